"""Two builds of xlashape timed round by round, alternating, on the kernel rows.

Run: ``python benchmarks/ab_kernels.py A_DIR B_DIR [--rounds N] [--case NAME ...]``
where each directory is a checkout whose extensions are built in place
(``python setup.py build_ext --inplace``), e.g. an older commit exported with
``git archive`` next to this branch. Each build runs in its own long-lived
worker process (``PYTHONPATH=DIR``), which sets the case's arrays up once;
the driver then asks A for one round, B for one, B, A, ... so that both
see the same machine state (on a shared machine, a run of A and a later run
of B do not). Every ``--every`` rounds both workers are replaced by new
ones with freshly allocated arrays: where a process's arrays lie (how much
of them got transparent huge pages, ...) biases all of its rounds (one
build against itself, two workers, 25 rounds: 1.50x in one, 1.42x in the
other), so one pair of processes must not decide a comparison. In a round a
worker times the kernel and ``np.copyto`` of the same bytes alternately,
``--reps`` times each, and reports the medians; the ratio of a round is its
kernel median over its copyto median, and the table gives, per build, the
median and the spread (min-max) of those ratios, and the median times.

Clocks: the relayouts run on two threads by default (wall time, as
``bench_kernels.py --only relayout``); the unpack rows on one (CPU time,
``time.process_time``, as ``--only pack``: a preempted run does not count
someone else's work). ``XLASHAPE_THREADS=1 ... --cpu``: the relayouts on one
thread, in CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent(r"""
    import json, statistics, sys, time
    import numpy as np
    import xlashape as xs
    from xlashape import LayoutArray

    case, reps, cpu = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "cpu"
    rng = np.random.default_rng(0)

    def relayout(n):
        x = rng.standard_normal((n, n), dtype=np.float32)
        src = LayoutArray.from_numpy(x, "{1,0}")
        dst = LayoutArray.from_numpy(x, "{0,1}")
        out = np.empty_like(x)
        def ours():
            dst[...] = src
        return ours, (lambda: np.copyto(out, x)), \
            (time.process_time if cpu else time.perf_counter), \
            (lambda: np.array_equal(dst.to_numpy(), x)), (x, src, dst, out)

    def unpack(n, dt, lay):
        x = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
        la = LayoutArray.from_numpy(x, lay)
        out = np.empty_like(x)
        xu = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        cdst = np.empty_like(xu)
        return (lambda: la.to_numpy(out=out)), (lambda: np.copyto(cdst, xu)), \
            time.process_time, (lambda: np.array_equal(out.view(np.uint8), x.view(np.uint8))), \
            (x, la, out, xu, cdst)

    CASES = {
        "relayout8192": lambda: relayout(8192),
        "relayout8200": lambda: relayout(8200),
        "unpack_s8_4096": lambda: unpack(4096, np.int8, "{1,0:T(8,128)(4,1)}"),
        "unpack_s8_8192": lambda: unpack(8192, np.int8, "{1,0:T(8,128)(4,1)}"),
        "unpack_f32_4096": lambda: unpack(4096, np.float32, "{1,0:T(8,128)}"),
        "unpack_f32_8192": lambda: unpack(8192, np.float32, "{1,0:T(8,128)}"),
        "unpack_bf16_8192": lambda: unpack(8192, xs.PrimitiveType.BF16.dtype,
                                           "{1,0:T(8,128)(2,1)}"),
    }
    ours, lim, clock, check, keep = CASES[case]()
    ours()
    assert check(), "wrong result"
    print("ready", flush=True)
    for line in sys.stdin:
        a, b = [], []
        for _ in range(reps):
            t0 = clock(); ours(); a.append(clock() - t0)
            t0 = clock(); lim(); b.append(clock() - t0)
        print(json.dumps([statistics.median(a), statistics.median(b)]), flush=True)
""")

CASES = ["relayout8192", "relayout8200", "unpack_s8_4096"]
ALL_CASES = CASES + ["unpack_s8_8192", "unpack_f32_4096", "unpack_f32_8192", "unpack_bf16_8192"]


def start(path, case, reps, cpu):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
    p = subprocess.Popen([sys.executable, "-c", WORKER, case, str(reps),
                          "cpu" if cpu else "wall"], env=env,
                         cwd=os.path.abspath(path), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", f"worker for {path} did not start"
    return p


def stop(procs):
    for p in procs:
        p.stdin.close()
        p.wait()
    procs.clear()


def one_round(p):
    p.stdin.write("go\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=3, help="kernel/copyto pairs per round")
    ap.add_argument("--every", type=int, default=4,
                    help="new worker processes (fresh arrays) every N rounds")
    ap.add_argument("--case", action="append", choices=ALL_CASES)
    ap.add_argument("--cpu", action="store_true",
                    help="CPU time for the relayouts too (with XLASHAPE_THREADS=1)")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"A = {args.a}\nB = {args.b}\n{args.rounds} alternating rounds of {args.reps} "
          f"pairs, load average {load:.1f} at the start, XLASHAPE_THREADS="
          f"{os.environ.get('XLASHAPE_THREADS', '(default)')}, "
          f"{'CPU' if args.cpu else 'wall'} time for the relayouts")
    print("case | build | ratio median | ratio min-max | kernel ms | copyto ms")
    for case in args.case or CASES:
        res = [[], []]
        procs = []
        try:
            for r in range(args.rounds):
                if r % args.every == 0:
                    stop(procs)
                    procs = [start(args.a, case, args.reps, args.cpu),
                             start(args.b, case, args.reps, args.cpu)]
                order = (0, 1) if r % 2 == 0 else (1, 0)
                for k in order:
                    res[k].append(one_round(procs[k]))
        finally:
            stop(procs)
        for k, name in enumerate("AB"):
            ratios = [o / c for o, c in res[k]]
            print(f"{case} | {name} | {statistics.median(ratios):.2f}x | "
                  f"{min(ratios):.2f}-{max(ratios):.2f}x | "
                  f"{statistics.median(o for o, _ in res[k]) * 1e3:.1f} | "
                  f"{statistics.median(c for _, c in res[k]) * 1e3:.1f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
