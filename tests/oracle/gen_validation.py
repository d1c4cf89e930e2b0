"""Record what XLA's own HLO parser validates: tests/data/xla_validation.json.

For every shape text in ``tests/validation_cases.py`` this asks XLA's parser
(jaxlib's ``xla_client.hlo.Shape``) twice: the text on its own, and the text
as the only element of a tuple. XLA validates tuple elements as it builds the
tuple (``ShapeUtil::ValidateShapeWithOptionalLayout``), and nothing else, so
the second answer is XLA's verdict on the shape's validity.

Each parse runs in a child process (XLA aborts the process on some inputs).

    python tests/oracle/gen_validation.py tests/data/xla_validation.json

Run it with a Python that has jax and jaxlib; xlashape is not needed.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from validation_cases import CASES  # noqa: E402

_WORKER = r"""
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from jax._src.lib import xla_client as xc
for line in sys.stdin:
    text = json.loads(line)
    try:
        out = ["OK", str(xc.hlo.Shape(text))]
    except Exception as e:
        out = ["ERR", str(e)]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class Parser:
    def __init__(self):
        self.proc = None

    def verdict(self, text):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            self.proc.stdin.write(json.dumps(text) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.proc = None
            return "ABORT"
        return json.loads(line)[0]


def main(out_path):
    import jax
    import jaxlib

    parser = Parser()
    cases = {}
    for text, _message in CASES:
        cases[text] = {"alone": parser.verdict(text),
                       "in_tuple": parser.verdict("(" + text + ")")}
    data = {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "cases": cases}
    with open(out_path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
