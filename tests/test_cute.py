"""CuTe ``(shape):(stride)`` text of XLA layouts.

Expected strings are derived by hand from the tiled-layout model (the
derivations are in the comments); the property test evaluates every CuTe
layout the module returns the way CuTe does (an integer coordinate inside a
hierarchical mode is split colexicographically, first sub-mode fastest) and
compares every logical index with ``tiling.linear_index``.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import xlashape as xs
from xlashape import Layout, Shape, tiling
from xlashape.cute import cute_layout, cute_layout_text

from strategies import tiled_layout_parts


@pytest.mark.parametrize("text, expected", [
    # the example: 3x5 padded to 4x6 by 2x2 tiles; a row inside a
    # tile moves 2 elements, a row of tiles 3 tiles * 4 = 12; a column moves
    # 1, a column of tiles 4
    ("f32[3,5]{1,0:T(2,2)}", "((2,2),(2,3)):((2,12),(1,4))"),
    ("f32[3,5]{1,0}", "(3,5):(5,1)"),
    ("f32[3,5]{0,1}", "(3,5):(1,3)"),
    ("f32[5]{0}", "(5):(1)"),
    ("f32[]", "():()"),
    # legacy padding 3x5 -> 4x8, row-major: the padded domain, row stride 8
    (Shape("f32", (3, 5), Layout((1, 0), padded_dimensions=(4, 8))), "(4,8):(8,1)"),
    # one tile holds the whole array: the padded domain is the tile
    ("f32[3,5]{1,0:T(4,8)}", "(4,8):(8,1)"),
    # physical dims (2,2,4,128,2,1): rows split 16 = 2 (within (2,1)) x 4 x 2
    # (row tiles), strides 1, 128*2 = 256, 2 * 1024 = 2048; columns
    # 256 = 128 x 2, strides 2 (a (2,1) tile holds two rows), 1024
    ("bf16[16,256]{1,0:T(8,128)(2,1)}", "((2,4,2),(128,2)):((1,256,2048),(2,1024))"),
    # the README's 8x expansion: dimension 1 (size 1) padded to 8 rows
    ("bf16[8,1,1280]{2,1,0:T(8,128)(2,1)}",
     "(8,(2,4),(128,10)):(10240,(1,256),(2,1024))"),
    # '*' merges 4x6 into 24; the tile 2 cuts dimension 1 into 2 x 3
    ("s8[4,6]{1,0:T(*,2)}", "(4,(2,3)):(6,(1,2))"),
    # column-major with a (2,2) tile: dimension 0 is minor
    ("f32[4,6]{0,1:T(2,2)}", "((2,2),(2,3)):((1,4),(2,8))"),
])
def test_hand_derived_layouts(text, expected):
    assert cute_layout_text(text) == expected


def test_tuple_form_matches_the_text():
    assert cute_layout("f32[3,5]{1,0:T(2,2)}") == (((2, 2), (2, 3)), ((2, 12), (1, 4)))


@pytest.mark.parametrize("text, fragment", [
    ("f32[8]{0:T(4)(3)}", r"tile \(3\) cuts a piece of dimension 0 of size 4 at 3"),
    ("s8[4,6]{1,0:T(*,4)}", r"tile \(\*,4\) cuts a piece of dimension 1 of size 6"),
    ("f32[0,3]{1,0}", "size 0"),
])
def test_refusals_say_why(text, fragment):
    with pytest.raises(xs.InvalidShapeError, match="has no CuTe layout: .*" + fragment):
        cute_layout_text(text)


def _offset(coord, shape, stride):
    """CuTe's crd2idx for an integer coordinate, written out."""
    if isinstance(shape, tuple):
        total = 0
        for i, (s, d) in enumerate(zip(shape, stride)):
            size = _size(s)
            c = coord if i == len(shape) - 1 else coord % size
            total += _offset(c, s, d)
            coord //= size
        return total
    return coord * stride


def _size(s):
    if isinstance(s, tuple):
        out = 1
        for x in s:
            out *= _size(x)
        return out
    return s


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_index_lands_where_the_tiling_model_says(data):
    rank = data.draw(st.integers(1, 3))
    dims = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    m2m, tiles, padded, align = data.draw(tiled_layout_parts(dims))
    shape = Shape("f32", dims, Layout(m2m, tiles=tiles, padded_dimensions=padded,
                                      tail_padding_alignment_in_elements=align))
    p = tiling.plan(shape)
    assume(p.element_count <= 5000)
    try:
        modes, strides = cute_layout(shape)
    except xs.InvalidShapeError:
        return
    assert len(modes) == rank
    for d in range(rank):
        assert _size(modes[d]) >= dims[d]
    for idx in itertools.product(*(range(n) for n in dims)):
        got = sum(_offset(i, m, s) for i, m, s in zip(idx, modes, strides))
        assert got == p.linear_index(idx), (shape, idx)
    # the whole padded domain maps into the buffer, one slot each
    seen = set()
    for idx in itertools.product(*(range(_size(m)) for m in modes)):
        off = sum(_offset(i, m, s) for i, m, s in zip(idx, modes, strides))
        assert 0 <= off < p.element_count
        seen.add(off)
    assert len(seen) == _size(modes)


def test_common_tpu_layouts_are_expressible():
    for text in ["bf16[128,1024]{1,0:T(8,128)(2,1)}", "f32[256,512]{1,0:T(8,128)}",
                 "s8[64,256]{1,0:T(32,128)(4,1)}", "f32[8,3,128]{2,1,0:T(8,128)}",
                 "bf16[4,16,128]{1,2,0:T(8,128)(2,1)}"]:
        cute_layout_text(text)
