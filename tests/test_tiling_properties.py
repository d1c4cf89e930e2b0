"""Properties of the tiling model over random shapes and layouts.

The oracle is an independent implementation of the tiled-layout doc's
description (spec §11) written with numpy: put each element's logical id in
an array, pad it, reshape and transpose it level by level, and read the
memory order off the flattened result. The model (``LayoutPlan``), its offset
program, the compiled program and the vectorized maps must all agree with it,
exhaustively, on every index of small shapes.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from xlashape import COMBINE_DIMENSION, Layout, Shape, index_maps
from xlashape._core import CompiledPlan
from xlashape.padding import padding_report
from xlashape.tiling import (
    LayoutPlan,
    linear_indices,
    multidimensional_indices,
    plan,
)
from strategies import tiled_layout_parts


# -- the oracle ---------------------------------------------------------------------

def memory_order(dims, m2m, tiles, padded=None, align=1):
    """Flattened memory holding the row-major logical id of each element, -1 for padding."""
    n = len(dims)
    count = math.prod(dims)
    a = np.arange(count, dtype=np.int64).reshape(dims) if n else np.array(0, dtype=np.int64)
    if padded:
        a = np.pad(a, [(0, p - d) for p, d in zip(padded, dims)], constant_values=-1)
    a = a.transpose(list(reversed(m2m))) if n else a
    for tile in tiles:
        k = len(tile)
        if k > a.ndim:
            a = a.reshape((1,) * (k - a.ndim) + a.shape)
        lead = a.shape[: a.ndim - k]
        sizes = list(a.shape[a.ndim - k:])
        t = list(tile)
        # merge each '*' dim into the next more-minor one (row-major merge of
        # adjacent axes is exactly E_j * S_{j+1} + E_{j+1})
        j = 0
        while j < len(t):
            if t[j] == COMBINE_DIMENSION:
                sizes[j: j + 2] = [sizes[j] * sizes[j + 1]]
                t.pop(j)
            else:
                j += 1
        a = a.reshape(tuple(lead) + tuple(sizes))
        m = len(t)
        pad = [(0, 0)] * len(lead) + [(0, -(-s // tt) * tt - s) for s, tt in zip(sizes, t)]
        a = np.pad(a, pad, constant_values=-1)
        split = []
        for s, tt in zip(sizes, t):
            split += [-(-s // tt), tt]
        a = a.reshape(tuple(lead) + tuple(split))
        nl = len(lead)
        order = list(range(nl)) + [nl + 2 * i for i in range(m)] + [nl + 2 * i + 1 for i in range(m)]
        a = a.transpose(order)
    flat = a.ravel()
    total = -(-flat.size // align) * align
    return np.concatenate([flat, np.full(total - flat.size, -1, dtype=np.int64)])


# -- random shapes and layouts -------------------------------------------------------

@st.composite
def shapes(draw, max_elements=3000):
    rank = draw(st.integers(0, 4))
    dims = tuple(draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank)))
    m2m, tiles, padded, align = draw(tiled_layout_parts(dims))
    et, ebits = draw(st.sampled_from([("f32", 0), ("bf16", 0), ("s8", 0), ("s4", 0),
                                      ("s4", 4), ("pred", 1), ("u2", 2), ("f32", 64)]))
    layout = Layout(m2m, tiles=tiles, padded_dimensions=padded,
                    tail_padding_alignment_in_elements=align, element_size_in_bits=ebits)
    shape = Shape(et, dims, layout)
    p = LayoutPlan(shape)
    assume(p.element_count <= max_elements)
    return shape


SETTINGS = settings(max_examples=int(__import__("os").environ.get("XLASHAPE_EXAMPLES", "300")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def oracle(shape):
    lay = shape.layout
    tiles = [t.dimensions for t in lay.tiles]
    return memory_order(shape.dimensions, lay.minor_to_major, tiles,
                        lay.padded_dimensions or None, lay.tail_padding_alignment_in_elements)


def indices_of(dims):
    return list(np.ndindex(*dims)) if dims else [()]


@SETTINGS
@given(shapes())
def test_model_matches_numpy_oracle(shape):
    p = plan(shape)
    memory = oracle(shape)
    assert p.element_count == memory.size
    bits = p.element_bits
    assert p.size_in_bytes == -(-memory.size * bits // 8)
    dims = shape.dimensions
    count = math.prod(dims)
    where = np.full(count, -1, dtype=np.int64)
    hit = memory >= 0
    where[memory[hit]] = np.flatnonzero(hit)
    assert (where >= 0).all()  # every element lands somewhere, once
    for n, idx in enumerate(indices_of(dims) if count else []):
        off = p.linear_index(idx)
        assert off == where[n]
        assert 0 <= off < p.element_count
        assert p.run_program(idx) == off
        assert p.multidimensional_index(off) == tuple(idx)
    # the slots not hit are exactly the padding
    for off in range(p.element_count):
        expected = None if memory[off] < 0 else tuple(np.unravel_index(memory[off], dims)) if dims else ()
        got = p.multidimensional_index(off)
        assert got == (tuple(int(x) for x in expected) if expected is not None else None)
        assert p.run_inverse_program(off) == got


@SETTINGS
@given(shapes())
def test_compiled_and_vectorized_match_reference(shape):
    p = plan(shape)
    dims = shape.dimensions
    rows = indices_of(dims) if math.prod(dims) else []
    idx = np.array(rows, dtype=np.int64).reshape(len(rows), len(dims))
    ref = [p.linear_index(tuple(i)) for i in idx]
    assert linear_indices(shape, idx).tolist() == ref  # the numpy model
    assert index_maps.linear_indices(shape, idx).tolist() == ref  # the compiled program
    cp = CompiledPlan(p)
    assert [cp.offset(tuple(int(x) for x in i)) for i in idx] == ref
    every_offset = np.arange(p.element_count)
    out, pad = multidimensional_indices(shape, every_offset)
    c_out, c_pad = index_maps.multidimensional_indices(shape, every_offset)
    assert np.array_equal(out, c_out) and np.array_equal(pad, c_pad)
    for off in range(p.element_count):
        m = p.multidimensional_index(off)
        if m is None:
            assert pad[off] and (out[off] == -1).all()
        else:
            assert not pad[off] and tuple(out[off].tolist()) == m


@SETTINGS
@given(shapes())
def test_strides_when_given_are_exact(shape):
    p = plan(shape)
    st_ = p.strides
    width = shape.element_type.byte_width
    dims = shape.dimensions
    if st_ is None:
        return
    assert len(st_) == len(dims)
    for idx in (indices_of(dims) if math.prod(dims) else []):
        assert sum(i * s for i, s in zip(idx, st_)) == p.linear_index(idx) * width


def affine_strides(p):
    """Element strides if the reference map is affine on every index (exhaustive)."""
    dims = p.dimensions
    if math.prod(dims) == 0:
        return "empty"
    base = p.linear_index((0,) * len(dims))
    if base:
        return None
    cand = []
    for d in range(len(dims)):
        e = [0] * len(dims)
        if dims[d] > 1:
            e[d] = 1
            cand.append(p.linear_index(tuple(e)))
        else:
            cand.append(0)
    for idx in indices_of(dims):
        if sum(i * c for i, c in zip(idx, cand)) != p.linear_index(idx):
            return None
    return cand


@SETTINGS
@given(shapes())
def test_strides_found_whenever_the_map_is_affine(shape):
    p = plan(shape)
    whole_bytes = p.element_bits == shape.element_type.byte_width * 8
    cand = affine_strides(p)
    if cand is None or cand == "empty" or not whole_bytes:
        if cand is None or not whole_bytes:
            assert p.strides is None
        return
    width = shape.element_type.byte_width
    got = p.strides
    assert got is not None
    for d, size in enumerate(shape.dimensions):
        if size > 1:
            assert got[d] == cand[d] * width


@SETTINGS
@given(shapes())
def test_minor_run_promise(shape):
    p = plan(shape)
    if p.rank == 0 or math.prod(shape.dimensions) == 0:
        return
    d0, run, stride = p.minor_dim, p.minor_run, p.minor_stride
    assert d0 == shape.layout.minor_to_major[0]
    assert run >= 1
    dims = shape.dimensions
    others = [range(s) if d != d0 else range(1) for d, s in enumerate(dims)]
    for base in np.ndindex(*[len(r) for r in others]):
        for start in range(0, dims[d0], run):
            idx = list(base)
            idx[d0] = start
            first = p.linear_index(tuple(idx))
            for j in range(1, min(run, dims[d0] - start)):
                idx[d0] = start + j
                assert p.linear_index(tuple(idx)) == first + j * stride


@SETTINGS
@given(shapes(max_elements=20000))
def test_padding_factors_multiply_to_the_expansion(shape):
    r = padding_report(shape)
    p = plan(shape)
    assert r.padded_bytes == p.size_in_bytes
    assert r.unpadded_bytes == -(-math.prod(shape.dimensions) * p.element_bits // 8)
    factors = [s.factor for s in r.sources if s.kind != "element_size"]
    assert all(f > 1 for f in factors)
    assert [s.factor for s in r.sources] == sorted((s.factor for s in r.sources), reverse=True)
    logical = math.prod(shape.dimensions)
    if logical == 0:
        return
    product = math.prod(factors)
    assert math.isclose(product, r.physical_elements / logical, rel_tol=1e-9)
    # bytes: only the rounding of sub-byte elements to whole bytes differs
    assert r.padded_bytes == -(-round(logical * product) * p.element_bits // 8)
    from xlashape.tiling import format_bytes

    for text in r.suggestions:
        # every suggestion states a smaller size than the current one
        assert text.endswith(f" instead of {format_bytes(r.padded_bytes)}")
        assert f"would take {format_bytes(r.padded_bytes)} " not in text


@pytest.mark.parametrize("dims,m2m,tiles", [
    ((4, 8), (1, 0), [(2, 4), (2, 1)]),
    ((3, 5), (1, 0), [(2, 2)]),
    ((2, 7, 8, 11, 10), (4, 3, 2, 1, 0), [(COMBINE_DIMENSION, COMBINE_DIMENSION, 2,
                                             COMBINE_DIMENSION, 3)]),
])
def test_oracle_reproduces_the_doc_examples(dims, m2m, tiles):
    # guard the oracle itself against the doc's figures
    mem = memory_order(dims, m2m, tiles)
    if dims == (4, 8):
        grid = np.empty(dims, dtype=np.int64)
        grid.ravel()[mem[mem >= 0]] = np.flatnonzero(mem >= 0)
        assert grid[0].tolist() == list(range(0, 16, 2))
        assert grid[3].tolist() == list(range(17, 32, 2))
    elif dims == (3, 5):
        assert int(np.flatnonzero(mem == 2 * 5 + 3)[0]) == 17 and mem.size == 24
    else:
        assert mem.size == 56 * 37 * 2 * 3


@SETTINGS
@given(shapes())
def test_tile_levels_describe_the_physical_dimensions(shape):
    # Rebuild the physical dimensions from the public description alone.
    p = plan(shape)
    sizes = [p.padded_dimensions[d] for d in reversed(p.minor_to_major)]
    origin = [(d,) for d in reversed(p.minor_to_major)]
    assert len(p.tile_levels) == len(shape.layout.tiles)
    for i, level in enumerate(p.tile_levels):
        assert level.index == i and level.tile == shape.layout.tiles[i]
        sizes = [1] * level.added_dimensions + sizes
        origin = [()] * level.added_dimensions + origin
        k = sum(len(e.inputs) for e in level.entries)
        assert k == len(level.tile)
        assert [s for e in level.entries for s in e.input_sizes] == sizes[len(sizes) - k:]
        assert [o for e in level.entries for o in e.inputs] == origin[len(origin) - k:]
        for e in level.entries:
            assert e.size == math.prod(e.input_sizes)
            assert e.count == -(-e.size // e.tile_size)
        sizes = (sizes[:len(sizes) - k] + [e.count for e in level.entries]
                 + [e.tile_size for e in level.entries])
        fed = [tuple(sorted(set().union(*e.inputs))) for e in level.entries]
        origin = origin[:len(origin) - k] + fed + fed
    assert tuple(sizes) == p.physical_dimensions


@SETTINGS
@given(shapes(max_elements=20000))
def test_size_only_computation_matches_the_plan(shape):
    from xlashape.tiling import size_with_layout

    assert size_with_layout(shape, shape.layout) == plan(shape).size_in_bytes
