"""One very long line: ``xlashape hlo`` and ``xlashape memory`` on modules
whose text is almost all one line (an instruction with a metadata string of
64 MB .. 1 GB), to check that reading is linear in the line's length and that
memory stays a small multiple of it.

For each size it writes, in a temporary directory (removed afterwards), a
module of four short lines and one long one::

    HloModule long_line, entry_computation_layout={(f32[8]{0})->f32[8]{0}}
    ENTRY %main (p: f32[8]) -> f32[8] {
      %p = f32[8]{0} parameter(0)
      ROOT %n = f32[8]{0} negate(f32[8]{0} %p), metadata={op_name="abcdefghij..."}
    }

and runs each command in a child process (output to /dev/null), reporting
its wall time, CPU time (user + system) and peak resident memory
(``ru_maxrss`` of that child, from ``os.wait4``), then ``time / size`` and
``peak RSS / size``: both stay flat when reading is linear and memory is
bounded by a multiple of the line. Each file is deleted before the next size
is written.

``--pythonpath DIR`` runs the commands against another checkout (to measure
a build from before a change the same way).

Run:  nice python benchmarks/bench_long_line.py [--sizes-mb 64,128,256,512,1024]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

_HEAD = ("HloModule long_line, entry_computation_layout={(f32[8]{0})->f32[8]{0}}\n\n"
         "ENTRY %main (p: f32[8]) -> f32[8] {\n"
         "  %p = f32[8]{0} parameter(0)\n"
         '  ROOT %n = f32[8]{0} negate(f32[8]{0} %p), metadata={op_name="')
_TAIL = '"}\n}\n'


def generate(path: str, line_bytes: int) -> int:
    """Write the module with a metadata string of ``line_bytes`` bytes; its size."""
    piece = b"abcdefghij" * (1 << 16)
    with open(path, "wb") as f:
        f.write(_HEAD.encode())
        left = line_bytes
        while left > 0:
            n = min(left, len(piece))
            f.write(piece[:n])
            left -= n
        f.write(_TAIL.encode())
    return os.path.getsize(path)


def run_child(cmd, env, cwd):
    """(wall s, CPU s, peak RSS in bytes) of one child process."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        # cwd: not a checkout (python -m puts the working directory first on sys.path)
        proc = subprocess.Popen(cmd, stdout=devnull, stderr=subprocess.PIPE, env=env, cwd=cwd)
        # os.wait4 gives this child's own rusage (RUSAGE_CHILDREN would give the
        # largest of all children so far)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read()
        proc.stderr.close()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                           f"{err.decode(errors='replace')[-500:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", default="64,128,256,512,1024",
                    help="lengths of the long line, in MiB (comma-separated)")
    ap.add_argument("--pythonpath", metavar="DIR", default=os.path.dirname(HERE),
                    help="the checkout whose xlashape the commands run (default: this one)")
    ap.add_argument("--commands", default="hlo,memory",
                    help="which of hlo (xlashape hlo --summary), memory (xlashape memory "
                         "--json) to run")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes_mb.split(",") if x.strip()]
    env = dict(os.environ, PYTHONPATH=args.pythonpath)
    commands = {"hlo": ["hlo", "--summary"], "memory": ["memory", "--json"]}
    chosen = [c for c in args.commands.split(",") if c]

    print(f"xlashape from {args.pythonpath}")
    check = subprocess.run([sys.executable, "-c", "import xlashape; print(xlashape.__file__)"],
                           env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    print(f"(imports {check.stdout.strip() or check.stderr.strip()[-200:]})")
    print("| command | line | wall s | CPU s | s per 100 MiB | peak RSS | RSS / line |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "long_line.hlo")
        for mb in sizes:
            line = mb << 20
            generate(path, line)
            try:
                for name in chosen:
                    cmd = [sys.executable, "-m", "xlashape", *commands[name], path,
                           "--no-progress"]
                    wall, cpu, rss = run_child(cmd, env, tmp)
                    print(f"| `{' '.join(commands[name])}` | {mb} MiB | {wall:.2f} | {cpu:.2f} | "
                          f"{wall / (mb / 100):.2f} | {rss / 2**20:,.0f} MiB | "
                          f"{rss / line:.2f} |", flush=True)
            finally:
                os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
