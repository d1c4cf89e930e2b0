"""Generate ``tests/data/whatif_pairs``: real compile pairs that differ by one
change, for ``xlashape memory A --what-if EDIT`` to predict B's figures.

Each pair is one program compiled twice by the real compiler (each compile in
its own child process, with ``XLA_FLAGS=--xla_dump_to=...``): variant ``a``
and variant ``b``; ``pairs.json`` says which edit turns ``a`` into ``b`` and
the tolerance the test allows on ``peak_memory_in_bytes`` (1% for a
donation, 2% for an element type; a layout fix as found). For each variant
the fixture holds ``memory_analysis.json`` (every field of XLA's
``memory_analysis()`` and the versions) and ``dump/``: the four text files a
reader needs (the optimized module, its buffer assignment, values and live
ranges; no ``.hlo.pb``, no memory-usage report), machine paths scrubbed.

XLA:CPU pairs (run with jax 0.10.2)::

    python tests/oracle/gen_whatif_pairs.py --platform cpu    # a Python with jax 0.10.2

XLA:TPU pairs, compile-only on a v5e topology (jax 0.12.0.1 with libtpu)::

    env PYTHONPATH=$LIBTPU JAX_PLATFORMS=cpu TPU_LIBRARY_PATH=$LIBTPU/libtpu/libtpu.so \\
        $VENV/bin/python tests/oracle/gen_whatif_pairs.py --platform tpu

``--out DIR`` (default ``tests/data/whatif_pairs``), ``--only NAME,...``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SCRIPT = os.path.abspath(__file__)
SCRIPT_NAME = os.path.basename(SCRIPT)
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "data", "whatif_pairs")
DUMP_SUFFIXES = ("after_optimizations.txt", "after_optimizations-buffer-assignment.txt",
                 "after_optimizations-buffer-assignment-values.txt",
                 "after_optimizations-live-range.txt")
FORBIDDEN = re.compile(r"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/|/proc/|/dev/shm)")
TPU_CHIP = "v5e:2x2"

#: name -> dict(platform, description, edits, tolerance, build(variant, topo) -> (fn, args, kw))
PAIRS = {}


def pair(name, platform, description, edits, tolerance):
    def register(build):
        PAIRS[name] = dict(name=name, platform=platform, description=description,
                           edits=list(edits), tolerance=tolerance, build=build)
        return build
    return register


def _sds(shape, dtype, topo=None):
    import jax
    if topo is None:
        return jax.ShapeDtypeStruct(shape, dtype)
    return jax.ShapeDtypeStruct(shape, dtype,
                                sharding=jax.sharding.SingleDeviceSharding(topo.devices[0]))


def _step():
    import jax.numpy as jnp

    def step(w, x):
        # a layer forward and a gradient-like update of w: temporaries of
        # both sizes, and w written back
        h = jnp.tanh(x @ w)
        g = x.T @ (h * (1 - h * h))
        return w - 0.01 * g, h.sum()
    return step


@pair("cpu_donation", "cpu", "a layer step whose weight f32[1024,1024] is donated (a) or not (b)",
      ["undonate"], 0.01)
def _cpu_donation(variant, topo):
    import jax.numpy as jnp
    kw = {"donate_argnums": 0} if variant == "a" else {}
    return _step(), (_sds((1024, 1024), jnp.float32), _sds((512, 1024), jnp.float32)), kw


def _mlp():
    import jax.numpy as jnp

    def mlp(x, w1, w2, w3):
        h = jnp.tanh(x @ w1)
        h = jnp.tanh(h @ w2)
        return h @ w3
    return mlp


@pair("cpu_dtype", "cpu", "a 3-layer MLP in bf16 (a) and in f32 (b)", ["dtype:bf16=f32"], 0.02)
def _cpu_dtype(variant, topo):
    import jax.numpy as jnp
    t = jnp.bfloat16 if variant == "a" else jnp.float32
    return _mlp(), (_sds((256, 1024), t), _sds((1024, 2048), t), _sds((2048, 2048), t),
                    _sds((2048, 512), t)), {}


@pair("tpu_donation", "tpu", "a layer step whose weight f32[4096,4096] is donated (a) or not (b)",
      ["undonate"], 0.01)
def _tpu_donation(variant, topo):
    import jax.numpy as jnp
    kw = {"donate_argnums": 0} if variant == "a" else {}
    return _step(), (_sds((4096, 4096), jnp.float32, topo),
                     _sds((2048, 4096), jnp.float32, topo)), kw


@pair("tpu_dtype", "tpu", "a 3-layer MLP in bf16 (a) and in f32 (b)", ["dtype:bf16=f32"], 0.02)
def _tpu_dtype(variant, topo):
    import jax.numpy as jnp
    t = jnp.bfloat16 if variant == "a" else jnp.float32
    return _mlp(), (_sds((256, 1024), t, topo), _sds((1024, 2048), t, topo),
                    _sds((2048, 2048), t, topo), _sds((2048, 512), t, topo)), {}


@pair("tpu_layout", "tpu",
      "a parameter s32[8192,1] with a requested row-major tiled layout {1,0:T(8,128)} (a, padded "
      "128x) and with XLA's default, the fix xlashape suggests (b)",
      ["layout:ids.1={0,1:T(1,128)}"], None)
def _tpu_layout(variant, topo):
    import jax
    import jax.numpy as jnp
    from jax.experimental.layout import Format, Layout

    dev = jax.sharding.SingleDeviceSharding(topo.devices[0])

    def lookup(ids, table):
        return ids.max(), (table * 2).sum(0)

    args = (_sds((8192, 1), jnp.int32, topo), _sds((4096, 512), jnp.float32, topo))
    if variant == "b":
        return lookup, args, {}
    ins = (Format(Layout(major_to_minor=(0, 1), tiling=((8, 128),)), dev), dev)
    return lookup, args, {"in_shardings": ins}


# --------------------------------------------------------------------------


def _versions():
    import jax
    import jaxlib
    out = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
           "python": ".".join(map(str, sys.version_info[:3]))}
    try:
        from importlib.metadata import version
        out["libtpu"] = version("libtpu")
    except Exception:  # noqa: BLE001 - libtpu is only there for TPU pairs
        pass
    return out


def child(name, variant, outdir):
    import jax

    p = PAIRS[name]
    topo = None
    if p["platform"] == "tpu":
        from jax.experimental import topologies
        topo = topologies.get_topology_desc(topology_name=TPU_CHIP, platform="tpu")
    fn, args, kwargs = p["build"](variant, topo)
    compiled = jax.jit(fn, **kwargs).lower(*args).compile()
    stats = compiled.memory_analysis()
    fields = {}
    for attr in sorted(dir(stats)):
        if attr.startswith("_"):
            continue
        value = getattr(stats, attr)
        if callable(value) or isinstance(value, bytes):
            continue
        fields[attr] = value
    info = {"pair": name, "variant": variant, "platform": p["platform"],
            "chip": TPU_CHIP if topo is not None else None, "module": "jit_" + fn.__name__,
            "description": p["description"], "jit_kwargs": sorted(kwargs),
            "memory_analysis": fields, "versions": _versions()}
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "child_result.json"), "w") as f:
        json.dump(info, f, indent=1)
    return 0


def scrub(text, where):
    text = text.replace(SCRIPT, SCRIPT_NAME)
    text = re.sub(r"/[^\s\"'<>]*?/site-packages/", "", text)
    m = FORBIDDEN.search(text)
    if m:
        start = max(0, m.start() - 80)
        raise SystemExit(f"{where}: a machine path is left after scrubbing: "
                         f"{text[start:m.end() + 80]!r}")
    return text


def generate(name, variant, out):
    dest = os.path.join(out, name, variant)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    with tempfile.TemporaryDirectory(prefix="whatif_") as tmp:
        work = os.path.join(tmp, "work")
        dump = os.path.join(tmp, "dump")
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump}"
                              " --xla_dump_hlo_as_text").strip())
        proc = subprocess.run([sys.executable, SCRIPT, "--child", name, variant, work],
                              env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"{name}/{variant}: child exited with {proc.returncode}:\n"
                             f"{proc.stderr[-3000:]}")
        with open(os.path.join(work, "child_result.json")) as f:
            info = json.load(f)
        marker = "." + info["module"] + "."
        kept = []
        for fname in sorted(os.listdir(dump)):
            path = os.path.join(dump, fname)
            if marker not in fname or not fname.startswith("module_"):
                continue
            if not any(fname.endswith(s) for s in DUMP_SUFFIXES):
                continue
            with open(path, encoding="utf-8") as f:
                text = scrub(f.read(), f"{name}/{variant}/{fname}")
            os.makedirs(os.path.join(dest, "dump"), exist_ok=True)
            with open(os.path.join(dest, "dump", fname), "w", encoding="utf-8") as f:
                f.write(text)
            kept.append(fname)
        if len(kept) != len(DUMP_SUFFIXES):
            raise SystemExit(f"{name}/{variant}: expected {len(DUMP_SUFFIXES)} dump files, "
                             f"got {kept}")
        info["dump_files"] = kept
        with open(os.path.join(dest, "memory_analysis.json"), "w") as f:
            json.dump(info, f, indent=1, sort_keys=True)
            f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", choices=("cpu", "tpu"), required="--child" not in (argv or sys.argv))
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only")
    ap.add_argument("--child", nargs=3, metavar=("PAIR", "VARIANT", "DIR"))
    args = ap.parse_args(argv)
    if args.child:
        return child(*args.child)
    names = [n for n, p in PAIRS.items() if p["platform"] == args.platform]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    index_path = os.path.join(args.out, "pairs.json")
    index = {}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    for name in names:
        for variant in ("a", "b"):
            generate(name, variant, args.out)
            print(f"{name}/{variant}")
        p = PAIRS[name]
        index[name] = {"platform": p["platform"], "description": p["description"],
                       "edits": p["edits"], "tolerance": p["tolerance"]}
    os.makedirs(args.out, exist_ok=True)
    with open(index_path, "w") as f:
        json.dump(dict(sorted(index.items())), f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
