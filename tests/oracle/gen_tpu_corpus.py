"""Generate the real XLA:TPU corpus in ``tests/data/tpu_corpus``.

Every program below is compiled by XLA:TPU in compile-only mode (no TPU is
needed, only jax, jaxlib and libtpu; see the README of the corpus for the
versions). Each compile runs in its own child process: libtpu aborts the
process on some inputs, and flags such as ``XLA_FLAGS`` are read once per
process.

For each program the corpus holds, in ``<out>/<program>/``:

* ``module.hlo``: ``compiled.as_text()``;
* ``memory_analysis.json``: every field of ``compiled.memory_analysis()``,
  the chip, ``input_formats`` / ``output_formats`` as text, a description and
  the versions;
* ``tpu_compile_log.txt`` (when libtpu logs it; not for every compile): the
  compile summary libtpu writes to its INFO log
  (``TPU_LOG_DIR``): HBM/VMEM usage and "Program hbm requirement" with the
  "HLO temp" line that ``temp_size_in_bytes`` comes from;
* ``dump/`` (some programs): the files of ``XLA_FLAGS="--xla_dump_to=DIR
  --xla_dump_hlo_as_proto --xla_dump_hlo_as_text"`` that a reader needs, with
  XLA's own file names: the optimized module as text and as ``.hlo.pb`` (an
  ``HloProto``), its buffer assignment, values, live ranges and memory-usage
  report (``.txt`` and ``.pb``), and a small ``before_optimizations.txt``;
* ``buffer_assignment.pb``: ``memory_analysis().serialized_buffer_assignment_proto``
  when it is not empty (it is empty on XLA:TPU: the file is never written there);
* ``oom/`` (programs that do not fit): libtpu's WARNING log with the detailed
  out-of-memory report (compiled with ``--xla_tpu_no_crash_on_oom=true``) and
  the exception text of the same compile without that flag.

Machine paths are scrubbed from everything written: the absolute path of
this script becomes its bare file name, paths into ``site-packages`` become
relative to it (in binary ``.pb`` files such directory prefixes become
underscores of the same length, so the protos stay valid), and the run stops
if any other absolute path is left.

Usage (with a Python that has jax, jaxlib and libtpu)::

    python tests/oracle/gen_tpu_corpus.py [--out DIR] [--only NAME,...] [--list]

``--out`` defaults to ``$XLASHAPE_TPU_CORPUS_OUT`` or else
``tests/data/tpu_corpus`` next to this script's ``tests`` folder. libtpu is
found as jax finds it (``TPU_LIBRARY_PATH``, or the ``libtpu`` package);
``JAX_PLATFORMS=cpu`` keeps jax from looking for a real TPU.
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
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "data", "tpu_corpus")

V5E, V4, V5P, V6E = "v5e:2x2", "v4:2x2x1", "v5p:2x2x1", "v6e:2x2"

# Dump files a reader needs (XLA's names end with these); the rest (configs,
# flag files, protos, codegen listings) is dropped.
DUMP_KEEP = (
    "after_optimizations.txt",
    "after_optimizations-buffer-assignment.txt",
    "after_optimizations-buffer-assignment-values.txt",
    "after_optimizations-live-range.txt",
    "after_optimizations-memory-usage-report.txt",
    "after_optimizations-memory-usage-report.pb",
    "after_optimizations.hlo.pb",
)
DUMP_KEEP_IF_SMALL = ("before_optimizations.txt",)
SMALL = 64 * 1024
# A kept dump file larger than this is dropped (and listed as dump_dropped).
MAX_FILE = 900 * 1024
DUMP_FLAGS = "--xla_dump_hlo_as_proto --xla_dump_hlo_as_text"

FORBIDDEN = re.compile(r"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/)")
FORBIDDEN_B = re.compile(FORBIDDEN.pattern.encode())


# --------------------------------------------------------------------------
# Programs. Each builder runs in the child, returns (fn, args, jit_kwargs)
# where args are ShapeDtypeStructs placed on the topology.
# --------------------------------------------------------------------------

PROGRAMS = {}


def program(name, chip, description, dump=False, oom=False, devices=1):
    def register(builder):
        PROGRAMS[name] = dict(name=name, chip=chip, description=description,
                              dump=dump, oom=oom, devices=devices, builder=builder)
        return builder
    return register


def _single(topo):
    import jax
    return jax.sharding.SingleDeviceSharding(topo.devices[0])


def _sds(topo, shape, dtype, sharding=None):
    import jax
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding or _single(topo))


def _mlp(topo):
    import jax
    import jax.numpy as jnp

    def mlp(x, w1, b1, w2, b2):
        h = jax.nn.gelu(jnp.einsum("bsd,df->bsf", x, w1) + b1)
        return jnp.einsum("bsf,fd->bsd", h, w2) + b2

    bf = jnp.bfloat16
    return mlp, (_sds(topo, (16, 1, 512), bf), _sds(topo, (512, 2048), bf),
                 _sds(topo, (2048,), bf), _sds(topo, (2048, 512), bf),
                 _sds(topo, (512,), bf)), {}


for _chip, _suffix in ((V5E, ""), (V4, "_v4"), (V6E, "_v6e")):
    program("mlp" + _suffix, _chip,
            "two-layer GELU MLP on a bf16[16,1,512] activation (batch, 1 token, width)",
            dump=(_chip == V5E))(_mlp)


def _attention(topo):
    import jax
    import jax.numpy as jnp

    def attention(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
        s = s.astype(jnp.float32)
        mask = jnp.tril(jnp.ones((q.shape[2], k.shape[2]), jnp.bool_))
        s = jnp.where(mask, s, -1e30)
        p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v)

    bf = jnp.bfloat16
    shape = (2, 4, 128, 64)
    return attention, tuple(_sds(topo, shape, bf) for _ in range(3)), {}


program("attention", V5E, "causal softmax attention, bf16[2,4,128,64] q/k/v (head dim 64)",
        dump=True)(_attention)
program("attention_v5p", V5P, "causal softmax attention, bf16[2,4,128,64] q/k/v, on v5p")(_attention)


def _conv(topo):
    import jax
    import jax.numpy as jnp

    def conv(img, k1, k2):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.lax.conv_general_dilated(img, k1, (1, 1), "SAME", dimension_numbers=dn)
        h = jax.nn.relu(h)
        return jax.lax.conv_general_dilated(h, k2, (2, 2), "SAME", dimension_numbers=dn)

    bf = jnp.bfloat16
    return conv, (_sds(topo, (4, 32, 32, 3), bf), _sds(topo, (3, 3, 3, 32), bf),
                  _sds(topo, (3, 3, 32, 64), bf)), {}


program("conv", V5E, "two NHWC convolutions on a bf16[4,32,32,3] image (3 input channels)",
        dump=True)(_conv)
program("conv_v6e", V6E, "two NHWC convolutions on a bf16[4,32,32,3] image, on v6e")(_conv)


def _conv_rgb(topo):
    import jax
    import jax.numpy as jnp

    def conv_layer(img, kernel, bias):
        y = jax.lax.conv_general_dilated(img, kernel, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y + bias)

    bf = jnp.bfloat16
    return conv_layer, (_sds(topo, (8, 64, 64, 3), bf), _sds(topo, (3, 3, 3, 32), bf),
                        _sds(topo, (32,), bf)), {}


program("example_conv_rgb", V5E,
        "the README's example: a first conv layer (3x3, 3 -> 32 channels, ReLU) on a batch of "
        "8 RGB 64x64 images; its dump directory is example_dump/", dump="example_dump")(_conv_rgb)


def _matmul_int8(topo):
    import jax
    import jax.numpy as jnp

    def matmul_int8(x, w, scale):
        acc = jax.lax.dot_general(x, w, (((1,), (0,)), ((), ())),
                                  preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * scale

    return matmul_int8, (_sds(topo, (256, 512), jnp.int8), _sds(topo, (512, 384), jnp.int8),
                         _sds(topo, (384,), jnp.float32)), {}


program("matmul_int8", V5E, "int8 x int8 -> int32 matmul with a per-column f32 scale")(_matmul_int8)
program("matmul_int8_v6e", V6E, "int8 x int8 -> int32 matmul with a per-column f32 scale, on v6e")(
    _matmul_int8)


def _matmul_int4(topo):
    import jax.numpy as jnp

    def matmul_int4(x, w, scale):
        return (x @ w.astype(jnp.bfloat16)) * scale

    return matmul_int4, (_sds(topo, (64, 1024), jnp.bfloat16), _sds(topo, (1024, 256), jnp.int4),
                         _sds(topo, (256,), jnp.bfloat16)), {}


program("matmul_int4", V5E, "bf16 activations times int4 weights (converted in the kernel)")(
    _matmul_int4)


def _matmul_fp8(topo):
    import jax
    import jax.numpy as jnp

    def matmul_fp8(x, w):
        return jax.lax.dot_general(x, w, (((1,), (0,)), ((), ())),
                                   preferred_element_type=jnp.float32)

    return matmul_fp8, (_sds(topo, (128, 256), jnp.float8_e4m3fn),
                        _sds(topo, (256, 128), jnp.float8_e5m2)), {}


program("matmul_fp8", V5E, "f8e4m3fn x f8e5m2 -> f32 matmul")(_matmul_fp8)


def _embedding(topo):
    import jax.numpy as jnp

    def embed(ids, table):
        return jnp.take(table, ids[:, 0], axis=0)

    return embed, (_sds(topo, (1024, 1), jnp.int32), _sds(topo, (8192, 256), jnp.bfloat16)), {}


program("embedding_gather", V5E, "embedding lookup: s32[1024,1] ids into a bf16[8192,256] table",
        dump=True)(_embedding)


def _scan(topo):
    import jax
    import jax.numpy as jnp

    def rnn(h0, xs, w, u):
        def cell(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h.sum(-1)
        return jax.lax.scan(cell, h0, xs)

    f32 = jnp.float32
    return rnn, (_sds(topo, (8, 128), f32), _sds(topo, (16, 8, 64), f32),
                 _sds(topo, (128, 128), f32), _sds(topo, (64, 128), f32)), {}


program("scan", V5E, "lax.scan over 16 steps of a tanh RNN cell, stacked per-step sums")(_scan)


def _while(topo):
    import jax
    import jax.numpy as jnp

    def loop(x, n):
        def cond(c):
            i, _ = c
            return i < n

        def body(c):
            i, y = c
            return i + 1, jnp.sin(y) @ y.T @ y

        return jax.lax.while_loop(cond, body, (jnp.int32(0), x))[1]

    return loop, (_sds(topo, (128, 256), jnp.float32), _sds(topo, (), jnp.int32)), {}


program("while_loop", V5E, "lax.while_loop with a dynamic trip count (s32[] argument)",
        dump=True)(_while)


def _train_step(topo):
    import jax
    import jax.numpy as jnp

    def loss(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        p = h @ params["w2"] + params["b2"]
        return jnp.mean((p - y) ** 2)

    def train_step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        new = jax.tree.map(lambda p, d: p - 0.01 * d, params, g)
        return new, l

    f32 = jnp.float32
    params = {"w1": _sds(topo, (256, 512), f32), "b1": _sds(topo, (512,), f32),
              "w2": _sds(topo, (512, 10), f32), "b2": _sds(topo, (10,), f32)}
    return train_step, (params, _sds(topo, (32, 256), f32), _sds(topo, (32, 10), f32)), \
        {"donate_argnums": 0}


program("train_step_donated", V5E,
        "SGD step of a 2-layer MLP, params donated (donate_argnums=0 -> input_output_alias)",
        dump=True)(_train_step)


def _host_offload(topo):
    import jax
    import jax.numpy as jnp

    dev = _single(topo)
    host = jax.sharding.SingleDeviceSharding(topo.devices[0], memory_kind="pinned_host")

    def offload(x, saved):
        y = jnp.tanh(x) * 2
        return y, (saved + 1)

    args = (jax.ShapeDtypeStruct((256, 512), jnp.float32, sharding=dev),
            jax.ShapeDtypeStruct((128, 256), jnp.float32, sharding=host))
    return offload, args, {"out_shardings": (host, host)}


program("host_offload", V5E,
        "arguments and outputs in pinned host memory (memory_kind='pinned_host' -> S(5))",
        dump=True)(_host_offload)


def _tuple_outputs(topo):
    import jax.numpy as jnp

    def many(x):
        return (x, x + 1, x.astype(jnp.bfloat16), x.sum(), x.astype(jnp.int8),
                x > 0, x.astype(jnp.int4), x[:, :1], x.T, jnp.cos(x), x.max(0), x * 3)

    return many, (_sds(topo, (64, 256), jnp.float32),), {}


program("tuple_outputs", V5E,
        "twelve outputs of mixed types (f32, bf16, s8, s4, pred, a scalar): a 12-entry result tuple")(
    _tuple_outputs)


for _chip, _suffix in ((V4, "_v4"), (V5P, "_v5p"), (V6E, "_v6e")):
    program("tuple_outputs" + _suffix, _chip,
            "the twelve mixed outputs of tuple_outputs on " + _chip.split(":")[0],
            dump=(_chip == V6E))(_tuple_outputs)


def _wide_tuple(topo):
    import jax.numpy as jnp

    def wide(x):
        return tuple(x[i] * i for i in range(150))

    return wide, (_sds(topo, (150, 128), jnp.float32),), {}


for _chip, _suffix in ((V5E, ""), (V6E, "_v6e")):
    program("tuple_outputs_150" + _suffix, _chip,
            "150 f32[128] outputs: how the result tuple's index table grows, on "
            + _chip.split(":")[0])(_wide_tuple)


def _tuple_params(topo):
    import jax.numpy as jnp

    def many_args(*xs):
        # only two of them are used: the module stays small, the parameter
        # tuple (and argument_size_in_bytes) still holds all 2001
        return xs[0] * xs[2000] + xs[1000]

    # jax passes a single tuple-shaped parameter to XLA:TPU when a program has
    # more than 2000 arguments.
    return many_args, tuple(_sds(topo, (), jnp.float32) for _ in range(2001)), {"keep_unused": True}


program("tuple_params", V5E,
        "2001 f32[] arguments (3 used): jax hands XLA:TPU one tuple-shaped parameter (more than "
        "2000)")(
    _tuple_params)


def _padding(topo):
    import jax
    import jax.numpy as jnp
    from jax.experimental.layout import Format, Layout

    dev = _single(topo)

    def padded(act, ids, coords, flags, h):
        return act.sum(), ids.max(), coords * 2, ~flags, h * 2, ids + 1

    # Row-major tiled layouts requested explicitly: the size-1 dimension sits
    # in the tile and is padded to its height. (XLA:TPU accepts them on
    # parameters and results; an elementwise fusion on such a parameter is
    # refused with a RET_CHECK asking for T(1,128), so the padded parameters
    # are only reduced.)
    def row_major(rank, tiling):
        return Format(Layout(major_to_minor=tuple(range(rank)), tiling=tiling), dev)

    f32_tile, bf16_tile = ((8, 128),), ((8, 128), (2, 1))
    args = (jax.ShapeDtypeStruct((8, 1, 1280), jnp.float32, sharding=dev),
            jax.ShapeDtypeStruct((4096, 1), jnp.int32, sharding=dev),
            jax.ShapeDtypeStruct((7, 9, 5), jnp.float32, sharding=dev),
            jax.ShapeDtypeStruct((1000, 3), jnp.bool_, sharding=dev),
            jax.ShapeDtypeStruct((16, 1, 512), jnp.bfloat16, sharding=dev))
    ins = (row_major(3, f32_tile), row_major(2, f32_tile), dev, dev, dev)
    outs = (dev, dev, dev, dev, row_major(3, bf16_tile), row_major(2, f32_tile))
    return padded, args, {"in_shardings": ins, "out_shardings": outs}


program("padding", V5E,
        "requested row-major tiled layouts: f32[8,1,1280], s32[4096,1] and bf16[16,1,512] padded "
        "in the tile (arguments and results); f32[7,9,5] and pred[1000,3] as XLA lays them out")(
    _padding)


def _decode_step(topo):
    import jax
    import jax.numpy as jnp

    def decode(cache, new, pos):
        return jax.lax.dynamic_update_slice(cache, new, (0, pos, 0, 0))

    bf = jnp.bfloat16
    return decode, (_sds(topo, (8, 256, 4, 128), bf), _sds(topo, (8, 1, 4, 128), bf),
                    _sds(topo, (), jnp.int32)), {"donate_argnums": 0}


program("kv_cache_update", V5E,
        "decode step: a bf16[8,1,4,128] token written into a donated bf16[8,256,4,128] KV cache")(
    _decode_step)


# --- in-place updates: values that share their operand's buffer ----------
# (the heap simulator's SHARE_WITH: dynamic-update-slice, scatter, loop
# fusions reusing an operand, loop-carried buffers; issue 30)


def _kv_decode(donate):
    def build(topo):
        import jax
        import jax.numpy as jnp

        def decode(params, k_cache, v_cache, x, pos):
            # one attention layer's decode step for a batch of tokens: the new
            # key and value are written into the caches with
            # dynamic_update_slice, then attended over
            b, s, h, d = k_cache.shape
            q = (x @ params["wq"]).reshape(b, 1, h, d)
            k = (x @ params["wk"]).reshape(b, 1, h, d).astype(k_cache.dtype)
            v = (x @ params["wv"]).reshape(b, 1, h, d).astype(v_cache.dtype)
            k_cache = jax.lax.dynamic_update_slice(k_cache, k, (0, pos, 0, 0))
            v_cache = jax.lax.dynamic_update_slice(v_cache, v, (0, pos, 0, 0))
            scores = jnp.einsum("bqhd,bkhd->bhqk", q, k_cache).astype(jnp.float32)
            scores = jnp.where(jnp.arange(s) <= pos, scores / jnp.sqrt(jnp.float32(d)), -1e30)
            p = jax.nn.softmax(scores, axis=-1).astype(v_cache.dtype)
            o = jnp.einsum("bhqk,bkhd->bqhd", p, v_cache).reshape(b, h * d)
            return x + o @ params["wo"], k_cache, v_cache

        bf = jnp.bfloat16
        b, s, h, d = 8, 256, 4, 128
        params = {k: _sds(topo, (h * d, h * d), bf) for k in ("wq", "wk", "wv", "wo")}
        cache = _sds(topo, (b, s, h, d), bf)
        return decode, (params, cache, cache, _sds(topo, (b, h * d), bf),
                        _sds(topo, (), jnp.int32)), (
            {"donate_argnums": (1, 2)} if donate else {})
    return build


program("kv_decode_donated", V5E,
        "attention decode step: new key/value written with dynamic_update_slice into donated "
        "bf16[8,256,4,128] K and V caches, then attended over", dump=True)(_kv_decode(True))
program("kv_decode", V5E,
        "the same decode step with caches not donated (the updated caches are new outputs)",
        dump=True)(_kv_decode(False))


def _bottleneck_train(topo):
    import jax
    import jax.numpy as jnp

    def norm(h, g, b):
        # batch-norm-ish: centred over the batch and pixels, scaled, shifted (f32)
        h32 = h.astype(jnp.float32)
        return ((h32 - h32.mean((0, 1, 2))) * g + b).astype(h.dtype)

    def block(p, x):
        dn = ("NHWC", "HWIO", "NHWC")

        def conv(h, w):
            return jax.lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=dn)
        h = jax.nn.relu(norm(conv(x, p["w1"]), p["g1"], p["b1"]))
        h = jax.nn.relu(norm(conv(h, p["w2"]), p["g2"], p["b2"]))
        h = norm(conv(h, p["w3"]), p["g3"], p["b3"])
        return jax.nn.relu(h + x)

    def loss(p, x, y):
        return jnp.mean((block(p, x).astype(jnp.float32) - y) ** 2)

    def train_step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree.map(lambda a, d: a - (0.1 * d).astype(a.dtype), p, g), l

    bf, f32 = jnp.bfloat16, jnp.float32
    c, m = 128, 32
    p = {"w1": _sds(topo, (1, 1, c, m), bf), "w2": _sds(topo, (3, 3, m, m), bf),
         "w3": _sds(topo, (1, 1, m, c), bf)}
    for i, k in ((1, m), (2, m), (3, c)):
        p[f"g{i}"] = _sds(topo, (k,), f32)
        p[f"b{i}"] = _sds(topo, (k,), f32)
    return train_step, (p, _sds(topo, (8, 16, 16, c), bf), _sds(topo, (8, 16, 16, c), f32)), \
        {"donate_argnums": 0}


program("bottleneck_train", V5E,
        "ResNet bottleneck block train step, bf16: 1x1, 3x3, 1x1 convolutions (128 -> 32 -> 32 -> "
        "128 channels) with batch-norm-ish scaling and ReLU, residual, mean-squared loss, "
        "gradients and SGD on donated params, bf16[8,16,16,128]", dump=True)(_bottleneck_train)


def _scatter_add(rows, cols, updates):
    def build(topo):
        import jax.numpy as jnp

        def scatter_add(x, idx, upd):
            # into the donated argument, and into a temporary (x * 2)
            y = x.at[idx].add(upd)
            z = (x * 2).at[idx].add(upd)
            return y, z.sum(0)

        f32 = jnp.float32
        return scatter_add, (_sds(topo, (rows, cols), f32), _sds(topo, (updates,), jnp.int32),
                             _sds(topo, (updates, cols), f32)), {"donate_argnums": 0}
    return build


program("scatter_add_donated", V5E,
        "scatter-add of f32[64,256] rows into a donated f32[1024,256] and into a temporary "
        "(in VMEM)", dump=True)(_scatter_add(1024, 256, 64))
program("scatter_add_hbm", V5E,
        "the same at f32[65536,1024] (4096 rows added): the temporary is updated in place in HBM",
        dump=True)(_scatter_add(65536, 1024, 4096))


def _while_dus(topo):
    import jax
    import jax.numpy as jnp

    def fill(x, w):
        # a while loop carrying a buffer that each step updates in place
        def body(i, buf):
            row = jnp.tanh(x[i] @ w + buf[i - 1])
            return jax.lax.dynamic_update_slice(buf, row[None], (i, 0))
        buf = jnp.zeros((x.shape[0], w.shape[1]), x.dtype)
        return jax.lax.fori_loop(1, x.shape[0], body, buf) * 2

    f32 = jnp.float32
    return fill, (_sds(topo, (64, 256), f32), _sds(topo, (256, 256), f32)), {}


program("while_dus", V5E,
        "fori_loop carrying an f32[64,256] buffer updated row by row with dynamic_update_slice",
        dump=True)(_while_dus)


def _axpb(topo):
    import jax.numpy as jnp

    def axpb(x, a, b):
        # an elementwise update of a donated buffer, and the same of a temporary
        t = jnp.sin(x)
        return x * a + b, (t * a + b).sum()

    f32 = jnp.float32
    return axpb, (_sds(topo, (512, 1024), f32), _sds(topo, (1024,), f32),
                  _sds(topo, (1024,), f32)), {"donate_argnums": 0}


program("axpb_donated", V5E,
        "x * a + b on a donated f32[512,1024] (in place) and on a temporary sin(x)",
        dump=True)(_axpb)


def _fusion_reuse(topo):
    import jax.numpy as jnp

    def sorts(x):
        # an elementwise fusion between two sorts, on an f32[8192,4096] that
        # lives in HBM: its output takes its operand's buffer, as do the sorts
        y = jnp.sort(x, axis=0)
        z = jnp.tanh(y) * 2 + 1
        return jnp.sort(z, axis=1)[:, :8]

    return sorts, (_sds(topo, (8192, 4096), jnp.float32),), {}


program("fusion_reuse", V5E,
        "sort, an elementwise fusion, sort on f32[8192,4096] in HBM: the fusion and the sorts "
        "reuse their operands' buffers", dump=True)(_fusion_reuse)


def _mesh(topo):
    import numpy as np
    import jax
    return jax.sharding.Mesh(np.array(topo.devices[:4]).reshape(2, 2), ("x", "y"))


def _collectives(topo):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh(topo)

    def step(x, w):
        h = x @ w                     # contracting over the sharded dim: all-reduce
        return jax.nn.relu(h).sum(0), h

    x = jax.ShapeDtypeStruct((256, 512), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    w = jax.ShapeDtypeStruct((512, 256), jnp.float32, sharding=NamedSharding(mesh, P("y", None)))
    return step, (x, w), {"out_shardings": (NamedSharding(mesh, P()),
                                            NamedSharding(mesh, P(None, "x")))}


program("collectives", V5E,
        "4 devices on a 2x2 mesh: a sharded matmul that needs all-reduce and all-gather",
        dump=True, devices=4)(_collectives)
program("collectives_v4", V4, "4 devices (v4 2x2x1): sharded matmul with all-reduce / all-gather",
        devices=4)(_collectives)


def _shard_map(topo):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh(topo)

    def body(x):
        s = jax.lax.psum(x.sum(0, keepdims=True), "x")
        g = jax.lax.all_gather(x, "y", tiled=True)
        return s, g

    f = jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=(P(None, "y"), P("x", None)),
                      check_vma=False)
    x = jax.ShapeDtypeStruct((64, 256), jnp.bfloat16, sharding=NamedSharding(mesh, P("x", "y")))
    return f, (x,), {}


program("shard_map_psum_allgather", V5E,
        "shard_map on a 2x2 mesh: psum over one axis and a tiled all_gather over the other",
        devices=4)(_shard_map)


def _shard_map_async(topo):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh(topo)

    def body(x, w):
        n = jax.lax.axis_size("x")
        y = jax.lax.ppermute(x, "x", [(i, (i + 1) % n) for i in range(n)])
        g = jax.lax.all_gather(w, "y", tiled=True)
        h = y @ g
        return jax.lax.psum(h, "y"), jax.lax.psum_scatter(h, "x", scatter_dimension=0, tiled=True)

    f = jax.shard_map(body, mesh=mesh, in_specs=(P("x", None), P("y", None)),
                      out_specs=(P("x", None), P("x", "y")), check_vma=False)
    x = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16, sharding=NamedSharding(mesh, P("x", None)))
    w = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16, sharding=NamedSharding(mesh, P("y", None)))
    return f, (x, w), {}


program("collectives_async", V5E,
        "shard_map on a 2x2 mesh: ppermute (async collective-permute-start/done), all-gather, "
        "all-reduce, reduce-scatter", dump=True, devices=4)(_shard_map_async)


def _cond(topo):
    import jax
    import jax.numpy as jnp

    def branches(i, x):
        y = jax.lax.switch(i, [lambda v: jnp.sin(v), lambda v: v @ v.T @ v, lambda v: v[::-1] * 2], x)
        z = jax.lax.cond(y.sum() > 0, lambda v: v + 1, lambda v: v - 1, y)
        return z

    return branches, (_sds(topo, (), jnp.int32), _sds(topo, (128, 128), jnp.float32)), {}


program("cond_switch", V5E, "lax.switch with three branches then a lax.cond on a pred")(_cond)


def _scalars(topo):
    import jax.numpy as jnp

    def scalars(a, b, c, p):
        return a * b, (a > b) & p, c + 1, jnp.where(p, a, b), a.astype(jnp.bfloat16)

    return scalars, (_sds(topo, (), jnp.float32), _sds(topo, (), jnp.float32),
                     _sds(topo, (), jnp.int32), _sds(topo, (), jnp.bool_)), {}


program("scalars_pred", V5E, "scalar f32/s32/pred arguments and results")(_scalars)


def _small_types(topo):
    import jax.numpy as jnp

    def small(a4, b4, u8, s8, f8, p):
        x = a4.astype(jnp.int8) + b4.astype(jnp.int8)
        return (x.astype(jnp.int4), (u8 // 3).astype(jnp.uint4), s8 * 2,
                (f8.astype(jnp.float32) * 2).astype(jnp.float8_e5m2), p & (s8 > 0))

    shape = (256, 384)
    return small, (_sds(topo, shape, jnp.int4), _sds(topo, shape, jnp.int4),
                   _sds(topo, shape, jnp.uint8), _sds(topo, shape, jnp.int8),
                   _sds(topo, shape, jnp.float8_e4m3fn), _sds(topo, shape, jnp.bool_)), {}


program("small_types", V5E, "s4, u4, u8, s8, f8e4m3fn, f8e5m2 and pred arrays of [256,384]")(
    _small_types)
program("small_types_v6e", V6E, "s4, u4, u8, s8, f8 and pred arrays of [256,384], on v6e")(
    _small_types)


def _layernorm(topo):
    import jax
    import jax.numpy as jnp

    def layernorm(x, g, b):
        x32 = x.astype(jnp.float32)
        m = x32.mean(-1, keepdims=True)
        v = ((x32 - m) ** 2).mean(-1, keepdims=True)
        return ((x32 - m) * jax.lax.rsqrt(v + 1e-6) * g + b).astype(x.dtype), m, v

    return layernorm, (_sds(topo, (4, 128, 768), jnp.bfloat16), _sds(topo, (768,), jnp.float32),
                       _sds(topo, (768,), jnp.float32)), {}


program("layernorm_stats", V5E,
        "layer norm that also returns its f32[4,128,1] mean and variance (keepdims)")(_layernorm)


def _sort_topk(topo):
    import jax
    import jax.numpy as jnp

    def topk(x):
        v, i = jax.lax.top_k(x, 8)
        return v, i, jnp.sort(x, axis=-1)

    return topk, (_sds(topo, (32, 1000), jnp.float32),), {}


program("sort_topk", V5E, "top-8 of 1000 logits (values and s32 indices) and a full sort")(_sort_topk)


# --- programs that do not fit in HBM -------------------------------------


def _oom_padded_outputs(topo):
    import jax
    import jax.numpy as jnp
    from jax.experimental.layout import Format, Layout

    dev = _single(topo)
    fmt = Format(Layout(major_to_minor=(0, 1, 2, 3), tiling=((8, 128), (2, 1))), dev)

    def expand(x):
        y = x[:, :, None, :]
        return tuple(y + i for i in range(7))

    x = jax.ShapeDtypeStruct((8, 1280, 16384), jnp.bfloat16, sharding=dev)
    return expand, (x,), {"out_shardings": tuple([fmt] * 7)}


program("oom_padded_outputs", V5E,
        "OOM dominated by padding: 7 bf16[8,1280,1,16384] outputs in a requested row-major "
        "(8,128)(2,1) layout, 8x padded (17.5G padded, 2.2G unpadded)", oom=True, dump=True)(
    _oom_padded_outputs)


def _oom_temps(topo):
    import jax
    import jax.numpy as jnp

    def temps(x, w):
        hs = [jnp.sin(x @ w + i) for i in range(8)]
        hs = jax.lax.optimization_barrier(hs)
        return sum(h.sum() for h in hs)

    f32 = jnp.float32
    return temps, (_sds(topo, (65536, 8192), f32), _sds(topo, (8192, 8192), f32)), {}


program("oom_temps", V5E,
        "OOM from temporaries: eight f32[65536,8192] matmul results (2G each) kept live by an "
        "optimization_barrier", oom=True, dump=True)(_oom_temps)


def _oom_padded_temps(topo):
    import jax
    import jax.numpy as jnp

    def temps(x):
        hs = [x * (i + 2) for i in range(8)]
        hs = jax.lax.optimization_barrier(hs)
        return sum(h.sum() for h in hs)

    return temps, (_sds(topo, (1 << 27, 3), jnp.float32),), {}


program("oom_padded_temps", V5E,
        "OOM from padding of temporaries: eight f32[134217728,3] kept live, laid out "
        "{0,1:T(4,128)} (2G each for 1.5G): 18G used, 13.5G without padding", oom=True, dump=True)(
    _oom_padded_temps)


def _oom_args_v4(topo):
    import jax.numpy as jnp

    def big(a, b, c):
        return a + b + c

    f32 = jnp.float32
    return big, tuple(_sds(topo, (4, 1024, 1024, 1024), f32) for _ in range(3)), {}


program("oom_arguments_v4", V4,
        "OOM on v4 from arguments alone: three f32[4,1024,1024,1024] (16G each)", oom=True)(
    _oom_args_v4)


def _oom_int8_v6e(topo):
    import jax
    import jax.numpy as jnp

    def stack(ids, table):
        rows = jnp.take(table, ids[:, 0], axis=0)
        return jax.lax.optimization_barrier([rows, rows.astype(jnp.float32)])

    return stack, (_sds(topo, (1 << 21, 1), jnp.int32), _sds(topo, (32000, 4096), jnp.bfloat16)), {}


program("oom_gather_v6e", V6E,
        "OOM on v6e: gathering 2M rows of a bf16 embedding table, bf16 and f32 copies kept", oom=True)(
    _oom_int8_v6e)


# Programs registered above without a dump that keep one too (the peak and
# live-range figures need the dump's live ranges, values and HloProto).
for _name in ("attention_v5p", "cond_switch", "kv_cache_update", "layernorm_stats", "matmul_int8",
              "mlp_v4", "mlp_v6e", "padding", "scan", "small_types", "sort_topk", "tuple_outputs"):
    PROGRAMS[_name]["dump"] = True


# --------------------------------------------------------------------------
# Child: compile one program and write what it saw.
# --------------------------------------------------------------------------


def _versions():
    import importlib.metadata as md
    import jax
    import jaxlib
    try:
        libtpu = md.version("libtpu")
    except md.PackageNotFoundError:  # pragma: no cover - depends on install
        libtpu = "unknown"
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "libtpu": libtpu}


def child(name, outdir, mode):
    """Compile one program; write module.hlo / memory_analysis.json or the error."""
    import jax
    from jax.experimental import topologies

    prog = PROGRAMS[name]
    topo = topologies.get_topology_desc(topology_name=prog["chip"], platform="tpu")
    fn, args, kwargs = prog["builder"](topo)
    info = {
        "program": name,
        "description": prog["description"],
        "chip": prog["chip"],
        "device_kind": topo.devices[0].device_kind,
        "num_devices_used": prog["devices"],
        "jit_kwargs": sorted(kwargs),
        "versions": _versions(),
    }
    os.makedirs(outdir, exist_ok=True)
    try:
        compiled = jax.jit(fn, **kwargs).lower(*args).compile()
    except Exception as e:  # the OOM programs end here
        info["exception_type"] = type(e).__module__ + "." + type(e).__name__
        info["exception"] = str(e)
        with open(os.path.join(outdir, "child_error.json"), "w") as f:
            json.dump(info, f, indent=1)
        return 0
    stats = compiled.memory_analysis()
    fields = {}
    for attr in sorted(dir(stats)):
        if attr.startswith("_"):
            continue
        value = getattr(stats, attr)
        if callable(value):
            continue
        if isinstance(value, bytes):
            fields[attr + "_length"] = len(value)
            if attr == "serialized_buffer_assignment_proto" and value:
                with open(os.path.join(outdir, "child_ba.pb"), "wb") as f:
                    f.write(value)
        else:
            fields[attr] = value
    info["memory_analysis"] = fields
    info["input_formats"] = _formats_text(compiled.input_formats)
    info["output_formats"] = _formats_text(compiled.output_formats)
    with open(os.path.join(outdir, "child_result.json"), "w") as f:
        json.dump(info, f, indent=1)
    with open(os.path.join(outdir, "child_module.hlo"), "w") as f:
        f.write(compiled.as_text())
    return 0


# --------------------------------------------------------------------------
# Parent: run children, scrub, filter and write the corpus.
# --------------------------------------------------------------------------


def scrub(text, where):
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
    import sysconfig
    prefixes = {os.path.dirname(SCRIPT) + "/"}
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            prefixes.update({p + "/", os.path.realpath(p) + "/"})
    for prefix in sorted(prefixes, key=len, reverse=True):
        b = prefix.encode()
        data = data.replace(b, b"_" * len(b))
    m = FORBIDDEN_B.search(data)
    if m:
        start = max(0, m.start() - 80)
        raise SystemExit(f"{where}: a machine path is left after scrubbing: "
                         f"{data[start:m.end() + 80]!r}")
    return data


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)


def _run_child(name, workdir, mode, env_extra):
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    # compile-only needs no exclusive hold on a TPU: several compiles (or other
    # users of libtpu) may run at once
    env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    env.update(env_extra)
    cmd = [sys.executable, SCRIPT, "--child", name, "--child-dir", workdir, "--child-mode", mode]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        tail = proc.stderr[-3000:]
        raise SystemExit(f"{name} ({mode}): child exited with {proc.returncode}:\n{tail}")
    return proc


def _copy_dump(dump_dir, dest):
    """Copy the files a reader needs; returns (kept, dropped for their size)."""
    kept, dropped = [], []
    for fname in sorted(os.listdir(dump_dir)):
        path = os.path.join(dump_dir, fname)
        if not os.path.isfile(path):
            continue
        keep = fname.endswith(DUMP_KEEP) or (
            fname.endswith(DUMP_KEEP_IF_SMALL) and os.path.getsize(path) <= SMALL)
        if not keep:
            continue
        if os.path.getsize(path) > MAX_FILE:
            dropped.append(fname)
            continue
        if fname.endswith(".pb"):
            with open(path, "rb") as f:
                data = scrub_bytes(f.read(), fname)
        else:
            with open(path) as f:
                data = scrub(f.read(), fname)
        _write(os.path.join(dest, fname), data)
        kept.append(fname)
    if not kept:
        raise SystemExit(f"no dump files in {dump_dir}")
    return kept, dropped


def _oom_log(log_dir):
    """libtpu's WARNING log, verbatim (scrubbed); None when there is none."""
    for fname in sorted(os.listdir(log_dir)):
        if ".log.WARNING." in fname:
            with open(os.path.join(log_dir, fname), errors="replace") as f:
                return f.read()
    return None


