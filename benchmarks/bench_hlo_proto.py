"""Reading a ~100 MB .hlo.pb: xlashape against jaxlib's own reader.

The module is made by XLA: HLO text of a long chain of elementwise
instructions with metadata (as JAX writes it) and a few reductions calling a
reducer, parsed by XLA's parser (``xla_client.hlo.hlo_module_from_text``)
and serialized by XLA (``as_serialized_hlo_module_proto()``), cached in the
temporary directory. Each reader then runs in a fresh child process on the
bytes already in memory:

- jaxlib ``HloModule.from_serialized_hlo_module_proto(bytes)`` (XLA's C++:
  parse the proto and build its HloModule);
- xlashape ``protos.read_hlo_proto(bytes)`` (the protobuf message only);
- xlashape ``hlo_proto.read_hlo_proto_module(bytes)`` (the message and the
  HloModule / Computation / Instruction model with Shape objects).

Medians of 3 runs of wall time (one warm-up run first), and the largest
growth of the child's resident memory during a run (peak ``VmHWM``, reset
before each run, over ``VmRSS`` before it, with the bytes already loaded):
what reading costs in memory beyond the file's bytes. Linux only.

    /path/to/venv-with-jax/bin/python benchmarks/bench_hlo_proto.py [MB=100]

Needs jax/jaxlib (the oracle venv) and xlashape importable (PYTHONPATH=.).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def make_text(n):
    lines = ["HloModule bench_big, entry_computation_layout={(f32[64,128]{1,0})->f32[64]{0}}", "",
             "%add_reducer (x: f32[], y: f32[]) -> f32[] {",
             "  %x = f32[] parameter(0)", "  %y = f32[] parameter(1)",
             "  ROOT %sum = f32[] add(%x, %y)", "}", "",
             "ENTRY %main (p0: f32[64,128]) -> f32[64] {",
             "  %p0 = f32[64,128]{1,0} parameter(0)",
             "  %zero = f32[] constant(0)"]
    prev = "p0"
    ops = ("add", "multiply", "subtract", "maximum")
    for i in range(n):
        name = f"v.{i}"
        md = (f'metadata={{op_type="{ops[i % 4]}" op_name="jit(train_step)/jvp(model)/'
              f'layer_{i % 97}/block_{i % 13}/{ops[i % 4]}" source_file="model.py" '
              f'source_line={100 + i % 900}}}')
        if i % 50 == 49:
            lines.append(f"  %r.{i} = f32[64]{{0}} reduce(%{prev}, %zero), dimensions={{1}}, "
                         f"to_apply=%add_reducer, {md}")
            lines.append(f"  %{name} = f32[64,128]{{1,0}} broadcast(%r.{i}), dimensions={{0}}, {md}")
        else:
            lines.append(f"  %{name} = f32[64,128]{{1,0}} {ops[i % 4]}(%{prev}, %p0), {md}")
        prev = name
    lines.append(f"  ROOT %out = f32[64]{{0}} reduce(%{prev}, %zero), dimensions={{1}}, "
                 "to_apply=%add_reducer")
    lines.append("}")
    return "\n".join(lines) + "\n"


def make_proto(mb):
    path = os.path.join(tempfile.gettempdir(), f"xlashape_bench_{mb}mb.hlo.pb")
    if os.path.exists(path):
        return path
    from jax._src.lib import xla_client as xc

    n = 2000
    size = len(xc.hlo.hlo_module_from_text(make_text(n)).as_serialized_hlo_module_proto())
    n = int(n * mb * 1e6 / size)
    data = xc.hlo.hlo_module_from_text(make_text(n)).as_serialized_hlo_module_proto()
    with open(path + ".tmp", "wb") as fh:
        fh.write(data)
    os.replace(path + ".tmp", path)
    return path


_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
which, path = sys.argv[1], sys.argv[2]
with open(path, "rb") as fh:
    data = fh.read()
if which == "jaxlib":
    from jax._src.lib import xla_client as xc
    run = lambda: xc.hlo.HloModule.from_serialized_hlo_module_proto(data)
elif which == "message":
    from xlashape import protos
    run = lambda: protos.read_hlo_proto(data)
else:
    from xlashape import hlo_proto
    run = lambda: hlo_proto.read_hlo_proto_module(data)
def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
times = []
growth = 0.0
for i in range(4):
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak (VmHWM) to the current RSS
    base = status("VmRSS")
    t = time.perf_counter()
    out = run()
    times.append(time.perf_counter() - t)
    growth = max(growth, status("VmHWM") - base)
    del out
print(json.dumps({{"times": times[1:], "rss_growth_mb": growth}}))
"""


def measure(which, path):
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT), which, path],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    mb = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 100
    try:
        import jaxlib  # noqa: F401
    except ImportError:
        print("bench_hlo_proto: skipped, needs jax/jaxlib (run it with the oracle venv)")
        return
    t = time.perf_counter()
    path = make_proto(mb)
    size = os.path.getsize(path)
    rows = []
    for which, label in (("jaxlib", "jaxlib HloModule.from_serialized_hlo_module_proto"),
                         ("message", "xlashape protos.read_hlo_proto (message)"),
                         ("module", "xlashape hlo_proto.read_hlo_proto_module (model)")):
        r = measure(which, path)
        rows.append((label, statistics.median(r["times"]), r["rss_growth_mb"]))
    ref = rows[0][1]
    print(f"{size / 1e6:.1f} MB .hlo.pb ({os.path.basename(path)}), medians of 3 after a warm-up")
    for label, med, rss in rows:
        print(f"{label:<52} {med:8.3f} s  {med / ref:5.2f}x jaxlib  peak RSS +{rss:7.1f} MiB")
    print(f"-- {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
