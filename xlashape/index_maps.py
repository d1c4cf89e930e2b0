"""Compiled bulk index maps: millions of logical indices <-> element offsets.

The same maps as :func:`xlashape.tiling.linear_indices` and
:func:`xlashape.tiling.multidimensional_indices`, with the same arguments,
results and errors, computed by the compiled core from the plan's offset
programs instead of by the numpy model (several times faster; see
``benchmarks/bench_offsets.py``). The two are tested against each other on
every index of small shapes.

This module sits above the compiled core, which sits above the pure-Python
model: :mod:`xlashape.tiling` never calls into compiled code.

>>> import numpy as np
>>> linear_indices("f32[3,5]{1,0:T(2,2)}", np.array([[0, 0], [2, 3]])).tolist()
[0, 17]
>>> idx, pad = multidimensional_indices("f32[3,5]{1,0:T(2,2)}", [17, 9])
>>> idx.tolist(), pad.tolist()
([[2, 3], [-1, -1]], [False, True])
"""

from __future__ import annotations

import weakref

from . import _core
from ._shared import index_rows, offset_array
from .errors import InvalidShapeError
from .tiling import LayoutPlan, plan

__all__ = ["linear_indices", "multidimensional_indices", "compiled_maps"]

_MAPS: "weakref.WeakKeyDictionary[LayoutPlan, _core.IndexMaps]" = weakref.WeakKeyDictionary()


def compiled_maps(shape) -> "_core.IndexMaps":
    """The compiled forward and inverse programs of a shape's plan (built
    once per plan). Accepts a :class:`~xlashape.tiling.LayoutPlan`, a Shape
    or HLO text. A layout too complex for the compiled core (rank above 64,
    or too many ops or registers) raises :class:`~xlashape.InvalidShapeError`.
    """
    p = shape if isinstance(shape, LayoutPlan) else plan(shape)
    maps = _MAPS.get(p)
    if maps is None:
        try:
            maps = _core.IndexMaps(p)
        except ValueError as e:  # more ops or registers than the core holds
            raise InvalidShapeError(str(e)) from None
        _MAPS[p] = maps
    return maps


def linear_indices(shape, indices):
    """Element offsets of many logical indices at once (compiled).

    Same arguments, results and errors as :func:`xlashape.tiling.linear_indices`:
    ``indices`` of shape ``(..., rank)`` give int64 offsets of shape ``(...)``;
    every entry is bounds-checked before anything is computed.
    """
    p = plan(shape)
    flat, batch = index_rows(p, indices)
    return compiled_maps(p).linear_indices(flat).reshape(batch)


def multidimensional_indices(shape, linear):
    """Logical indices stored at many element offsets (compiled).

    Same arguments, results and errors as
    :func:`xlashape.tiling.multidimensional_indices`: ``(indices, padding)``,
    with -1 rows where ``padding`` is True.
    """
    p = plan(shape)
    arr = offset_array(p, linear)
    out, pad = compiled_maps(p).multidimensional_indices(arr.reshape(-1))
    return out.reshape(arr.shape + (p.rank,)), pad.reshape(arr.shape)
