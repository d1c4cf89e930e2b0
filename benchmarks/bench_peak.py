"""What the peak costs: ``analyze(DUMP)`` with and without the peak and what is
live at it, on a generated dump directory.

The dump is one module as XLA writes it with ``--xla_dump_to``: the module
text after optimizations (an entry computation of N elementwise instructions
on tiled f32 arrays, each with ``metadata={op_name=... stack_frame_id=...}``
and the stack-frame tables), its buffer assignment (parameters, the output
and one preallocated temporary allocation holding every instruction's value,
placed in a few rotating slots as the heap simulator would), the live-range
file (the schedule and each value's range) and the values file (each value's
defining instruction). About 60% of the bytes are the module text.

Each case runs in a child process (``os.wait4`` gives its CPU time and peak
RSS); medians of ``--repeat`` interleaved rounds::

    python benchmarks/bench_peak.py --instructions 1000000 --repeat 3

``--before DIR`` runs another copy of xlashape too (DIR holds the package,
e.g. ``git archive OLD xlashape | tar -x -C DIR`` plus the built ``.so``
files), interleaved with this one, for a before/after in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

KEY = "module_0000.jit_big.cl_1."
SLOTS = 8          # temporaries rotate over this many offsets
LIVE = 3           # each temporary lives this many steps
SHAPE = "f32[256,1024]{1,0:T(8,128)}"
SIZE = 256 * 1024 * 4


def generate(directory: str, n: int) -> int:
    """Write the dump of an n-instruction module; returns its total bytes."""
    pre = os.path.join(directory, KEY + "after_optimizations")
    with open(pre + ".txt", "w") as f:
        f.write(f"HloModule jit_big, is_scheduled=true, entry_computation_layout="
                f"{{({SHAPE})->{SHAPE}}}\n\n")
        f.write('FileNames\n1 "model.py"\n\nFunctionNames\n1 "layer"\n\nFileLocations\n')
        for i in range(1, 51):
            f.write(f"{i} {{file_name_id=1 function_name_id=1 line={100 + i} end_line={100 + i} "
                    f"column=1 end_column=9}}\n")
        f.write("\nStackFrames\n")
        for i in range(1, 51):
            f.write(f"{i} {{file_location_id={i} parent_frame_id=0}}\n")
        f.write(f"\n\nENTRY %main (p: {SHAPE}) -> {SHAPE} {{\n")
        f.write(f"  %p = {SHAPE} parameter(0), metadata={{op_name=\"p\"}}\n")
        prev = "p"
        for i in range(n):
            root = "ROOT " if i == n - 1 else ""
            f.write(f"  {root}%v{i} = {SHAPE} add({SHAPE} %{prev}, {SHAPE} %p), "
                    f"metadata={{op_name=\"jit(big)/layer{i % 97}/add\" "
                    f"stack_frame_id={1 + i % 50}}}\n")
            prev = f"v{i}"
        f.write("}\n")
    with open(pre + "-buffer-assignment.txt", "w") as f:
        f.write("BufferAssignment:\n")
        f.write(f"allocation 0: size {SIZE}, parameter 0, shape |f32[256,1024]| at ShapeIndex {{}}:\n"
                f" value: <0 p @0> (size={SIZE},offset=0): {SHAPE}\n")
        f.write(f"allocation 1: size {SIZE}, output shape is |f32[256,1024]|, maybe-live-out:\n"
                f" value: <{n} v{n - 1} @0> (size={SIZE},offset=0): {SHAPE}\n")
        f.write(f"allocation 2: size {SIZE * SLOTS}, preallocated-temp:\n")
        for i in range(n - 1):
            f.write(f" value: <{i + 1} v{i} @0> (size={SIZE},offset={SIZE * (i % SLOTS)}): {SHAPE}\n")
    with open(pre + "-live-range.txt", "w") as f:
        f.write(f"HloLiveRange (max {n + 1}):\n  InstructionSequence:\n    0:p\n")
        for i in range(n):
            f.write(f"    {i + 1}:v{i}\n")
        f.write("  BufferLiveRange:\n    p{}:0-%d\n" % (n + 1))
        for i in range(n):
            f.write(f"    v{i}{{}}:{i + 1}-{min(i + LIVE, n + 1)}\n")
    with open(pre + "-buffer-assignment-values.txt", "w") as f:
        f.write("Used values:\n")
        for i in range(n):
            f.write(f"<{i + 1} v{i} @0>\n positions:\n  v{i}\n uses:\n  v{i + 1}, operand 0\n"
                    f" from instruction: %v{i} = {SHAPE} add({SHAPE} %{'p' if i == 0 else f'v{i - 1}'}, "
                    f"{SHAPE} %p)\n")
    return sum(os.path.getsize(os.path.join(directory, x)) for x in os.listdir(directory))


def run_child(code: str, tree: str = None):
    env = dict(os.environ)
    cwd = None
    if tree is not None:
        # another copy of xlashape (e.g. `git archive` of an older commit,
        # with its built extensions): its directory first on the path, run
        # from elsewhere so that the current directory's copy is not found
        env["PYTHONPATH"] = tree
        cwd = tempfile.gettempdir()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"child failed: {code}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", metavar="DIR",
                    help="also run the xlashape in DIR (a directory holding the package), "
                         "interleaved, and print its rows as 'before:'")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="xlashape-bench-peak-")
    try:
        total = generate(tmp, args.instructions)
        cases = {
            "analyze(DUMP, peak=False): figures and allocations": "peak=False",
            "analyze(DUMP): + the peak, heap and live at the peak": "peak=True",
        }
        trees = {"": None}
        if args.before:
            here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            trees = {"before: ": os.path.abspath(args.before), "after: ": here}
        results = {(p, k): [] for p in trees for k in cases}
        for _ in range(args.repeat):
            for prefix, tree in trees.items():
                for name, flag in cases.items():
                    code = (f"from xlashape import memory; r = memory.analyze({tmp!r}, {flag}); "
                            "m = r.modules[0]; m.to_json()")
                    results[prefix, name].append(run_child(code, tree))
        print(f"{args.instructions} instructions, dump of {total / 1e6:.0f} MB; "
              f"medians of {args.repeat} (CPU s, peak RSS MB); load average "
              + " ".join(f"{x:.1f}" for x in os.getloadavg()))
        for prefix in trees:
            base = statistics.median(t for t, _ in results[prefix, next(iter(cases))])
            for name in cases:
                runs = results[prefix, name]
                t = statistics.median(x for x, _ in runs)
                rss = statistics.median(r for _, r in runs)
                print(f"| {prefix}{name} | {t:.2f} | {t / base:.2f}x | {rss:.0f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
