"""Dumps of the two GPU out-of-memory programs of ``tests/data/gpu_corpus/oom``,
compiled by XLA:CPU (no GPU here): the same jax programs, so the buffers the
GPU's allocator could not place are in the buffer assignment with the same
sizes. Compiling does not allocate them, so this runs on a small machine.

``dev_oom_broadcast_output``: ``f32[8192,8192]`` broadcast to a
``f32[600,8192,8192]`` output (161061273600 bytes, the 150.00GiB the GPU's
allocator was asked for). ``dev_oom_three_temps``: three
``f32[100000,100000]`` results of one ``f32[100000,100000]`` input
(40000000000 bytes each, the 37.25GiB request).

Writes ``tests/data/gpu_corpus/oom/<program>.cpu_dump/`` with the final
module's text and buffer assignment, the machine's paths scrubbed::

    python tests/oracle/gen_gpu_oom_dumps.py     # in a venv with jax
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "gpu_corpus", "oom")
KEEP = re.compile(r"after_optimizations(\.txt|-buffer-assignment\.txt)$")


def programs():
    import jax.numpy as jnp

    def broadcast_output(x):
        return jnp.broadcast_to(x, (600, 8192, 8192))

    def three_temps(x):
        return jnp.sin(x), jnp.cos(x), x * 2.0

    return {
        "dev_oom_broadcast_output": (broadcast_output, (8192, 8192)),
        "dev_oom_three_temps": (three_temps, (100000, 100000)),
    }


def compile_one(name: str, tmp: str) -> None:
    """In a child process: XLA reads XLA_FLAGS once per process."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_dump_to={tmp} --xla_dump_hlo_as_text")
    import jax
    import jax.numpy as jnp

    fn, shape = programs()[name]
    fn.__name__ = "<lambda>"           # the GPU run's executable was jit__lambda
    jax.jit(fn).lower(jax.ShapeDtypeStruct(shape, jnp.float32)).compile()


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        compile_one(sys.argv[2], sys.argv[3])
        return 0
    import subprocess

    for name in ("dev_oom_broadcast_output", "dev_oom_three_temps"):
        tmp = tempfile.mkdtemp()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, tmp], check=True)
        out = os.path.join(OUT, name + ".cpu_dump")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for f in sorted(glob.glob(os.path.join(tmp, "*"))):
            base = os.path.basename(f)
            if not KEEP.search(base):
                continue
            text = open(f, encoding="utf-8").read()
            text = text.replace(os.path.abspath(__file__), os.path.basename(__file__))
            text = re.sub(r'source_file="[^"]*/', 'source_file="', text)
            with open(os.path.join(out, base), "w", encoding="utf-8") as g:
                g.write(text)
        shutil.rmtree(tmp)
        print(name, sorted(os.listdir(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
