"""Generate ``tests/data/cpu_dump``: a small real XLA dump from the CPU backend.

It is the "dump from another backend" case of xlashape's memory reader: no
tiling, sizes as the CPU compiler gives them (8-byte pointers in a tuple's
table), file names with ``cpu_`` in them. One program (a donated matmul step
with a tuple result) is compiled by XLA:CPU with ``--xla_dump_to``; the
module text, its buffer assignment and memory-usage report are kept, and
``memory_analysis.json`` records ``compiled.memory_analysis()`` and the
versions.

Usage (with a Python that has jax and jaxlib; no TPU, no libtpu)::

    python tests/oracle/gen_cpu_dump.py [--out DIR]

``--out`` defaults to ``$XLASHAPE_CPU_DUMP_OUT`` or ``tests/data/cpu_dump``.
The compile runs in a child process (``XLA_FLAGS`` is read once per process).
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
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "data", "cpu_dump")
KEEP = ("cpu_after_optimizations.txt", "cpu_after_optimizations-buffer-assignment.txt",
        "cpu_after_optimizations-memory-usage-report.txt")
FORBIDDEN = re.compile(r"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/)")

CHILD = r'''
import json, sys
import jax, jax.numpy as jnp

def step(x, w):
    h = jnp.tanh(x @ w)
    return h.sum(axis=0), x * 2

x = jnp.zeros((8, 128), jnp.float32)
w = jnp.zeros((128, 256), jnp.bfloat16)
compiled = jax.jit(step, donate_argnums=(0,)).lower(x, w).compile()
m = compiled.memory_analysis()
stats = {k: getattr(m, k) for k in dir(m) if k.endswith("_in_bytes") and isinstance(getattr(m, k), int)}
import jaxlib
json.dump({"program": "step", "module": "jit_step", "backend": "cpu",
           "description": "tanh(x @ w) summed over rows, and 2x; x (f32[8,128]) donated",
           "memory_analysis": stats,
           "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__}},
          open(sys.argv[1], "w"), indent=1, sort_keys=True)
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("XLASHAPE_CPU_DUMP_OUT", DEFAULT_OUT))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        child = os.path.join(tmp, "step.py")
        with open(child, "w") as f:
            f.write(CHILD)
        stats = os.path.join(tmp, "memory_analysis.json")
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_dump_to={dump}")
        subprocess.run([sys.executable, child, stats], env=env, check=True)
        os.makedirs(args.out, exist_ok=True)
        for name in os.listdir(args.out):
            os.remove(os.path.join(args.out, name))
        kept = 0
        for name in sorted(os.listdir(dump)):
            if ".jit_step." in name and name.endswith(KEEP):
                text = open(os.path.join(dump, name)).read()
                text = text.replace(child, "step.py")
                if FORBIDDEN.search(text):
                    raise SystemExit(f"{name} still holds a machine path: "
                                     f"{FORBIDDEN.search(text).group()}")
                with open(os.path.join(args.out, name), "w") as f:
                    f.write(text)
                kept += 1
        if kept != len(KEEP):
            raise SystemExit(f"expected {len(KEEP)} dump files of jit_step, found {kept}")
        shutil.copy(stats, os.path.join(args.out, "memory_analysis.json"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
