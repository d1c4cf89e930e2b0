"""Start-up time of the ``xlashape`` command (issue 21).

Run: ``python benchmarks/bench_startup.py [--rounds N] [TREE ...]``. Each
TREE is a directory holding a built ``xlashape`` package (default: this
checkout); with two (an older build and this one, say) their runs alternate,
so both see the same machine. Prints the median and the minimum wall time
and CPU time (user + system, the figure a loaded machine disturbs least) of
``python -m xlashape --version`` and of ``describe SHAPE`` in new processes.
For where the time goes: ``python -X importtime -m xlashape --version``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "--version": ["--version"],
    "describe": ["describe", "f32[3,5]{1,0:T(2,2)}"],
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("trees", nargs="*",
                    default=[str(pathlib.Path(__file__).resolve().parent.parent)])
    args = ap.parse_args(argv)
    args.trees = [os.path.abspath(t) for t in args.trees]
    times = {(t, c): [] for t in args.trees for c in COMMANDS}
    cpu = {key: [] for key in times}
    for _ in range(args.rounds):
        for name, cmd in COMMANDS.items():
            for tree in args.trees:
                env = dict(os.environ, PYTHONPATH=tree)
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                # run in TREE: `python -m` puts the working directory first on
                # sys.path, where a checkout's xlashape would shadow TREE's
                subprocess.run([sys.executable, "-m", "xlashape", *cmd], env=env, check=True,
                               stdout=subprocess.DEVNULL, cwd=tree)
                times[(tree, name)].append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[(tree, name)].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t0
    print(f"xlashape start-up: {args.rounds} rounds, load average "
          f"{os.getloadavg()[0]:.1f} at the end, python -c pass {bare * 1e3:.0f} ms")
    for (tree, name), ts in times.items():
        cs = cpu[(tree, name)]
        print(f"{name:10s} {tree}: median {statistics.median(ts) * 1e3:.0f} ms, "
              f"min {min(ts) * 1e3:.0f} ms; CPU median {statistics.median(cs) * 1e3:.0f} ms, "
              f"min {min(cs) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
