"""LayoutArray against numpy (and memoryview) on the targets of issue 4.

Run: ``python benchmarks/bench_array.py`` (or ``python benchmarks/run.py``).
Every row times ours and the reference in the same run; figures are medians
of repeats. Ratio = ours / reference time (lower is better for us).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import textwrap
import time
import timeit

import numpy as np

import xlashape as xs
from xlashape import Layout, LayoutArray, Shape, Tile

BF16 = xs.PrimitiveType.BF16.dtype
N = 8192


def _median_call(fn, repeat):
    """Median CPU time of fn() over `repeat` runs (seconds).

    CPU time (process_time: user + system, page faults included) rather than
    wall time: the benchmark machine is shared, and a preempted run would
    otherwise count someone else's work. Every kernel here is single-threaded.
    """
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def _per_op(stmts, env, number=100_000, repeat=9):
    """Median CPU time of one execution of each stmt (seconds), the stmts
    interleaved repeat by repeat so that they share the machine's state."""
    timers = [timeit.Timer(s, globals=env, timer=time.process_time) for s in stmts]
    res = [[] for _ in stmts]
    for _ in range(repeat):
        for k, t in enumerate(timers):
            res[k].append(t.timeit(number) / number)
    return [statistics.median(r) for r in res]


def _row(rows, what, ours, ref, ref_name, mv=None, target=None, extra=""):
    rows.append((what, ours, ref, ref_name, mv, target, extra))


def scalar_rows(rows):
    rng = np.random.default_rng(0)
    cases = [
        ("f32[1024,1024]{1,0}", Shape("f32", (1024, 1024), Layout((1, 0))), (517, 333)),
        ("f32[1024,1024]{1,0:T(8,128)}",
         Shape("f32", (1024, 1024), Layout((1, 0), tiles=[Tile(8, 128)])), (517, 333)),
        ("bf16[8,4,1280,1024]{3,2,0,1:T(8,128)(2,1)}",
         Shape("bf16", (8, 4, 1280, 1024), Layout((3, 2, 0, 1), tiles=[Tile(8, 128), Tile(2, 1)])),
         (5, 2, 1000, 777)),
    ]
    for name, shape, key in cases:
        dt = shape.dtype
        x = rng.standard_normal(shape.dimensions, dtype=np.float32).astype(dt)
        la = LayoutArray.from_numpy(x, shape)
        a = np.ascontiguousarray(x)
        # memoryview indexing on the same bytes (bf16 has no PEP 3118 code: as u16)
        mv = memoryview(a if dt != BF16 else a.view(np.uint16))
        env = {"la": la, "a": a, "mv": mv, "v": 1.5, "w": 1}
        for k, i in enumerate(key):
            env["i%d" % k] = i
        idx = ", ".join("i%d" % k for k in range(len(key)))
        t_la, t_np, t_mv = _per_op([f"la[{idx}]", f"a[{idx}]", f"mv[{idx}]"], env)
        _row(rows, f"la[{idx}] get  {name}", t_la, t_np, "numpy a[i,...]", t_mv, 0.5)
        mv_set = f"mv[{idx}] = v" if dt != BF16 else f"mv[{idx}] = w"
        t_las, t_nps, t_mvs = _per_op([f"la[{idx}] = v", f"a[{idx}] = v", mv_set], env)
        _row(rows, f"la[{idx}] = v  {name}", t_las, t_nps, "numpy a[i,...] = v", t_mvs, 0.5)


