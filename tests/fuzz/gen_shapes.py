"""Cases for the ``shapes`` target: mutated shape and layout text.

Real shapes (the test data's HLO files and a fixed list) are mutated by
deleting, inserting and replacing pieces (HLO fragments, huge numbers) and
given to ``parse_shape`` / ``parse_layout`` / ``LayoutArray`` /
``tiling`` / ``shape_util``. Only errors of the xlashape family may come out.
"""

from __future__ import annotations

import os
import re

import numpy as np

SEEDS = [
    "f32[3,5]{1,0:T(2,2)}", "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}", "pred[]",
    "s4[7,9]{0,1:T(8,128)(2,1)E(4)}", "(f32[2], (s32[], token[]))", "u8[0,3]{0,1}",
    "f32[<=10,?]{1,0}", "c64[2,2]{0,1:T(2)L(8)}", "f8e4m3fn[16,16]{1,0:T(8,128)(4,1)}",
    "s32[3,4]{1,0:T(*,2)(2,*,1)}", "f32[100,5]{0,1:T(8,128)}", "u2[33]{0:T(4)E(2)}",
    "f16[2,3,4]{2,1,0:D(C,D)#(s32)*(s64)S(2)M(3)}", "b(f32[4]{0})", "opaque[]",
]

FRAGMENTS = list("[](){},:<=?*#/ \n0123456789-xTLESCPMDbfsu") + [
    "f32", "bf16", "s4", "u32", "pred", "token", "opaque", "b(", "T(", "S(", "SC(", "P(",
    "E(", "L(", "M(", "#(", "*(", "D(", "/*c*/", "//c\n", "18446744073709551615",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "4294967296",
    "<=", "?", "{:", ":T(8,128)", "(2,1)", "x", "0" * 40, "(" * 50, "[" * 50, "1e9", "\x00", "é",
]

SHAPE_RE = re.compile(r"\b(?:pred|[sufc]\d+|bf16|f8e\w+|f4e2m1fn)\[[^\]\s]*\](?:\{[^}\s]*\})?")


def _corpus():
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.path.join(here, "..", "data")
    found = set()
    for name in ("tpu_module.hlo", "small_dump.hlo", "seed_examples.hlo"):
        try:
            with open(os.path.join(data, name), errors="replace") as f:
                found.update(SHAPE_RE.findall(f.read()))
        except OSError:
            pass
    return SEEDS + sorted(found)[:400]


_TEXTS = None


def mutate(rng, s, rounds):
    for _ in range(rounds):
        op = int(rng.integers(5))
        i = int(rng.integers(0, len(s) + 1))
        if op == 0 and s:
            j = int(rng.integers(i, min(len(s), i + 4) + 1))
            s = s[:i] + s[j:]
        elif op == 1:
            s = s[:i] + FRAGMENTS[int(rng.integers(len(FRAGMENTS)))] + s[i:]
        elif op == 2 and i < len(s):
            s = s[:i] + FRAGMENTS[int(rng.integers(len(FRAGMENTS)))] + s[i + 1:]
        elif op == 3:
            # replace a number by a huge or odd one
            nums = list(re.finditer(r"\d+", s))
            if nums:
                m = nums[int(rng.integers(len(nums)))]
                rep = str([0, 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64, 10**30, 255][int(rng.integers(10))])
                s = s[:m.start()] + rep + s[m.end():]
        else:
            s = s[:i]
    return s


CALLS = [
    ("parse_shape", "out = xlashape.parse_shape(T)"),
    ("parse_layout", "out = xlashape.parse_layout(T[T.find('{'):] if '{' in T else T)"),
    ("str_roundtrip", "s = xlashape.parse_shape(T)\nout = xlashape.parse_shape(str(s))\nassert str(out) == str(s), (str(s), str(out))"),
    ("LayoutArray", "out = LayoutArray(T)\nout = (out.shape, out.physical_nbytes, out.tolist() if out.size < 64 else None)"),
    ("validate", "out = xlashape.validate_shape(xlashape.parse_shape(T))"),
    ("tiling.physical_size", "out = xlashape.tiling.physical_size_in_bytes(T)"),
    ("tiling.padding_report", "out = xlashape.tiling.padding_report(T).summary()"),
    ("byte_size", "out = xlashape.shape_util.byte_size_of(xlashape.parse_shape(T))"),
    ("linear_index", "s = xlashape.parse_shape(T)\nout = xlashape.tiling.linear_index(s, tuple(max(d - 1, 0) for d in s.dimensions))"),
]


def generate(rng: np.random.Generator, level: int = 2, op: str | None = None):
    global _TEXTS
    if _TEXTS is None:
        _TEXTS = _corpus()
    text = _TEXTS[int(rng.integers(len(_TEXTS)))]
    text = mutate(rng, text, int(rng.integers(1, 2 + level)))
    names = [c[0] for c in CALLS]
    name = op if op in names else names[int(rng.integers(len(names)))]
    code = dict(CALLS)[name]
    return {"target": "shapes", "op": name, "family": name, "kind": "family",
            "setup": f"T = {text!r}\n", "la_pre": "", "la": code, "detail": "", "allow": ()}