def _compile_log(log_dir):
    """The compile summary of libtpu's INFO log, verbatim: from "XLA::TPU module
    name" to "XLA::TPU program SMEM usage" (HBM/VMEM usage, "Total hbm usage",
    "Program hbm requirement" with its "HLO temp" line), for every module."""
    for fname in sorted(os.listdir(log_dir)):
        if ".log.INFO." in fname:
            with open(os.path.join(log_dir, fname), errors="replace") as f:
                lines = f.read().split("\n")
            break
    else:
        return None
    out, inside = [], False
    for line in lines:
        if "] XLA::TPU module name: " in line:
            inside = True
        if inside:
            out.append(line)
        if inside and "] XLA::TPU program SMEM usage: " in line:
            inside = False
    return "\n".join(out) + "\n" if out else None


def _formats_text(formats):
    """str() of input_formats / output_formats; a very long one (thousands of
    identical parameters) is cut after its first 8 entries, with the count."""
    text = str(formats)
    if len(text) <= 20000:
        return text
    flat = []

    def walk(x):
        if isinstance(x, (tuple, list)):
            for e in x:
                walk(e)
        elif isinstance(x, dict):
            for e in x.values():
                walk(e)
        else:
            flat.append(x)
    walk(formats)
    return f"{len(flat)} formats; the first 8: " + ", ".join(str(f) for f in flat[:8])