def _gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def bulk_rows(rows, repeat=5):
    rng = np.random.default_rng(1)
    x32 = rng.standard_normal((N, N), dtype=np.float32)
    nbytes = x32.nbytes
    dst = np.empty_like(x32)
    t_copyto = _median_call(lambda: np.copyto(dst, x32), repeat)
    _row(rows, "np.copyto f32 256 MiB, preallocated (bandwidth ref)", t_copyto, None, "",
         extra=f"{_gbps(nbytes, t_copyto):.2f} GB/s")

    # f32[8192,8192]{1,0:T(8,128)}: physical = (1024, 64, 8, 128)
    s = Shape("f32", (N, N), Layout((1, 0), tiles=[Tile(8, 128)]))

    def np_pack():
        return x32.reshape(N // 8, 8, N // 128, 128).transpose(0, 2, 1, 3).copy()

    la = LayoutArray.from_numpy(x32, s)
    ref_phys = np_pack()
    assert bytes(la.physical) == ref_phys.tobytes()
    t_ours = _median_call(lambda: LayoutArray.from_numpy(x32, s), repeat)
    t_np = _median_call(np_pack, repeat)
    _row(rows, "from_numpy f32 T(8,128), new buffer", t_ours, t_np,
         "reshape/transpose/copy", target=0.5)

    def la_pack():
        la[...] = x32

    def np_pack_into():
        np.copyto(ref_phys.transpose(0, 2, 1, 3), x32.reshape(N // 8, 8, N // 128, 128))

    t_ours = _median_call(la_pack, repeat)
    t_np = _median_call(np_pack_into, repeat)
    _row(rows, "pack f32 T(8,128) into existing (la[...] = x)", t_ours, t_np, "np.copyto(view)",
         extra=f"{_gbps(nbytes, t_ours):.2f} GB/s = {t_copyto / t_ours:.0%} of copyto (>=60%)")

    def np_unpack():
        return ref_phys.transpose(0, 2, 1, 3).reshape(N, N)

    t_ours = _median_call(la.to_numpy, repeat)
    t_np = _median_call(np_unpack, repeat)
    _row(rows, "to_numpy f32 T(8,128), new array", t_ours, t_np, "transpose/reshape",
         target=0.5)
    t_ours = _median_call(lambda: la.to_numpy(out=dst), repeat)
    t_np = _median_call(lambda: np.copyto(dst.reshape(N // 8, 8, N // 128, 128),
                                          ref_phys.transpose(0, 2, 1, 3)), repeat)
    _row(rows, "unpack f32 T(8,128) into existing (out=)", t_ours, t_np, "np.copyto(view)",
         extra=f"{_gbps(nbytes, t_ours):.2f} GB/s = {t_copyto / t_ours:.0%} of copyto (>=60%)")
    del la, ref_phys

    # bf16[8192,8192]{1,0:T(8,128)(2,1)}: physical = (1024, 64, 4, 128, 2, 1)
    xb = x32.astype(BF16)
    del x32, dst
    sb = Shape("bf16", (N, N), Layout((1, 0), tiles=[Tile(8, 128), Tile(2, 1)]))
    nb = xb.nbytes
    dstb = np.empty_like(xb)
    t_copyto_b = _median_call(lambda: np.copyto(dstb, xb), repeat)
    _row(rows, "np.copyto bf16 128 MiB, preallocated (bandwidth ref)", t_copyto_b, None, "",
         extra=f"{_gbps(nb, t_copyto_b):.2f} GB/s")

    def np_pack_b():
        return xb.reshape(N // 8, 4, 2, N // 128, 128).transpose(0, 3, 1, 4, 2).copy()

    lb = LayoutArray.from_numpy(xb, sb)
    ref_b = np_pack_b()
    assert bytes(lb.physical) == ref_b.tobytes()
    t_ours = _median_call(lambda: LayoutArray.from_numpy(xb, sb), repeat)
    t_np = _median_call(np_pack_b, repeat)
    _row(rows, "from_numpy bf16 T(8,128)(2,1), new buffer", t_ours, t_np,
         "reshape/transpose/copy", target=0.5)

    def lb_pack():
        lb[...] = xb

    t_ours = _median_call(lb_pack, repeat)
    t_np = _median_call(lambda: np.copyto(ref_b.transpose(0, 2, 4, 1, 3),
                                          xb.reshape(N // 8, 4, 2, N // 128, 128)), repeat)
    _row(rows, "pack bf16 T(8,128)(2,1) into existing", t_ours, t_np, "np.copyto(view)",
         extra=f"{_gbps(nb, t_ours):.2f} GB/s = {t_copyto_b / t_ours:.0%} of copyto (>=60%)")

    def np_unpack_b():
        return ref_b.transpose(0, 2, 4, 1, 3).reshape(N, N)

    t_ours = _median_call(lb.to_numpy, repeat)
    t_np = _median_call(np_unpack_b, repeat)
    _row(rows, "to_numpy bf16 T(8,128)(2,1), new array", t_ours, t_np, "transpose/reshape",
         target=0.5)
    t_ours = _median_call(lambda: lb.to_numpy(out=dstb), repeat)
    t_np = _median_call(lambda: np.copyto(dstb.reshape(N // 8, 4, 2, N // 128, 128),
                                          ref_b.transpose(0, 2, 4, 1, 3)), repeat)
    _row(rows, "unpack bf16 T(8,128)(2,1) into existing", t_ours, t_np, "np.copyto(view)",
         extra=f"{_gbps(nb, t_ours):.2f} GB/s = {t_copyto_b / t_ours:.0%} of copyto (>=60%)")
    del lb, ref_b, xb, dstb

    x32 = rng.standard_normal((N, N), dtype=np.float32)
    la = LayoutArray.from_numpy(x32, Shape("f32", (N, N), Layout((1, 0))))
    t_ours = _median_call(lambda: la.relayout(Layout((0, 1))), 3)
    t_np = _median_call(lambda: np.ascontiguousarray(x32.T), 3)
    _row(rows, "relayout f32[8192,8192] {1,0}->{0,1}", t_ours, t_np,
         "np.ascontiguousarray(a.T)", target=0.25, extra=f"{_gbps(nbytes, t_ours):.2f} GB/s")


_PEAK_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from xlashape import LayoutArray, Shape, Layout, Tile

    def peak():
        # VmHWM: peak RSS of this process image (ru_maxrss would also count
        # the parent's pages inherited through fork before exec).
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    N = 8192
    x = np.ones((N, N), dtype=np.float32)         # the input, touched
    before = peak()
    la = LayoutArray.from_numpy(x, Shape("f32", (N, N), Layout((1, 0), tiles=[Tile(8, 128)])))
    after = peak()
    print(after - before, la.physical_nbytes)
""")


def peak_rows(rows):
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT], capture_output=True,
                         text=True, check=True).stdout.split()
    grown, phys = int(out[0]), int(out[1])
    rows.append(("peak RSS growth of from_numpy f32 T(8,128)", None, None, "", None, None,
                 f"{grown / 2**20:.1f} MiB for a {phys / 2**20:.1f} MiB physical buffer "
                 f"(extra {(grown - phys) / 2**20:+.1f} MiB)"))


def _fmt_t(t):
    if t is None:
        return "-"
    if t < 1e-6:
        return f"{t * 1e9:.1f} ns"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    return f"{t * 1e3:.1f} ms"


def print_table(rows, file=sys.stdout):
    head = ("case", "ours", "reference", "ref time", "memoryview", "ours/ref", "target", "notes")
    lines = [head]
    for what, ours, ref, ref_name, mv, target, extra in rows:
        ratio = f"{ours / ref:.2f}x" if ours and ref else "-"
        tgt = "-"
        if target is not None and ours and ref:
            ok = ours / ref <= target and (mv is None or ours < mv)
            tgt = f"<={target}x" + (" met" if ok else " MISSED")
        lines.append((what, _fmt_t(ours), ref_name, _fmt_t(ref), _fmt_t(mv), ratio, tgt, extra))
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(head))]
    for k, r in enumerate(lines):
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip(), file=file)
        if k == 0:
            print("-+-".join("-" * w for w in widths), file=file)


def main(argv=None):
    rows = []
    t0 = time.perf_counter()
    peak_rows(rows)
    scalar_rows(rows)
    bulk_rows(rows)
    print(f"LayoutArray benchmarks: medians of CPU time, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs, {time.perf_counter() - t0:.0f} s")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
