#!/usr/bin/env python
"""xlashape's fuzz harness: run random cases for N minutes, report failures.

    python tests/fuzz/run.py --minutes 10 --seed 1 --target all --jobs 1

Targets (see each generator's docstring):

- ``layout_array`` (``gen_layout.py``): LayoutArray against numpy over every
  element type and random layouts.
- ``shapes`` (``gen_shapes.py``): mutated shape/layout text.
- ``readers`` (``gen_readers.py``): mutated real dumps, modules and
  out-of-memory reports into the readers and the CLI.

Cases run in worker processes (``worker.py``), one case at a time each; a
worker that dies (a crash: the signal, or an AddressSanitizer report) or
runs past the case's time budget is recorded and replaced, and the run goes
on. A failure is one of: ``crash``, ``hang`` (time budget), ``blowup``
(``MemoryError`` under the memory budget), ``builtin`` (an exception not in
``xlashape.errors.XlaShapeError``'s family), ``refused`` (an xlashape error
where numpy has a result, for an operation that may not refuse), ``mismatch`` (a value, dtype or
shape other than numpy's: bitwise, NaN-aware), ``missing-error`` (numpy
raises, xlashape returns), ``oracle`` (a case's own check, e.g. unbounded
warnings). Failures are grouped by signature
``target:kind:operation:detail[:types or mutation]``; the first of each new
signature is minimized (regenerated at smaller levels, lines deleted) and
written as a runnable Python reproducer to the results directory
(``--results``, default a new ``/tmp/xlashape-fuzz-*`` folder).

``--known FILE``: signatures (``fnmatch`` patterns, one a line, ``#``
comments) of bugs already reported; they are counted as ``known`` and do
not fail the run. The exit status is 1 when any other failure was found.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import oracle  # noqa: E402

TARGETS = ("layout_array", "shapes", "readers")
BUDGET = {"layout_array": 10.0, "shapes": 10.0, "readers": 20.0}


def _generators():
    import gen_layout
    import gen_readers
    import gen_shapes
    return {"layout_array": gen_layout.generate, "shapes": gen_shapes.generate,
            "readers": gen_readers.generate}


def operation_names(target):
    """The operation families a generator draws from (what --ops selects)."""
    if target == "layout_array":
        import gen_layout
        return list(gen_layout.OPS)
    if target == "shapes":
        import gen_shapes
        return [c[0] for c in gen_shapes.CALLS]
    import gen_readers
    return list(gen_readers.CALLS) + ["long_line_scaling"]


# -- workers ---------------------------------------------------------------------

class HarnessError(Exception):
    """The harness itself cannot go on (e.g. a worker cannot import xlashape)."""


class Worker:
    def __init__(self, n, logdir, env):
        self.n = n
        self.log_path = os.path.join(logdir, f"worker-{n}.log")
        self.env = env
        self.proc = None
        self.case = None
        self.started = 0.0
        self.log_offset = 0
        self.restarts = -1
        self.start()

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "worker.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=self.env, start_new_session=True,
            bufsize=0)
        self.restarts += 1
        self._buf = b""
        # the worker says "ready" once it has imported numpy, ml_dtypes and xlashape
        deadline = time.monotonic() + 300
        while b"\n" not in self._buf:
            r, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.proc.stdout.fileno(), 65536) if r else b""
            if not chunk:
                self.kill()
                with open(self.log_path, "rb") as f:
                    tail = f.read()[-3000:].decode("utf-8", "replace")
                raise HarnessError(f"a worker process could not start:\n{tail}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        if line != b"ready":
            raise HarnessError(f"a worker process said {line[:200]!r} instead of 'ready'")

    def send(self, case):
        self.case = case
        self.started = time.monotonic()
        self.log.flush()
        self.log_offset = os.path.getsize(self.log_path)
        payload = {k: v for k, v in case.items() if k != "workdir"}
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def fileno(self):
        return self.proc.stdout.fileno()

    def read_result(self):
        """A result dict, or None if the worker died (it is restarted)."""
        while b"\n" not in self._buf:
            chunk = os.read(self.fileno(), 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def log_tail(self, limit=6000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        m = text.find("ERROR: AddressSanitizer")
        if m >= 0:
            return text[m:m + limit]
        return text[-limit:]

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.log.close()

    def death(self):
        """(kind, detail) for a dead worker."""
        rc = self.proc.wait()
        tail = self.log_tail()
        if "ERROR: AddressSanitizer" in tail:
            m = re.search(r"AddressSanitizer: ([\w-]+)", tail)
            return "crash", "ASAN-" + (m.group(1) if m else "report")
        if rc < 0:
            try:
                return "crash", signal.Signals(-rc).name
            except ValueError:
                return "crash", f"signal{-rc}"
        return "crash", f"exit{rc}"

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self.log.close()


def run_one(worker, case, budget):
    """Run ``case`` on ``worker`` synchronously: the result dict (crashes and
    hangs included; the worker is replaced after either)."""
    worker.send(case)
    deadline = time.monotonic() + budget
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            worker.kill()
            worker.start()
            return {"status": "fail", "kind": "hang", "detail": f">{budget:g}s"}
        r, _, _ = select.select([worker], [], [], left)
        if r:
            res = worker.read_result()
            if res is None:
                kind, detail = worker.death()
                res = {"status": "fail", "kind": kind, "detail": detail, "message": worker.log_tail()}
                worker.log.close()
                worker.start()
            return res


# -- signatures, known bugs, reproducers -------------------------------------------------

def signature(case, res):
    parts = [case["target"], res["kind"], case["op"], res.get("detail", "")]
    if res["kind"] in ("mismatch", "missing-error", "refused") or (case["target"] == "readers" and res["kind"] == "builtin"
                                                          and case.get("detail")):
        parts.append(case.get("detail", ""))
    return ":".join(p.replace(":", "~") if i == 4 else p for i, p in enumerate(parts))


def load_known(path):
    pats = []
    if path:
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    pats.append(line)
    return pats


def is_known(sig, pats):
    return any(fnmatch.fnmatchcase(sig, p) for p in pats)


def render(case, res=None, sig=None, input_dir=None):
    """A runnable Python reproducer."""
    out = []
    if sig:
        out.append(f"# {sig}")
    if res:
        for line in (res.get("message") or "").splitlines()[:30]:
            out.append("# " + line)
    setup = case.get("setup", "")
    if input_dir and case.get("workdir"):
        setup = setup.replace(repr(case["workdir"])[1:-1], "' + HERE + '")
        setup = ("import os\nHERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "
                 f"{os.path.basename(input_dir)!r})\n" + setup)
    out += [oracle.PRELUDE.rstrip(), "", setup.rstrip(), case.get("la_pre", "").rstrip(),
            case.get("la", "").rstrip()]
    if case.get("kind") == "diff" and (res is None or res.get("kind") in ("mismatch", "missing-error",
                                                                          "refused")):
        out += ["print('xlashape:', repr(out) if 'out' in globals() else A)", "",
                "# the same on numpy", setup.rstrip(), case.get("np", "").rstrip(),
                "print('numpy:   ', repr(out) if 'out' in globals() else A)"]
    return "\n".join(x for x in out if x is not None) + "\n"


def _slug(sig):
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", sig)[:90]


# -- the run -------------------------------------------------------------------------

class Run:
    def __init__(self, args):
        self.args = args
        self.known = load_known(args.known)
        self.results = args.results or tempfile.mkdtemp(prefix="xlashape-fuzz-")
        os.makedirs(os.path.join(self.results, "repro"), exist_ok=True)
        os.makedirs(os.path.join(self.results, "logs"), exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix="xlashape-fuzz-inputs-")
        self.env = dict(os.environ)
        self.env["XLASHAPE_FUZZ_MEMORY_MB"] = str(args.memory_mb)
        self.env.setdefault("XLASHAPE_THREADS", "1")
        self.gens = _generators()
        self.targets = TARGETS if args.target == "all" else tuple(args.target.split(","))
        self.ops = {}
        if args.ops:
            wanted = args.ops.split(",")
            for t in self.targets:
                names = operation_names(t)
                self.ops[t] = [n for n in names if any(fnmatch.fnmatchcase(n, w) for w in wanted)]
            self.targets = tuple(t for t in self.targets if self.ops[t])
            if not self.targets:
                raise SystemExit(f"--ops {args.ops}: no operation of the targets matches")
        self.stats = {t: defaultdict(Counter) for t in self.targets}
        self.failures = {}           # sig -> record
        self.refusals = Counter()
        self.generator_errors = Counter()
        self.numpy_crashes = Counter()
        self.interrupted = False
        self.harness_error = None
        self.n = 0
        self.plant = None
        if args.plant:
            self.plant = open(args.plant).read() if os.path.isfile(args.plant) else args.plant

    def new_case(self, i):
        target = self.targets[i % len(self.targets)]
        rng = np.random.default_rng([self.args.seed, i])
        level = int(rng.integers(1, 3))
        kw = {}
        if target == "readers":
            kw["workdir"] = os.path.join(self.scratch, f"case-{i}")
        if self.ops.get(target):
            kw["op"] = self.ops[target][int(rng.integers(len(self.ops[target])))]
        for _ in range(20):
            try:
                case = self.gens[target](rng, level, **kw)
            except Exception as e:  # noqa: BLE001  (a bug of the generator: keep going)
                self.generator_errors[f"{target}:{type(e).__name__}: {e}"[:200]] += 1
                case = None
            if case is not None:
                break
            if target == "readers":
                shutil.rmtree(kw["workdir"], ignore_errors=True)
        else:
            return None
        case["id"] = i
        case["level"] = level
        case["target"] = target
        if self.plant:
            case["plant"] = self.plant
        return case

    def cleanup_case(self, case):
        wd = case.get("workdir")
        if wd:
            shutil.rmtree(wd, ignore_errors=True)

    def record(self, case, res, worker):
        t, op = case["target"], case["op"]
        st = res["status"]
        if st == "fail" and res["kind"] == "crash" and case.get("kind") == "diff" and \
                self.numpy_alone_crashes(case):
            st = "numpy_crash"          # numpy crashes on its own: not xlashape's bug
            self.numpy_crashes[f"{t}:{op}"] += 1
        if st == "fail":
            sig = signature(case, res)
            if is_known(sig, self.known):
                st = "known"
            rec = self.failures.get(sig)
            if rec is None:
                rec = self.failures[sig] = {"signature": sig, "count": 0, "known": st == "known",
                                            "first_case": case["id"], "message": res.get("message", ""),
                                            "input": case.get("input")}
                self.save_repro(sig, case, res, rec, worker)
            rec["count"] += 1
        elif st == "refused":
            self.refusals[f"{t}:{op}:{res.get('detail')}"] += 1
        self.stats[t][op][st] += 1
        self.stats[t][op]["tried"] += 1
        self.n += 1

    def numpy_alone_crashes(self, case):
        np_only = {"target": case["target"], "op": case["op"], "kind": "family", "id": case["id"],
                   "setup": case.get("setup", ""), "la_pre": "", "la": case["np"], "allow": ()}
        tw = Worker(f"np-{case['id']}", os.path.join(self.results, "logs"), self.env)
        try:
            r = run_one(tw, np_only, self._budget(case))
        finally:
            tw.close()
        return r.get("kind") == "crash"

    def save_repro(self, sig, case, res, rec, worker):
        if not rec["known"] and self.args.minimize:
            case, res = self.minimize(case, res, sig, worker)
        k = len(self.failures)
        base = os.path.join(self.results, "repro", f"{k:03d}-{_slug(sig)}")
        input_dir = None
        if case.get("workdir") and os.path.isdir(case["workdir"]):
            input_dir = base + "-input"
            shutil.copytree(case["workdir"], input_dir, symlinks=True, dirs_exist_ok=True)
        with open(base + ".py", "w") as f:
            f.write(render(case, res, sig, input_dir))
        rec["repro"] = base + ".py"
        if res.get("traceback"):
            rec["traceback"] = res["traceback"]

    def minimize(self, case, res, sig, worker):
        """Smaller cases with the same signature: regenerated at lower levels, then
        lines of the operation deleted (crashes and exceptions)."""
        budget_end = time.monotonic() + self.args.minimize_seconds
        best, best_res = case, res
        tw = Worker(f"min-{case['id']}", os.path.join(self.results, "logs"), self.env)
        try:
            gen = self.gens[case["target"]]
            for level in range(0, case.get("level", 2)):
                for j in range(6):
                    if time.monotonic() > budget_end:
                        break
                    rng = np.random.default_rng([self.args.seed, case["id"], level, j, 7])
                    kw = {}
                    if case["target"] == "readers":
                        kw["workdir"] = os.path.join(self.scratch, f"min-{case['id']}-{level}-{j}")
                    c = gen(rng, level, op=case.get("family"), **kw)
                    if c is None:
                        continue
                    c.update(id=case["id"], level=level, target=case["target"])
                    if self.plant:
                        c["plant"] = self.plant
                    r = run_one(tw, c, self._budget(c) * 2)
                    if r.get("status") == "fail" and signature(c, r) == sig and \
                            len(render(c)) < len(render(best)):
                        if best is not case:
                            self.cleanup_case(best)
                        best, best_res = c, r
                    elif c is not best:
                        self.cleanup_case(c)
                if best is not case:
                    break
            if best_res["kind"] in ("crash", "builtin") and "\n" in best.get("la", ""):
                lines = best["la"].split("\n")
                i = 0
                while i < len(lines) and time.monotonic() < budget_end:
                    trial = dict(best, la="\n".join(lines[:i] + lines[i + 1:]))
                    r = run_one(tw, trial, self._budget(trial) * 2)
                    if r.get("status") == "fail" and signature(trial, r) == sig:
                        lines = lines[:i] + lines[i + 1:]
                        best, best_res = trial, r
                    else:
                        i += 1
        finally:
            tw.close()
        return best, best_res

    def _budget(self, case):
        return max(self.args.timeout or BUDGET[case["target"]], case.get("budget", 0))

    def _loop(self, workers, busy, end, t0):
        a = self.args
        i = 0
        last_progress = t0
        while True:
            now = time.monotonic()
            stop = now >= end or (a.max_cases and i >= a.max_cases)
            for w in workers:
                if w not in busy and not stop:
                    case = None
                    while case is None and not (a.max_cases and i >= a.max_cases):
                        case = self.new_case(i)
                        i += 1
                    if case is not None:
                        w.send(case)
                        busy[w] = case
            if not busy:
                break
            timeout = min(w.started + self._budget(c) for w, c in busy.items()) - time.monotonic()
            ready, _, _ = select.select(list(busy), [], [], max(0.0, timeout))
            for w in ready:
                case = busy.pop(w)
                res = w.read_result()
                if res is None:
                    kind, detail = w.death()
                    res = {"status": "fail", "kind": kind, "detail": detail, "message": w.log_tail()}
                    w.log.close()
                    w.start()
                self.record(case, res, w)
                self.cleanup_case(case)
            now = time.monotonic()
            for w, case in list(busy.items()):
                if now - w.started > self._budget(case):
                    busy.pop(w)
                    w.kill()
                    w.start()
                    self.record(case, {"status": "fail", "kind": "hang",
                                       "detail": f">{self._budget(case):g}s"}, w)
                    self.cleanup_case(case)
            if not a.quiet and now - last_progress > 30:
                last_progress = now
                nf = sum(1 for r in self.failures.values() if not r["known"])
                print(f"[{now - t0:6.0f}s] {self.n} cases, {len(self.failures)} signatures "
                      f"({nf} new)", file=sys.stderr, flush=True)

    def main(self):
        a = self.args
        end = time.monotonic() + (a.minutes * 60 if a.minutes else 0) + (a.seconds or 0)
        if not a.minutes and not a.seconds and not a.max_cases:
            end = time.monotonic() + 60
        elif not a.minutes and not a.seconds:
            end = float("inf")
        workers = []
        busy = {}
        t0 = time.monotonic()
        try:
            for j in range(a.jobs):
                workers.append(Worker(j, os.path.join(self.results, "logs"), self.env))
            self._loop(workers, busy, end, t0)
        except KeyboardInterrupt:
            self.interrupted = True
        except HarnessError as e:
            print(f"fuzz: {e}", file=sys.stderr)
            self.interrupted = True
            self.harness_error = str(e)
        except Exception:  # noqa: BLE001  (a bug of the harness: still report what ran)
            import traceback
            self.harness_error = traceback.format_exc()
            print(self.harness_error, file=sys.stderr)
            self.interrupted = True
        finally:
            for w in workers:
                if w in busy:
                    w.kill()
                else:
                    w.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.elapsed = time.monotonic() - t0
        return self.report()

    def report(self):
        lines = [f"xlashape fuzz: seed {self.args.seed}, targets {','.join(self.targets)}, "
                 f"{self.n} cases in {self.elapsed:.0f} s, results in {self.results}", ""]
        if self.interrupted:
            lines.insert(1, "(interrupted)")
        if self.numpy_crashes:
            lines.append(f"crashes of numpy itself (the numpy side alone crashes too; not counted): "
                         f"{dict(self.numpy_crashes)}")
        if self.generator_errors:
            lines.append(f"generator errors (bugs of the harness, cases not run): "
                         f"{dict(self.generator_errors.most_common(5))}")
        summary = {"seed": self.args.seed, "cases": self.n, "seconds": round(self.elapsed, 1),
                   "generator_errors": dict(self.generator_errors),
                   "numpy_crashes": dict(self.numpy_crashes),
                   "targets": {}, "failures": [], "refusals": dict(self.refusals.most_common(50))}
        for t in self.targets:
            ops = self.stats[t]
            tot = Counter()
            for c in ops.values():
                tot.update(c)
            summary["targets"][t] = {"totals": dict(tot), "operations": {k: dict(v) for k, v in sorted(ops.items())}}
            lines.append(f"{t}: {tot['tried']} cases: {tot['ok']} ok, {tot['refused']} refused "
                         f"(an xlashape error: of mutated input, or where numpy has a result), "
                         f"{tot['external']} external (numpy/Python raised, no xlashape frame), "
                         f"{tot['skip']} skipped (invalid random input), {tot['fail']} failed, "
                         f"{tot['known']} known")
            for op, c in sorted(ops.items()):
                lines.append(f"  {op:34s} {c['tried']:6d} tried  {c['fail']:4d} failed  {c['known']:4d} known"
                             f"  {c['refused']:4d} refused  {c['skip']:4d} skipped")
        new = [r for r in self.failures.values() if not r["known"]]
        known = [r for r in self.failures.values() if r["known"]]
        for title, recs in (("new failures", new), ("known failures", known)):
            lines += ["", f"{title}: {len(recs)} signatures"]
            for r in sorted(recs, key=lambda r: -r["count"]):
                lines.append(f"  {r['count']:5d}x {r['signature']}")
                msg = (r.get("message") or "").strip().splitlines()
                if msg:
                    lines.append(f"         {msg[0][:160]}")
                if r.get("repro"):
                    lines.append(f"         {r['repro']}")
        summary["failures"] = sorted(self.failures.values(), key=lambda r: -r["count"])
        summary["harness_error"] = self.harness_error
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.results, "summary.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(self.results, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        if not self.args.quiet:
            print(text)
        if self.harness_error:
            return 3
        return 1 if new else 0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=0, help="run for this long")
    p.add_argument("--seconds", type=float, default=0, help="(added to --minutes)")
    p.add_argument("--max-cases", type=int, default=0, help="stop after this many cases")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", default="all",
                   help="layout_array, shapes, readers, a comma-separated list, or all")
    p.add_argument("--ops", help="only these operation families (fnmatch patterns, comma-separated; "
                                 "e.g. construct,dlpack or cli.*)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--known", help="file of known-bug signature patterns (not failures)")
    p.add_argument("--results", help="directory for summary and reproducers (default: new /tmp folder)")
    p.add_argument("--timeout", type=float, default=0,
                   help="per-case time budget in seconds (default 10; readers 20)")
    p.add_argument("--memory-mb", type=int, default=3072,
                   help="per-worker address-space budget (0: none; off under AddressSanitizer)")
    p.add_argument("--no-minimize", dest="minimize", action="store_false")
    p.add_argument("--minimize-seconds", type=float, default=30)
    p.add_argument("--plant", help=argparse.SUPPRESS)   # code run in each worker (the smoke test)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    bad = [t for t in (args.target.split(",") if args.target != "all" else []) if t not in TARGETS]
    if bad:
        p.error(f"unknown target {bad[0]!r}; one of {', '.join(TARGETS)} or all")
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    # `kill` (SIGTERM) stops a run like Ctrl-C: the summary is still written
    signal.signal(signal.SIGTERM, _interrupt)
    return Run(parse_args(argv)).main()


if __name__ == "__main__":
    sys.exit(main())
