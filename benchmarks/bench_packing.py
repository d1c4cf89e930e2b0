"""What ``--packing`` and ``--what-if`` cost on a dump: ``memory.analyze(DUMP)``,
``analyze(DUMP, packing=True)`` and ``analyze(DUMP, what_if=[EDIT])``, each
in a child process (CPU time and peak RSS from ``os.wait4``), medians of
``--repeat`` rounds::

    python benchmarks/bench_packing.py --dump DIR [--dump DIR ...] [--edit undonate] [--repeat 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, json
from xlashape.memory import analyze
case, dump, edit = sys.argv[1], sys.argv[2], sys.argv[3]
if case == "plain":
    r = analyze(dump)
elif case == "packing":
    r = analyze(dump, packing=True)
else:
    r = analyze(dump, what_if=[edit])
m = max(r.modules, key=lambda m: m.value_count)
print(json.dumps({"packed": [p.equal_to_dump for p in (m.packing or [])]}))
"""


def run(case, dump, edit):
    with tempfile.TemporaryFile("w+") as errf:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, case, dump, edit],
                                stdout=subprocess.PIPE, stderr=errf, text=True)
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = status            # reaped here: Popen must not wait again
        errf.seek(0)
        err = errf.read()
    if status != 0:
        raise SystemExit(f"{case} {dump}: {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, json.loads(out)


def name(dump):
    """The dump's directory name (its parent's where it is called ``dump``)."""
    parts = os.path.normpath(dump).split(os.sep)
    return "/".join(parts[-2:]) if parts[-1] == "dump" and len(parts) > 1 else parts[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", action="append", required=True)
    ap.add_argument("--edit", default="undonate")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| dump | case | CPU s (median) | peak RSS MB | packing = XLA's |")
    print("|---|---|---:|---:|---|")
    for dump in args.dump:
        for case in ("plain", "packing", "what-if"):
            times, rss, equal = [], [], ""
            for _ in range(args.repeat):
                t, m, got = run(case, dump, args.edit)
                times.append(t)
                rss.append(m)
                if case == "packing":
                    equal = (f"{sum(got['packed'])} of {len(got['packed'])} allocations"
                             if got["packed"] else "no packing")
            label = case if case != "what-if" else f"what-if {args.edit}"
            print(f"| {name(dump)} | {label} | "
                  f"{statistics.median(times):.3f} | {statistics.median(rss):.0f} | {equal} |")


if __name__ == "__main__":
    main()
