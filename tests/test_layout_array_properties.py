"""Property tests: random shapes and layouts (repeated tiles, '*', L(n),
E(n), padded dimensions, padding values) and random source strides."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from xlashape import Layout, LayoutArray, PrimitiveType as P, Shape, tiling

from strategies import tiled_layout_parts
from test_layout_array import TYPES, _pad_value, check_physical, python_value, random_array, same

SETTINGS = settings(max_examples=int(os.environ.get("XLASHAPE_EXAMPLES", "150")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def layouts_for(draw, t, dims):
    m2m, tiles, padded, align = draw(tiled_layout_parts(dims))
    bits = 0
    if t.bit_width < 8 and t != P.PRED or (t == P.PRED and draw(st.booleans())):
        bits = draw(st.sampled_from([0, t.bit_width]))
    pv = draw(st.sampled_from([0, _pad_value(t)]))
    return Layout(m2m, tiles=tiles, padded_dimensions=padded, element_size_in_bits=bits,
                  tail_padding_alignment_in_elements=align, padding_value=pv)


@st.composite
def cases(draw):
    t = draw(st.sampled_from(TYPES))
    rank = draw(st.integers(0, 4))
    dims = tuple(draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank)))
    a = Shape(t, dims, draw(layouts_for(t, dims)))
    b = Shape(t, dims, draw(layouts_for(t, dims)))
    assume(tiling.plan(a).element_count <= 3000 and tiling.plan(b).element_count <= 3000)
    # a source view with arbitrary strides: a permuted, reversed, strided parent
    perm = draw(st.permutations(range(rank)))
    flips = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    step = draw(st.sampled_from([1, 2]))
    return t, a, b, perm, flips, step


@SETTINGS
@given(cases())
def test_random_layouts_roundtrip_place_and_relayout(case):
    t, a, b, perm, flips, step = case
    dims = a.dimensions
    # build x as a strided view of a bigger parent, holding random codes
    parent_dims = [dims[p] * step for p in perm]
    parent = random_array(t, parent_dims, seed=len(parent_dims))
    view = parent[tuple(slice(None, None, step) for _ in parent_dims)]
    inv = np.argsort(perm) if dims else []
    x = view.transpose(inv) if dims else view
    x = x[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    assert x.shape == dims
    la = LayoutArray.from_numpy(x, a)
    assert la.to_numpy().tobytes() == np.ascontiguousarray(x).tobytes()
    check_physical(la, x, t)
    for idx in list(np.ndindex(*dims))[:50]:
        assert same(la[idx], python_value(t, x[idx]))
    r = la.relayout(b)
    check_physical(r, x, t)
    out = np.empty(dims[::-1], dtype=t.dtype).T if dims else np.empty((), dtype=t.dtype)
    r.to_numpy(out=out)
    assert np.ascontiguousarray(out).tobytes() == np.ascontiguousarray(x).tobytes()
