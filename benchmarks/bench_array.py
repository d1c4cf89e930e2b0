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
    """Median wall time of fn() over `repeat` runs (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _per_op(stmt, env, number=200_000, repeat=7):
    """Median time of one execution of stmt (seconds), timeit-style."""
    t = timeit.Timer(stmt, globals=env)
    return statistics.median(t.repeat(repeat=repeat, number=number)) / number


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
        # memoryview indexing on the same bytes (bf16 has no PEP 3118 code: u16)
        mv = memoryview(a if dt != BF16 else a.view(np.uint16))
        env = {"la": la, "a": a, "mv": mv, "v": 1.5}
        for k, i in enumerate(key):
            env["i%d" % k] = i
        idx = ", ".join("i%d" % k for k in range(len(key)))
        t_la = _per_op(f"la[{idx}]", env)
        t_np = _per_op(f"a[{idx}]", env)
        t_mv = _per_op(f"mv[{idx}]", env)
        _row(rows, f"get la[{idx}] {name}", t_la, t_np, "numpy a[...]", t_mv, 0.5)
        t_las = _per_op(f"la[{idx}] = v", env)
        t_nps = _per_op(f"a[{idx}] = v", env)
        t_mvs = _per_op(f"mv[{idx}] = v", env) if dt != BF16 else None
        _row(rows, f"set la[{idx}] = v {name}", t_las, t_nps, "numpy a[...] = v", t_mvs, 0.5)


def _gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def bulk_rows(rows, repeat=5):
    rng = np.random.default_rng(1)
    x32 = rng.standard_normal((N, N), dtype=np.float32)
    nbytes = x32.nbytes
    dst = np.empty_like(x32)
    t_copyto = _median_call(lambda: np.copyto(dst, x32), repeat)
    _row(rows, "np.copyto 256 MB (bandwidth reference)", t_copyto, t_copyto, "np.copyto",
         extra=f"{_gbps(nbytes, t_copyto):.2f} GB/s")

    s = Shape("f32", (N, N), Layout((1, 0), tiles=[Tile(8, 128)]))
    la = LayoutArray.from_numpy(x32, s)
    ref_phys = x32.reshape(N // 8, 8, N // 128, 128).transpose(0, 2, 1, 3).copy()
    assert bytes(la.physical[:4096]) == ref_phys.tobytes()[:4096]
    t_ours = _median_call(lambda: LayoutArray.from_numpy(x32, s), repeat)
    t_np = _median_call(
        lambda: x32.reshape(N // 8, 8, N // 128, 128).transpose(0, 2, 1, 3).copy(), repeat)
    _row(rows, "from_numpy f32[8192,8192]{1,0:T(8,128)}", t_ours, t_np,
         "reshape/transpose/copy", target=0.5,
         extra=f"{_gbps(nbytes, t_ours):.2f} GB/s = {t_copyto / t_ours:.0%} of copyto")
    t_ours = _median_call(la.to_numpy, repeat)
    t_np = _median_call(
        lambda: ref_phys.reshape(N // 8, N // 128, 8, 128).transpose(0, 2, 1, 3)
        .reshape(N, N), repeat)
    _row(rows, "to_numpy f32[8192,8192]{1,0:T(8,128)}", t_ours, t_np,
         "transpose/reshape", target=0.5,
         extra=f"{_gbps(nbytes, t_ours):.2f} GB/s = {t_copyto / t_ours:.0%} of copyto")
    del la, ref_phys

    xb = x32.astype(BF16)
    del x32, dst
    sb = Shape("bf16", (N, N), Layout((1, 0), tiles=[Tile(8, 128), Tile(2, 1)]))
    nb = xb.nbytes
    dstb = np.empty_like(xb)
    t_copyto_b = _median_call(lambda: np.copyto(dstb, xb), repeat)
    del dstb

    def np_pack_b():
        return xb.reshape(N // 8, 4, 2, N // 128, 128).transpose(0, 3, 1, 4, 2).copy()

    lb = LayoutArray.from_numpy(xb, sb)
    ref_b = np_pack_b()
    assert bytes(lb.physical[:4096]) == ref_b.tobytes()[:4096]
    t_ours = _median_call(lambda: LayoutArray.from_numpy(xb, sb), repeat)
    t_np = _median_call(np_pack_b, repeat)
    _row(rows, "from_numpy bf16[8192,8192]{1,0:T(8,128)(2,1)}", t_ours, t_np,
         "reshape/transpose/copy", target=0.5,
         extra=f"{_gbps(nb, t_ours):.2f} GB/s = {t_copyto_b / t_ours:.0%} of copyto")
    t_ours = _median_call(lb.to_numpy, repeat)
    t_np = _median_call(
        lambda: ref_b.reshape(N // 8, N // 128, 4, 128, 2).transpose(0, 2, 4, 1, 3)
        .reshape(N, N), repeat)
    _row(rows, "to_numpy bf16[8192,8192]{1,0:T(8,128)(2,1)}", t_ours, t_np,
         "transpose/reshape", target=0.5,
         extra=f"{_gbps(nb, t_ours):.2f} GB/s = {t_copyto_b / t_ours:.0%} of copyto")
    del lb, ref_b, xb

    x32 = rng.standard_normal((N, N), dtype=np.float32)
    la = LayoutArray.from_numpy(x32, Shape("f32", (N, N), Layout((1, 0))))
    t_ours = _median_call(lambda: la.relayout(Layout((0, 1))), repeat)
    t_np = _median_call(lambda: np.ascontiguousarray(x32.T), repeat)
    _row(rows, "relayout f32[8192,8192] {1,0}->{0,1}", t_ours, t_np,
         "np.ascontiguousarray(a.T)", target=0.25,
         extra=f"{_gbps(nbytes, t_ours):.2f} GB/s")


_PEAK_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from xlashape import LayoutArray, Shape, Layout, Tile
    N = 8192
    x = np.ones((N, N), dtype=np.float32)         # input, touched
    import gc; gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    la = LayoutArray.from_numpy(x, Shape("f32", (N, N), Layout((1, 0), tiles=[Tile(8, 128)])))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((after - before) * 1024, la.physical_nbytes)
""")


