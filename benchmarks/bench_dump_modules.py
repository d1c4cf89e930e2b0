"""What finding the modules of a large dump directory costs:
``xla_dump.find_dump_modules(DIR)`` on generated dumps of N modules, before
any file is read.

The dump is what a long run with ``--xla_dump_to`` leaves: N modules, each
with its ``before_optimizations.txt`` and ``after_optimizations.txt`` (empty
files: only their names matter here), XLA:TPU's naming
(``module_0004.jit_step_17.cl_123.``), 200 function names shared by the
modules, and one module in ten renumbered (its optimized files carry the
next free number, the case the second pairing pass handles).

Each case runs in a child process (a fresh interpreter, its own timing
around the call); medians of ``--repeat`` rounds::

    python benchmarks/bench_dump_modules.py --modules 1000,4000,8000,50000 --repeat 3

``--before DIR`` times another copy of xlashape too (DIR holds the package,
e.g. ``git archive OLD xlashape | tar -x -C DIR`` plus the built ``.so``
files), interleaved with this one, up to ``--before-max`` modules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import sys, time
from xlashape.xla_dump import find_dump_modules
t = time.perf_counter()
modules = find_dump_modules(sys.argv[1])
print(time.perf_counter() - t, len(modules), sum(not m.optimized for m in modules))
"""


def generate(directory: str, n: int) -> None:
    """n modules; every tenth renumbered (before N, after the next free number)."""
    number = 0
    for i in range(n):
        name = f"jit_step_{i % 200}"
        before = number
        after = number + 1 if i % 10 == 9 else number
        number = after + 1
        open(os.path.join(directory, f"module_{before:04d}.{name}.before_optimizations.txt"),
             "w").close()
        open(os.path.join(directory, f"module_{after:04d}.{name}.cl_123.after_optimizations.txt"),
             "w").close()


def once(package: str, directory: str, timeout: float):
    env = dict(os.environ, PYTHONPATH=package)
    # cwd "/": `python -c` puts the working directory first on sys.path
    r = subprocess.run([sys.executable, "-c", CHILD, directory], capture_output=True, text=True,
                       env=env, timeout=timeout, cwd="/")
    if r.returncode:
        raise SystemExit(r.stderr)
    seconds, modules, before_only = r.stdout.split()
    return float(seconds), int(modules), int(before_only)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modules", default="1000,4000,8000,50000")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--before", metavar="DIR", help="another copy of the package to time too")
    p.add_argument("--before-max", type=int, default=8000,
                   help="time --before only up to this many modules (it may be quadratic)")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args(argv)
    print(f"{'modules':>8} {'files':>8} {'this s':>9} {'before s':>9}  found (before-only)")
    for n in (int(x) for x in args.modules.split(",")):
        d = tempfile.mkdtemp(prefix="xlashape-bench-dump-")
        try:
            generate(d, n)
            ours, theirs, found = [], [], None
            for _ in range(args.repeat):
                s, m, b = once(HERE, d, args.timeout)
                ours.append(s)
                found = (m, b)
                if args.before and n <= args.before_max:
                    s, m, b = once(args.before, d, args.timeout)
                    theirs.append(s)
                    if (m, b) != found:
                        raise SystemExit(f"{n} modules: before found {(m, b)}, this {found}")
            before = f"{statistics.median(theirs):9.2f}" if theirs else f"{'-':>9}"
            print(f"{n:>8} {2 * n:>8} {statistics.median(ours):9.2f} {before}  "
                  f"{found[0]} ({found[1]})", flush=True)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    main()
