"""Reading the real protobuf files of the test corpora: time and memory.

Every ``*.hlo.pb`` under tests/data (XLA's ``HloProto`` dumps of the CPU,
GPU and TPU corpora, with their buffer assignments), the same modules as bare
``HloModuleProto`` files (the module's bytes alone, as
``as_serialized_hlo_module_proto()`` writes them), and the ``*.hlo.pb.gz`` of
``data/protos/tpu``; each set read by ``protos.read_hlo_proto(path)`` and by
``memory.analyze(path)`` (the proto route: which message it is, the figures,
allocations and peak). Each set runs in a fresh child process:

- time: the CPU time of the whole set read (``time.process_time``: the
  machine is shared, and wall time swings with the other jobs), median of 11
  rounds after a warm-up;
- Python memory: ``tracemalloc``'s peak while reading the set's largest
  file, over its size (the copies of its bytes that the reader makes, plus
  what a reader of a small file costs anyway);
- RSS: the largest growth of the child's resident memory (peak ``VmHWM``,
  reset before each file, over ``VmRSS`` before it) while reading one file,
  which counts protobuf's own memory too. Linux only.

    python benchmarks/bench_proto_read.py [--code DIR]

``--code DIR`` imports xlashape from DIR (a checkout with its extensions
built) instead of this one, to compare two versions on the same files.
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "tests", "data")

_CHILD = r"""
import json, os, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from xlashape import memory, protos
which, paths = sys.argv[2], sys.argv[3:]
read = protos.read_hlo_proto if which == "read" else memory.analyze
def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
for p in paths:                      # warm-up (imports, descriptor pool, caches)
    read(p)
times = []
for _ in range(11):
    t = time.process_time()
    for p in paths:
        read(p)
    times.append(time.process_time() - t)
rss = 0.0
largest = max(paths, key=os.path.getsize)
for p in paths:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    base = status("VmRSS")
    tracemalloc.start()
    out = read(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = max(rss, status("VmHWM") - base)
    if p == largest:
        ratio = peak / os.path.getsize(p)
    del out
print(json.dumps({"median_s": sorted(times)[5], "peak_over_size": ratio, "max_rss_mb": rss,
                  "largest_kb": os.path.getsize(largest) / 1024}))
"""


def main():
    args = sys.argv[1:]
    code = ROOT
    if args[:1] == ["--code"]:
        code = os.path.abspath(args[1])
    sys.path.insert(0, code)
    from xlashape import protos

    whole = sorted(glob.glob(os.path.join(DATA, "**", "*.hlo.pb"), recursive=True))
    gz = sorted(glob.glob(os.path.join(DATA, "protos", "tpu", "*.hlo.pb.gz")))
    tmp = tempfile.mkdtemp(prefix="xlashape-bench-")
    bare = []
    for i, p in enumerate(whole):
        out = os.path.join(tmp, f"bare_{i}.hlo.pb")
        with open(out, "wb") as fh:
            fh.write(protos.read_hlo_proto(p).hlo_module.SerializeToString())
        bare.append(out)
    sets = (("HloProto .hlo.pb", whole), ("bare HloModuleProto", bare), (".hlo.pb.gz (TPU)", gz))
    mb = {name: sum(os.path.getsize(p) for p in paths) / 1e6 for name, paths in sets}
    print(f"xlashape from {code}")
    print(f"{'files':<22} {'n':>4} {'MB':>6}  {'reader':<24} {'median':>8}  "
          f"{'largest: tracemalloc/size':>25}  {'max RSS growth':>14}")
    for name, paths in sets:
        for which in ("read", "analyze"):
            r = subprocess.run([sys.executable, "-c", _CHILD, code, which, *paths],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: {which} failed: {r.stderr[-500:]}")
                continue
            got = json.loads(r.stdout.splitlines()[-1])
            label = "protos.read_hlo_proto" if which == "read" else "memory.analyze"
            print(f"{name:<22} {len(paths):>4} {mb[name]:>6.2f}  {label:<24} "
                  f"{got['median_s']:>7.3f}s  {got['largest_kb']:>7.0f} KiB: "
                  f"{got['peak_over_size']:>7.2f}x  "
                  f"{got['max_rss_mb']:>10.1f} MiB")
    for p in bare:
        os.unlink(p)
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
