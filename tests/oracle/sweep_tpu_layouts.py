"""Ask XLA:TPU which layout it gives a jit parameter, and how many bytes that takes.

Run with jax, jaxlib and libtpu installed, set up for compile-only TPU
topologies (no TPU needed)::

    env PYTHONPATH=$LIBTPU JAX_PLATFORMS=cpu TPU_LIBRARY_PATH=$LIBTPU/libtpu/libtpu.so \\
        python tests/oracle/sweep_tpu_layouts.py --out tests/data/tpu_layouts --seed 0

For every chip that has a compile-only topology it draws random
``(element type, dimensions)`` cases (ranks 0-6, sizes around tile
boundaries), compiles ``jax.jit(lambda *a: None, keep_unused=True)`` over
many parameters at once with no requested layout, and records, per
parameter:

* the layout XLA printed for it in ``entry_computation_layout`` (which must
  agree with ``compiled.input_formats``: checked for every parameter), and
* its size: the ``size`` of the parameter's allocation in the compiler's
  buffer assignment (``--xla_dump_to``), which must equal the size of the
  value in that allocation.

Then it checks that batching changes nothing: ``--verify`` cases per chip
are compiled again one at a time as ``jax.jit(lambda a: a)`` (the array is
copied to the output), where the layout must be the same and
``memory_analysis().argument_size_in_bytes`` must equal the recorded size.
Any disagreement stops the script.

``--acceptance`` instead compiles ``jax.jit(lambda a: a)`` for every element
type and rank 0-6 (a few shapes each) and records which ones the compiler
rejects, with its message (or the signal the compiling process died of).

Every compile runs in a worker process (libtpu aborts the process on some
inputs); a worker that dies is replaced, and a batch that fails is split in
halves until the failing case is alone.

Output (``--out DIR``): ``DIR/<chip>.tsv`` with one line per case,
``<shape with XLA's layout>\\t<bytes>``, after ``#`` header lines that give
the jax/jaxlib/libtpu versions, the seed and the checks made; with
``--acceptance``, ``DIR/acceptance.tsv``.

The committed fixtures were made with::

    sweep_tpu_layouts.py --out tests/data/tpu_layouts --seed 0 --cases 3000 --verify 60
    sweep_tpu_layouts.py --out tests/data/tpu_layouts/recheck --seed 20251123 --cases 2000 \\
        --verify 20
    sweep_tpu_layouts.py --out tests/data/tpu_layouts --acceptance
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

# chip name -> compile-only topology name
TOPOLOGIES = {
    "v2": "v2:2x2",
    "v3": "v3:2x2",
    "v4": "v4:2x2x1",
    "v5e": "v5e:2x2",
    "v5p": "v5p:2x2x1",
    "v6e": "v6e:2x2",
    "v7x": "tpu7x:2x2x1",
}

# HLO element type name -> numpy / ml_dtypes type name
DTYPES = {
    "pred": "bool",
    "s2": "int2", "s4": "int4", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u2": "uint2", "u4": "uint4", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "f8e5m2": "float8_e5m2", "f8e4m3": "float8_e4m3", "f8e4m3fn": "float8_e4m3fn",
    "f8e4m3b11fnuz": "float8_e4m3b11fnuz", "f8e3m4": "float8_e3m4",
    "f8e5m2fnuz": "float8_e5m2fnuz", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e8m0fnu": "float8_e8m0fnu", "f4e2m1fn": "float4_e2m1fn",
    "c64": "complex64", "c128": "complex128",
}
# tried in the acceptance run only: JAX has no other way to ask for XLA's s1/u1
EXTRA_DTYPES = {"s1": "int1", "u1": "uint1"}

BITS = {"pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "f4e2m1fn": 4, "c64": 64, "c128": 128}
for _n in DTYPES:
    _m = re.search(r"(\d+)$", _n)
    if _n not in BITS:
        BITS[_n] = 8 if _n.startswith("f8") else int(_m.group(1))

# sizes around tile boundaries
BOUNDARY_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65,
                  96, 100, 127, 128, 129, 192, 255, 256, 257, 384, 511, 512, 513, 640, 1000,
                  1023, 1024, 1025, 1280, 2047, 2048, 2049, 4095, 4096, 4097, 8192)

# always swept, before the random cases: the shapes the README and the
# documentation talk about, and a few ranks above 6
EXAMPLES = (
    ("f32", (100, 5)), ("s32", (1024, 1)), ("bf16", (8, 1, 1280)), ("f32", (1024, 8, 4)),
    ("bf16", (8, 1, 1280, 16384)), ("bf16", (8, 1280, 1, 16384)), ("f32", (3, 5)),
    ("f32", (2, 3)), ("f32", (3, 5, 7)), ("s8", (7,)), ("s4", (3, 5, 7)), ("f32", (100,)),
    ("f32", (300,)), ("bf16", (7,)), ("f32", ()), ("bf16", ()), ("s4", ()), ("pred", ()),
    ("f32", (3, 5, 7, 9, 2, 4, 6)), ("bf16", (2, 3, 4, 5, 6, 7, 8, 9)),
    ("s8", (1, 2, 1, 2, 1, 2, 1, 2, 1)), ("f32", (65537, 3)), ("f32", (131072,)),
)

# a case may take at most this many bytes even if every dimension is padded
# badly (the sweep stays far from every chip's HBM)
MAX_CASE_BYTES = 1 << 28
MAX_BATCH_BYTES = 1 << 31
MAX_BATCH_PARAMS = 400


# ---------------------------------------------------------------------------
# the worker: compiles what it is sent, one JSON line in, one JSON line out
# ---------------------------------------------------------------------------

_SHAPE_RE = re.compile(r"(\w+)\[([^\]]*)\](\{[^}]*\})?")


def _entry_parameter_shapes(hlo_text):
    """The parameter shapes of ``entry_computation_layout``, as printed."""
    first = hlo_text.split("\n", 1)[0]
    start = first.index("entry_computation_layout={(") + len("entry_computation_layout={(")
    end = first.index(")->", start)
    params = re.sub(r"/\*index=\d+\*/", "", first[start:end])
    return [m.group(0) for m in _SHAPE_RE.finditer(params)]


def _format_layout_text(fmt):
    """A jax ``Format``'s layout in XLA's text (minor_to_major, tiles, E(n))."""
    lay = fmt.layout
    m2m = ",".join(str(d) for d in reversed(lay.major_to_minor))
    tail = "".join("T" * (i == 0) + "(" + ",".join(str(t) for t in tile) + ")"
                   for i, tile in enumerate(lay.tiling))
    if lay.sub_byte_element_size_in_bits:
        tail += f"E({lay.sub_byte_element_size_in_bits})"
    return "{" + m2m + (":" + tail if tail else "") + "}"


_ALLOC_RE = re.compile(r"^allocation \d+: size (\d+), .*?parameter (\d+), shape \|[^|]*\| "
                       r"at ShapeIndex \{\}:\n value: <[^>]*> \(size=(\d+),offset=0\)", re.M)


def _parameter_allocations(dump_dir, n):
    files = [f for f in glob.glob(os.path.join(dump_dir, "*buffer-assignment.txt"))]
    if len(files) != 1:
        raise RuntimeError(f"expected one buffer assignment in the dump, found {len(files)}")
    with open(files[0]) as f:
        text = f.read()
    alloc = [None] * n
    value = [None] * n
    for m in _ALLOC_RE.finditer(text):
        p = int(m.group(2))
        alloc[p] = int(m.group(1))
        value[p] = int(m.group(3))
    return alloc, value


def _first_line(message):
    lines = [ln.strip() for ln in str(message).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def worker(chip):
    import jax
    import ml_dtypes
    import numpy as np
    from jax.experimental import topologies

    jax.config.update("jax_enable_x64", True)
    dump_dir = os.environ["SWEEP_DUMP_DIR"]
    topo = topologies.get_topology_desc(topology_name=TOPOLOGIES[chip], platform="tpu")
    sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])

    def dtype(name):
        np_name = DTYPES.get(name) or EXTRA_DTYPES[name]
        return np.dtype(getattr(ml_dtypes, np_name) if hasattr(ml_dtypes, np_name)
                        and not hasattr(np, np_name) else np_name)

    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the reply channel
    for line in sys.stdin:
        task = json.loads(line)
        for f in os.listdir(dump_dir):
            p = os.path.join(dump_dir, f)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        reply = {}
        try:
            args = [jax.ShapeDtypeStruct(tuple(dims), dtype(name), sharding=sharding)
                    for name, dims in task["params"]]
            if task["mode"] == "unused":
                fn = jax.jit(lambda *a: None, keep_unused=True)
            else:  # "copy": every parameter is also an output
                fn = jax.jit(lambda *a: a, keep_unused=True)
            t0 = time.time()
            compiled = fn.lower(*args).compile()
            seconds = time.time() - t0
            text = compiled.as_text()
            shapes = _entry_parameter_shapes(text)
            formats = [_format_layout_text(f) for f in compiled.input_formats[0]]
            reply = {
                "ok": True,
                "shapes": shapes,
                "formats": formats,
                "argument_bytes": compiled.memory_analysis().argument_size_in_bytes,
                "seconds": seconds,
            }
            if task.get("dump"):
                reply["alloc"], reply["value"] = _parameter_allocations(dump_dir, len(args))
        except Exception as e:  # noqa: BLE001 - every compiler error is an answer
            reply = {"ok": False, "error": f"{type(e).__name__}: {_first_line(e)}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


# ---------------------------------------------------------------------------
# the parent: cases, batches, workers that may die
# ---------------------------------------------------------------------------


class Worker:
    def __init__(self, chip, dump, timeout=120.0):
        self.chip = chip
        self.timeout = timeout
        self.dump = dump
        self.proc = None
        self.compiles = 0
        self.restarts = 0

    def _start(self):
        self.dump_dir = tempfile.mkdtemp(prefix="tpu_sweep_dump_")
        self.stderr = tempfile.TemporaryFile()
        # compile-only: no device to guard, so several workers (and other
        # programs using libtpu) may load it at once
        env = dict(os.environ, SWEEP_DUMP_DIR=self.dump_dir, ALLOW_MULTIPLE_LIBTPU_LOAD="1")
        if self.dump:
            flags = env.get("XLA_FLAGS", "") + f" --xla_dump_to={self.dump_dir}"
            env["XLA_FLAGS"] = flags.strip()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", self.chip],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env, text=True)

    def compile(self, params, mode):
        if self.proc is None:
            self._start()
        self.compiles += 1
        task = {"params": params, "mode": mode, "dump": self.dump}
        try:
            self.proc.stdin.write(json.dumps(task) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
            if not ready:
                # some compiles never finish (and grow without bound): give up on them
                self.proc.kill()
                self.close()
                self.restarts += 1
                return {"ok": False, "error": f"the compile did not finish in {self.timeout:.0f} s",
                        "timeout": True}
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if line:
            return json.loads(line)
        # the process died: say how
        rc = self.proc.wait()
        self.stderr.seek(0)
        err = self.stderr.read().decode("utf-8", "replace")
        self.close()
        self.restarts += 1
        return {"ok": False, "error": _death(rc, err)}

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.wait()
            self.proc = None
            shutil.rmtree(self.dump_dir, ignore_errors=True)


def _death(rc, stderr):
    """The compiling process died: its signal and the fatal log line, if any."""
    sig = -rc if rc < 0 else None
    names = {4: "SIGILL", 6: "SIGABRT", 11: "SIGSEGV", 9: "SIGKILL"}
    what = f"process died of {names.get(sig, sig)}" if sig else f"process exited with status {rc}"
    for ln in stderr.splitlines():
        m = re.match(r"^[FE]\d{4} [\d:. ]+\d+ (\S+:\d+\] .*)$", ln)
        if ln.startswith("F") and m:
            return f"{what}: {m.group(1)}"
        if "Check failed" in ln:
            return f"{what}: {ln.strip()}"
    frames = re.findall(r"^\s+@\s+0x[0-9a-f]+\s+\S+\s+(xla::\S+)\(\)", stderr, re.M)
    if frames:
        return f"{what} in {frames[0]}"
    errors = [ln.strip() for ln in stderr.splitlines() if re.match(r"^\w*(Error|Exception)\b", ln)]
    return f"{what}: {errors[-1]}" if errors else what


def compile_all(worker, cases, mode, results, failures):
    """Compile ``cases`` (a list of (name, dims)) in as few compiles as possible;
    store each case's answer in ``results`` or its error in ``failures``."""
    if not cases:
        return
    reply = worker.compile([[n, list(d)] for n, d in cases], mode)
    if reply["ok"]:
        if len(reply["shapes"]) != len(cases):
            raise SystemExit(f"{worker.chip}: {len(cases)} parameters but {len(reply['shapes'])} "
                             "shapes in entry_computation_layout")
        for i, case in enumerate(cases):
            results[case] = {k: (v[i] if isinstance(v, list) else v) for k, v in reply.items()}
            results[case]["batch"] = len(cases)
        return
    if len(cases) == 1:
        failures[cases[0]] = reply["error"]
        return
    half = len(cases) // 2
    compile_all(worker, cases[:half], mode, results, failures)
    compile_all(worker, cases[half:], mode, results, failures)


