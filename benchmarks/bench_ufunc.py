"""Elementwise ufuncs on LayoutArrays of one tiled layout, against numpy.

Run: ``python benchmarks/bench_ufunc.py`` (or ``python benchmarks/run.py ufunc``).

``la + lb`` on two LayoutArrays of the same tiled layout runs ``np.add`` on
the physical buffers (padding slots masked out when there are any) and
allocates the result in that layout; the reference is ``np.add`` of the
logical numpy arrays (C-contiguous, result allocated by numpy). A second
row per layout adds the cost a user would otherwise pay: unpack both,
``np.add``, pack the result back (``to_numpy`` + ``from_numpy``). Figures are
medians of interleaved rounds of CPU time; ratio = ours / reference.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import xlashape as xs
from xlashape import LayoutArray

CASES = [
    # no padding inside the tiles: no mask
    "f32[2048,2048]{1,0:T(8,128)}",
    "bf16[2048,2048]{1,0:T(8,128)(2,1)}",
    # padding: 1000 columns in tiles of 128, 1001 rows in tiles of 8
    "f32[1001,1000]{1,0:T(8,128)}",
    # column-major tiles
    "f32[2048,2048]{0,1:T(8,128)}",
    # a plain strided layout (no tiles), for comparison
    "f32[2048,2048]{0,1}",
]


def _interleaved(fns, rounds=15):
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            times[k].append(time.process_time() - t0)
    return [statistics.median(t) for t in times]


def rows():
    rng = np.random.default_rng(0)
    out = []
    for text in CASES:
        shape = xs.parse_shape(text)
        x = rng.standard_normal(shape.dimensions, dtype=np.float32).astype(shape.dtype)
        y = rng.standard_normal(shape.dimensions, dtype=np.float32).astype(shape.dtype)
        la, lb = LayoutArray.from_numpy(x, shape), LayoutArray.from_numpy(y, shape)
        la + lb                                   # warm the mask cache
        ours, ref, roundtrip = _interleaved([
            lambda: la + lb,
            lambda: np.add(x, y),
            lambda: LayoutArray.from_numpy(np.add(la.to_numpy(), lb.to_numpy()), shape),
        ])
        out.append((f"la + lb  {text}", ours, ref, "np.add(x, y)"))
        out.append((f"  unpack, np.add, pack  {text}", roundtrip, ref, "np.add(x, y)"))
    return out


def main(argv=None) -> int:
    print(f"{'case':<60} {'ours ms':>9} {'ref ms':>9} {'ratio':>6}  reference")
    for what, ours, ref, name in rows():
        print(f"{what:<60} {ours * 1e3:9.2f} {ref * 1e3:9.2f} {ours / ref:6.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