def generate(name, out):
    prog = PROGRAMS[name]
    dest = os.path.join(out, name)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    with tempfile.TemporaryDirectory(prefix="tpu_corpus_") as tmp:
        work = os.path.join(tmp, "work")
        env = {}
        dump_dir = os.path.join(tmp, "dump")
        if prog["dump"]:
            env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_dump_to=" + dump_dir
                                + " " + DUMP_FLAGS).strip()
        if not prog["oom"]:
            log_dir = os.path.join(tmp, "tpu_logs")
            os.makedirs(log_dir)
            env["TPU_LOG_DIR"] = log_dir
            _run_child(name, work, "compile", env)
            if os.path.exists(os.path.join(work, "child_error.json")):
                with open(os.path.join(work, "child_error.json")) as f:
                    raise SystemExit(f"{name}: compile failed: {json.load(f)['exception']}")
            with open(os.path.join(work, "child_result.json")) as f:
                info = json.load(f)
            with open(os.path.join(work, "child_module.hlo")) as f:
                hlo = f.read()
            _write(os.path.join(dest, "module.hlo"), scrub(hlo, name + "/module.hlo"))
            info["module"] = hlo.split(None, 2)[1].rstrip(",")
            ba = os.path.join(work, "child_ba.pb")
            if os.path.exists(ba):
                with open(ba, "rb") as f:
                    _write(os.path.join(dest, "buffer_assignment.pb"),
                           scrub_bytes(f.read(), name + "/buffer_assignment.pb"))
            if prog["dump"]:
                # dump="NAME": the dump directory is <out>/NAME instead of <program>/dump
                dump_dest = (os.path.join(out, prog["dump"]) if isinstance(prog["dump"], str)
                             else os.path.join(dest, "dump"))
                if os.path.isdir(dump_dest):
                    shutil.rmtree(dump_dest)
                info["dump_files"], info["dump_dropped"] = _copy_dump(dump_dir, dump_dest)
            # libtpu does not log this summary for every compile
            log = _compile_log(log_dir)
            if log is not None:
                _write(os.path.join(dest, "tpu_compile_log.txt"),
                       scrub(log, name + "/tpu_compile_log.txt"))
            _write(os.path.join(dest, "memory_analysis.json"),
                   scrub(json.dumps(info, indent=1) + "\n", name + "/memory_analysis.json"))
            return info
        # A program that does not fit: the plain exception, then the detailed
        # report from a compile that goes on past the OOM.
        _run_child(name, work, "compile", {})
        with open(os.path.join(work, "child_error.json")) as f:
            info = json.load(f)
        _write(os.path.join(dest, "oom", "exception.txt"),
               scrub(info.pop("exception") + "\n", name + "/exception.txt"))
        log_dir = os.path.join(tmp, "tpu_logs")
        os.makedirs(log_dir)
        work2 = os.path.join(tmp, "work2")
        env2 = {"LIBTPU_INIT_ARGS": (os.environ.get("LIBTPU_INIT_ARGS", "")
                                     + " --xla_tpu_no_crash_on_oom=true").strip(),
                "TPU_LOG_DIR": log_dir}
        if prog["dump"]:
            env2["XLA_FLAGS"] = env["XLA_FLAGS"]
        _run_child(name, work2, "compile", env2)
        no_crash = {}
        for fname in ("child_error.json", "child_result.json"):
            p = os.path.join(work2, fname)
            if os.path.exists(p):
                with open(p) as f:
                    no_crash = json.load(f)
        log = _oom_log(log_dir)
        if log is None:
            raise SystemExit(f"{name}: libtpu wrote no WARNING log in TPU_LOG_DIR")
        _write(os.path.join(dest, "oom", "tpu_driver.WARNING.txt"),
               scrub(log, name + "/tpu_driver.WARNING.txt"))
        if prog["dump"]:
            info["dump_files"], info["dump_dropped"] = _copy_dump(dump_dir,
                                                                  os.path.join(dest, "dump"))
        info["no_crash_on_oom_result"] = (
            {"exception": no_crash["exception"]} if "exception" in no_crash
            else {"memory_analysis": no_crash.get("memory_analysis")})
        _write(os.path.join(dest, "oom", "oom.json"),
               scrub(json.dumps(info, indent=1) + "\n", name + "/oom.json"))
        return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("XLASHAPE_TPU_CORPUS_OUT", DEFAULT_OUT))
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-dir", help=argparse.SUPPRESS)
    ap.add_argument("--child-mode", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child, a.child_dir, a.child_mode)
    if a.list:
        for p in PROGRAMS.values():
            flags = ("dump " if p["dump"] else "") + ("oom" if p["oom"] else "")
            print(f"{p['name']:28} {p['chip']:10} {flags:9} {p['description']}")
        return 0
    names = a.only.split(",") if a.only else list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s): {', '.join(unknown)}")
    os.makedirs(a.out, exist_ok=True)
    for name in names:
        info = generate(name, a.out)
        ma = info.get("memory_analysis") or {}
        print(f"{name}: ok ({'OOM' if PROGRAMS[name]['oom'] else ma.get('temp_size_in_bytes')})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
