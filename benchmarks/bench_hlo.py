"""Throughput of ``xlashape hlo`` on a large generated HLO dump.

Generates a realistic XLA:TPU-style module (fused computations, reducers, a
while loop, tuples, tokens, ``metadata={...}`` on most lines, a pool of a few
thousand distinct shapes the way real programs repeat shapes) of about
``--size-mb`` MB in a temporary directory, then measures, median of
``--repeat`` runs:

* reading the file line by line in Python (the floor any line-based reader pays),
* the Python API: ``HloReader().read(f)`` (instructions with Shape objects),
* the API plus ``memory_footprint`` per instruction (what ``hlo`` computes),
* the command: ``python -m xlashape hlo FILE --summary``, ``--json`` and the
  default table, with output to /dev/null (process start-up included).

Run:  python benchmarks/bench_hlo.py [--size-mb 80] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

_TYPES = [("bf16", "T(8,128)(2,1)"), ("f32", "T(8,128)"), ("s32", "T(8,128)"),
          ("s8", "T(8,128)(4,1)"), ("pred", "T(8,128)(4,1)")]


def _shape_pool(rng: random.Random, n: int) -> list:
    """Distinct array shape strings, as XLA:TPU prints them."""
    pool = set()
    dims_choices = [1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 384, 512, 768, 1024, 1280, 2048,
                    4096, 5120, 8192, 16384, 32000, 50257]
    while len(pool) < n:
        rank = rng.choice([1, 2, 2, 3, 3, 4, 4, 5])
        et, tile = rng.choice(_TYPES)
        dims = [rng.choice(dims_choices) for _ in range(rank)]
        elements = 1
        for d in dims:
            elements *= d
        if elements > 1 << 32:   # keep shapes a real program could hold
            continue
        m2m = list(range(rank - 1, -1, -1))
        if rank >= 3 and rng.random() < 0.3:
            i, j = rng.sample(range(rank), 2)
            m2m[i], m2m[j] = m2m[j], m2m[i]
        if rank == 1:
            tile = "T(1024)" if et != "bf16" else "T(1024)(128)(2,1)"
        space = "S(1)" if rng.random() < 0.05 else ""
        pool.add(f"{et}[{','.join(map(str, dims))}]{{{','.join(map(str, m2m))}:{tile}{space}}}")
    return sorted(pool)


_OPS = ["add", "multiply", "subtract", "exponential", "convert", "broadcast", "transpose",
        "reshape", "copy", "select", "maximum", "divide", "negate", "tanh", "bitcast"]


def generate(path: str, size_mb: float, seed: int = 0) -> int:
    """Write a module of about ``size_mb`` MB to ``path``; returns the byte count."""
    rng = random.Random(seed)
    shapes = _shape_pool(rng, 3000)
    scalar = "f32[]{:T(128)}"
    target = int(size_mb * 1e6)
    written = 0
    out = open(path, "w")

    def w(text):
        nonlocal written
        out.write(text)
        written += len(text)

    w("HloModule jit_train_step, is_scheduled=true, entry_computation_layout="
      "{(bf16[8,4096]{1,0:T(8,128)(2,1)}, f32[]{:T(128)})->bf16[8,4096]{1,0:T(8,128)(2,1)}}\n\n")
    w("%region_add (a: f32[], b: f32[]) -> f32[] {\n"
      f"  %a = {scalar} parameter(0)\n  %b = {scalar} parameter(1)\n"
      f"  ROOT %s = {scalar} add({scalar} %a, {scalar} %b)\n}}\n\n")
    k = 0
    fused = []
    entry_budget = target // 5
    while written < target - entry_budget:
        k += 1
        name = f"fused_computation.{k}"
        fused.append(name)
        nparams = rng.randint(1, 4)
        params = [rng.choice(shapes) for _ in range(nparams)]
        sig = ", ".join(f"param_{i}.{k}: {p.split('{')[0]}" for i, p in enumerate(params))
        res = rng.choice(shapes)
        w(f"%{name} ({sig}) -> {res.split('{')[0]} {{\n")
        names = []
        for i, p in enumerate(params):
            w(f"  %param_{i}.{k} = {p} parameter({i})\n")
            names.append((f"param_{i}.{k}", p))
        for j in range(rng.randint(3, 12)):
            op = rng.choice(_OPS)
            s = rng.choice(shapes) if rng.random() < 0.5 else names[-1][1]
            a = rng.choice(names)
            b = rng.choice(names)
            nm = f"{op}.{k}.{j}"
            w(f"  %{nm} = {s} {op}({a[1]} %{a[0]}, {b[1]} %{b[0]}), "
              f"metadata={{op_type=\"{op}\" op_name=\"jit(train_step)/jit(main)/layer_{k % 48}/{op}\" "
              f"source_file=\"/work/model.py\" source_line={rng.randint(1, 900)}}}\n")
            names.append((nm, s))
        last = names[-1]
        w(f"  ROOT %tuple.{k} = ({last[1]}, {scalar}) tuple({last[1]} %{last[0]}, "
          f"{scalar} %param_0.{k})\n}}\n\n")
    w("ENTRY %main.1 (p0: bf16[8,4096], p1: f32[]) -> bf16[8,4096] {\n"
      "  %p0 = bf16[8,4096]{1,0:T(8,128)(2,1)} parameter(0), sharding={replicated}\n"
      f"  %p1 = {scalar} parameter(1)\n")
    i = 0
    while written < target:
        i += 1
        s = rng.choice(shapes)
        calls = rng.choice(fused)
        kind = rng.choice(["kLoop", "kInput", "kOutput"])
        w(f"  %fusion.{i} = ({s}, {scalar}) fusion(bf16[8,4096]{{1,0:T(8,128)(2,1)}} %p0, {scalar} %p1), "
          f"kind={kind}, calls=%{calls}, metadata={{op_type=\"fusion\" op_name=\"jit(train_step)/"
          f"jit(main)/block_{i % 96}/fusion\" source_file=\"/work/model.py\" source_line={i % 900}}}, "
          f"backend_config={{\"flag_configs\":[],\"scoped_memory_configs\":[],\"used_scoped_memory_configs\":[]}}\n")
        w(f"  %gte.{i} = {s} get-tuple-element(({s}, {scalar}) %fusion.{i}), index=0\n")
    w("  ROOT %copy.0 = bf16[8,4096]{1,0:T(8,128)(2,1)} copy(bf16[8,4096]{1,0:T(8,128)(2,1)} %p0)\n}\n")
    out.close()
    return os.path.getsize(path)


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=80.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", metavar="PATH", help="also copy the generated dump here")
    args = ap.parse_args(argv)

    from xlashape.hlo_module import HloReader, memory_footprint

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "module.after_optimizations.txt")
        t = time.perf_counter()
        nbytes = generate(path, args.size_mb)
        gen = time.perf_counter() - t
        with open(path) as f:
            nlines = sum(1 for _ in f)
        mb = nbytes / 1e6
        print(f"generated {mb:.1f} MB, {nlines} lines in {gen:.1f} s: {path}")
        if args.keep:
            import shutil

            shutil.copy(path, args.keep)

        def read_lines():
            with open(path) as f:
                for _ in f:
                    pass

        count = [0]

        def cold():
            # every run starts cold, as a fresh `xlashape hlo` process does:
            # no parsed shapes, plans or footprints left from the previous run
            from xlashape import hlo_text, tiling

            for f in (getattr(hlo_text, "_parse_shape_cached", None),
                      getattr(tiling, "_plan_cached", None), memory_footprint):
                if f is not None and hasattr(f, "cache_clear"):
                    f.cache_clear()

        def api_parse():
            cold()
            n = 0
            with open(path) as f:
                for _ in HloReader().read(f):
                    n += 1
            count[0] = n

        def api_sizes():
            cold()
            with open(path) as f:
                for ins in HloReader().read(f):
                    memory_footprint(ins.shape)

        def cli(*extra):
            def run():
                with open(os.devnull, "w") as devnull:
                    subprocess.run([sys.executable, "-m", "xlashape", "hlo", path, "--no-progress",
                                    *extra], stdout=devnull, check=True)
            return run

        def startup():
            subprocess.run([sys.executable, "-m", "xlashape", "--version"],
                           stdout=subprocess.DEVNULL, check=True)

        rows = [("read lines (Python floor)", read_lines),
                ("API: HloReader().read", api_parse),
                ("API: read + memory_footprint", api_sizes),
                ("CLI: hlo --summary", cli("--summary")),
                ("CLI: hlo --json > /dev/null", cli("--json")),
                ("CLI: hlo (table) > /dev/null", cli())]
        base = None
        print(f"{'what':<34} {'median s':>9} {'MB/s':>8} {'vs floor':>9}")
        for name, fn in rows:
            sec = _median_time(fn, args.repeat)
            if base is None:
                base = sec
            print(f"{name:<34} {sec:>9.2f} {mb / sec:>8.1f} {sec / base:>8.1f}x")
        t_start = _median_time(startup, args.repeat)
        print(f"{count[0]} instructions; CLI rows include {t_start:.2f} s of process "
              "start-up (python -m xlashape --version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
