"""XLA's HloModuleProto of every TPU corpus module: tests/data/protos/tpu/NAME.hlo.pb.gz.

The TPU corpus (tests/data/tpu_corpus/NAME/module.hlo) holds XLA:TPU's
optimized modules as text only. XLA's own parser reads each one
(jaxlib's ``xla_client.hlo.hlo_module_from_text``) and XLA serializes it
(``as_serialized_hlo_module_proto()``): the bytes XLA writes for that
module, with XLA:TPU's tiled layouts and memory spaces. tests/test_hlo_proto.py
reads them with xlashape and compares with xlashape's reading of the text.

    python tests/oracle/gen_module_protos.py

Run it with a Python that has jax and jaxlib; xlashape is not needed. Each
module is parsed in a child process (XLA aborts on some inputs). Modules
with ``custom-call-start`` are left out: this XLA's parser rewrites it into
an ``async-start`` wrapping a new computation, so its proto is not the
module of the text. XLA's parser also numbers the stack frames anew
(``stack_frame_id`` differs from the text's).
"""

import glob
import gzip
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
OUT = os.path.join(TESTS, "data", "protos", "tpu")

_WORKER = r"""
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from jax._src.lib import xla_client as xc
with open(sys.argv[1]) as fh:
    module = xc.hlo.hlo_module_from_text(fh.read())
sys.stdout.buffer.write(module.as_serialized_hlo_module_proto())
"""


def main():
    os.makedirs(OUT, exist_ok=True)
    done = 0
    for path in sorted(glob.glob(os.path.join(TESTS, "data", "tpu_corpus", "*", "module.hlo"))):
        name = os.path.basename(os.path.dirname(path))
        with open(path) as fh:
            if "custom-call-start(" in fh.read():
                print(f"{name}: left out (custom-call-start)")
                continue
        proc = subprocess.run([sys.executable, "-c", _WORKER, path], capture_output=True)
        if proc.returncode != 0 or not proc.stdout:
            print(f"{name}: XLA refused it ({proc.stderr.decode(errors='replace')[-200:]})")
            continue
        with gzip.GzipFile(os.path.join(OUT, name + ".hlo.pb.gz"), "wb", mtime=0) as fh:
            fh.write(proc.stdout)
        done += 1
    print(f"{done} modules")


if __name__ == "__main__":
    main()
