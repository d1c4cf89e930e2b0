"""LayoutArray's bulk kernels against the hardware's limits (issue 12).

Run: ``python benchmarks/bench_kernels.py`` (or ``python benchmarks/run.py
kernels``); ``--rounds N`` for more interleaved rounds.

Every row times ours and its limit in the same process, alternately, round
after round (so both see the same machine state); the ratio is the median
over rounds of ours / limit, the times are medians too. Times are CPU time
(``time.process_time``: user + system, so page faults count) of the calling
process, which is what a quiet machine's wall clock would show for these
single-threaded kernels; the two-core rows use wall time.

Limits:

* ``np.copyto`` of the same bytes into a preallocated array: moving the
  bytes once, the floor for a kernel writing into an existing buffer
  (``la[...] = x``, ``la.to_numpy(out=)``, ``dst[...] = src`` between two
  LayoutArrays, which is ``relayout`` into an existing buffer).
* numpy's own way of producing the same result in fresh memory (the
  reshape/transpose/copy of the tiling, ``np.ascontiguousarray(x.T)``), for
  the operations that allocate (``from_numpy``, ``to_numpy()``,
  ``relayout``); ``x.copy()`` (a plain copy into fresh memory, page faults
  included) is shown beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

import xlashape as xs
from xlashape import LayoutArray

BF16 = xs.PrimitiveType.BF16.dtype
_SECTION = []


def rounds_of(fns, rounds, clock=time.process_time):
    """Per function, the list of times of `rounds` interleaved rounds."""
    res = [[] for _ in fns]
    for _ in range(rounds):
        for k, f in enumerate(fns):
            t0 = clock()
            f()
            res[k].append(clock() - t0)
    return res


def row(rows, what, ours, limit, limit_name, target=None, note=""):
    """ours, limit: lists of per-round times (same rounds)."""
    ratio = statistics.median(a / b for a, b in zip(ours, limit))
    rows.append((what, statistics.median(ours), limit_name, statistics.median(limit),
                 ratio, target, note))


def _fmt_t(t):
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    return f"{t * 1e3:.1f} ms"


def print_table(rows, file=sys.stdout):
    head = ("case", "ours", "limit", "limit time", "ratio", "target", "notes")
    lines = [head]
    for what, ours, lname, lim, ratio, target, note in rows:
        tgt = "-"
        if target is not None:
            tgt = f"<={target}x " + ("met" if ratio <= target else "MISSED")
        lines.append((what, _fmt_t(ours), lname, _fmt_t(lim), f"{ratio:.2f}x", tgt, note))
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(head))]
    for k, r in enumerate(lines):
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip(), file=file)
        if k == 0:
            print("-+-".join("-" * w for w in widths), file=file)


def relayout_rows(rows, rounds):
    rng = np.random.default_rng(0)
    cases = [
        ("f32[8192,8192] {1,0}->{0,1}", 8192, "{1,0}", "{0,1}"),
        ("f32[8200,8200] {1,0}->{0,1}", 8200, "{1,0}", "{0,1}"),
        ("f32[4096,4096] {1,0:T(8,128)}->{0,1:T(8,128)}", 4096, "{1,0:T(8,128)}",
         "{0,1:T(8,128)}"),
    ]
    for name, n, a, b in cases:
        x = rng.standard_normal((n, n), dtype=np.float32)
        src = LayoutArray.from_numpy(x, a)
        dst = LayoutArray.from_numpy(x.T.copy().T, b)     # same values, layout b
        out = np.empty_like(x)
        assert np.array_equal(src.relayout(b).to_numpy(), x)

        def into():
            dst[...] = src

        ours, lim = rounds_of([into, lambda: np.copyto(out, x)], rounds)
        row(rows, f"relayout {name}, into an existing LayoutArray (dst[...] = src)",
            ours, lim, "np.copyto", 2.0)
        new, xcopy, npt = rounds_of([lambda: src.relayout(b), x.copy,
                                     lambda: np.ascontiguousarray(x.T)], max(3, rounds // 2))
        row(rows, f"relayout {name}, new LayoutArray", new, xcopy, "x.copy() (fresh)",
            note=f"numpy's np.ascontiguousarray(x.T): {statistics.median(npt) * 1e3:.1f} ms")
        del src, dst, out, x


def _tiled(dt, n):
    """(layout text, numpy pack, numpy view of physical -> logical) for the three
    TPU tilings of the issue, on an n x n array."""
    if dt == np.float32:
        lay = "{1,0:T(8,128)}"

        def pack(x):
            return x.reshape(n // 8, 8, n // 128, 128).transpose(0, 2, 1, 3)

        def unpack(p):
            return p.transpose(0, 2, 1, 3)
    else:
        k = 2 if dt == BF16 else 4
        lay = "{1,0:T(8,128)(%d,1)}" % k

        def pack(x):
            return x.reshape(n // 8, 8 // k, k, n // 128, 128).transpose(0, 3, 1, 4, 2)

        def unpack(p):
            return p.transpose(0, 2, 4, 1, 3)
    return lay, pack, unpack


def pack_unpack_rows(rows, rounds, n=8192):
    rng = np.random.default_rng(1)
    x32 = rng.standard_normal((n, n), dtype=np.float32)
    for dt, name in ((np.float32, "f32 T(8,128)"), (BF16, "bf16 (8,128)(2,1)"),
                     (np.int8, "s8 (8,128)(4,1)")):
        x = x32.astype(dt)
        lay, pack, unpack = _tiled(dt, n)
        la = LayoutArray.from_numpy(x, lay)
        phys = la.physical_array()
        assert np.array_equal(pack(x).reshape(phys.shape).view(np.uint8),
                              phys.view(np.uint8))
        dst = np.empty_like(x)
        copy_dst = np.empty_like(x)

        def pk():
            la[...] = x

        ours, lim = rounds_of([pk, lambda: np.copyto(copy_dst, x)], rounds)
        row(rows, f"pack {name} [{n},{n}] into existing (la[...] = x)", ours, lim,
            "np.copyto", 1.25)
        ours, lim = rounds_of([lambda: la.to_numpy(out=dst), lambda: np.copyto(copy_dst, x)],
                              rounds)
        assert np.array_equal(dst.view(np.uint8), x.view(np.uint8))
        row(rows, f"unpack {name} [{n},{n}] into existing (to_numpy(out=))", ours, lim,
            "np.copyto", 1.25)
        del la, phys, dst, copy_dst, x
    del x32


def fresh_rows(rows, rounds):
    """from_numpy / to_numpy into fresh memory, f32 T(8,128), every size."""
    rng = np.random.default_rng(2)
    for r, c in ((8, 128), (64, 512), (256, 1024), (1024, 1024), (8192, 8192)):
        x = rng.standard_normal((r, c), dtype=np.float32)
        s = xs.parse_shape(f"f32[{r},{c}]{{1,0:T(8,128)}}")
        la = LayoutArray.from_numpy(x, s)
        phys = la.physical_array()

        def np_pack():
            return x.reshape(r // 8, 8, c // 128, 128).transpose(0, 2, 1, 3).copy()

        def np_unpack():
            return phys.transpose(0, 2, 1, 3).reshape(r, c)

        assert np_pack().tobytes() == bytes(la.physical)
        assert np.array_equal(np_unpack(), x) and np.array_equal(la.to_numpy(), x)
        size = x.nbytes
        label = f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
        # many calls per timing for the small ones (process_time ticks are coarse)
        reps = max(1, min(2000, (8 << 20) // size))
        k = max(5, rounds) if size < (64 << 20) else rounds

        def many(f):
            def g():
                for _ in range(reps):
                    f()
            return g

        a, b, cp = rounds_of([many(lambda: LayoutArray.from_numpy(x, s)), many(np_pack),
                              many(x.copy)], k)
        a = [t / reps for t in a]
        b = [t / reps for t in b]
        cp = [t / reps for t in cp]
        row(rows, f"from_numpy f32[{r},{c}] T(8,128) ({label}), new buffer", a, b,
            "numpy reshape/transpose/copy", 1.0,
            f"{statistics.median(x / y for x, y in zip(a, cp)):.2f}x x.copy()")
        a, b, cp = rounds_of([many(la.to_numpy), many(np_unpack), many(x.copy)], k)
        a = [t / reps for t in a]
        b = [t / reps for t in b]
        cp = [t / reps for t in cp]
        row(rows, f"to_numpy f32[{r},{c}] T(8,128) ({label}), new array", a, b,
            "numpy transpose/reshape", 1.0,
            f"{statistics.median(x / y for x, y in zip(a, cp)):.2f}x x.copy()")
        del la, phys, x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", choices=["relayout", "pack", "fresh"], default=None)
    args = ap.parse_args(argv)
    rows = []
    t0 = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.only in (None, "relayout"):
        relayout_rows(rows, args.rounds)
    if args.only in (None, "pack"):
        pack_unpack_rows(rows, args.rounds)
    if args.only in (None, "fresh"):
        fresh_rows(rows, args.rounds)
    print(f"LayoutArray kernels: medians of {args.rounds} interleaved rounds (CPU time), "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs, load average {load:.1f} at the "
          f"start, {time.perf_counter() - t0:.0f} s")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
