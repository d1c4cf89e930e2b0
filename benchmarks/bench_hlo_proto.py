"""Reading a ~100 MB .hlo.pb: xlashape against jaxlib's own reader.

The module is made by XLA: HLO text of a long chain of elementwise
instructions with metadata (as JAX writes it) and a few reductions calling a
reducer, parsed by XLA's parser (``xla_client.hlo.hlo_module_from_text``)
and serialized by XLA (``as_serialized_hlo_module_proto()``), cached in the
temporary directory with a gzip'd copy (``gzip`` level 6). Each reader then
runs in a fresh child process on the bytes already in memory:

- jaxlib ``HloModule.from_serialized_hlo_module_proto(bytes)`` (XLA's C++:
  parse the proto and build its HloModule);
- xlashape ``protos.read_hlo_proto(bytes)`` (the protobuf message only);
- xlashape ``hlo_proto.read_hlo_proto_module(bytes)`` (the message and the
  HloModule / Computation / Instruction model with Shape objects);
- xlashape ``protos.read_hlo_proto(path)`` of the gzip'd copy (unpacking,
  the parse estimate gzip input must pass, the parse).

Each child runs its reader once to warm up, then 3 times; ``--rounds N``
runs every reader N times in turn (fresh children, alternating, so that a
change in the machine's load falls on all of them), and the table gives the
median of all the timed runs: wall time, CPU time of the process, and the
largest growth of the child's resident memory during a run (peak ``VmHWM``,
reset before each run, over ``VmRSS`` before it, with the bytes already
loaded): what reading costs in memory beyond the file's bytes. Linux only.

``--before DIR`` also runs the xlashape readers from DIR (another checkout
with its extensions built, e.g. ``git worktree add --detach DIR main`` then
``python setup.py build_ext --inplace`` there), in the same rounds.

    /path/to/venv-with-jax/bin/python benchmarks/bench_hlo_proto.py [MB=100] [--rounds N] [--before DIR]

Needs jax/jaxlib and protobuf (the oracle venv has no protobuf: put a
directory holding only protobuf's ``google`` package on PYTHONPATH) and
xlashape importable (PYTHONPATH=.).
"""

import gzip
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
    if not os.path.exists(path):
        from jax._src.lib import xla_client as xc

        n = 2000
        size = len(xc.hlo.hlo_module_from_text(make_text(n)).as_serialized_hlo_module_proto())
        n = int(n * mb * 1e6 / size)
        data = xc.hlo.hlo_module_from_text(make_text(n)).as_serialized_hlo_module_proto()
        with open(path + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(path + ".tmp", path)
    if not os.path.exists(path + ".gz"):
        with open(path, "rb") as fh:
            packed = gzip.compress(fh.read(), 6, mtime=0)
        with open(path + ".gz.tmp", "wb") as fh:
            fh.write(packed)
        os.replace(path + ".gz.tmp", path + ".gz")
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
elif which == "gzip":
    from xlashape import protos
    del data
    run = lambda: protos.read_hlo_proto(path + ".gz")
else:
    from xlashape import hlo_proto
    run = lambda: hlo_proto.read_hlo_proto_module(data)
def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
times, cpu = [], []
growth = 0.0
for i in range(4):
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak (VmHWM) to the current RSS
    base = status("VmRSS")
    t, c = time.perf_counter(), time.process_time()
    out = run()
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
    growth = max(growth, status("VmHWM") - base)
    del out
print(json.dumps({{"times": times[1:], "cpu": cpu[1:], "rss_growth_mb": growth}}))
"""


def measure(which, path, root):
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=root), which, path],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{which} ({root}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    args = sys.argv[1:]
    rounds, before = 1, None
    if "--rounds" in args:
        k = args.index("--rounds")
        rounds = int(args[k + 1])
        del args[k:k + 2]
    if "--before" in args:
        k = args.index("--before")
        before = os.path.abspath(args[k + 1])
        del args[k:k + 2]
    mb = int(args[0]) if args and args[0].isdigit() else 100
    try:
        import jaxlib  # noqa: F401
    except ImportError:
        print("bench_hlo_proto: skipped, needs jax/jaxlib (run it with the oracle venv)")
        return
    t = time.perf_counter()
    path = make_proto(mb)
    size = os.path.getsize(path)
    readers = [("jaxlib", ROOT, "jaxlib HloModule.from_serialized_hlo_module_proto")]
    for code, tag in ((before, "before: "), (ROOT, "")):
        if code is None:
            continue
        readers += [("message", code, f"{tag}xlashape protos.read_hlo_proto (message)"),
                    ("module", code, f"{tag}xlashape hlo_proto.read_hlo_proto_module (model)"),
                    ("gzip", code, f"{tag}xlashape protos.read_hlo_proto (.gz path)")]
    got = {label: {"times": [], "cpu": [], "rss": []} for _, _, label in readers}
    for _ in range(rounds):
        for which, code, label in readers:
            r = measure(which, path, code)
            got[label]["times"] += r["times"]
            got[label]["cpu"] += r["cpu"]
            got[label]["rss"].append(r["rss_growth_mb"])
    ref = statistics.median(got[readers[0][2]]["times"])
    print(f"{size / 1e6:.1f} MB .hlo.pb ({os.path.basename(path)}; gzip'd "
          f"{os.path.getsize(path + '.gz') / 1e6:.1f} MB), {rounds} round(s) of a child per "
          f"reader, medians of {3 * rounds} runs after a warm-up each")
    print(f"{'reader':<62} {'wall':>8} {'range':>15} {'vs jaxlib':>9} {'CPU':>8}  peak RSS")
    for _, _, label in readers:
        g = got[label]
        med = statistics.median(g["times"])
        print(f"{label:<62} {med:7.3f}s {min(g['times']):6.2f}-{max(g['times']):6.2f} s "
              f"{med / ref:8.2f}x {statistics.median(g['cpu']):7.3f}s  +{max(g['rss']):7.1f} MiB")
    print(f"-- {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
