"""Programs compiled for a TPU topology on this host (XLA:TPU, compile only), run in a child process.

``main()`` lowers each program with :func:`xlashape.memory.lower_for_tpu`,
analyses it (``analyze(lowered, device=...)``) and prints one JSON object
per program: xlashape's figures and verdict, and the golden values -- the
``memory_analysis()`` of a compile of the same lowered function. An
out-of-memory program reports what the compile's error said. Needs jax and
libtpu (``pip install -e '.[tpu]'``); libtpu can abort a process on some
inputs, hence the child. Run alone::

    JAX_PLATFORMS=cpu python tests/tpu_programs.py
"""

from __future__ import annotations

import json
import sys

PROGRAMS = {}


def program(name):
    def register(builder):
        PROGRAMS[name] = builder
        return builder
    return register


@program("mlp_v5e")
def _mlp_v5e():
    import jax
    import jax.numpy as jnp

    from xlashape.memory import lower_for_tpu

    def mlp(x, w1, w2):
        return jax.nn.gelu(x @ w1) @ w2

    bf = jnp.bfloat16
    # arrays and ShapeDtypeStructs alike: only their shapes and dtypes are used
    return lower_for_tpu(mlp, jax.ShapeDtypeStruct((16, 1, 512), bf), jnp.zeros((512, 2048), bf),
                         jax.ShapeDtypeStruct((2048, 512), bf), topology="v5e:2x2"), "v5e"


@program("train_step_donated_v6e")
def _train_step_donated_v6e():
    import jax
    import jax.numpy as jnp

    from xlashape.memory import lower_for_tpu

    def loss(params, x):
        return jnp.mean(jnp.tanh(x @ params["w1"]) @ params["w2"])

    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    f32 = jnp.float32
    params = {"w1": jax.ShapeDtypeStruct((1024, 4096), f32),
              "w2": jax.ShapeDtypeStruct((4096, 1024), f32)}
    return lower_for_tpu(jax.jit(step, donate_argnums=0), params,
                         jax.ShapeDtypeStruct((256, 1024), f32), topology="v6e:2x2"), "v6e"


@program("cumsum_v5e")
def _cumsum_v5e():
    import jax
    import jax.numpy as jnp

    from xlashape.memory import lower_for_tpu

    def f(x):
        return jnp.cumsum(x, axis=0) * 2

    # a size-1 dimension: XLA:TPU lays the parameter out so that its tiles need no padding
    return lower_for_tpu(f, jax.ShapeDtypeStruct((4096, 1, 1024), jnp.float32),
                         topology="v5e:2x2"), "v5e"


@program("sharded_v5e_2x2")
def _sharded_v5e_2x2():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from xlashape.memory import lower_for_tpu, tpu_topology

    topo = tpu_topology("v5e:2x2")
    mesh = Mesh(np.array(topo.devices).reshape(4), ("data",))

    def mlp(w, x):
        return jnp.tanh(x @ w)

    f32 = jnp.float32
    return lower_for_tpu(
        mlp, jax.ShapeDtypeStruct((1024, 1024), f32, sharding=NamedSharding(mesh, P())),
        jax.ShapeDtypeStruct((4096, 1024), f32, sharding=NamedSharding(mesh, P("data", None))),
        topology="v5e:2x2"), "v5e"


@program("oom_v5e")
def _oom_v5e():
    import jax
    import jax.numpy as jnp

    from xlashape.memory import lower_for_tpu

    def f(x, w):
        return jnp.tanh(x @ w) * 2

    # 12 GiB + 3 GiB of arguments and a 4 GiB result: more than a v5e's 15.75G
    f32 = jnp.float32
    return lower_for_tpu(f, jax.ShapeDtypeStruct((65536, 49152), f32),
                         jax.ShapeDtypeStruct((49152, 16384), f32), topology="v5e:2x2"), "v5e"


def _ints(obj):
    return {k: getattr(obj, k) for k in dir(obj) if not k.startswith("_")
            and isinstance(getattr(obj, k), int) and not isinstance(getattr(obj, k), bool)}


def run(name):
    import jax

    import xlashape.memory as memory
    from xlashape.testing import assert_fits

    lowered, chip = PROGRAMS[name]()
    result = memory.analyze(lowered, device=chip)
    m = result.modules[-1]
    try:
        xla = _ints(lowered.compile().memory_analysis())
        error = None
    except Exception as e:  # noqa: BLE001 - the compile's own error (an OOM)
        xla, error = None, str(e)
    try:
        assert_fits(result, device=chip)
        failure = None
    except AssertionError as e:
        failure = str(e)
    ours = {k: getattr(m, k, None) for k in (
        "argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
        "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
        "host_alias_size_in_bytes", "host_temp_size_in_bytes", "memory_used_bytes",
        "memory_limit_bytes")}
    if m.peak is not None:
        ours.update(m.peak.figures)
    return {
        "name": name, "jax": jax.__version__, "kind": result.kind, "source": m.source,
        "platform": m.platform, "devices": m.devices, "device_kind": m.device_kind,
        "ours": ours, "xla": xla, "error": error, "notes": list(m.notes),
        "warnings": list(m.warnings),
        "verdict": None if m.verdict is None else m.verdict.to_json(),
        "live_at_peak": [b.to_json() for b in (m.peak.live_at_peak if m.peak else [])],
        "padding": sum(a.padding_in_bytes for a in m.allocations),
        "assert_fits": failure, "text": str(result),
    }


def main(argv):
    for name in argv or list(PROGRAMS):
        print(json.dumps(run(name)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
