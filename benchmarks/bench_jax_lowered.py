"""What ``memory.analyze(lowered)`` costs beside the compile it makes.

A deep MLP (``LAYERS`` tanh layers of 256x256 f32, differentiated: a train
step's forward and backward) is lowered afresh for each run, jax's caches
cleared first (``jax.clear_caches()``: jax would otherwise answer the
reference compile from memory), and

- compiled alone (``lowered.compile()``), the reference;
- analysed (``analyze(lowered)``: the compile with a temporary dump, the
  dump read -- text route -- and the directory removed);
- analysed from the ``.hlo.pb`` (``prefer="proto"``).

Medians of wall time over ``RUNS`` runs, each kind in turn. Needs jax::

    python benchmarks/bench_jax_lowered.py [LAYERS] [RUNS]
"""

import statistics
import sys
import time


def main(argv):
    import jax
    import jax.numpy as jnp

    from xlashape.memory import analyze

    layers = int(argv[0]) if argv else 200
    runs = int(argv[1]) if len(argv) > 1 else 5

    def loss(ws, x):
        for i in range(layers):
            x = jnp.tanh(x @ ws[i])
        return jnp.sum(x ** 2)

    def step(ws, x):
        return [w - 0.01 * g for w, g in zip(ws, jax.grad(loss)(ws, x))]

    ws = [jax.ShapeDtypeStruct((256, 256), jnp.float32) for _ in range(layers)]
    x = jax.ShapeDtypeStruct((128, 256), jnp.float32)

    def fresh():
        return jax.jit(step, donate_argnums=0).lower(ws, x)

    kinds = {
        "compile alone": lambda lo: lo.compile(),
        "analyze(lowered)": lambda lo: analyze(lo),
        "analyze(lowered, prefer='proto')": lambda lo: analyze(lo, prefer="proto"),
    }
    times = {k: [] for k in kinds}
    modules = None
    for _ in range(runs):
        for name, fn in kinds.items():
            jax.clear_caches()
            lo = fresh()
            t = time.perf_counter()
            got = fn(lo)
            times[name].append(time.perf_counter() - t)
            if name == "analyze(lowered)":
                m = got.modules[0]
                modules = (m.allocation_count, len(m.peak.live_at_peak))
    print(f"jax {jax.__version__}, {layers} layers (train step), {runs} runs; "
          f"{modules[0]} allocations, {modules[1]} live at the peak")
    base = statistics.median(times["compile alone"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<36} {med * 1e3:8.1f} ms   {med / base:5.2f}x the compile")


if __name__ == "__main__":
    main(sys.argv[1:])
