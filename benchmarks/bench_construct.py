"""``LayoutArray(shape)``, a new array of zeros, against ``np.zeros`` of the
same number of bytes: the constructor alone, and the constructor followed by
one write of every element (``fill``), which is when the pages are really
touched. Medians of ``--repeat`` rounds of CPU time (user + system of this
process), each case in turn.

A layout whose padding value is 0 (or that has no padding) is all zero
bytes: its buffer comes from calloc, as np.zeros's does, so the pages are
zeroed by the kernel when first touched. With a nonzero padding value the
padding slots are written at construction.

Run:  python benchmarks/bench_construct.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from xlashape import LayoutArray, parse_shape  # noqa: E402

CASES = [
    "f32[8192,8192]{1,0}",
    "f32[8192,8192]{1,0:T(8,128)}",
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "u2[2147483648]{0}",
]


def _cpu() -> float:
    return time.process_time()     # user + system of this process, fine-grained


def _median_cpu(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = _cpu()
        fn()
        times.append(_cpu() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs, medians of {args.repeat}")
    print(f"{'case':<48} {'ours ms':>9} {'np.zeros ms':>12} {'ratio':>6}   "
          f"{'+ fill ms':>10} {'np + fill ms':>13} {'ratio':>6}")
    for text in CASES:
        shape = parse_shape(text)
        nbytes = LayoutArray(shape).physical_array().nbytes
        print(f"{text}: {nbytes / 2**20:.0f} MiB physical")

        def ours():
            LayoutArray(shape)

        def ref():
            np.zeros(nbytes, np.uint8)

        def ours_fill():
            la = LayoutArray(shape)
            la.fill(1)

        def ref_fill():
            a = np.zeros(nbytes, np.uint8)
            a.fill(1)

        o, r = _median_cpu(ours, args.repeat), _median_cpu(ref, args.repeat)
        of, rf = _median_cpu(ours_fill, args.repeat), _median_cpu(ref_fill, args.repeat)
        print(f"{text:<48} {o * 1e3:>9.2f} {r * 1e3:>12.2f} {o / max(r, 1e-9):>6.2f}   "
              f"{of * 1e3:>10.1f} {rf * 1e3:>13.1f} {of / max(rf, 1e-9):>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
