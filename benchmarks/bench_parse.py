"""Shape text: parse and print speed against XLA's C++ parser and printer.

On a realistic mix of TPU-dump shapes (``MIX``), each figure the median of
interleaved rounds (one round of every measurement, ours and XLA's, then the
next round), in microseconds of CPU time per shape (``time.process_time`` on
both sides, so that time the process spends waiting for a core on a busy
machine is not counted):

* ``parse_shape`` + ``str()`` with the parse cache off (every call parses),
  against XLA's ``ParseShape`` + printer (``str(xla_client.hlo.Shape(text))``);
* the parse alone, against ``xla_client.hlo.Shape(text)``;
* ``str()`` of a parsed shape, against ``str()`` of XLA's parsed shape;
* ``str()`` of a shape built by the constructors (its text not yet computed),
  the first time, against the same XLA print;
* for reference: the full Python parser alone (fast path off), the warm
  cache, and ``parse_shape_prefix`` on whole instruction lines.

XLA's side runs through jaxlib: in this process when jaxlib is importable,
else in ``--peer-python PYTHON`` (a Python with jax and jaxlib; xlashape is
not needed there), which answers one round at a time over a pipe so both
sides run under the same load. Without either, only xlashape's figures are
printed.

Run::

    python benchmarks/bench_parse.py                       # xlashape only
    python benchmarks/bench_parse.py --peer-python JAXPY   # with the XLA column
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import time

from xlashape import hlo_text
from xlashape.hlo_text import parse_shape, parse_shape_prefix

# The kind of shapes a TPU HLO dump is made of: tiled bf16/f32 activations and
# weights (often in VMEM, S(1)), sub-byte weights, scalars with their own tile,
# tuples with tokens, dynamic shapes, and plain default layouts.
MIX = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}",
    "f32[1024,1024]{1,0:T(8,128)}",
    "f32[8,128]{1,0:T(8,128)}",
    "s8[128,512]{1,0:T(8,128)(4,1)}",
    "s4[256,1024]{1,0:T(8,128)(8,1)E(4)}",
    "pred[128]{0:T(1024)}",
    "s32[]{:T(128)}",
    "f32[]{:T(256)}",
    "u32[]{:T(128)S(1)}",
    "bf16[1,2048]{1,0:T(2,128)(2,1)S(5)}",
    "f32[<=4096,128]{1,0:T(8,128)}",
    "s32[?,784]{1,0}",
    "f32[16,512,128]{2,1,0}",
    "f32[2,3]",
    "(s32[]{:T(128)}, bf16[16,512]{1,0:T(8,128)(2,1)}, token[])",
    "(f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)}, u8[0]{0}, s32[4]{0:T(128)}, token[], "
    "/*index=5*/f32[<=8,128]{1,0})",
]

# The shape whose uncached parse time the parser work was measured on.
ONE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}"

LINES = [
    f"  %fusion.{i} = {shape} fusion({shape} %param.{i}), kind=kLoop, calls=%fused_computation.{i}"
    for i, shape in enumerate(MIX)
]

# XLA's side: one round per request, rates as JSON (run here or in a peer Python).
_PEER = r"""
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from jax._src.lib import xla_client as xc
import jaxlib

def rounds():
    texts = json.loads(sys.stdin.readline())
    parse = xc.hlo.Shape
    parsed = [parse(t) for t in texts]
    sys.stdout.write(json.dumps({"jaxlib": jaxlib.__version__}) + "\n")
    sys.stdout.flush()
    for _ in sys.stdin:
        out = {}
        t0 = time.process_time()
        for t in texts:
            str(parse(t))
        out["parse+print"] = (time.process_time() - t0) / len(texts)
        t0 = time.process_time()
        for t in texts:
            parse(t)
        out["parse"] = (time.process_time() - t0) / len(texts)
        t0 = time.process_time()
        for s in parsed:
            str(s)
        out["print"] = (time.process_time() - t0) / len(texts)
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()

