"""Generate a real XLA:CPU corpus: ``tests/data/cpu_corpus`` (jax 0.10.x) or
``tests/data/cpu_corpus_jax0NN`` (jax 0.NN, e.g. ``cpu_corpus_jax012``).

Every program below is compiled by XLA:CPU from ``jax.ShapeDtypeStruct``
arguments (``jax.jit(f).lower(*args).compile()``: nothing is allocated, so the
shapes can be those of the XLA:GPU corpus). Each compile runs in its own
child process with
``XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_proto --xla_dump_hlo_as_text"``
(XLA reads its flags once per process).

For each program the corpus holds, in ``<out>/<program>/``:

* ``module.hlo``: ``compiled.as_text()``;
* ``memory_analysis.json``: every integer field of ``compiled.memory_analysis()``
  (XLA's ``CompiledMemoryStats``) as jax reports it, the length of its
  ``serialized_buffer_assignment_proto``, ``input_formats`` / ``output_formats``
  as text, the description, the module name and the versions;
* ``buffer_assignment.pb``: ``serialized_buffer_assignment_proto`` (a
  ``BufferAssignmentProto``) when it is not empty;
* ``dump/``: the dump files of the final (optimized) module, with XLA's names:
  ``*after_optimizations.txt``, ``*-buffer-assignment.txt``,
  ``*-buffer-assignment-values.txt``, ``*-live-range.txt``,
  ``*-memory-usage-report.txt`` / ``.pb`` and ``*after_optimizations.hlo.pb``
  (an ``HloProto``: module and buffer assignment). A file over ``MAX_FILE``
  bytes is dropped and listed in ``memory_analysis.json`` (``dump_dropped``).

Machine paths: in text, the absolute path of this script becomes its bare file
name and paths into ``site-packages`` become relative to it; in binary
``.pb`` files every such directory prefix is replaced by underscores of the
same length (so the protos stay valid). The run stops if an absolute path of
this machine is left in any file it writes.

Usage (with a Python that has jax and jaxlib; no accelerator)::

    python tests/oracle/gen_cpu_corpus.py [--out DIR] [--only NAME,...] [--list]

``--out`` defaults to ``$XLASHAPE_CPU_CORPUS_OUT``, else to the directory of the
installed jax's version: ``tests/data/cpu_corpus`` for jax 0.10.x (the first
corpus), ``tests/data/cpu_corpus_jax0NN`` for jax 0.NN. The same programs and
the same script serve every version (checked with jax/jaxlib 0.10.2 on Python
3.11 and 0.12.0.1 on Python 3.12); ``memory_analysis.json`` records the
versions and every integer field that version's ``memory_analysis()`` has.
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
DATA = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "data")
MAX_FILE = 900 * 1024

# Suffixes (after "after_optimizations") of the dump files kept for the final module.
DUMP_SUFFIXES = (".txt", "-buffer-assignment.txt", "-buffer-assignment-values.txt",
                 "-live-range.txt", "-memory-usage-report.txt", "-memory-usage-report.pb",
                 ".hlo.pb")

FORBIDDEN = re.compile(r"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/|/proc/|/dev/shm)")
FORBIDDEN_B = re.compile(FORBIDDEN.pattern.encode())

PROGRAMS = {}


def program(name, description):
    def register(builder):
        PROGRAMS[name] = dict(name=name, description=description, builder=builder)
        return builder
    return register


def _sds(shape, dtype, **kw):
    import jax
    return jax.ShapeDtypeStruct(shape, dtype, **kw)


# --------------------------------------------------------------------------
# Programs mirroring the XLA:GPU corpus (same shapes where the GPU one says).
# Each builder returns (fn, args, jit_kwargs).
# --------------------------------------------------------------------------

@program("mlp_f32", "Two-layer f32 MLP with tanh: x f32[512,1024] @ [1024,4096] @ [4096,1024]")
def _mlp():
    import jax.numpy as jnp

    def mlp_f32(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2

    f32 = jnp.float32
    return mlp_f32, (_sds((512, 1024), f32), _sds((1024, 4096), f32), _sds((4096, 1024), f32)), {}


@program("attention", "Plain softmax attention (no cuDNN on the CPU), non-causal, bf16 q/k/v "
                      "[2,512,8,64] (batch, sequence, heads, head dim)")
def _attention():
    import jax
    import jax.numpy as jnp

    def attention(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / 8.0
        p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v)

    bf = jnp.bfloat16
    return attention, tuple(_sds((2, 512, 8, 64), bf) for _ in range(3)), {}


@program("conv3x3_f16", "3x3 conv NHWC f16[8,64,64,32] -> 64 channels, ReLU, 2x2 average pool")
def _conv():
    import jax
    import jax.numpy as jnp

    def conv3x3_f16(x, k):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        n, h, w, c = y.shape
        return y.reshape(n, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))

    f16 = jnp.float16
    return conv3x3_f16, (_sds((8, 64, 64, 32), f16), _sds((3, 3, 32, 64), f16)), {}


@program("int8_gemm", "s8[256,1024] x s8[1024,512] -> s32")
def _int8():
    import jax
    import jax.numpy as jnp

    def int8_gemm(a, b):
        return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                   preferred_element_type=jnp.int32)

    return int8_gemm, (_sds((256, 1024), jnp.int8), _sds((1024, 512), jnp.int8)), {}


@program("int4_dequant", "s4[2048,512] weights dequantized with bf16 per-column scales, "
                         "x bf16[8,2048]")
def _int4():
    import jax.numpy as jnp

    def int4_dequant(x, w, scale):
        return x @ (w.astype(jnp.bfloat16) * scale)

    bf = jnp.bfloat16
    return int4_dequant, (_sds((8, 2048), bf), _sds((2048, 512), jnp.int4), _sds((512,), bf)), {}


@program("sort_1d", "jnp.sort and argsort of a f32[4000000] vector")
def _sort():
    import jax.numpy as jnp

    def sort_1d(x):
        return jnp.sort(x), jnp.argsort(x)

    return sort_1d, (_sds((4000000,), jnp.float32),), {}


@program("fori_cumulative", "fori_loop of 50 steps updating f32[1024,1024] with a matmul and a "
                            "running max")
def _fori():
    import jax
    import jax.numpy as jnp

    def fori_cumulative(x):
        def body(i, c):
            y, m = c
            y = jnp.tanh(y @ x) + i
            return y, jnp.maximum(m, y)
        return jax.lax.fori_loop(0, 50, body, (x, x))

    return fori_cumulative, (_sds((1024, 1024), jnp.float32),), {}


@program("sgd_donated", "SGD momentum step, params/momentum donated: f32 [2048,2048] x 3 and "
                        "[2048]")
def _sgd():
    import jax
    import jax.numpy as jnp

    def sgd_donated(params, mom, grads):
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, grads)
        params = jax.tree.map(lambda p, m: p - 0.01 * m, params, mom)
        return params, mom

    f32 = jnp.float32
    tree = lambda: [_sds((2048, 2048), f32), _sds((2048, 2048), f32),  # noqa: E731
                    _sds((2048, 2048), f32), _sds((2048,), f32)]
    return sgd_donated, (tree(), tree(), tree()), {"donate_argnums": (0, 1)}


@program("decode_small", "KV cache bf16[4,1024,4,64] decode step with donated caches: the new "
                         "token's k/v written at a dynamic position, attention over the cache")
def _decode():
    import jax
    import jax.numpy as jnp

    def decode_small(k_cache, v_cache, q, k_new, v_new, pos):
        k_cache = jax.lax.dynamic_update_slice(k_cache, k_new, (0, pos, 0, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v_new, (0, pos, 0, 0))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k_cache).astype(jnp.float32) / 8.0
        p = jax.nn.softmax(s, axis=-1).astype(v_cache.dtype)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v_cache), k_cache, v_cache

    bf = jnp.bfloat16
    return decode_small, (_sds((4, 1024, 4, 64), bf), _sds((4, 1024, 4, 64), bf),
                          _sds((4, 1, 4, 64), bf), _sds((4, 1, 4, 64), bf),
                          _sds((4, 1, 4, 64), bf), _sds((), jnp.int32)), {"donate_argnums": (0, 1)}


@program("solve", "LU solve of f32[4,256,256] systems and an SVD of f32[128,64] (LAPACK custom "
                  "calls on the CPU)")
def _solve():
    import jax.numpy as jnp

    def solve(a, b, m):
        x = jnp.linalg.solve(a, b)
        u, s, vt = jnp.linalg.svd(m, full_matrices=False)
        return x, u, s, vt

    f32 = jnp.float32
    return solve, (_sds((4, 256, 256), f32), _sds((4, 256, 8), f32), _sds((128, 64), f32)), {}


@program("offload", "pinned_host input f32[1024,2048] used on the device, output back to "
                    "pinned_host (S(5); XLA:CPU counts it as device memory)")
def _offload():
    import jax
    import jax.numpy as jnp

    dev = jax.devices("cpu")[0]
    host = jax.sharding.SingleDeviceSharding(dev, memory_kind="pinned_host")

    def offload(h):
        return jnp.sin(h) * 2

    return offload, (_sds((1024, 2048), jnp.float32, sharding=host),), {"out_shardings": host}


@program("remat_scan", "Gradient through lax.scan of 16 checkpointed tanh layers on "
                       "f32[1024,1024]")
def _remat():
    import jax
    import jax.numpy as jnp

    def remat_scan(x, ws):
        def loss(x, ws):
            @jax.checkpoint
            def layer(h, w):
                return jnp.tanh(h @ w), None
            h, _ = jax.lax.scan(layer, x, ws)
            return jnp.sum(h * h)
        return jax.grad(loss, argnums=1)(x, ws)

    f32 = jnp.float32
    return remat_scan, (_sds((1024, 1024), f32), _sds((16, 1024, 1024), f32)), {}


@program("constant_table", "A 4 MiB f32 lookup table constant gathered by s32[65536] ids (the "
                           "module protos are over the size limit and dropped)")
def _const_table():
    import numpy as np
    import jax.numpy as jnp

    table = np.sin(np.arange(1 << 20, dtype=np.float32))

    def constant_table(ids):
        return jnp.asarray(table)[ids]

    return constant_table, (_sds((65536,), jnp.int32),), {}


@program("constant_small", "A 256 KiB f32 lookup table constant gathered by s32[4096] ids (protos "
                           "kept)")
def _const_small():
    import numpy as np
    import jax.numpy as jnp

    table = np.cos(np.arange(1 << 16, dtype=np.float32))

    def constant_small(ids):
        return jnp.asarray(table)[ids] * 2

    return constant_small, (_sds((4096,), jnp.int32),), {}


@program("fft2", "2-D FFT of c64[64,512,512] and its magnitude")
def _fft():
    import jax.numpy as jnp

    def fft2(x):
        y = jnp.fft.fft2(x)
        return y, jnp.abs(y)

    return fft2, (_sds((64, 512, 512), jnp.complex64),), {}


@program("embedding_grad", "Gradient of an embedding lookup (scatter-add into f32[30000,512]) "
                           "with ids s32[16,512]")
def _emb():
    import jax
    import jax.numpy as jnp

    def embedding_grad(table, ids):
        return jax.grad(lambda t: jnp.sum(jnp.tanh(t[ids])))(table)

    return embedding_grad, (_sds((30000, 512), jnp.float32), _sds((16, 512), jnp.int32)), {}


@program("layer_norm_bf16", "LayerNorm in bf16 with f32 statistics on bf16[32,1024,2048]")
def _ln():
    import jax
    import jax.numpy as jnp

    def layer_norm_bf16(x, g, b):
        x32 = x.astype(jnp.float32)
        m = x32.mean(-1, keepdims=True)
        v = ((x32 - m) ** 2).mean(-1, keepdims=True)
        return ((x32 - m) * jax.lax.rsqrt(v + 1e-5)).astype(x.dtype) * g + b

    bf = jnp.bfloat16
    return layer_norm_bf16, (_sds((32, 1024, 2048), bf), _sds((2048,), bf), _sds((2048,), bf)), {}


# --- more programs (CPU only) ---------------------------------------------

@program("while_loop", "lax.while_loop with a dynamic trip count (s32[] argument) on "
                       "f32[256,512]")
def _while():
    import jax
    import jax.numpy as jnp

    def while_loop(x, n):
        def cond(c):
            return c[0] < n

        def body(c):
            i, y = c
            return i + 1, jnp.sin(y) @ y.T @ y

        return jax.lax.while_loop(cond, body, (jnp.int32(0), x))[1]

    return while_loop, (_sds((256, 512), jnp.float32), _sds((), jnp.int32)), {}


@program("cond_switch", "lax.switch with three branches, then a lax.cond, on f32[256,256]")
def _cond():
    import jax
    import jax.numpy as jnp

    def cond_switch(i, x):
        y = jax.lax.switch(i, [jnp.sin, lambda v: v @ v.T @ v, lambda v: v[::-1] * 2], x)
        return jax.lax.cond(y.sum() > 0, lambda v: v + 1, lambda v: v @ v, y)

    return cond_switch, (_sds((), jnp.int32), _sds((256, 256), jnp.float32)), {}


@program("reductions", "sum, max, argmax, logsumexp and a variance over different axes of "
                       "f32[64,256,512]")
def _red():
    import jax
    import jax.numpy as jnp

    def reductions(x):
        return (x.sum(), x.max(axis=0), jnp.argmax(x, axis=1), jax.nn.logsumexp(x, axis=-1),
                x.var(axis=(0, 2)))

    return reductions, (_sds((64, 256, 512), jnp.float32),), {}


@program("tuple_outputs", "twelve outputs of mixed types (f32, bf16, s8, s4, pred, u8, a scalar, "
                          "a transpose, a pass-through of the argument)")
def _tuple():
    import jax.numpy as jnp

    def tuple_outputs(x):
        return (x, x + 1, x.astype(jnp.bfloat16), x.sum(), x.astype(jnp.int8), x > 0,
                x.astype(jnp.int4), x[:, :1], x.T, jnp.cos(x), x.max(0), x.astype(jnp.uint8))

    return tuple_outputs, (_sds((64, 256), jnp.float32),), {}


@program("donated_alias", "x f32[1024,1024] donated and updated in place (x*2+y, aliased to "
                          "output 0), plus a second fresh output; y not donated")
def _alias():
    import jax.numpy as jnp

    def donated_alias(x, y):
        return x * 2 + y, (x @ y).sum(0)

    f32 = jnp.float32
    return donated_alias, (_sds((1024, 1024), f32), _sds((1024, 1024), f32)), \
        {"donate_argnums": (0,)}


@program("scan_rnn", "lax.scan over 64 steps of a tanh RNN cell on f32[32,512], stacked "
                     "per-step outputs")
def _scan():
    import jax
    import jax.numpy as jnp

    def scan_rnn(h0, xs, w, u):
        def cell(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h
        return jax.lax.scan(cell, h0, xs)

    f32 = jnp.float32
    return scan_rnn, (_sds((32, 512), f32), _sds((64, 32, 256), f32), _sds((512, 512), f32),
                      _sds((256, 512), f32)), {}


# --------------------------------------------------------------------------
# Child: compile one program and write what it saw.
# --------------------------------------------------------------------------


def _versions():
    import jax
    import jaxlib
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "python": ".".join(map(str, sys.version_info[:3]))}


def child(name, outdir):
    import jax

    prog = PROGRAMS[name]
    fn, args, kwargs = prog["builder"]()
    assert fn.__name__ == name, (fn.__name__, name)
    compiled = jax.jit(fn, **kwargs).lower(*args).compile()
    stats = compiled.memory_analysis()
    fields, proto = {}, b""
    for attr in sorted(dir(stats)):
        if attr.startswith("_"):
            continue
        value = getattr(stats, attr)
        if callable(value):
            continue
        if isinstance(value, bytes):
            fields[attr + "_length"] = len(value)
            if attr == "serialized_buffer_assignment_proto":
                proto = value
        else:
            fields[attr] = value
    info = {
        "program": name,
        "module": "jit_" + name,
        "platform": "cpu",
        "device_kind": jax.devices("cpu")[0].device_kind,
        "description": prog["description"],
        "jit_kwargs": sorted(kwargs),
        "memory_analysis": fields,
        "input_formats": str(compiled.input_formats),
        "output_formats": str(compiled.output_formats),
        "versions": _versions(),
    }
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "child_result.json"), "w") as f:
        json.dump(info, f, indent=1)
    with open(os.path.join(outdir, "child_module.hlo"), "w") as f:
        f.write(compiled.as_text())
    if proto:
        with open(os.path.join(outdir, "child_ba.pb"), "wb") as f:
            f.write(proto)
    return 0


# --------------------------------------------------------------------------
# Parent: run children, scrub, filter and write the corpus.
# --------------------------------------------------------------------------


def _site_packages():
    import sysconfig
    dirs = set()
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p) + "/")
            dirs.add(p + "/")
    return sorted(dirs, key=len, reverse=True)


def scrub_text(text, where):
    text = text.replace(SCRIPT, SCRIPT_NAME)
    text = re.sub(r"/[^\s\"'<>]*?/site-packages/", "", text)
    m = FORBIDDEN.search(text)
    if m:
        start = max(0, m.start() - 80)
        raise SystemExit(f"{where}: a machine path is left after scrubbing: "
                         f"{text[start:m.end() + 80]!r}")
    return text


def scrub_bytes(data, where):
    """Same-length replacement of machine directories in a binary proto."""
    for prefix in [os.path.dirname(SCRIPT) + "/"] + _site_packages():
        b = prefix.encode()
        data = data.replace(b, b"_" * len(b))
    m = FORBIDDEN_B.search(data)
    if m:
        start = max(0, m.start() - 80)
        raise SystemExit(f"{where}: a machine path is left after scrubbing: "
                         f"{data[start:m.end() + 80]!r}")
    return data


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def generate(name, out):
    dest = os.path.join(out, name)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    with tempfile.TemporaryDirectory(prefix="cpu_corpus_") as tmp:
        work = os.path.join(tmp, "work")
        dump = os.path.join(tmp, "dump")
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump}"
                              " --xla_dump_hlo_as_proto --xla_dump_hlo_as_text").strip())
        proc = subprocess.run([sys.executable, SCRIPT, "--child", name, "--child-dir", work],
                              env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"{name}: child exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
        with open(os.path.join(work, "child_result.json")) as f:
            info = json.load(f)
        with open(os.path.join(work, "child_module.hlo")) as f:
            _write(os.path.join(dest, "module.hlo"), scrub_text(f.read(), name + "/module.hlo"))
        ba = os.path.join(work, "child_ba.pb")
        if os.path.exists(ba):
            with open(ba, "rb") as f:
                _write(os.path.join(dest, "buffer_assignment.pb"),
                       scrub_bytes(f.read(), name + "/buffer_assignment.pb"))
        marker = "." + info["module"] + "."
        kept, dropped = [], []
        for fname in sorted(os.listdir(dump)):
            path = os.path.join(dump, fname)
            if marker not in fname or not os.path.isfile(path):
                continue
            if not any(fname.endswith("after_optimizations" + s) for s in DUMP_SUFFIXES):
                continue
            if os.path.getsize(path) > MAX_FILE:
                dropped.append(fname)
                continue
            with open(path, "rb") as f:
                data = f.read()
            where = f"{name}/dump/{fname}"
            if fname.endswith(".pb"):
                data = scrub_bytes(data, where)
            else:
                data = scrub_text(data.decode(), where)
            _write(os.path.join(dest, "dump", fname), data)
            kept.append(fname)
        modules = {f.split(".")[0] for f in kept}
        if not kept or len(modules) != 1:
            raise SystemExit(f"{name}: expected the files of one module, got {kept}")
        info["dump_files"] = kept
        info["dump_dropped"] = dropped
        info["buffer_assignment_proto"] = "buffer_assignment.pb" if os.path.exists(ba) else None
        _write(os.path.join(dest, "memory_analysis.json"),
               scrub_text(json.dumps(info, indent=1, sort_keys=True) + "\n",
                          name + "/memory_analysis.json"))
        return info


def default_out() -> str:
    """``tests/data/cpu_corpus`` for jax 0.10.x, ``cpu_corpus_jax0NN`` for jax
    0.NN (read from the installed distribution: jax is not imported here)."""
    from importlib.metadata import version
    major, minor = (int(x) for x in version("jax").split(".")[:2])
    if (major, minor) == (0, 10):
        return os.path.join(DATA, "cpu_corpus")
    return os.path.join(DATA, f"cpu_corpus_jax{major}{minor:02d}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("XLASHAPE_CPU_CORPUS_OUT"),
                    help="default: tests/data/cpu_corpus (jax 0.10.x) or "
                         "tests/data/cpu_corpus_jax0NN (jax 0.NN)")
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child, a.child_dir)
    if a.list:
        for p in PROGRAMS.values():
            print(f"{p['name']:18} {p['description']}")
        return 0
    names = a.only.split(",") if a.only else list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s): {', '.join(unknown)}")
    if a.out is None:
        a.out = default_out()
    os.makedirs(a.out, exist_ok=True)
    for name in names:
        info = generate(name, a.out)
        ma = info["memory_analysis"]
        print(f"{name}: ok (temp {ma.get('temp_size_in_bytes')}, peak "
              f"{ma.get('peak_memory_in_bytes')}, dropped {info['dump_dropped']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
