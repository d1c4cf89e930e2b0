"""Record XLA's ShapeProto bytes for many shapes: tests/data/xla_shape_protos.jsonl.gz.

For every shape text (random ones from a seeded generator, and every shape
string found in the repository's test data), XLA's own parser builds the
shape (jaxlib's ``xla_client.Shape(text)``) and XLA serializes it
(``to_serialized_proto()``). Each line of the gzip'd output is
``[text, XLA's str() of the shape, hex of XLA's bytes]``; texts XLA refuses
are left out (their number is printed). The first line is a header with the
jaxlib version, the seed and the counts.

    python tests/oracle/gen_shape_protos.py tests/data/xla_shape_protos.jsonl.gz

Run it with a Python that has jax and jaxlib; xlashape is not needed. XLA
runs in a child process, restarted if it dies (XLA aborts on some inputs).
Element types and layout attributes xlashape does not model (f6 types,
sparse ``D(...)`` layouts, which this XLA parses and drops, ``P(...)``) are
not generated and corpus strings with them are skipped; the header records
XLA's bytes of two f6 shapes (``unsupported_by_xlashape``).
"""

import gzip
import json
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
SEED = 19
N_RANDOM = 12000

_WORKER = r"""
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from jax._src.lib import xla_client as xc
for line in sys.stdin:
    text = json.loads(line)
    try:
        s = xc.Shape(text)
        out = ["OK", str(s), s.to_serialized_proto().hex()]
    except Exception as e:
        out = ["ERR", str(e)[:200]]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class Oracle:
    def __init__(self):
        self.proc = None
        self.crashes = 0

    def ask(self, text):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            self.proc.stdin.write(json.dumps(text) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.crashes += 1
            self.proc = None
            return ["CRASH"]
        return json.loads(line)


TYPES = ("pred s1 s2 s4 s8 s16 s32 s64 u1 u2 u4 u8 u16 u32 u64 f16 f32 bf16 f64 "
         "f8e5m2 f8e4m3 f8e4m3fn f8e4m3b11fnuz f8e3m4 f8e5m2fnuz f8e4m3fnuz f4e2m1fn "
         "f8e8m0fnu c64 c128").split()
INDEX_TYPES = ("u8", "u16", "u32", "u64")
# Shapes XLA serializes that xlashape cannot represent (element types it
# does not have): recorded in the header, for the error test.
UNSUPPORTED = ("f6e3m2fn[4]{0}", "(f32[], f6e2m3fn[2,3]{1,0})")


def rand_size(r):
    k = r.random()
    if k < 0.5:
        return r.randint(0, 10)
    if k < 0.8:
        return r.randint(11, 5000)
    if k < 0.95:
        return r.randint(5000, 1 << 40)
    return r.randint(1 << 40, (1 << 62))


def rand_tile(r, rank):
    n = r.randint(1, max(1, min(rank, 3)) if rank else 1)
    dims = []
    for _ in range(n):
        k = r.random()
        if k < 0.1:
            dims.append("*")
        elif k < 0.6:
            dims.append(str(r.choice((1, 2, 4, 8, 16, 32, 128, 256))))
        else:
            dims.append(str(r.randint(0, 1000)))
    return "(" + ",".join(dims) + ")"


def rand_layout(r, rank):
    m2m = list(range(rank))
    if r.random() < 0.6:
        r.shuffle(m2m)
    else:
        m2m.reverse()
    if r.random() < 0.03 and rank:  # a wrong one now and then: XLA refuses it
        m2m = m2m[:-1]
    attrs = ""
    if r.random() < 0.45:
        attrs += "T" + "".join(rand_tile(r, rank) for _ in range(r.randint(1, 3)))
    if r.random() < 0.1:
        attrs += f"L({r.choice((1, 2, 8, 128, r.randint(1, 10000)))})"
    if r.random() < 0.06:
        attrs += f"#({r.choice(INDEX_TYPES)})"
    if r.random() < 0.06:
        attrs += f"*({r.choice(INDEX_TYPES)})"
    if r.random() < 0.2:
        attrs += f"E({r.choice((1, 2, 4, 8, 16, 32, 64, r.randint(0, 300)))})"
    if r.random() < 0.2:
        attrs += f"S({r.choice((1, 2, 3, 5, r.randint(0, 127), r.randint(-128, 300)))})"
    if r.random() < 0.06 and rank:
        splits = sorted(r.sample(range(1, 5000), r.randint(1, 3)))
        attrs += f"SC({r.randint(0, rank - 1)}:{','.join(map(str, splits))})"
        if r.random() < 0.3:
            attrs += f"({r.randint(0, rank - 1)}:{r.randint(1, 100)})"
    if r.random() < 0.05:
        attrs += f"M({r.randint(0, 4096)})"
    body = ",".join(map(str, m2m))
    return "{" + body + (":" + attrs if attrs else "") + "}"


def rand_array(r):
    t = r.choice(TYPES)
    rank = r.choice((0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 6))
    dims = []
    for _ in range(rank):
        k = r.random()
        if k < 0.05:
            dims.append("?")
        elif k < 0.15:
            dims.append(f"<={rand_size(r)}")
        else:
            dims.append(str(rand_size(r)))
    text = f"{t}[{','.join(dims)}]"
    if r.random() < 0.85:
        text += rand_layout(r, rank)
    return text


def rand_shape(r, depth=0):
    k = r.random()
    if depth < 3 and k < 0.12:
        return "(" + ", ".join(rand_shape(r, depth + 1) for _ in range(r.randint(0, 4))) + ")"
    if k < 0.14:
        return "token[]"
    if k < 0.15:
        return "opaque[]"
    if k < 0.18:
        return f"b({rand_array(r)})"
    return rand_array(r)


_SHAPE_RE = re.compile(
    r"\b(?:pred|[su](?:1|2|4|8|16|32|64)|f16|f32|f64|bf16|c64|c128|f8e\w+|f4e2m1fn)"
    r"\[[^\]]*\](?:\{[^{}]*\})?")


def corpus_strings():
    """Every array shape string in the repository's test data (text files)."""
    found = set()
    for root, _dirs, files in os.walk(os.path.join(TESTS, "data")):
        for name in files:
            if not name.endswith((".txt", ".hlo", ".json", ".pbtxt")):
                continue
            with open(os.path.join(root, name), errors="replace") as fh:
                text = fh.read()
            found.update(_SHAPE_RE.findall(text))
    with open(os.path.join(TESTS, "validation_cases.py")) as fh:
        found.update(_SHAPE_RE.findall(fh.read()))
    return sorted(s for s in found if "D(" not in s and "P(" not in s)


