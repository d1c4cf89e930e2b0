"""Differential tests against XLA's own shape parser and printer.

XLA ships inside jaxlib: ``xla_client.hlo.Shape(text)`` parses with
``xla::ParseShape`` and ``str()`` prints with XLA's printer. This module is
skipped when jaxlib is not importable. Run it from the checkout with a
Python that has jax and jaxlib installed (the package built in place)::

    PYTHONPATH=. /path/to/jax-venv/bin/python -m pytest tests/test_xla_oracle.py -q

XLA is driven in a child process, one string per line: some inputs (a
negative tile entry other than ``*``, ``L(0)``, ``token[2]``, a layout on a
token) make XLA abort the whole process. When the child dies, the string is
recorded as an abort and a new child is started; xlashape rejects all of
those with ``HloParseError``.

Known, deliberate differences (see the assertions that pin them):
* nesting deeper than ``MAX_NESTING_DEPTH`` (200): XLA accepts it until its
  stack overflows (a few thousand levels); xlashape refuses it;
* XLA reports no message for invalid dimension sizes and for tuple elements
  that fail validation; xlashape says what is wrong.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlashape
from xlashape import HloParseError, parse_shape
from xlashape.hlo_text import MAX_NESTING_DEPTH

try:
    from jax._src.lib import xla_client  # noqa: F401
except Exception:  # pragma: no cover - depends on the environment
    pytest.skip("jaxlib (XLA's parser) is not importable", allow_module_level=True)

from strategies import array_shapes, mutated, shapes  # noqa: E402

_WORKER = r"""
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from jax._src.lib import xla_client as xc
for line in sys.stdin:
    text = json.loads(line)
    try:
        out = ["OK", str(xc.hlo.Shape(text))]
    except Exception as e:
        out = ["ERR", str(e)]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class XlaOracle:
    """XLA's ParseShape in a child process that may die on bad input."""

    def __init__(self):
        self.proc = None
        self.aborts = 0

    def _start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

    def parse(self, text: str):
        """('OK', printed) | ('ERR', message) | ('ABORT', None)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps(text) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self._reap()
            self.aborts += 1
            return ("ABORT", None)
        kind, value = json.loads(line)
        return (kind, value)

    def _reap(self):
        proc, self.proc = self.proc, None
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:  # the pipe broke when the child died
                pass
        proc.wait(timeout=60)

    def close(self):
        if self.proc is not None:
            self._reap()


@pytest.fixture(scope="module")
def xla():
    oracle = XlaOracle()
    yield oracle
    oracle.close()


def ours(text: str):
    try:
        return ("OK", str(parse_shape(text)))
    except HloParseError as e:
        return ("ERR", e)


_XLA_ERROR_RE = re.compile(r"was parsing (\d+):(\d+): error: (.*)")


def xla_messages(message: str):
    """[(line, column0, text)] from XLA's joined error list."""
    return [(int(m.group(1)), int(m.group(2)), m.group(3))
            for m in _XLA_ERROR_RE.finditer(message)]


OUR_OWN_WORDING = ("tuple element", "a buffer shape", "Invalid dimension size")


def check_agrees(xla, text: str):
    """Same accept/reject decision, same printed form, and on errors our
    primary message is one of XLA's, at the same place."""
    kx, vx = xla.parse(text)
    ko, vo = ours(text)
    if kx == "ABORT":
        assert ko == "ERR", f"XLA aborts on {text!r} but xlashape accepted it as {vo!r}"
        return
    assert kx == ko, f"{text!r}: XLA {kx} {vx!r}, xlashape {ko} {vo!r}"
    if kx == "OK":
        assert vo == vx, f"{text!r}: XLA prints {vx!r}, xlashape prints {vo!r}"
        return
    if vo.message.startswith(OUR_OWN_WORDING):
        # XLA fails these without a message of its own (its error list may
        # hold only stale messages from attributes it recovered from).
        return
    xmsgs = xla_messages(vx)
    if "Extra content after shape" in vx and not xmsgs:
        assert vo.message == "Extra content after shape"
        return
    if not xmsgs:
        return  # XLA gave no message (validation failures); ours is our own wording
    # XLA's positions are byte offsets with a 0-based column; compare on ASCII text.
    if not text.isascii():
        return
    matches = [(line, col) for line, col, msg in xmsgs if vo.message.startswith(msg)]
    assert matches, f"{text!r}: xlashape says {vo.message!r}, XLA says {[m for *_, m in xmsgs]}"
    # XLA's column is 0-based on the first line and 1-based after a newline
    # (it subtracts the offset of the previous '\n'); ours is 1-based throughout.
    xla_column = vo.column - 1 if vo.line == 1 else vo.column
    assert (vo.line, xla_column) in matches, (
        f"{text!r}: xlashape points at {vo.line}:{xla_column}, XLA at {matches}")


