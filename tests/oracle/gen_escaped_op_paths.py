"""Generate ``tests/data/escaped_op_paths``: a real XLA:CPU dump whose op paths
hold what XLA escapes in its text.

JAX names a parameter by its argument and its place in the pytree
(``params['layers'][0]['w1']``: ``jax.tree_util.keystr``); XLA's text prints
each ``op_name`` and ``source_file`` through ``absl::CEscape``, which writes
``'`` as ``\\'``, ``"`` as ``\\"``, a backslash as two, and every byte that is
not printable ASCII (the UTF-8 of ``ö``) as a three-digit octal escape. The
``.hlo.pb`` holds the same strings unescaped. The program is the gradient of
a two-layer loss over a dict of parameters with a nested list, a key with
non-ASCII letters and a key with a quote, double quotes and a backslash; the
script that compiles it is named ``op's_paths.py`` (a quote in the source
file's name).

For each module kept, ``op_paths.json`` records the name JAX gives each
parameter (``"params" + keystr(path)``, from jax itself) and the versions.

Usage (with a Python that has jax and jaxlib; no accelerator)::

    python tests/oracle/gen_escaped_op_paths.py [--out DIR]

``--out`` defaults to ``tests/data/escaped_op_paths``. The compile runs in a
child process (``XLA_FLAGS`` is read once per process) in a temporary
directory. jax records the script's absolute path: in text it becomes the
bare file name, in the ``.hlo.pb`` the directory becomes underscores of the
same length (so the proto stays valid); the run stops if a machine path is
left in any file.
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
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "data", "escaped_op_paths")
CHILD_NAME = "op's_paths.py"
KEEP = ("cpu_after_optimizations.txt", "cpu_after_optimizations-buffer-assignment.txt",
        "cpu_after_optimizations-buffer-assignment-values.txt",
        "cpu_after_optimizations-live-range.txt",
        "cpu_after_optimizations-memory-usage-report.txt", "cpu_after_optimizations.hlo.pb")
FORBIDDEN = re.compile(r"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/|site-packages)")

CHILD = r'''
import json, sys
import jax, jax.numpy as jnp
import jaxlib

QUOTED = 'it\'s "q"\\'

def loss(params, x):
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w1"]) @ layer["w2"]
    return jnp.sum(h * params["gr\u00f6\u00dfe"]) + jnp.sum(h[:, :3] * params[QUOTED])

params = {"layers": [{"w1": jnp.ones((64, 128)), "w2": jnp.ones((128, 64))} for _ in range(2)],
          "gr\u00f6\u00dfe": jnp.ones((32, 64)), QUOTED: jnp.ones((3,))}
x = jnp.ones((32, 64))
compiled = jax.jit(jax.grad(loss)).lower(params, x).compile()
leaves, _ = jax.tree_util.tree_flatten_with_path(params)
names = ["params" + jax.tree_util.keystr(path) for path, _ in leaves] + ["x"]
m = compiled.memory_analysis()
stats = {k: getattr(m, k) for k in dir(m)
         if k.endswith(("_in_bytes", "_allocation_bytes", "_allocations"))
         and isinstance(getattr(m, k), int)}
json.dump({"module": "jit_loss", "backend": "cpu", "parameter_names": names,
           "description": "jax.grad of a two-layer loss over a dict of parameters: nested list, "
                          "a non-ASCII key, a key with a quote, double quotes and a backslash",
           "memory_analysis": stats,
           "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__}},
          open(sys.argv[1], "w", encoding="utf-8"), indent=1, sort_keys=True, ensure_ascii=False)
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        with open(os.path.join(tmp, CHILD_NAME), "w", encoding="utf-8") as f:
            f.write(CHILD)
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS="--xla_dump_to=dump --xla_dump_hlo_as_text --xla_dump_hlo_as_proto")
        subprocess.run([sys.executable, CHILD_NAME, "op_paths.json"], env=env, check=True, cwd=tmp)
        out_dump = os.path.join(args.out, "dump")
        shutil.rmtree(args.out, ignore_errors=True)
        os.makedirs(out_dump)
        kept = 0
        for name in sorted(os.listdir(dump)):
            if ".jit_loss." in name and name.endswith(KEEP):
                data = open(os.path.join(dump, name), "rb").read()
                # jax records the script's absolute path: its bare name in
                # text; in the proto, underscores of the same length (the
                # message stays valid)
                prefix = (tmp + os.sep).encode()
                data = data.replace(prefix, b"" if name.endswith(".txt") else b"_" * len(prefix))
                hit = FORBIDDEN.search(data.decode("utf-8", "replace"))
                if hit:
                    raise SystemExit(f"{name} holds a machine path: {hit.group()}")
                with open(os.path.join(out_dump, name), "wb") as f:
                    f.write(data)
                kept += 1
        if kept != len(KEEP):
            raise SystemExit(f"expected {len(KEEP)} dump files of jit_loss, found {kept}")
        shutil.copy(os.path.join(tmp, "op_paths.json"), os.path.join(args.out, "op_paths.json"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
