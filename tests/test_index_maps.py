"""The compiled bulk maps (xlashape.index_maps) against the numpy model
(xlashape.tiling.linear_indices / multidimensional_indices) and the scalar
model (LayoutPlan.linear_index / multidimensional_index): every logical index
and every element offset of a grid of small shapes and layouts.

The hypothesis tests in test_tiling_properties.py cover random layouts; this
grid makes sure the usual families are always covered, run after run.
"""

import itertools

import numpy as np
import pytest

from xlashape import Layout, Shape, index_maps, tiling
from xlashape.tiling import plan

DIMS = [(), (1,), (5,), (3, 5), (1, 7), (0, 5), (2, 3, 4), (4, 1, 3)]
TILES = [(), ((2,),), ((2, 2),), ((8, 128),), ((2, 2), (1, 2)), (("*", 2),),
         ((2, "*", 2),), ((4,), (2,)), ((3, 1),), ((2, 2, 2),)]


def layouts():
    for dims in DIMS:
        n = len(dims)
        for m2m in itertools.permutations(range(n)):
            for tiles in TILES:
                if tiles and tiles[0][-1] == "*":
                    continue
                yield dims, Layout(m2m, tiles=tiles)
        # legacy padding and L(n) on the default order
        m2m = tuple(range(n - 1, -1, -1))
        yield dims, Layout(m2m, tiles=((2,),) if n else (),
                           padded_dimensions=tuple(d + 1 for d in dims))
        yield dims, Layout(m2m, tail_padding_alignment_in_elements=7)


CASES = [Shape("f32", dims, layout) for dims, layout in layouts()]
SUB_BYTE = [Shape("s4", (3, 5), Layout((1, 0), tiles=[(2, 4)], element_size_in_bits=4)),
            Shape("pred", (5,), Layout((0,), tiles=[(8,)]))]


@pytest.mark.parametrize("shape", CASES + SUB_BYTE, ids=str)
def test_compiled_equals_numpy_model_equals_scalar_model(shape):
    p = plan(shape)
    rows = list(np.ndindex(*shape.dimensions))
    idx = np.array(rows, dtype=np.int64).reshape(len(rows), len(shape.dimensions))
    expected = [p.linear_index(tuple(int(x) for x in i)) for i in idx]
    assert tiling.linear_indices(shape, idx).tolist() == expected
    assert index_maps.linear_indices(shape, idx).tolist() == expected
    offsets = np.arange(p.element_count, dtype=np.int64)
    model, model_pad = tiling.multidimensional_indices(shape, offsets)
    compiled, compiled_pad = index_maps.multidimensional_indices(shape, offsets)
    assert np.array_equal(model, compiled) and np.array_equal(model_pad, compiled_pad)
    for off in range(p.element_count):
        m = p.multidimensional_index(off)
        assert model_pad[off] == (m is None)
        assert tuple(model[off].tolist()) == (m if m is not None else (-1,) * p.rank)


def test_the_grid_is_not_trivial():
    assert len(CASES) > 200
    assert any(plan(s).element_count > plan(s).unpadded_element_count for s in CASES)


def test_compiled_maps_are_built_once_per_plan():
    p = plan("f32[3,5]{1,0:T(2,2)}")
    assert index_maps.compiled_maps(p) is index_maps.compiled_maps("f32[3,5]{1,0:T(2,2)}")
    assert index_maps.compiled_maps(p).plan is p
