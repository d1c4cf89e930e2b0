"""Sizes as the commands print them: :func:`fmt_bytes` (``1.00G``, as XLA's
out-of-memory report writes a byte count; every command that prints sizes;
from :mod:`xlashape.reporters.text`) and :func:`tpu_note` (the lines ``--tpu`` adds to ``describe`` and
``explain``: the shape XLA:TPU stores and its size).

The commands that import this module already load the model (numpy, the
tiling model, the HLO reader); ``xlashape --version`` does not import it.
"""

from __future__ import annotations

from typing import List

from ..reporters.text import fmt_bytes
from ..shape import Shape
from ..sizes import memory_footprint


def tpu_note(shape: Shape, chip: str) -> List[str]:
    """The lines ``--tpu`` adds: ``on TPU v5e this array is stored as ...: N bytes``."""
    n = memory_footprint(shape).padded_bytes
    if shape.is_tuple:
        return [f"on TPU {chip} these arrays are stored as {shape}: {n} bytes ({fmt_bytes(n)})",
                "  (the layouts XLA:TPU gives jit parameters of these shapes when no layout "
                "is requested)"]
    return [f"on TPU {chip} this array is stored as {shape}: {n} bytes ({fmt_bytes(n)})",
            "  (the layout XLA:TPU gives a jit parameter of this shape when no layout "
            "is requested)"]
