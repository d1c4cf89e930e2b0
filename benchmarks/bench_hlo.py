"""Throughput of xlashape's HLO reader, ``xlashape hlo`` and ``xlashape memory``
on a large generated module, against XLA's own parser.

Generates, in a temporary directory, a module of about ``--size-mb`` MB that
XLA's parser accepts and that looks like what XLA:TPU prints after
optimizations: the header with ``entry_computation_layout`` and
``input_output_alias``, the stack-frame sections, fused computations (with
tiled layouts from a pool of shapes, ``metadata={... stack_frame_id=N}``, a
reduce with its reducer), an entry computation calling them with long JSON
``backend_config`` attributes, get-tuple-elements, copy-start/copy-done pairs
and a while loop (about 200 bytes per instruction, as in real dumps). Then it
measures, medians of ``--repeat`` interleaved rounds:

* reading the file line by line in Python (the floor any line-based reader pays),
* the API: ``scan_calls`` (the call-graph pass) and ``iter_instructions(Path)``
  (that pass, then every instruction with its Shape object, computation kind
  and result kind, read by blocks),
* the commands: ``xlashape memory FILE --json``, ``xlashape hlo FILE --json``
  and ``--summary``, output to /dev/null, process start-up included, with the
  peak resident memory of each,
* XLA's ``hlo_module_from_text`` on the same text (the parse call alone, the
  text already in memory), in a Python that has jaxlib: this one if it does,
  else ``--xla-python PATH`` (a separate process; skipped when neither has it).

Times are CPU seconds (user + system; of the child process for the commands
and for XLA), medians of the rounds: the build machines are shared, and
wall time there measures the neighbours.

Run:  python benchmarks/bench_hlo.py [--size-mb 1000] [--repeat 3] [--xla-python PY]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

_LAYOUTS = {"f32": "T(8,128)", "bf16": "T(8,128)(2,1)"}
_ELEMENTWISE = ["add", "multiply", "subtract", "maximum", "divide"]
_UNARY = ["exponential", "tanh", "negate", "sqrt", "log"]


def _shape_pool(rng: random.Random, n: int) -> list:
    """Distinct (type, dims, layout text) with tiled TPU layouts."""
    dims_choices = [1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 384, 512, 768, 1024, 1280, 2048, 4096]
    pool = {}
    while len(pool) < n:
        rank = rng.choice([2, 2, 3, 3, 4])
        et = rng.choice(["f32", "bf16"])
        dims = [rng.choice(dims_choices) for _ in range(rank)]
        if rank >= 3 and rng.random() < 0.3:
            dims[rng.randrange(rank - 1)] = 1
        m2m = list(range(rank - 1, -1, -1))
        if rng.random() < 0.3:
            i, j = rng.sample(range(rank), 2)
            m2m[i], m2m[j] = m2m[j], m2m[i]
        space = "S(1)" if rng.random() < 0.05 else ""
        dims_text = ",".join(map(str, dims))
        text = f"{et}[{dims_text}]{{{','.join(map(str, m2m))}:{_LAYOUTS[et]}{space}}}"
        pool[text] = (et, dims_text, text)
    return sorted(pool.values())


_BACKEND = ('{{"flag_configs":[],"window_config":{{"kernel_window_bounds":[],"output_window_bounds":'
            '["{a}","{b}"],"input_window_bounds":[],"estimated_cycles":"{c}","iteration_bounds":'
            '["1","1"],"cost_model_type":"COST_MODEL_TYPE_INVALID","ml_estimated_microseconds":0,'
            '"is_mask":false,"pad_output_on_minor_dim":"0","pad_input_on_minor_dim":"0",'
            '"estimated_vmem_bytes":"0","estimated_bundle_count":"0","estimated_scoped_vmem_bytes":'
            '"0","buffering_level":"2"}},"scoped_memory_configs":[],"used_scoped_memory_configs":'
            '[{{"memory_space":"1","offset":"0","size":"{s}"}}],"retry_config":{{"retry_count":"0"}},'
            '"aliasing_operands":{{"lists":[]}}}}')


def generate(path: str, size_mb: float, seed: int = 0) -> int:
    """Write a module of about ``size_mb`` MB to ``path``; returns the byte count."""
    rng = random.Random(seed)
    pool = _shape_pool(rng, 64)
    target = int(size_mb * 1e6)
    out = open(path, "w", buffering=1 << 20)
    written = 0

    def w(text):
        nonlocal written
        out.write(text)
        written += len(text)

    scalar = "f32[]{:T(128)}"
    params = [p[2] for p in pool] + [scalar]
    ecl = ", ".join(params)
    w(f"HloModule jit_train_step, is_scheduled=true, input_output_alias={{ {{0}}: (0, {{}}, "
      f"may-alias) }}, entry_computation_layout={{({ecl})->({pool[0][2]}, {scalar})}}, "
      f"allow_spmd_sharding_propagation_to_output={{true,true}}\n\n")
    w('FileNames\n1 "model.py"\n\nFunctionNames\n1 "train_step"\n2 "layer"\n\nFileLocations\n')
    for i in range(1, 101):
        w(f"{i} {{file_name_id=1 function_name_id={1 + i % 2} line={10 + i} end_line={10 + i} "
          f"column=4 end_column=30}}\n")
    w("\nStackFrames\n")
    for i in range(1, 101):
        w(f"{i} {{file_location_id={i} parent_frame_id={max(1, i - 1)}}}\n")
    w("\n\n")
    w(f"%region_add (x: f32[], y: f32[]) -> f32[] {{\n  %x = {scalar} parameter(0)\n"
      f"  %y = {scalar} parameter(1)\n  ROOT %sum = {scalar} add(%x, %y)\n}}\n\n")
    w("%while_body (s: (s32[], f32[])) -> (s32[], f32[]) {\n"
      "  %s = (s32[]{:T(128)}, f32[]{:T(128)}) parameter(0)\n"
      "  %i = s32[]{:T(128)} get-tuple-element(%s), index=0\n"
      "  %v = f32[]{:T(128)} get-tuple-element(%s), index=1\n"
      "  %one = s32[]{:T(128)} constant(1)\n  %next = s32[]{:T(128)} add(%i, %one)\n"
      "  %v2 = f32[]{:T(128)} multiply(%v, %v)\n"
      "  ROOT %t = (s32[]{:T(128)}, f32[]{:T(128)}) tuple(%next, %v2)\n}\n\n"
      "%while_cond (c: (s32[], f32[])) -> pred[] {\n"
      "  %c = (s32[]{:T(128)}, f32[]{:T(128)}) parameter(0)\n"
      "  %ci = s32[]{:T(128)} get-tuple-element(%c), index=0\n"
      "  %n = s32[]{:T(128)} constant(8)\n"
      "  ROOT %lt = pred[]{:T(512)} compare(%ci, %n), direction=LT\n}\n\n")
    # the entry computation comes last in the text but is written as the
    # fusions are: to a second file, appended at the end
    entry_path = path + ".entry"
    entry = open(entry_path, "w", buffering=1 << 20)
    entry_written = 0
    k = 0
    while written + entry_written < target:
        k += 1
        pi = rng.randrange(len(pool))
        et, dims_text, shp = pool[pi]
        sig = f"param_0.{k}: {et}[{dims_text}], param_1.{k}: f32[]"
        w(f"%fused_computation.{k} ({sig}) -> ({et}[{dims_text}], f32[]) {{\n")
        w(f"  %param_0.{k} = {shp} parameter(0)\n  %param_1.{k} = {scalar} parameter(1)\n")
        src = f"param_1.{k}"
        if et != "f32":
            w(f"  %convert.{k} = {et}[]{{:T(256)}} convert(%{src})\n")
            src = f"convert.{k}"
        w(f"  %broadcast.{k} = {shp} broadcast(%{src}), dimensions={{}}\n")
        prev = f"param_0.{k}"
        for j in range(rng.randint(3, 10)):
            sf = rng.randint(1, 100)
            if rng.random() < 0.4:
                op = rng.choice(_UNARY)
                operands = f"%{prev}"
            else:
                op = rng.choice(_ELEMENTWISE)
                operands = f"%{prev}, %broadcast.{k}"
            w(f"  %{op}.{k}.{j} = {shp} {op}({operands}), metadata={{op_name=\"jit(train_step)/"
              f"layer_{k % 96}/{op}\" stack_frame_id={sf}}}\n")
            prev = f"{op}.{k}.{j}"
        if et != "f32":
            w(f"  %f32.{k} = f32[{dims_text}]{{{shp.split('{')[1].split(':')[0]}:T(8,128)}} "
              f"convert(%{prev})\n")
            red_in = f"f32.{k}"
        else:
            red_in = prev
        rank = dims_text.count(",") + 1
        w(f"  %zero.{k} = {scalar} constant(0)\n"
          f"  %reduce.{k} = {scalar} reduce(%{red_in}, %zero.{k}), dimensions="
          f"{{{','.join(map(str, range(rank)))}}}, to_apply=%region_add, metadata={{op_name="
          f"\"jit(train_step)/layer_{k % 96}/reduce_sum\" stack_frame_id={rng.randint(1, 100)}}}\n"
          f"  ROOT %tuple.{k} = ({shp}, {scalar}) tuple(%{prev}, %reduce.{k})\n}}\n\n")
        chain = f"gte.{k - 1}.1" if k > 1 else f"arg.{len(pool)}"
        bc = _BACKEND.format(a=rng.randint(1, 64), b=rng.randint(1, 16),
                             c=rng.randint(1000, 99999), s=rng.choice([0, 8192, 65536, 262144]))
        line = (f"  %fusion.{k} = ({shp}, {scalar}) fusion(%arg.{pi}, %{chain}), kind=kLoop, "
                f"calls=%fused_computation.{k}, metadata={{op_name=\"jit(train_step)/layer_"
                f"{k % 96}/fusion\" stack_frame_id={rng.randint(1, 100)}}}, backend_config={bc}\n"
                f"  %gte.{k}.0 = {shp} get-tuple-element(%fusion.{k}), index=0\n"
                f"  %gte.{k}.1 = {scalar} get-tuple-element(%fusion.{k}), index=1\n")
        if k % 50 == 0:
            line += (f"  %copy-start.{k} = ({shp}, {shp}, u32[]{{:S(2)}}) copy-start(%gte.{k}.0), "
                     f"cross_program_prefetch_index=0\n"
                     f"  %copy-done.{k} = {shp} copy-done(%copy-start.{k})\n")
        entry.write(line)
        entry_written += len(line)
    entry.close()
    w(f"ENTRY %main.1 ("
      + ", ".join(f"arg.{i}: {p[0]}[{p[1]}]" for i, p in enumerate(pool))
      + f", arg.{len(pool)}: f32[]) -> ({pool[0][0]}[{pool[0][1]}], f32[]) {{\n")
    for i, p in enumerate(pool):
        w(f"  %arg.{i} = {p[2]} parameter({i}), metadata={{op_name=\"params[{i}]\"}}\n")
    w(f"  %arg.{len(pool)} = {scalar} parameter({len(pool)})\n")
    with open(entry_path) as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            w(block)
    os.remove(entry_path)
    last = k
    w(f"  %zero.i = s32[]{{:T(128)}} constant(0)\n"
      f"  %init = (s32[]{{:T(128)}}, {scalar}) tuple(%zero.i, %gte.{last}.1)\n"
      f"  %loop = (s32[]{{:T(128)}}, {scalar}) while(%init), condition=%while_cond, body=%while_body\n"
      f"  %out.1 = {scalar} get-tuple-element(%loop), index=1\n"
      f"  %out.0 = {pool[0][2]} copy(%arg.0)\n"
      f"  ROOT %result = ({pool[0][2]}, {scalar}) tuple(%out.0, %out.1)\n}}\n")
    out.close()
    return os.path.getsize(path)


_XLA_CHILD = r"""
import sys, time
from jax._src.lib import xla_client
with open(sys.argv[1]) as f:
    text = f.read()
