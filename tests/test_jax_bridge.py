"""The JAX bridge: xlashape Layout <-> jax.experimental.layout.Layout, and a
jax.Array's format -> xlashape Shape. Runs against jax when it is installed;
the refusals and the duck-typed reverse direction need no jax."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlashape as xs
from xlashape import Layout, Shape, Tile, parse_layout, parse_shape
from xlashape.jax_bridge import from_jax_layout, shape_of, to_jax_layout

from strategies import tiled_layout_parts


def test_importing_xlashape_does_not_import_jax():
    code = ("import sys, numpy as np, xlashape, xlashape.cute, xlashape.jax_bridge;"
            "la = xlashape.LayoutArray('f32[2,2]{1,0:T(2,2)}'); la + 1; la.T; np.sum(la);"
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_from_jax_layout_duck_typed():
    jl = SimpleNamespace(major_to_minor=(0, 1), tiling=((8, 128), (2, 1)),
                         sub_byte_element_size_in_bits=0)
    assert from_jax_layout(jl) == parse_layout("{1,0:T(8,128)(2,1)}")
    jl = SimpleNamespace(major_to_minor=(1, 0, 2), tiling=None, sub_byte_element_size_in_bits=4)
    assert from_jax_layout(jl) == Layout((2, 0, 1), element_size_in_bits=4)
    with pytest.raises(xs.ShapeTypeError, match="expected a jax Layout"):
        from_jax_layout(object())


@pytest.mark.parametrize("layout, fragment", [
    (parse_layout("{1,0:T(8,128)L(1024)}"), r"L\(1024\)"),
    (parse_layout("{1,0:S(1)}"), r"S\(1\)"),
    (Layout((1, 0), padded_dimensions=(4, 8)), "the legacy padded_dimensions"),
    (Layout((1, 0), padding_value=1), "the legacy padded_dimensions"),
    (parse_layout("{1,0:SC(0:2)}"), "split configs"),
])
def test_fields_jax_cannot_hold_are_refused(layout, fragment):
    with pytest.raises(xs.InvalidShapeError, match="jax's Layout has no place for " + fragment):
        to_jax_layout(layout)


def test_element_size_that_fits_neither_width_is_refused():
    with pytest.raises(xs.InvalidShapeError, match="E\\(16\\) is neither"):
        to_jax_layout("f32[4]{0:E(16)}")


try:
    import jax
    import jax.numpy as jnp
    from jax.experimental import layout as jlayout
except ImportError:     # CI has no jax: the tests below are skipped
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax is not installed")


def _printed_by_xla(jax_layout, dtype):
    """XLA's own printing of the layout jax builds (jax's private helper)."""
    to_xla = getattr(jax_layout, "_to_xla_layout", None)
    if to_xla is None:
        pytest.skip("this jax has no _to_xla_layout")
    return str(to_xla(dtype))


@needs_jax
@pytest.mark.parametrize("text", [
    "f32[3,5]{1,0:T(2,2)}", "bf16[16,256]{0,1:T(8,128)(2,1)}", "f32[3,5]{0,1}",
    "s4[16,256]{1,0:T(8,128)(2,1)E(4)}", "f32[2,3,4]{2,1,0:T(2,*,4)}",
    "s8[64,256]{1,0:T(32,128)(4,1)}", "pred[8,128]{1,0:T(8,128)(4,1)}",
])
def test_to_jax_layout_prints_the_same_in_xla(text):
    shape = parse_shape(text)
    jl = to_jax_layout(shape)
    assert tuple(jl.major_to_minor) == shape.layout.major_to_minor
    assert _printed_by_xla(jl, shape.dtype) == str(shape.layout)
    assert from_jax_layout(jl) == shape.layout


@needs_jax
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_random_layouts_round_trip_through_jax(data):
    rank = data.draw(st.integers(1, 4))
    dims = tuple(data.draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    m2m, tiles, _, _ = data.draw(tiled_layout_parts(dims))
    layout = Layout(m2m, tiles=tiles)
    jl = to_jax_layout(layout)
    assert from_jax_layout(jl) == layout
    assert _printed_by_xla(jl, np.dtype(np.float32)) == str(layout)


@needs_jax
@pytest.mark.parametrize("dtype, hlo", [(np.float32, "f32"), (xs.PrimitiveType.BF16.dtype, "bf16"),
                                        (np.int8, "s8"), (np.bool_, "pred")])
def test_shape_of_a_jax_array(dtype, hlo):
    x = jnp.zeros((3, 5), dtype)
    s = shape_of(x)
    assert s == parse_shape(f"{hlo}[3,5]{{1,0}}")
    assert s.layout == from_jax_layout(x.format.layout if hasattr(x, "format") else
                                       x.layout.device_local_layout)


@needs_jax
def test_a_layout_from_xlashape_used_by_jax():
    # the CPU backend takes the default row-major layout through a Format
    if not hasattr(jlayout, "Format"):
        pytest.skip("this jax has no Format")
    dev = jax.devices("cpu")[0]
    fmt = jlayout.Format(to_jax_layout("f32[3,5]{1,0}"), jax.sharding.SingleDeviceSharding(dev))
    y = jax.device_put(np.arange(15, dtype=np.float32).reshape(3, 5), fmt)
    assert shape_of(y) == parse_shape("f32[3,5]{1,0}")
    assert Tile(8, 128) == from_jax_layout(to_jax_layout("{1,0:T(8,128)}")).tiles[0]