CORPUS = [
    # --- accepted, printed back -------------------------------------------------
    "f32[2,3]", "f32[]", "pred[]", "s4[3,5]{1,0:E(4)}", "u8[0]", "c128[1,2,3]",
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}",
    "f32[3,2,1,0]{3,2,1,0:T(42,123)(4,5)L(100)E(42)}",
    "f32[2,3]{0,1:SC(0:3)(1:0,4)}", "f32[2,3]{0,1:M(123)}", "f32[2,3]{0,1:#(u32)}",
    "f32[2,3]{0,1:*(u16)}", "f32[2]{0:#(s32)}", "f32[2]{0:#(pred)}",
    "s32[]{:T(128)}", "f32[]{:T(256)}", "u32[]{:T(128)}", "f32[]{:S(1)}", "f32[]{:}",
    "(f32[], token[], s32[2]{0:T(128)})", "()", "( )", "(f32[], f32[], f32[], f32[], f32[], f32[])",
    "(f32[], (token[], (s32[], ())), opaque[])", "token[]", "opaque[]",
    "b(f32[2])", "b(s32[2,3]{0,1})", "b(f32[2]{5})", "b (f32[])", "b/**/(f32[])",
    "f32[<=3,?]", "f32[?]{0}", "f32[<= 3]", "s32[<=4,5]{0,1:T(2)}", "f32[?,?,2]",
    "f32[18446744073709551615]", "f32[9223372036854775807,2]",
    "f32[ 2 , 3 ] { 0 , 1 : T ( 2 , 2 ) }", "f32[2]/*x*/{0}", "f32[2]//c\n{0}",
    "\n\t f32[2] \r\n", "/* lead */ f32[2] // trail",
    "f32[2]{0:E(}", "f32[2]{0:#u32)}", "f32[2]{0:#()}", "f32[2]{0:#(u32}", "f32[2]{0:T}",
    "f32[2]{0:T(8,128}", "f32[2]{0:SC(0:1}", "f32[2]{0:E(4}", "f32[2]{0:SC}", "f32[2]{0:L}",
    "f32[2]{0:#}", "f32[2]{0:}", "f32[2]{0:D(D,C+~)T(8)}", "f32[2]{0:D(H~,S+)}",
    "f32[2]{0:S(200)}", "f32[2]{0:S(-129)}", "f32[2]{0:S(256)}", "f32[2]{0:S(9223372036854775807)}",
    "f32[2]{0:M(-5)}", "f32[2]{0:E(-1)}", "f32[2]{0:SC(0:)}", "f32[2]{0:SC(-1:-2)}",
    "f32[2]{0:T(*)}", "f32[2]{0:T()}", "f32[2]{0:T(0)}", "f32[2]{0:T(2)(*,3)}",
    "f32[2]{0:T(9223372036854775808)}", "f32[2]{0:T(-9223372036854775808)}",
    "f32[2]{0:T(9223372036854775807)}", "f32[2]{5}", "f32[2,2]{0,0}", "f32[2]{-1}",
    "s1[2]", "u1[2]", "s2[4]{0:E(2)}", "u4[8]{0:E(4)}", "f8e8m0fnu[2]", "f4e2m1fn[3]",
    "f8e4m3b11fnuz[2]", "f8e5m2fnuz[1]", "f8e3m4[]", "f8e4m3[7]",
    "(f32[4,8]{0,1:SC(0:5)})", "(f32[4,8]{0,1:SC(1:3)})", "(f32[4]{0:SC(0:1,2,3)})",
    "(f32[2]{0:T(*)})", "(f32[2]{0:S(5)})", "(f32[2]{0:L(2)})", "(f32[2]{0:T(2,2,2)})",
    "(f32[2305843009213693951])", "(f32[?])", "(f32[<=5])", "(pred[3]{0:E(1)})",
    "(f32[2]{0:M(-3)})", "(f32[0]{0:SC(0:)})", "(b(f32[2]))",
    "(" * 100 + "f32[]" + ")" * 100, "b(f32[4611686018427387904])",
    # --- rejected ------------------------------------------------------------------
    "", "   ", "f32", "f32[", "f32]", "[2]", "f32[2]]", "f32[2] extra", "f32[2]{0} {0}",
    "f32[2]{0}}", "f32[2]{0", "f32[2]{0:T(2)", "f32[2]{0:T(2", "f32[2]\x00", "f32[2]é",
    "f32[2]{}", "f32[]{}", "f32[2]{,}", "f32[2]{0,}", "f32[2]{:}", "f32[2x3]", "f32[2x3]{0}",
    "f32[-1]", "f32[<=-1]", "f32[<=?]", "f32[?5]", "f32[1.5]", "f32[1e3]", "f32[2_3]",
    "f32[0x2]", "f32[18446744073709551616]", "f32[-9223372036854775808]",
    "f32[-9223372036854775809]", "f32[<=]", "f32[< =3]", "f32[2]/*", "f32[2]/",
    "F32[2]", "Pred[]", "bogus", "opaque_type[]", "tuple[]", "buffer[]", "buffer",
    "primitive_type_invalid[]", "b()", "b((f32[]))", "b(token[])", "b(s32[], f32[])",
    "b(b(f32[]))", "b", "b f32[]", "b[2]", "b(", "b(f32[]", "(,)", "(f32[],)",
    "(f32[] f32[])", "(f32[]", ")", "f32[2]{1,0}", "f32[2]{0:P(s32[10]{0})}",
    "f32[2]{0:P(s32[10])}", "f32[2]{0:P(garbage)}", "f32[2]{0:P()}", "f32[2]{0:P}",
    "f32[2]{0:T(8,x)}", "f32[2]{0:S(1)T(8)}", "f32[2]{0:D(X)}", "f32[2]{0:T(2)T(3)}",
    "f32[2]{0:E(4)E(4)}", "f32[2]{0:SC()}", "f32[2]{0:SC(0)}", "f32[2]{0:SC(0:1:2)}",
    "f32[2]{0:L()}", "f32[2]{0:T(2,)}", "f32[2]{0:T(,2)}", "f32[2]{0:T((2))}",
    "f32[2]{0:#(invalid)}", "f32[2]{0:#(U32)}", "f32[3]{0:L}junk", "f32[2]{0:#(u32 x}",
    "f32[2]{0:# u32)x}", "f32[2]{0:#(s32)x}", "f32[2]{0:*(u8 x}", "f32[2]{0:* u8)x}",
    "f32[2]{0:P x}", "f32[2]{0:E x}", "f32[2]{0:E(4 x}", "f32[2]{0:SC x}", "f32[2]{0:L x}",
    "f32[2]{0:M(1 x}", "f32[2]{0:S(x)}",
    "(f32[2]{5})", "(f32[2]{0:T(0)})", "(f32[2]{0:#(u32)})", "(f32[2]{0:*(u8)})",
    "(f32[2,2]{0,0})", "(f32[2]{0:E(-1)})", "(f32[9223372036854775807,2])",
    "(f32[2305843009213693952])", "(f32[?,9223372036854775807])", "(f32[2]{0:T()})",
    "(f32[2]{0:T(2,0)})", "(f32[2]{0:SC(5:1)})", "((f32[2]{5}))", "(token[], f32[2]{1})",
    "(b(f32[2]{5}))", "(f32[2]{0:#(s32)})", "(f32[4]{0:SC(0:3,1)})", "(f32[4]{0:SC(0:4)})",
    "(f32[4]{0:SC(0:0)})", "(f32[4,8]{0,1:SC(1:6)})", "(f32[?]{0:SC(0:1)})",
    "(f32[4,4]{1,0:SC(0:1)(0:2)})", "(b(f32[4611686018427387904]))",
    '"abc"', "'abc'", '"a\\qb"', "x: f32[]", "x=f32[]", "%x", "->", "...", "true", "nan",
    "nan(0x1)", "-inf", "1.5", "bf_io->bf", "2x3", "1_2", "~", "+", "=", "<=", "<",
    # --- token boundaries the fast lexer path must get right ---------------------------
    "f32[2]{0:T2(8)}", "f32[2]{0:SCx}", "f32[2]{0:T:8}", "f32[2]{0:T=8}", "f32[2]{0:T.(8)}",
    "f32x[2]", "f32.[2]", "f32-[2]", "bf16_[2]", "b_(f32[])", "b(f32[])x", "f32[2]{0:bf_io->bf}",
    "f32[1b]", "f32[1f_2]", "f32[12_34->56]", "f32[0012]", "f32[2]{0:T(08)}", "f32[2]{0:E(4)S}",
    "f32[2]{0:Sx(1)}", "f32[2]{0:S (1)}", "f32[2]{0:S/**/(1)}", "f32[2]{0:S\n(1)}",
    "f32[1234567890123456789]", "f32[12345678901234567890]", "f32[2]{0:M(99999999999999999999)}",
    "(f32[2]{0},s32[]{:T(128)},token[])", "f32[2]{0:T(1)(2)(3)(4)}", "pred[]{:T(1024)E(1)}",
    # --- XLA aborts; xlashape refuses ---------------------------------------------------
    "f32[2]{0:T(-1)}", "f32[2]{0:L(0)}", "f32[2]{0:L(-3)}", "token[2]", "token[]{0}",
    "token[]{:T(2)}", "opaque[]{:S(1)}", "f32[2]{0:T(18446744073709551615)}",
]