rounds()
"""


class Peer:
    """XLA's parser and printer, one timed round per call."""

    def __init__(self, texts, python=None):
        self.proc = subprocess.Popen(
            [python or sys.executable, "-c", _PEER], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        self.proc.stdin.write(json.dumps(texts) + "\n")
        self.proc.stdin.flush()
        self.version = json.loads(self.proc.stdout.readline())["jaxlib"]

    def round(self) -> dict:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def _per_item(fn, items) -> float:
    t0 = time.process_time()
    for item in items:
        fn(item)
    return (time.process_time() - t0) / len(items)


def _start_peer(texts, peer_python):
    try:
        import jax  # noqa: F401  (jaxlib in this process: run XLA's side here)

        return Peer(texts)
    except Exception:
        pass
    if peer_python:
        return Peer(texts, peer_python)
    return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="shapes per round (default 2000)")
    ap.add_argument("--rounds", type=int, default=9,
                    help="interleaved rounds; medians are shown (default 9)")
    ap.add_argument("--peer-python", metavar="PYTHON",
                    help="a Python with jax and jaxlib, for XLA's figures when jaxlib "
                         "is not importable here")
    args = ap.parse_args(argv)

    n = args.n
    texts = (MIX * (n // len(MIX) + 1))[:n]
    lines = (LINES * (n // len(LINES) + 1))[:n]
    prefix_items = [(line, line.index("=") + 2) for line in lines]
    uncached = hlo_text._parse_shape_cached.__wrapped__
    parsed = [uncached(t) for t in texts]
    for t in MIX:
        parse_shape(t)
    peer = _start_peer(texts, args.peer_python)

    ours = {}
    xla = {"parse+print": [], "parse": [], "print": []}

    def add(name, seconds):
        ours.setdefault(name, []).append(seconds)

    for _ in range(args.rounds):
        add("parse+print", _per_item(lambda t: str(uncached(t)), texts))
        add("parse", _per_item(uncached, texts))
        for s in parsed:
            str(s)
        add("print", _per_item(str, parsed))
        fresh = [copy.deepcopy(s) for s in parsed]  # built by the constructors: no text yet
        add("print, first time", _per_item(str, fresh))
        hlo_text._USE_FAST_PATH = False
        try:
            add("parse, full parser only", _per_item(uncached, texts))
            add("one, full parser only", _per_item(uncached, [ONE] * (n // 4)))
        finally:
            hlo_text._USE_FAST_PATH = True
        add("one", _per_item(uncached, [ONE] * (n // 4)))
        add("warm cache", _per_item(parse_shape, texts))
        add("prefix", _per_item(lambda it: parse_shape_prefix(*it), prefix_items))
        if peer is not None:
            for key, value in peer.round().items():
                xla[key].append(value)
    if peer is not None:
        peer.close()

    med = {k: statistics.median(v) for k, v in ours.items()}
    xmed = {k: statistics.median(v) for k, v in xla.items() if v}
    rows = [
        ("parse_shape + str(), no cache", "parse+print", "parse+print"),
        ("parse_shape, no cache", "parse", "parse"),
        ("str() of a parsed shape", "print", "print"),
        ("str() of a constructed shape, first time", "print, first time", "print"),
        ("parse_shape, no cache, full parser only", "parse, full parser only", "parse"),
        ("parse_shape, warm cache", "warm cache", "parse"),
        ("parse_shape_prefix on instruction lines, warm", "prefix", "parse"),
    ]
    print(f"shape text: {n} shapes per round from a mix of {len(MIX)} TPU-dump shapes, "
          f"medians of {args.rounds} interleaved rounds, µs per shape")
    if peer is not None:
        print(f"XLA: jaxlib {peer.version} (xla_client.hlo.Shape and str() of it)")
    width = max(len(r[0]) for r in rows) + 2
    header = f"{'what':<{width}}{'xlashape':>10}"
    if xmed:
        header += f"{'XLA':>10}{'XLA/ours':>10}"
    print(header)
    print("-" * len(header))
    for label, key, xkey in rows:
        line = f"{label:<{width}}{med[key] * 1e6:>10.2f}"
        if xmed:
            line += f"{xmed[xkey] * 1e6:>10.2f}{xmed[xkey] / med[key]:>9.2f}x"
        print(line)
    if not xmed:
        print("(no jaxlib here and no --peer-python: no XLA column)")
    print(f"uncached parse of {ONE}: {med['one'] * 1e6:.1f} µs "
          f"(full parser only: {med['one, full parser only'] * 1e6:.1f} µs)")


if __name__ == "__main__":
    main()