def peak_rows(rows):
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT], capture_output=True,
                         text=True, check=True).stdout.split()
    grown, phys = int(out[0]), int(out[1])
    rows.append(("peak RSS growth of from_numpy f32[8192,8192]{1,0:T(8,128)}",
                 None, None, "", None, None,
                 f"{grown / 2**20:.1f} MiB for a {phys / 2**20:.1f} MiB buffer "
                 f"(+{(grown - phys) / 2**20:.1f} MiB)"))


def _fmt_t(t):
    if t is None:
        return "-"
    if t < 1e-6:
        return f"{t * 1e9:.1f} ns"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    return f"{t * 1e3:.1f} ms"


def print_table(rows, file=sys.stdout):
    head = ("case", "ours", "reference", "ref time", "memoryview", "ratio", "target", "notes")
    lines = [head]
    for what, ours, ref, ref_name, mv, target, extra in rows:
        ratio = f"{ours / ref:.2f}x" if ours and ref else "-"
        tgt = "-"
        if target is not None and ours and ref:
            ok = ours / ref <= target and (mv is None or ours < mv)
            tgt = f"<={target}x " + ("met" if ok else "MISSED")
        lines.append((what, _fmt_t(ours), ref_name, _fmt_t(ref), _fmt_t(mv), ratio, tgt, extra))
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(head))]
    for k, r in enumerate(lines):
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip(), file=file)
        if k == 0:
            print("-+-".join("-" * w for w in widths), file=file)


def main(argv=None):
    rows = []
    t0 = time.perf_counter()
    scalar_rows(rows)
    bulk_rows(rows)
    peak_rows(rows)
    print(f"LayoutArray benchmarks (numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"{time.perf_counter() - t0:.0f} s)")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