t = time.process_time()
m = xla_client.hlo.hlo_module_from_text(text)
print(time.process_time() - t)
"""

_RSS_CHILD = r"""
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _has_jaxlib(python: str) -> bool:
    r = subprocess.run([python, "-c", "from jax._src.lib import xla_client; "
                        "xla_client.hlo.hlo_module_from_text"],
                       capture_output=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    return r.returncode == 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=80.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--xla-python", metavar="PY",
                    help="a Python with jaxlib for XLA's parser (default: this one, if it has it)")
    ap.add_argument("--keep", metavar="PATH", help="also copy the generated module here")
    args = ap.parse_args(argv)

    from xlashape import hlo_text, tiling
    from pathlib import Path

    from xlashape.hlo_module import iter_instructions, memory_footprint, scan_calls

    xla_python = args.xla_python or sys.executable
    if not _has_jaxlib(xla_python):
        xla_python = None

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "module.after_optimizations.txt")
        t = time.perf_counter()
        nbytes = generate(path, args.size_mb)
        gen = time.perf_counter() - t
        with open(path) as f:
            nlines = sum(1 for _ in f)
        mb = nbytes / 1e6
        print(f"generated {mb:.1f} MB, {nlines} lines in {gen:.1f} s")
        if args.keep:
            import shutil

            shutil.copy(path, args.keep)
        count = [0]

        def cold():
            # every run starts cold, as a fresh process does
            for f in (getattr(hlo_text, "_parse_shape_cached", None),
                      getattr(tiling, "_plan_cached", None), memory_footprint):
                if f is not None and hasattr(f, "cache_clear"):
                    f.cache_clear()

        def read_lines():
            with open(path) as f:
                for _ in f:
                    pass

        def api_scan():
            scan_calls(path)

        def api_read():
            # the API's fastest way through a file: iter_instructions(Path)
            cold()
            n = 0
            for ins in iter_instructions(Path(path)):
                ins.result
                n += 1
            count[0] = n

        def cli(*extra):
            cmd = [sys.executable, "-m", "xlashape", *extra, "--no-progress"]

            def run():
                # CPU time of the child (user + system): on a shared machine
                # wall time says more about the neighbours than about us
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                with open(os.devnull, "w") as devnull:
                    subprocess.run(cmd, stdout=devnull, check=True)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            run.cmd = cmd
            return run

        xla_times = []

        def xla():
            r = subprocess.run([xla_python, "-c", _XLA_CHILD, path], capture_output=True,
                               text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
            xla_times.append(float(r.stdout.strip().splitlines()[-1]))

        rows = [("read lines (Python floor)", read_lines),
                ("API: scan_calls (call-graph pass)", api_scan),
                ("API: iter_instructions(Path) (+ .result)", api_read),
                ("CLI: memory FILE --json", cli("memory", path, "--json")),
                ("CLI: hlo FILE --json", cli("hlo", path, "--json")),
                ("CLI: hlo FILE --summary", cli("hlo", path, "--summary"))]
        times = {name: [] for name, _ in rows}
        for _ in range(args.repeat):          # interleaved rounds
            for name, fn in rows:
                t = time.process_time()
                child = fn()
                times[name].append(child if child is not None else time.process_time() - t)
            if xla_python:
                xla()
        ref = statistics.median(xla_times) if xla_times else None
        print(f"{'what':<38} {'CPU s':>9} {'MB/s':>8} {'vs XLA parse':>13} {'peak RSS':>9}")
        for name, fn in rows:
            sec = statistics.median(times[name])
            vs = f"{sec / ref:.2f}x" if ref else "-"
            rss = "-"
            if hasattr(fn, "cmd"):
                r = subprocess.run([sys.executable, "-c", _RSS_CHILD, *fn.cmd],
                                   capture_output=True, text=True, check=True)
                rss = f"{int(r.stdout.strip()) / 1024:.0f} MB"
            print(f"{name:<38} {sec:>9.2f} {mb / sec:>8.1f} {vs:>13} {rss:>9}")
        if ref:
            print(f"{'XLA hlo_module_from_text (jaxlib)':<38} {ref:>9.2f} {mb / ref:>8.1f} "
                  f"{'1.00x':>13} {'-':>9}")
        else:
            print("XLA hlo_module_from_text: no jaxlib here (give --xla-python PY)")
        print(f"{count[0]} instructions; medians of {args.repeat} interleaved rounds of CPU time "
              "(user + system); CLI rows include process start-up, the XLA row is the parse "
              "call alone, on text already in memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
