"""Generate ``tests/data/diff_pairs/padding_default``: the ``padding`` program
of ``tests/data/tpu_corpus`` (XLA:TPU v5e, compile-only) with XLA's default
layouts instead of the requested row-major tiled ones, so ``xlashape memory
diff`` has a real pair for "a requested padded layout vs the default".

Same machinery, files and scrubbing as ``gen_tpu_corpus.py`` (this script
registers one program with it and runs its ``main``); run it as that script
(the setup in ``gen_tpu_corpus.py``: a Python 3.12 venv with jax 0.12 and libtpu)::

    env PYTHONPATH=$LIBTPU JAX_PLATFORMS=cpu TPU_LIBRARY_PATH=$LIBTPU/libtpu/libtpu.so \\
        $VENV/bin/python tests/oracle/gen_tpu_diff_pairs.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tpu_corpus as gen  # noqa: E402

_GEN = gen.SCRIPT
_scrub = gen.scrub


def _scrub_both(text, where):
    # the corpus generator's own frames are in the stack traces too
    return _scrub(text.replace(_GEN, os.path.basename(_GEN)), where)


gen.scrub = _scrub_both
gen.SCRIPT = os.path.abspath(__file__)
gen.SCRIPT_NAME = os.path.basename(gen.SCRIPT)
gen.DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(gen.SCRIPT)), "data", "diff_pairs")
gen.PROGRAMS.clear()


def _padding_default(topo):
    import jax
    import jax.numpy as jnp

    dev = gen._single(topo)

    def padded(act, ids, coords, flags, h):
        return act.sum(), ids.max(), coords * 2, ~flags, h * 2, ids + 1

    args = (jax.ShapeDtypeStruct((8, 1, 1280), jnp.float32, sharding=dev),
            jax.ShapeDtypeStruct((4096, 1), jnp.int32, sharding=dev),
            jax.ShapeDtypeStruct((7, 9, 5), jnp.float32, sharding=dev),
            jax.ShapeDtypeStruct((1000, 3), jnp.bool_, sharding=dev),
            jax.ShapeDtypeStruct((16, 1, 512), jnp.bfloat16, sharding=dev))
    return padded, args, {}


gen.program("padding_default", gen.V5E,
            "the padding program of the TPU corpus with XLA's default layouts (no Format "
            "requested)", dump=True)(_padding_default)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--out" not in argv and "--child" not in argv:
        argv += ["--out", os.environ.get("XLASHAPE_DIFF_PAIRS_OUT", gen.DEFAULT_OUT)]
    sys.exit(gen.main(argv))
