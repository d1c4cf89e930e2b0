"""Sizes as the commands print them: :func:`fmt_bytes` (``1.00G``, as XLA's
out-of-memory report writes a byte count; every command that prints sizes)
and :func:`tpu_note` (the lines ``--tpu`` adds to ``describe`` and
``explain``: the shape XLA:TPU stores and its size).

The commands that import this module already load the model (numpy, the
tiling model, the HLO reader); ``xlashape --version`` does not import it.
"""

from __future__ import annotations

from typing import List, Optional

from ..hlo_module import memory_footprint
from ..shape import Shape
from ..tiling import format_bytes


def fmt_bytes(n: Optional[int], _cache: dict = {}) -> str:  # noqa: B006 - a deliberate cache
    """Bytes as XLA's out-of-memory report prints them (``1.00G``); ``?`` for
    unknown. Cached, since a dump repeats the same sizes many times.

    >>> fmt_bytes(3 << 30), fmt_bytes(1536), fmt_bytes(None)
    ('3.00G', '1.5K', '?')
    """
    if n is None:
        return "?"
    text = _cache.get(n)
    if text is None:
        if len(_cache) > 1 << 16:
            _cache.clear()
        text = _cache[n] = format_bytes(n)
    return text


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
