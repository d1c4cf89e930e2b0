"""Compiled bulk offsets (xlashape.index_maps.linear_indices /
multidimensional_indices) against the equivalent numpy expression, in the same run.

Run: ``python benchmarks/bench_offsets.py [--sizes 1000000,10000000] [--repeat 7]``
(``benchmarks/run.py`` calls :func:`main`).

References:

* untiled ``f32[4096,4096]{1,0}``: ``np.ravel_multi_index``;
* tiled ``T(8,128)`` and ``T(8,128)(2,1)``: a hand-written numpy div/mod
  expression of the same map (checked equal to ours before timing);
* inverse: ``np.unravel_index`` (untiled) and the hand-written inverse
  div/mod expression for ``T(8,128)`` (no padding in the timed shape).

Figures are medians of ``repeat`` runs; ratio = numpy time / xlashape time
(above 1: xlashape is faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from xlashape import Layout, Shape
from xlashape.index_maps import linear_indices, multidimensional_indices

ROWS, COLS = 4096, 4096


def _median(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _numpy_t8_128(i, j):
    # T(8,128) on [4096,4096]{1,0}: P = (512, 32, 8, 128)
    return ((i // 8) * (COLS // 128) + j // 128) * 1024 + (i % 8) * 128 + j % 128


def _numpy_t8_128_2_1(i, j):
    # T(8,128)(2,1): P = (512, 32, 4, 128, 2, 1)
    r = i % 8
    return ((i // 8) * (COLS // 128) + j // 128) * 1024 + (r // 2) * 256 + (j % 128) * 2 + r % 2


def _numpy_inverse_t8_128(lin):
    tile, within = lin // 1024, lin % 1024
    return (tile // (COLS // 128)) * 8 + within // 128, (tile % (COLS // 128)) * 128 + within % 128


CASES = [
    ("f32[4096,4096]{1,0}", "np.ravel_multi_index",
     Shape("f32", (ROWS, COLS), Layout((1, 0))),
     lambda i, j: np.ravel_multi_index((i, j), (ROWS, COLS))),
    ("f32[4096,4096]{1,0:T(8,128)}", "numpy div/mod",
     Shape("f32", (ROWS, COLS), Layout((1, 0), tiles=[(8, 128)])), _numpy_t8_128),
    ("bf16[4096,4096]{1,0:T(8,128)(2,1)}", "numpy div/mod",
     Shape("bf16", (ROWS, COLS), Layout((1, 0), tiles=[(8, 128), (2, 1)])), _numpy_t8_128_2_1),
]

INVERSE_CASES = [
    ("f32[4096,4096]{1,0}", "np.unravel_index",
     Shape("f32", (ROWS, COLS), Layout((1, 0))),
     lambda lin: np.unravel_index(lin, (ROWS, COLS))),
    ("f32[4096,4096]{1,0:T(8,128)}", "numpy div/mod",
     Shape("f32", (ROWS, COLS), Layout((1, 0), tiles=[(8, 128)])), _numpy_inverse_t8_128),
]


def run(sizes=(1_000_000, 10_000_000), repeat=7, out=sys.stdout):
    """Time every case; returns rows (direction, shape, n, ours_s, ref_name, ref_s)."""
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        idx = np.stack([rng.integers(0, ROWS, n), rng.integers(0, COLS, n)], axis=1)
        i, j = idx[:, 0].copy(), idx[:, 1].copy()
        for name, ref_name, shape, ref in CASES:
            ours = linear_indices(shape, idx)
            if not np.array_equal(ours, ref(i, j)):
                raise AssertionError(f"{name}: numpy reference disagrees with xlashape")
            t_ours = _median(lambda: linear_indices(shape, idx), repeat)
            t_ref = _median(lambda: ref(i, j), repeat)
            rows.append(("offsets", name, n, t_ours, ref_name, t_ref))
        lin = rng.integers(0, ROWS * COLS, n)
        for name, ref_name, shape, ref in INVERSE_CASES:
            got, pad = multidimensional_indices(shape, lin)
            r0, r1 = ref(lin)
            if pad.any() or not (np.array_equal(got[:, 0], r0) and np.array_equal(got[:, 1], r1)):
                raise AssertionError(f"{name}: numpy inverse disagrees with xlashape")
            t_ours = _median(lambda: multidimensional_indices(shape, lin), repeat)
            t_ref = _median(lambda: ref(lin), repeat)
            rows.append(("indices", name, n, t_ours, ref_name, t_ref))
    print(f"{'map':8} {'shape':36} {'N':>9} {'xlashape':>10} {'numpy':>10} {'ratio':>6}  reference",
          file=out)
    for direction, name, n, t_ours, ref_name, t_ref in rows:
        print(f"{direction:8} {name:36} {n:9d} {t_ours * 1e3:8.1f}ms {t_ref * 1e3:8.1f}ms "
              f"{t_ref / t_ours:5.2f}x  {ref_name}", file=out)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000",
                        help="comma-separated numbers of indices (default 1000000,10000000)")
    parser.add_argument("--repeat", type=int, default=7, help="runs per median (default 7)")
    args = parser.parse_args(argv)
    sizes = tuple(int(x) for x in args.sizes.split(","))
    run(sizes, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