@pytest.mark.parametrize("text", CORPUS)
def test_corpus_agrees_with_xla(xla, text):
    check_agrees(xla, text)


def test_the_xla_abort_cases_really_abort(xla):
    # If a future XLA stops aborting on these, xlashape should follow it.
    for text in ["f32[2]{0:T(-1)}", "f32[2]{0:L(0)}", "token[2]"]:
        assert xla.parse(text)[0] == "ABORT", text


def test_deep_nesting_is_the_one_deliberate_difference(xla):
    depth = MAX_NESTING_DEPTH + 1
    text = "(" * depth + "f32[]" + ")" * depth
    assert xla.parse(text)[0] == "OK"
    with pytest.raises(HloParseError, match="maximum recursion depth exceeded"):
        parse_shape(text)
    ok = "(" * (MAX_NESTING_DEPTH - 1) + "f32[]" + ")" * (MAX_NESTING_DEPTH - 1)
    assert xla.parse(ok) == ("OK", str(parse_shape(ok)))


@settings(max_examples=300)
@given(shapes())
def test_random_shapes_print_and_parse_like_xla(xla, shape):
    check_agrees(xla, str(shape))


@settings(max_examples=200)
@given(array_shapes())
def test_random_arrays_without_layout_get_xlas_default(xla, shape):
    check_agrees(xla, shape.to_string(print_layout=False))


@settings(max_examples=600)
@given(mutated(CORPUS[:120]))
def test_mutated_strings_accepted_and_rejected_like_xla(xla, text):
    check_agrees(xla, text)


@settings(max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("f32[](){},:<=?*#/ 0123456789-TLESCPMbtoken")),
               max_size=30))
def test_random_strings_accepted_and_rejected_like_xla(xla, text):
    check_agrees(xla, text)


def test_module_version_is_recorded():
    # Records which XLA this run compared against (visible with -rA / in failures).
    import jaxlib

    assert jaxlib.__version__
    assert xlashape.__version__
