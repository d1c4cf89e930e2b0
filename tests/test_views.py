"""xlashape.views on its own: a view's Shape keeps every element where it was.

The check is independent of how the views are found: for every logical index
of the view, the tiling model's offset (``tiling.linear_index``) must equal the
offset of the element it stands for in the original shape (the same C-order
position for a reshape, the permuted index for a transpose), and spot checks
against the scalar ``tiling.linear_index``.
"""

import itertools

import numpy as np
import pytest

from xlashape import tiling
from xlashape.hlo_text import parse_shape
from xlashape.views import permuted_shape, reshaped_shape

SHAPES = ["f32[4,8,128]{2,1,0:T(8,128)}", "f32[6,4]{0,1}", "bf16[2,16,128]{2,1,0:T(8,128)(2,1)}",
          "s8[3,32,128]{1,2,0:T(32,128)(4,1)}", "f32[2,3,5]{2,1,0}", "f32[3,1,8]{2,1,0:T(2,8)}"]


def _rows(dims):
    """Every index of ``dims`` in C order, as an (N, rank) int64 array."""
    return np.indices(dims, dtype=np.int64).reshape(len(dims), -1).T.copy()


def _offsets(shape, rows):
    return tiling.plan(shape).model_linear_indices(rows)


def _factorizations(n, parts):
    if parts == 1:
        yield (n,)
        return
    for d in range(1, n + 1):
        if n % d == 0:
            for rest in _factorizations(n // d, parts - 1):
                yield (d,) + rest


@pytest.mark.parametrize("text", SHAPES)
def test_every_permutation_keeps_every_offset(text):
    shape = parse_shape(text)
    n = len(shape.dimensions)
    for axes in itertools.permutations(range(n)):
        view = permuted_shape(shape, axes)
        assert view.dimensions == tuple(shape.dimensions[a] for a in axes)
        rows = _rows(view.dimensions)
        old = np.empty_like(rows)
        old[:, list(axes)] = rows
        assert np.array_equal(_offsets(view, rows), _offsets(shape, old))


@pytest.mark.parametrize("text", SHAPES)
def test_reshapes_keep_every_offset_or_refuse(text):
    shape = parse_shape(text)
    size = int(np.prod(shape.dimensions))
    found = 0
    for rank in (1, 2, 3, 4):
        for new in _factorizations(size, rank):
            view = reshaped_shape(shape, new)
            if view is None:
                continue
            found += 1
            assert view.dimensions == new
            assert tiling.plan(view).size_in_bytes == tiling.plan(shape).size_in_bytes
            # the same C-order position in both: row k of each listing
            assert np.array_equal(_offsets(view, _rows(new)),
                                  _offsets(shape, _rows(shape.dimensions)))
    assert found >= 1        # at least the shape itself


def test_known_views():
    # a whole tile row absorbed into the major dimension; a layout that no
    # reshape can follow (the tiled minor dimension split)
    s = parse_shape("f32[4,8,128]{2,1,0:T(8,128)}")
    assert str(reshaped_shape(s, (32, 128))) == "f32[32,128]{1,0:T(8,128)}"
    assert reshaped_shape(s, (4, 8, 2, 64)) is None
    assert reshaped_shape(s, (4, 8, 128)) == s
    v = permuted_shape(s, (2, 0, 1))
    assert tiling.linear_index(v, (5, 3, 7)) == tiling.linear_index(s, (3, 7, 5))