def main(out_path):
    r = random.Random(SEED)
    texts = corpus_strings()
    n_corpus = len(texts)
    seen = set(texts)
    while len(texts) < n_corpus + N_RANDOM:
        t = rand_shape(r)
        if t not in seen:
            seen.add(t)
            texts.append(t)
    oracle = Oracle()
    rows, refused = [], 0
    for i, text in enumerate(texts):
        out = oracle.ask(text)
        if out[0] == "OK":
            rows.append([text, out[1], out[2]])
        else:
            refused += 1
        if i % 2000 == 0:
            print(f"{i}/{len(texts)} ok={len(rows)} refused={refused}", flush=True)
    import jaxlib

    unsupported = {}
    for text in UNSUPPORTED:
        out = oracle.ask(text)
        if out[0] == "OK":
            unsupported[text] = out[2]
    header = {"jaxlib": jaxlib.__version__, "seed": SEED, "corpus_strings": n_corpus,
              "random_strings": N_RANDOM, "kept": len(rows), "refused_by_xla": refused,
              "xla_crashes": oracle.crashes, "unsupported_by_xlashape": unsupported}
    with gzip.open(out_path, "wt", compresslevel=9) as fh:
        fh.write(json.dumps(header) + "\n")
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    print(header)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else
         os.path.join(TESTS, "data", "xla_shape_protos.jsonl.gz"))
