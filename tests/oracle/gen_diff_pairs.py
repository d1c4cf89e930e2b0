"""Generate ``tests/data/diff_pairs``: XLA:CPU variants of two programs of the
CPU corpus, so ``xlashape memory diff`` has real pairs of one program:

* ``sgd_not_donated``: ``sgd_donated`` (``tests/data/cpu_corpus``) without
  ``donate_argnums`` -- the pair shows the donations lost;
* ``remat_scan_off``: ``remat_scan`` without ``jax.checkpoint`` -- the pair
  shows what rematerialization saves;
* ``sgd_mom_bf16``: ``sgd_donated`` with its momentum kept in bf16 -- the pair
  shows buffers whose element type changed.

Same machinery, files and scrubbing as ``gen_cpu_corpus.py`` (this script
registers two programs with it and runs its ``main``)::

    python tests/oracle/gen_diff_pairs.py [--only NAME,...]     # jax 0.10.x, Python 3.11
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_cpu_corpus as gen  # noqa: E402

_GEN = gen.SCRIPT
_scrub_text = gen.scrub_text


def _scrub(text, where):
    # the corpus generator's own frames are in the stack traces too
    return _scrub_text(text.replace(_GEN, os.path.basename(_GEN)), where)


gen.scrub_text = _scrub
gen.SCRIPT = os.path.abspath(__file__)
gen.SCRIPT_NAME = os.path.basename(gen.SCRIPT)
gen.DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(gen.SCRIPT)), "data", "diff_pairs")
gen.PROGRAMS.clear()


@gen.program("sgd_not_donated", "sgd_donated of the CPU corpus without donate_argnums")
def _sgd():
    import jax
    import jax.numpy as jnp

    def sgd_not_donated(params, mom, grads):
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, grads)
        params = jax.tree.map(lambda p, m: p - 0.01 * m, params, mom)
        return params, mom

    f32 = jnp.float32
    tree = lambda: [gen._sds((2048, 2048), f32), gen._sds((2048, 2048), f32),  # noqa: E731
                    gen._sds((2048, 2048), f32), gen._sds((2048,), f32)]
    return sgd_not_donated, (tree(), tree(), tree()), {}


@gen.program("remat_scan_off", "remat_scan of the CPU corpus without jax.checkpoint")
def _remat():
    import jax
    import jax.numpy as jnp

    def remat_scan_off(x, ws):
        def loss(x, ws):
            def layer(h, w):
                return jnp.tanh(h @ w), None
            h, _ = jax.lax.scan(layer, x, ws)
            return jnp.sum(h * h)
        return jax.grad(loss, argnums=1)(x, ws)

    f32 = jnp.float32
    return remat_scan_off, (gen._sds((1024, 1024), f32), gen._sds((16, 1024, 1024), f32)), {}


@gen.program("sgd_mom_bf16", "sgd_donated of the CPU corpus with the momentum in bf16")
def _sgd_bf16():
    import jax
    import jax.numpy as jnp

    def sgd_mom_bf16(params, mom, grads):
        mom = jax.tree.map(lambda m, g: (0.9 * m + g).astype(m.dtype), mom, grads)
        params = jax.tree.map(lambda p, m: p - 0.01 * m.astype(p.dtype), params, mom)
        return params, mom

    f32, bf16 = jnp.float32, jnp.bfloat16
    tree = lambda t: [gen._sds((2048, 2048), t), gen._sds((2048, 2048), t),  # noqa: E731
                      gen._sds((2048, 2048), t), gen._sds((2048,), t)]
    return sgd_mom_bf16, (tree(f32), tree(bf16), tree(f32)), {"donate_argnums": (0, 1)}


if __name__ == "__main__":
    out = ["--out", os.environ.get("XLASHAPE_DIFF_PAIRS_OUT", gen.DEFAULT_OUT)]
    sys.exit(gen.main(sys.argv[1:] if "--out" in sys.argv or "--child" in sys.argv
                      else sys.argv[1:] + out))
