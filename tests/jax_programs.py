"""JAX programs for ``memory.analyze(lowered)``, run in a child process.

Each program below is a function and its arguments; ``main()`` lowers each
one, analyses the lowered function with :func:`xlashape.memory.analyze`
(which compiles it once more, with a temporary dump) and prints one JSON
object per program: xlashape's figures, the compile's own
``memory_analysis()`` (the golden values: XLA's), the buffers live at the
peak with their op paths, source lines and shardings, and what is left in
the temporary directory afterwards.

The child is started with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``
(read once, when jax starts: hence a process of its own), so the sharded
programs run on 8 host devices; the others use one. Run alone::

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/jax_programs.py [NAME ...]
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

PROGRAMS = {}


def program(name, description):
    def register(builder):
        PROGRAMS[name] = (description, builder)
        return builder
    return register


def _mesh(shape, names):
    """A mesh of the host devices whose axes let XLA's partitioner choose
    the shardings of intermediates (Auto: what jit did before explicit
    sharding)."""
    import jax

    return jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(names))


def _mlp_sgd_step(array):
    """An MLP's SGD train step and its arguments, each made by ``array(shape,
    dtype)`` (arrays, or ShapeDtypeStructs)."""
    import jax
    import jax.numpy as jnp

    def loss(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w2"] - y) ** 2)

    def step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

    f32 = jnp.float32
    params = {"w1": array((256, 512), f32), "b1": array((512,), f32), "w2": array((512, 64), f32)}
    return step, (params, array((128, 256), f32), array((128, 64), f32))


@program("train_step_donated", "an MLP's SGD train step, parameters donated (donate_argnums=0)")
def _train_step_donated():
    import jax
    import jax.numpy as jnp

    step, args = _mlp_sgd_step(jnp.zeros)
    return jax.jit(step, donate_argnums=0).lower(*args)


@program("train_step", "the same train step without donation (parameters copied)")
def _train_step():
    import jax

    step, args = _mlp_sgd_step(jax.ShapeDtypeStruct)
    return jax.jit(step).lower(*args)


@program("scan_rnn", "an RNN over 64 steps with lax.scan, its states stacked")
def _scan_rnn():
    import jax
    import jax.numpy as jnp

    def rnn(w, u, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h
        _, hs = jax.lax.scan(cell, jnp.zeros((32, 256), xs.dtype), xs)
        return hs

    f32 = jnp.float32
    return jax.jit(rnn).lower(jax.ShapeDtypeStruct((256, 256), f32),
                              jax.ShapeDtypeStruct((128, 256), f32),
                              jax.ShapeDtypeStruct((64, 32, 128), f32))


@program("remat_scan", "a scan of 16 layers under jax.checkpoint, differentiated")
def _remat_scan():
    import jax
    import jax.numpy as jnp

    def model(ws, x):
        @jax.checkpoint
        def layer(h, w):
            return jnp.tanh(h @ w), None
        h, _ = jax.lax.scan(layer, x, ws)
        return jnp.sum(h ** 2)

    f32 = jnp.float32
    return jax.jit(jax.grad(model)).lower(jax.ShapeDtypeStruct((16, 128, 128), f32),
                                          jax.ShapeDtypeStruct((64, 128), f32))


@program("sharded_mlp_8", "a data-parallel MLP on 8 host devices: batch sharded, weights "
                          "replicated (NamedSharding)")
def _sharded_mlp_8():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh((8,), ("data",))
    rows, rep = NamedSharding(mesh, P("data", None)), NamedSharding(mesh, P())

    def mlp(w1, w2, x):
        return jnp.tanh(x @ w1) @ w2

    f32 = jnp.float32
    return jax.jit(mlp).lower(jax.ShapeDtypeStruct((256, 1024), f32, sharding=rep),
                              jax.ShapeDtypeStruct((1024, 256), f32, sharding=rep),
                              jax.ShapeDtypeStruct((2048, 256), f32, sharding=rows))


@program("sharded_train_8", "a train step on a 4x2 mesh of 8 host devices: the batch split "
                            "4 ways, the weights 2 ways (model parallel), donated")
def _sharded_train_8():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh((4, 2), ("data", "model"))
    batch = NamedSharding(mesh, P("data", None))
    cols, rows = NamedSharding(mesh, P(None, "model")), NamedSharding(mesh, P("model", None))

    def loss(w1, w2, x):
        return jnp.mean((jax.nn.relu(x @ w1) @ w2) ** 2)

    def step(w1, w2, x):
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    f32 = jnp.float32
    return jax.jit(step, donate_argnums=(0, 1)).lower(
        jax.ShapeDtypeStruct((512, 1024), f32, sharding=cols),
        jax.ShapeDtypeStruct((1024, 512), f32, sharding=rows),
        jax.ShapeDtypeStruct((256, 512), f32, sharding=batch))


@program("bf16_attention", "causal softmax attention in bf16 (f32 softmax)")
def _bf16_attention():
    import jax
    import jax.numpy as jnp

    def attention(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) / 8.0
        mask = jnp.tril(jnp.ones((q.shape[2], k.shape[2]), jnp.bool_))
        p = jax.nn.softmax(jnp.where(mask, s, -1e30), axis=-1).astype(v.dtype)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v)

    bf = jnp.bfloat16
    shape = jax.ShapeDtypeStruct((2, 4, 256, 64), bf)
    return jax.jit(attention).lower(shape, shape, shape)


@program("sds_conv", "two convolutions on ShapeDtypeStruct arguments only (nothing allocated)")
def _sds_conv():
    import jax
    import jax.numpy as jnp

    def conv(img, k1, k2):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(jax.lax.conv_general_dilated(img, k1, (1, 1), "SAME",
                                                     dimension_numbers=dn))
        return jax.lax.conv_general_dilated(h, k2, (2, 2), "SAME", dimension_numbers=dn)

    f32 = jnp.float32
    return jax.jit(conv).lower(jax.ShapeDtypeStruct((8, 64, 64, 3), f32),
                               jax.ShapeDtypeStruct((3, 3, 3, 32), f32),
                               jax.ShapeDtypeStruct((3, 3, 32, 64), f32))


@program("static_layers", "an MLP whose depth is a static argument (static_argnums)")
def _static_layers():
    import jax
    import jax.numpy as jnp

    def deep(x, w, depth):
        for _ in range(depth):
            x = jax.nn.gelu(x @ w)
        return x

    f32 = jnp.float32
    return jax.jit(deep, static_argnums=2).lower(jax.ShapeDtypeStruct((256, 256), f32),
                                                 jax.ShapeDtypeStruct((256, 256), f32), 6)


@program("kv_cache_donated", "a KV-cache update (dynamic_update_slice) into a donated cache")
def _kv_cache_donated():
    import jax
    import jax.numpy as jnp

    def update(cache, new, pos):
        return jax.lax.dynamic_update_slice(cache, new, (0, pos, 0)), jnp.sum(new)

    f32 = jnp.float32
    return jax.jit(update, donate_argnums=0).lower(
        jax.ShapeDtypeStruct((8, 1024, 128), f32), jax.ShapeDtypeStruct((8, 1, 128), f32),
        jax.ShapeDtypeStruct((), jnp.int32))


@program("while_sort", "a fori_loop carrying a buffer, then a sort and top_k")
def _while_sort():
    import jax
    import jax.numpy as jnp

    def f(x):
        x = jax.lax.fori_loop(0, 10, lambda i, a: jnp.sin(a) + i, x)
        return jnp.sort(x, axis=-1), jax.lax.top_k(x, 8)[0]

    return jax.jit(f).lower(jax.ShapeDtypeStruct((64, 4096), jnp.float32))


@program("int8_matmul", "an int8 matmul accumulated in int32, scaled to f32")
def _int8_matmul():
    import jax
    import jax.numpy as jnp

    def mm(x, w, scale):
        acc = jax.lax.dot_general(x, w, (((1,), (0,)), ((), ())),
                                  preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * scale

    return jax.jit(mm).lower(jax.ShapeDtypeStruct((512, 1024), jnp.int8),
                             jax.ShapeDtypeStruct((1024, 384), jnp.int8),
                             jax.ShapeDtypeStruct((384,), jnp.float32))


@program("cond_branches", "lax.cond choosing between two branches of different temporaries")
def _cond_branches():
    import jax
    import jax.numpy as jnp

    def f(p, x):
        return jax.lax.cond(p, lambda v: jnp.cumsum(v @ v.T, axis=0), lambda v: v * 2.0, x)

    return jax.jit(f).lower(jax.ShapeDtypeStruct((), jnp.bool_),
                            jax.ShapeDtypeStruct((512, 512), jnp.float32))


def _stats(compiled_stats_dict, module):
    out = {}
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
              "host_alias_size_in_bytes", "host_temp_size_in_bytes"):
        out[k] = getattr(module, k)
    if module.peak is not None:
        out.update(module.peak.figures)
    return out


def run(name):
    import jax

    import xlashape.memory as memory

    description, builder = PROGRAMS[name]
    lowered = builder()
    # XLA's own figures, from a compile of the same lowered function
    stats = lowered.compile().memory_analysis()
    xla = {k: getattr(stats, k) for k in dir(stats)
           if not k.startswith("_") and isinstance(getattr(stats, k), int)
           and not isinstance(getattr(stats, k), bool)}
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "xlashape-jax-*")))
    result = memory.analyze(lowered)
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), "xlashape-jax-*")))
    (m,) = result.modules
    pa = m.peak
    return {
        "name": name, "description": description, "jax": jax.__version__,
        "kind": result.kind, "source": m.source, "module": m.name, "platform": m.platform,
        "devices": m.devices, "device_kind": m.device_kind, "path": m.path,
        "buffer_assignment": m.buffer_assignment,
        "ours": _stats(None, m), "xla": xla, "memory_analysis": m.memory_analysis,
        "warnings": list(m.warnings), "notes": list(m.notes),
        "peak_reasons": dict(pa.reasons) if pa else {},
        "parameter_shardings": {str(k): v for k, v in m.parameter_shardings.items()},
        "live_at_peak": [b.to_json() for b in (pa.live_at_peak if pa else [])],
        "by_op_path": [list(x) for x in (pa.by_op_path() if pa else [])],
        "left_behind": sorted(after - before),
        "text": str(result),
    }


def main(argv):
    names = argv or list(PROGRAMS)
    for name in names:
        print(json.dumps(run(name)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
