"""The accounting core against another tree: what ``xlashape memory`` costs on a dump.

For each dump directory given, in child processes (``os.wait4`` gives each
one's CPU time and peak RSS), alternating the trees round by round, medians
of ``--repeat`` rounds:

- ``analyze text``: ``memory.analyze(DUMP)`` (the dump's text files) and
  ``to_json()`` of the result;
- ``analyze proto``: the same with ``prefer="proto"`` (the ``.hlo.pb``; only
  for dumps that have one);
- ``cli json+html``: ``xlashape memory DUMP --json --html P`` end to end
  (start-up, every view);
- ``cli diff``: ``xlashape memory diff DUMP DUMP --json``.

::

    python benchmarks/bench_memory_core.py --tree new=. --tree old=/path/to/old/checkout \\
        --dump /path/to/dump [--dump ...] [--repeat 5]

A tree is a directory holding the ``xlashape`` package with its built
extensions (a checkout after ``python setup.py build_ext --inplace``). Each
child runs with that directory first on ``sys.path`` and its working
directory there. ``benchmarks/gen_cpu_dump.py`` writes a real XLA:CPU dump of
a deep MLP with jax (the one recorded in ``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

_CASES = {
    "analyze text": ("from xlashape import memory\n"
                     "r = memory.analyze(DUMP)\nr.to_json()\n"),
    "analyze proto": ("from xlashape import memory\n"
                      "r = memory.analyze(DUMP, prefer='proto')\nr.to_json()\n"),
    "cli json+html": ("import sys\nfrom xlashape.cli import main\n"
                      "sys.stdout = open(os.devnull, 'w')\n"
                      "main(['memory', DUMP, '--json', '--html', OUT])\n"),
    "cli diff": ("import sys\nfrom xlashape.cli import main\n"
                 "sys.stdout = open(os.devnull, 'w')\n"
                 "main(['memory', 'diff', DUMP, DUMP, '--json'])\n"),
}


def _run(tree: str, code: str, dump: str, out: str):
    prelude = (f"import os, sys\nsys.path.insert(0, {tree!r})\nDUMP = {dump!r}\nOUT = {out!r}\n")
    pid = subprocess.Popen([sys.executable, "-c", prelude + code], cwd=tree,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).pid
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        raise SystemExit(f"{tree}: a child failed ({status}) on {dump}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=DIR")
    ap.add_argument("--dump", action="append", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cases", default=",".join(_CASES))
    args = ap.parse_args(argv)
    trees = [t.split("=", 1) for t in args.tree]
    cases = args.cases.split(",")
    out = os.path.join(tempfile.mkdtemp(), "page.html")
    for dump in map(os.path.abspath, args.dump):     # the children run in the tree's directory
        has_proto = any(n.endswith(".hlo.pb") for n in os.listdir(dump))
        print(f"{dump}: {sum(os.path.getsize(os.path.join(dump, n)) for n in os.listdir(dump)) / 1e6:.1f} MB")
        print(f"  {'case':<16} " + "  ".join(f"{name + ' CPU s':>14} {name + ' RSS MB':>14}"
                                             for name, _ in trees))
        for case in cases:
            if case == "analyze proto" and not has_proto:
                continue
            got = {name: [] for name, _ in trees}
            for i in range(args.repeat):
                order = trees if i % 2 == 0 else trees[::-1]
                for name, tree in order:
                    got[name].append(_run(os.path.abspath(tree), _CASES[case], dump, out))
            cells = []
            for name, _ in trees:
                cpu = statistics.median(x[0] for x in got[name])
                rss = statistics.median(x[1] for x in got[name])
                cells.append(f"{cpu:>14.3f} {rss:>14.0f}")
            print(f"  {case:<16} " + "  ".join(cells))


if __name__ == "__main__":
    main()
