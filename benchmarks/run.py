"""Run every benchmark: ``python benchmarks/run.py [name ...]``.

Discovers ``benchmarks/bench_*.py`` files that define ``main()`` and runs
each in turn (all of them, or only those whose name contains one of the
arguments, e.g. ``python benchmarks/run.py array``). Each prints its own
table: ours, the numpy / memoryview / XLA reference, and the ratio.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent


def discover():
    """(name, module) for each bench_*.py here that defines main()."""
    found = []
    for path in sorted(HERE.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:  # a broken benchmark must not hide the others
            print(f"== {path.name}: cannot import", file=sys.stderr)
            traceback.print_exc()
            continue
        if callable(getattr(module, "main", None)):
            found.append((path.stem, module))
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sys.path.insert(0, str(HERE.parent))   # run against this checkout
    failures = 0
    for name, module in discover():
        if argv and not any(a in name for a in argv):
            continue
        print(f"\n== {name} ==", flush=True)
        t0 = time.perf_counter()
        try:
            module.main([])
        except SystemExit as e:
            if e.code not in (0, None):
                failures += 1
        except Exception:
            failures += 1
            traceback.print_exc()
        print(f"-- {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
