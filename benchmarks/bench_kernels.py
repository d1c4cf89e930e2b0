"""LayoutArray's bulk kernels against the hardware's limits (issue 12).

Run: ``python benchmarks/bench_kernels.py`` (or ``python benchmarks/run.py
kernels``); ``--rounds N`` for more interleaved rounds.

Every row times ours and its limit in the same process, alternately, round
after round (so both see the same machine state); the ratio is the median
over rounds of ours / limit, the times are medians too. Times are CPU time
(``time.process_time``: user + system, so page faults count) of the calling
process, which is what a quiet machine's wall clock would show for these
single-threaded kernels; the two-thread rows (``--only threads``: the
transposing copy split between two threads, GIL released) use wall time.
``--only general``: copies to and from layouts whose tiles combine dimensions
(``*``), whose offsets come from the compiled program rather than tables.

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


# issue 12's relayout rows: (name, n, source layout, destination layout)
RELAYOUT_CASES = [
    ("f32[8192,8192] {1,0}->{0,1}", 8192, "{1,0}", "{0,1}"),
    ("f32[8200,8200] {1,0}->{0,1}", 8200, "{1,0}", "{0,1}"),
    ("f32[4096,4096] {1,0:T(8,128)}->{0,1:T(8,128)}", 4096, "{1,0:T(8,128)}",
     "{0,1:T(8,128)}"),
]


def relayout_rows(rows, rounds):
    rng = np.random.default_rng(0)
    for name, n, a, b in RELAYOUT_CASES:
        x = rng.standard_normal((n, n), dtype=np.float32)
        src = LayoutArray.from_numpy(x, a)
        dst = LayoutArray.from_numpy(x.T.copy().T, b)     # same values, layout b
        out = np.empty_like(x)
        assert np.array_equal(src.relayout(b).to_numpy(), x)

        def into():
            dst[...] = src

        # wall time: the transposing copy runs on two threads by default
        # where the process may use two CPUs (CPU time would add both up)
        ours, lim = rounds_of([into, lambda: np.copyto(out, x)], rounds,
                              clock=time.perf_counter)
        row(rows, f"relayout {name}, into an existing LayoutArray (dst[...] = src)",
            ours, lim, "np.copyto", 2.0)
        new, xcopy, npt = rounds_of([lambda: src.relayout(b), x.copy,
                                     lambda: np.ascontiguousarray(x.T)], max(3, rounds // 2),
                                    clock=time.perf_counter)
        row(rows, f"relayout {name}, new LayoutArray", new, xcopy, "x.copy() (fresh)",
            note=f"numpy's np.ascontiguousarray(x.T): {statistics.median(npt) * 1e3:.1f} ms")
        del src, dst, out, x


def two_thread_rows(rows, rounds):
    """The relayouts into an existing LayoutArray with the transposing copy
    split between two threads (the GIL released), against one thread and
    np.copyto, in wall time (CPU time would add both threads up)."""
    rng = np.random.default_rng(0)
    core = xs._core
    for name, n, a, b in RELAYOUT_CASES:
        x = rng.standard_normal((n, n), dtype=np.float32)
        src = LayoutArray.from_numpy(x, a)
        dst = LayoutArray.from_numpy(x, b)
        out = np.empty_like(x)

        def run(k):
            def f():
                old = core._kernel_settings(threads=k)
                try:
                    dst[...] = src
                finally:
                    core._kernel_settings(**old)
            return f

        two, one, lim = rounds_of([run(2), run(1), lambda: np.copyto(out, x)], rounds,
                                  clock=time.perf_counter)
        assert np.array_equal(dst.to_numpy(), x)
        row(rows, f"relayout {name}, into existing, 2 threads (wall time)", two, lim,
            "np.copyto", 2.0,
            f"1 thread in the same rounds: "
            f"{statistics.median(p / q for p, q in zip(one, lim)):.2f}x (wall)")
        del src, dst, out, x


def _anon_huge_kib():
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def explain_rows(rows, rounds, n=8192):
    """Experiments on f32[n,n] {1,0}->{0,1} into an existing LayoutArray
    (the transposing relayout rows), all in the same interleaved rounds, wall
    time: kernel settings (streaming stores off, other block edges, the
    carry of partial destination lines off, two threads) and, for n = 8192,
    numpy's own transposing copy into existing memory and the whole row again
    on buffers without transparent huge pages (numpy's madvise switched off,
    our buffers wrapped with frombuffer)."""
    core = xs._core
    full = n == 8192
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty_like(x)
    src = LayoutArray.from_numpy(x, "{1,0}")
    dst = LayoutArray.from_numpy(x, "{0,1}")
    # the same on 4 KiB pages
    set_hp = getattr(getattr(np, "_core", np.core).multiarray, "_set_madvise_hugepage", None)
    small = None
    if set_hp is not None and full:
        was = set_hp(False)
        try:
            x4 = np.empty_like(x)
            x4[...] = x
            out4 = np.empty_like(x)
            out4[...] = 0
            src4 = LayoutArray.frombuffer(np.empty(src.physical_nbytes, np.uint8),
                                          src.xla_shape)
            dst4 = LayoutArray.frombuffer(np.empty(dst.physical_nbytes, np.uint8),
                                          dst.xla_shape)
            src4[...] = x
            dst4[...] = 0
            small = (x4, out4, src4, dst4)
        finally:
            set_hp(was)

    def with_settings(**kw):
        def f():
            old = core._kernel_settings(**kw)
            try:
                dst[...] = src
            finally:
                core._kernel_settings(**old)
        return f

    def assign(d, s_):
        def f():
            d[...] = s_
        return f

    def copy2():
        h = n // 2
        t = threading.Thread(target=np.copyto, args=(out[h:], x[h:]))
        t.start()
        np.copyto(out[:h], x[:h])
        t.join()

    fns = {
        "default (threads as configured, streaming stores, 64x128 blocks, carry)":
            assign(dst, src),
        "1 thread": with_settings(threads=1),
        "carry off": with_settings(carry=False),
        "blocks 64x64": with_settings(block=(64, 64)),
        "blocks 128x64": with_settings(block=(128, 64)),
        "blocks 32x32": with_settings(block=(32, 32)),
        "streaming stores off": with_settings(stream_threshold=1 << 62),
        "2 threads": with_settings(threads=2, thread_threshold=0),
        "numpy np.copyto(out, x.T)": lambda: np.copyto(out, x.T),
        "np.copyto in 2 threads (halves; the machine's 2-core bandwidth)": copy2,
        "np.copyto (limit)": lambda: np.copyto(out, x),
    }
    if not full:
        for k in ("blocks 32x32", "numpy np.copyto(out, x.T)",
                  "np.copyto in 2 threads (halves; the machine's 2-core bandwidth)"):
            del fns[k]
    if small is not None:
        x4, out4, src4, dst4 = small
        fns["4 KiB pages: default"] = assign(dst4, src4)
        fns["4 KiB pages: np.copyto (limit)"] = lambda: np.copyto(out4, x4)
    times = rounds_of(list(fns.values()), rounds, clock=time.perf_counter)
    by = dict(zip(fns, times))
    # CPU time of the two-thread kernel (both threads' time adds up: about
    # twice its wall time shows that both threads worked)
    cpu2 = statistics.median(rounds_of([with_settings(threads=2, thread_threshold=0)],
                                       rounds)[0])
    assert np.array_equal(dst.to_numpy(), x)
    hp = _anon_huge_kib()
    for name, t in by.items():
        lim = by["4 KiB pages: np.copyto (limit)"] if name.startswith("4 KiB") else \
            by["np.copyto (limit)"]
        row(rows, f"explain f32[{n},{n}] {{1,0}}->{{0,1}} into existing: {name}", t, lim,
            "np.copyto", note="wall time" + (f"; AnonHugePages {hp // 1024} MiB"
                                             if hp is not None and name.startswith("default")
                                             else "") +
            (f"; CPU time {cpu2 * 1e3:.1f} ms" if name == "2 threads" else ""))
    del src, dst, out, x, small


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
        # the limit copies the same bytes as plain unsigned integers: numpy's
        # copy of ml_dtypes' bfloat16 is not a memcpy (it ran at half speed)
        xu = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        copy_dst = np.empty_like(xu)

        def pk():
            la[...] = x

        ours, lim = rounds_of([pk, lambda: np.copyto(copy_dst, xu)], rounds)
        row(rows, f"pack {name} [{n},{n}] into existing (la[...] = x)", ours, lim,
            "np.copyto", 1.25)
        ours, lim = rounds_of([lambda: la.to_numpy(out=dst), lambda: np.copyto(copy_dst, xu)],
                              rounds)
        assert np.array_equal(dst.view(np.uint8), x.view(np.uint8))
        row(rows, f"unpack {name} [{n},{n}] into existing (to_numpy(out=))", ours, lim,
            "np.copyto", 1.25)
        del la, phys, dst, copy_dst, x, xu
    del x32


# Layouts whose tiles combine dimensions ('*'): their offset programs are not
# separable, so the kernels address them through the program (one run per
# block row) rather than per-dimension tables: (name, dtype, source layout,
# destination layout) on [64, 512, 512] (32-64 MiB).
GENERAL_CASES = [
    ("transpose f32 {2,1,0:T(*,8,128)}->{1,2,0:T(*,8,128)}", np.float32,
     "{2,1,0:T(*,8,128)}", "{1,2,0:T(*,8,128)}"),
    ("transpose f32 {2,1,0:T(*,8,128)}->{1,2,0}", np.float32, "{2,1,0:T(*,8,128)}", "{1,2,0}"),
    ("pack bf16 {2,1,0:T(*,8,128)(2,1)} (zip)", BF16, None, "{2,1,0:T(*,8,128)(2,1)}"),
    ("unpack bf16 {2,1,0:T(*,8,128)(2,1)} (unzip)", BF16, "{2,1,0:T(*,8,128)(2,1)}", None),
    ("pack s8 {2,1,0:T(*,8,128)(4,1)} (zip)", np.int8, None, "{2,1,0:T(*,8,128)(4,1)}"),
    ("unpack s8 {2,1,0:T(*,8,128)(4,1)} (unzip)", np.int8, "{2,1,0:T(*,8,128)(4,1)}", None),
]


def general_rows(rows, rounds, dims=(64, 512, 512)):
    """The copies between a '*' layout and another layout or numpy, into
    existing memory, against np.copyto of the same bytes (CPU time)."""
    rng = np.random.default_rng(3)
    x32 = rng.standard_normal(dims, dtype=np.float32)
    for name, dt, a, b in GENERAL_CASES:
        x = x32.astype(dt)
        xu = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        copy_dst = np.empty_like(xu)
        if a is None:                     # pack: numpy -> b
            dst = LayoutArray.from_numpy(x, b)

            def f():
                dst[...] = x
        elif b is None:                   # unpack: a -> numpy
            src = LayoutArray.from_numpy(x, a)
            out = np.empty_like(x)

            def f():
                src.to_numpy(out=out)
        else:                             # relayout a -> b
            src = LayoutArray.from_numpy(x, a)
            dst = LayoutArray.from_numpy(x, b)

            def f():
                dst[...] = src
        f()
        ours, lim = rounds_of([f, lambda: np.copyto(copy_dst, xu)], rounds)
        row(rows, f"{name} {list(dims)}, into existing", ours, lim, "np.copyto")
        del x, xu, copy_dst
        src = dst = out = None
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
    ap.add_argument("--only", choices=["relayout", "threads", "pack", "fresh", "explain",
                                       "general"], default=None)
    args = ap.parse_args(argv)
    rows = []
    t0 = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.only in (None, "relayout"):
        relayout_rows(rows, args.rounds)
    if args.only in (None, "threads"):
        two_thread_rows(rows, args.rounds)
    if args.only in (None, "explain"):
        explain_rows(rows, args.rounds)
        explain_rows(rows, args.rounds, 8200)
    if args.only in (None, "pack"):
        pack_unpack_rows(rows, args.rounds)
    if args.only in (None, "fresh"):
        fresh_rows(rows, args.rounds)
    if args.only in (None, "general"):
        general_rows(rows, args.rounds)
    print(f"LayoutArray kernels: medians of {args.rounds} interleaved rounds (CPU time), "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs, load average {load:.1f} at the "
          f"start, {time.perf_counter() - t0:.0f} s")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