def bound_bytes(name, dims):
    """An upper bound of what any TPU layout could make of this case."""
    n = 1
    for d in dims:
        n *= d
    if n == 0:
        return 0
    worst = 1.0
    ds = sorted(dims)
    if ds:
        worst *= -(-ds[0] // 128) * 128 / ds[0]
    if len(ds) > 1:
        worst *= -(-ds[1] // 64) * 64 / ds[1]
    return int(n * max(BITS[name], 8) / 8 * worst * 4) + 4096


def draw_size(rng):
    r = rng.random()
    if r < 0.005:
        return 0
    if r < 0.65:
        return rng.choice(BOUNDARY_SIZES)
    return int(math.exp(rng.uniform(0, math.log(5000))))


def draw_cases(rng, count, names):
    """``count`` distinct random cases; a case too big for the bound has its
    largest dimension replaced by a smaller size until it fits."""
    cases = []
    seen = set()
    while len(cases) < count:
        name = rng.choice(names)
        dims = [draw_size(rng) for _ in range(rng.randint(0, 6))]
        while bound_bytes(name, dims) > MAX_CASE_BYTES:
            i = max(range(len(dims)), key=dims.__getitem__)
            smaller = [s for s in BOUNDARY_SIZES if s < dims[i]]
            dims[i] = rng.choice(smaller[:max(1, len(smaller) // 2)])
        case = (name, tuple(dims))
        if case not in seen:
            seen.add(case)
            cases.append(case)
    return cases


def batches(cases):
    batch, total = [], 0
    for c in cases:
        b = bound_bytes(*c)
        if batch and (len(batch) >= MAX_BATCH_PARAMS or total + b > MAX_BATCH_BYTES):
            yield batch
            batch, total = [], 0
        batch.append(c)
        total += b
    if batch:
        yield batch


def versions():
    import importlib.metadata as md

    out = {}
    for p in ("jax", "jaxlib", "libtpu"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = "unknown"
    return out


def shape_text(name, dims):
    return f"{name}[{','.join(map(str, dims))}]"


def sweep_chip(chip, cases, args, vers):
    t0 = time.time()
    w = Worker(chip, dump=True)
    results, failures = {}, {}
    for i, batch in enumerate(batches(cases)):
        compile_all(w, batch, "unused", results, failures)
        if args.progress:
            print(f"{chip}: batch {i}, {len(results)} cases, {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    w.close()
    problems = []
    for case, r in results.items():
        layout = r["shapes"][len(shape_text(*case)):]
        if not r["shapes"].startswith(shape_text(*case)) or layout != r["formats"]:
            problems.append(f"{case}: printed {r['shapes']} but input_formats says {r['formats']}")
        if r["alloc"] is None or r["alloc"] != r["value"]:
            problems.append(f"{case}: allocation {r['alloc']} bytes, value {r['value']} bytes")
    compiles = w.compiles
    # batching must not change anything: compile a sample alone, copied to the output
    rng = random.Random(args.seed + 1)
    sample = rng.sample(sorted(results), min(args.verify, len(results)))
    v = Worker(chip, dump=False)
    single, single_fail = {}, {}
    for case in sample:
        compile_all(v, [case], "copy", single, single_fail)
        if args.progress:
            print(f"{chip}: alone {case}: {single.get(case, {}).get('seconds')} s",
                  file=sys.stderr, flush=True)
    v.close()
    for case in sample:
        if case in single_fail:
            # a compiler that accepts the parameter but fails on the copy: noted, not a mismatch
            continue
        s, r = single[case], results[case]
        if s["shapes"] != r["shapes"] or s["argument_bytes"] != r["alloc"]:
            problems.append(f"{case}: alone and copied {s['shapes']} {s['argument_bytes']} bytes, "
                            f"batched {r['shapes']} {r['alloc']} bytes")
    checked_single = len(sample) - len(single_fail)
    if problems:
        for p in problems[:50]:
            print(f"{chip}: MISMATCH {p}", file=sys.stderr)
        raise SystemExit(f"{chip}: {len(problems)} disagreements; nothing written")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{chip}.tsv")
    with open(path, "w") as f:
        f.write(f"# XLA:TPU default layouts of jit parameters, chip {chip} "
                f"(compile-only topology {TOPOLOGIES[chip]})\n")
        f.write(f"# jax {vers['jax']}, jaxlib {vers['jaxlib']}, libtpu {vers['libtpu']}\n")
        f.write(f"# tests/oracle/sweep_tpu_layouts.py --seed {args.seed} --cases {args.cases}: "
                f"{len(results)} cases in {compiles} compiles\n")
        f.write("# shape: printed by XLA in entry_computation_layout (equal to input_formats); "
                "bytes: the parameter's allocation in XLA's buffer assignment\n")
        f.write(f"# {checked_single} random cases compiled alone as jit(lambda a: a): same layout, "
                "argument_size_in_bytes equal to bytes\n")
        for (name, dims), err in sorted(single_fail.items()):
            f.write(f"# copying {shape_text(name, dims)} alone did not compile: {err}\n")
        for name, dims in cases:
            if (name, dims) in results:
                r = results[(name, dims)]
                f.write(f"{r['shapes']}\t{r['alloc']}\n")
        for (name, dims), err in sorted(failures.items()):
            f.write(f"# REJECTED {shape_text(name, dims)}\t{err}\n")
    print(f"{chip}: {len(results)} cases, {len(failures)} rejected, {compiles} compiles, "
          f"{checked_single} verified alone ({len(single_fail)} copies failed), "
          f"{time.time() - t0:.0f} s -> {path}", file=sys.stderr)


def acceptance(chips, args, vers):
    """Which element types and ranks a program that copies the array compiles for."""
    rows = []
    names = list(DTYPES) + list(EXTRA_DTYPES)
    rng = random.Random(args.seed + 2)
    for chip in chips:
        w = Worker(chip, dump=False)
        for name in names:
            cases = []
            for rank in range(7):
                shapes = {tuple([1] * rank), tuple([7] * rank)}
                sizes = (2, 3, 8, 9, 100, 129, 1000) if rank <= 2 else (2, 3, 5, 8, 9, 17)
                while len(shapes) < 3 and rank:
                    shapes.add(tuple(rng.choice(sizes) for _ in range(rank)))
                cases += [(name, s) for s in sorted(shapes)]
            results, failures = {}, {}
            compile_all(w, cases, "copy", results, failures)
            for case in cases:
                if case in failures:
                    rows.append((chip, shape_text(*case), "rejected", failures[case]))
                else:
                    rows.append((chip, shape_text(*case), "ok", results[case]["shapes"]))
            print(f"{chip} {name}: {len(failures)}/{len(cases)} rejected", file=sys.stderr)
        w.close()
    path = os.path.join(args.out, "acceptance.tsv")
    with open(path, "w") as f:
        f.write("# which arrays XLA:TPU compiles jax.jit(lambda a: a) for, one array per compile\n")
        f.write(f"# jax {vers['jax']}, jaxlib {vers['jaxlib']}, libtpu {vers['libtpu']}\n")
        f.write("# chip\tshape\tok|rejected\tparameter shape or the compiler's error\n")
        for row in rows:
            f.write("\t".join(row) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=False, help="output directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=3000, help="cases per chip")
    ap.add_argument("--chips", default=",".join(TOPOLOGIES))
    ap.add_argument("--types", default=",".join(DTYPES), help="element types to draw from")
    ap.add_argument("--verify", type=int, default=60,
                    help="cases per chip compiled again alone (copied), to check the batching")
    ap.add_argument("--acceptance", action="store_true",
                    help="instead of the layout sweep, record which types and ranks a program "
                         "that copies the array compiles for (DIR/acceptance.tsv)")
    ap.add_argument("--cases-file",
                    help="JSON list of [type, dims] to compile instead of random ones")
    ap.add_argument("--progress", action="store_true", help="report every compile on stderr")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if not args.out:
        ap.error("--out is required")
    chips = [c for c in args.chips.split(",") if c]
    for c in chips:
        if c not in TOPOLOGIES:
            ap.error(f"unknown chip {c!r}; known: {', '.join(TOPOLOGIES)}")
    vers = versions()
    names = [t for t in args.types.split(",") if t]
    if args.cases_file:
        with open(args.cases_file) as f:
            cases = [(n, tuple(d)) for n, d in json.load(f)]
    else:
        cases = list(EXAMPLES) + [c for c in draw_cases(random.Random(args.seed), args.cases, names)
                                  if c not in EXAMPLES]
    if args.acceptance:
        os.makedirs(args.out, exist_ok=True)
        acceptance(chips, args, vers)
        return 0
    for chip in chips:
        sweep_chip(chip, cases, args, vers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
