"""A real XLA:CPU dump of a deep MLP, for ``bench_memory_core.py``: ``L``
layers of tanh/softmax/matmul with ``jax.checkpoint``, the gradient of a
sum of squares, compiled (not run) from ``jax.ShapeDtypeStruct`` arguments
with ``XLA_FLAGS=--xla_dump_to=OUT --xla_dump_hlo_as_proto``.

    python benchmarks/gen_cpu_dump.py OUT 400     # a Python with jax (0.10.2 here)

Keep the module's ``*cpu_after_optimizations*`` files (the benchmark reads a
directory holding those) -- with 400 layers about 25 MB of them.
"""
import os, sys
out = sys.argv[1]
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text"
import jax, jax.numpy as jnp
def layer(x, w1, w2, s):
    h = jnp.tanh(x @ w1) * s
    h = jax.nn.softmax(h, axis=-1)
    return x + h @ w2
def f(x, ws):
    for i, (w1, w2) in enumerate(ws):
        x = layer(x, w1, w2, 1.0 + i)
        x = jax.checkpoint(lambda y: jnp.sin(y) * y)(x)
    return jnp.sum(x ** 2)
L = int(sys.argv[2])
ws = [(jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((512, 256), jnp.float32)) for _ in range(L)]
x = jax.ShapeDtypeStruct((64, 256), jnp.float32)
c = jax.jit(jax.value_and_grad(f, argnums=1)).lower(x, ws).compile()
print(c.memory_analysis())
