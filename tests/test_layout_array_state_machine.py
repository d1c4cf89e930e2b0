"""A hypothesis state machine drives a LayoutArray against a numpy model.

Like pyroaring's tests of its bitmap against a Python ``set``: every step
does the same thing to a :class:`~xlashape.LayoutArray` and to a plain numpy
array (the model) and checks that they agree. Steps: scalar and slice reads
and writes (numpy's basic indexing: ints, slices with any step, ``...``,
``None``), ``fill``, ``la[...] = array``, ``relayout`` and ``copy``,
zero-copy views (``np.asarray``, ``memoryview``, ``physical``,
``physical_array()``, a ``frombuffer`` wrapper of ``physical``) written
through and dropped, and ``release()`` attempts: refused while a view lives,
then every operation raises ``ReleasedArrayError`` until the machine makes a
new array from the model.

Layouts are random tiled layouts (repeated tiles, ``*``, tail padding), with
``E(n)`` sub-byte packing and the legacy ``padded_dimensions`` /
``padding_value`` fields, over every element type; values are random bit
patterns (NaNs, and PRED bytes other than 0/1, included). After every step:
the logical values equal the model's, every physical slot holds what the
layout says (elements where ``tiling.linear_index`` puts them, padding
elsewhere), PRED storage holds only 0/1, and ``exports`` counts the live
views.

Bounded for CI: ``XLASHAPE_STATE_EXAMPLES`` (default 40) runs of up to 25
steps.
"""

from __future__ import annotations

import gc
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule)

import xlashape as xs
from xlashape import LayoutArray, PrimitiveType as P, Shape, tiling

from test_layout_array import TYPES, check_physical, python_value, same
from test_layout_array_properties import layouts_for

MAX_SLOTS = 600     # physical slots per array: keeps every check cheap


def _packed(t, shape):
    return tiling.plan(shape).element_bits < 8


def _strided(t, shape):
    """Independent of the code under test: the plan's strides exist and the
    elements are byte-addressable."""
    return tiling.plan(shape).strides is not None and not _packed(t, shape)


def _has_pep3118(t):
    return t.hlo_name in {"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                          "f16", "f32", "f64", "c64", "c128"}


@st.composite
def array_shapes(draw):
    t = draw(st.sampled_from(TYPES))
    rank = draw(st.integers(0, 3))
    dims = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    shape = Shape(t, dims, draw(layouts_for(t, dims)))
    if tiling.plan(shape).element_count > MAX_SLOTS:
        shape = Shape(t, dims, xs.Layout(tuple(range(rank))[::-1]))
    return shape


def raw_values(data, t, shape):
    """Random bit patterns of type t (any byte for PRED: numpy reads nonzero as True)."""
    n = math.prod(shape) * t.dtype.itemsize
    raw = np.frombuffer(data.draw(st.binary(min_size=n, max_size=n)), np.uint8).copy()
    if t != P.PRED and t.bit_width < 8:
        raw &= (1 << t.bit_width) - 1
    return raw.view(t.dtype).reshape(shape)


def scalar_value(data, t):
    return python_value(t, raw_values(data, t, ())[()])


@st.composite
def basic_keys(draw, shape):
    """numpy basic indexing keys for `shape`: ints (negative too), slices of
    any step and out-of-range bounds, None, at most one Ellipsis."""
    rank = len(shape)
    per_axis = []
    for size in shape:
        if size and draw(st.booleans()):
            per_axis.append(draw(st.integers(-size, size - 1)))
        else:
            b = st.one_of(st.none(), st.integers(-size - 2, size + 2))
            step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool)))
            per_axis.append(slice(draw(b), draw(b), step))
    if draw(st.booleans()):          # a leading run, `...`, a trailing run
        a = draw(st.integers(0, rank))
        b = draw(st.integers(0, rank - a))
        items = per_axis[:a] + [Ellipsis] + per_axis[rank - b:]
    else:
        items = per_axis[:draw(st.integers(0, rank))]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


def assert_same_values(got, want, t):
    if not isinstance(want, np.ndarray):
        assert same(got, python_value(t, want)), (got, want)
        return
    assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
    for g, w in zip(got.reshape(-1), want.reshape(-1)):
        assert same(python_value(t, g), python_value(t, w)), (got, want)


def pred_bytes_clean(la):
    plan = tiling.plan(la.xla_shape)
    if la.dtype != np.bool_ or plan.element_bits != 8:
        return True
    return set(bytes(la.physical)) <= {0, 1}


VIEW_KINDS = ["asarray", "memoryview", "physical", "physical_array", "frombuffer"]


class LayoutArrayMachine(RuleBasedStateMachine):
    """A LayoutArray (self.la) and its numpy model (self.model)."""

    def _new(self, shape, values):
        self.t = shape.element_type
        self.shape = shape
        self.la = LayoutArray.from_numpy(values, shape)
        self.model = values.copy()
        self.views = []          # (kind, view): each holds one export of self.la
        self.released = False

    @initialize(shape=array_shapes(), data=st.data())
    def start(self, shape, data):
        self._new(shape, raw_values(data, shape.element_type, shape.dimensions))

    # -- reads and writes -------------------------------------------------------------

    @precondition(lambda self: not self.released and self.model.size)
    @rule(data=st.data())
    def get_scalar(self, data):
        idx = tuple(data.draw(st.integers(-d, d - 1)) for d in self.model.shape)
        assert same(self.la[idx], python_value(self.t, self.model[idx]))

    @precondition(lambda self: not self.released and self.model.size)
    @rule(data=st.data())
    def set_scalar(self, data):
        idx = tuple(data.draw(st.integers(-d, d - 1)) for d in self.model.shape)
        v = scalar_value(data, self.t)
        if data.draw(st.booleans()):
            v = np.asarray(v, dtype=self.t.dtype)[()] if self.t != P.PRED else v
        self.la[idx] = v
        self.model[idx] = v

    @precondition(lambda self: not self.released)
    @rule(data=st.data())
    def get_block(self, data):
        key = data.draw(basic_keys(self.model.shape))
        assert_same_values(self.la[key], self.model[key], self.t)

    @precondition(lambda self: not self.released)
    @rule(data=st.data())
    def set_block(self, data):
        key = data.draw(basic_keys(self.model.shape))
        target = np.shape(self.model[key])
        kind = data.draw(st.sampled_from(["scalar", "array", "row"]))
        if kind == "scalar":
            v = scalar_value(data, self.t)
        elif kind == "row" and target:
            v = raw_values(data, self.t, target[-1:])      # broadcast along the rest
        else:
            v = raw_values(data, self.t, target)
        self.la[key] = v
        self.model[key] = v

    @precondition(lambda self: not self.released)
    @rule(data=st.data())
    def out_of_range(self, data):
        if not self.model.ndim:
            return
        axis = data.draw(st.integers(0, self.model.ndim - 1))
        size = self.model.shape[axis]
        bad = data.draw(st.sampled_from([size, size + 7, -size - 1, 2 ** 70]))
        key = tuple(bad if a == axis else 0 for a in range(self.model.ndim))
        if 0 in self.model.shape:
            key = tuple(bad if a == axis else slice(None) for a in range(self.model.ndim))
        with pytest.raises(xs.ShapeIndexError,
                           match=f"index {bad} is out of bounds for axis {axis} with size {size}"):
            self.la[key]
        with pytest.raises(IndexError):
            self.la[key] = scalar_value(data, self.t)

    @precondition(lambda self: not self.released)
    @rule(data=st.data())
    def fill(self, data):
        v = scalar_value(data, self.t)
        self.la.fill(v)
        self.model[...] = v

    @precondition(lambda self: not self.released)
    @rule(data=st.data())
    def assign_all(self, data):
        v = raw_values(data, self.t, self.model.shape)
        if data.draw(st.booleans()):
            v = v[tuple(slice(None, None, -1) for _ in v.shape)]   # negative strides
        self.la[...] = v
        self.model[...] = v

    # -- new arrays from this one ----------------------------------------------------

    @precondition(lambda self: not self.released)
    @rule(data=st.data())
    def relayout(self, data):
        layout = data.draw(layouts_for(self.t, self.model.shape))
        target = Shape(self.t, self.model.shape, layout)
        if tiling.plan(target).element_count > MAX_SLOTS:
            return
        r = self.la.relayout(target)
        assert r.xla_shape == target
        assert_same_values(r.to_numpy(), self.model, self.t)
        check_physical(r, r.to_numpy(), self.t)
        assert pred_bytes_clean(r)
        if not self.views:                   # move on to the new layout
            old = self.la
            self.la, self.shape = r, target
            old.release()

    @precondition(lambda self: not self.released)
    @rule()
    def copy(self):
        c = self.la.copy()
        assert c.xla_shape == self.la.xla_shape and not c.readonly
        assert_same_values(c.to_numpy(), self.model, self.t)
        if self.model.size:
            c.fill(python_value(self.t, self.model.reshape(-1)[0]))   # independent storage
            c[(0,) * self.model.ndim] = python_value(self.t, self.model.reshape(-1)[-1])
        assert_same_values(self.la.to_numpy(), self.model, self.t)

    # -- views -------------------------------------------------------------------------

    @precondition(lambda self: not self.released and len(self.views) < 4)
    @rule(kind=st.sampled_from(VIEW_KINDS))
    def take_view(self, kind):
        la, t, shape = self.la, self.t, self.shape
        if kind == "asarray":
            if not _strided(t, shape):
                with pytest.raises(xs.ShapeValueError, match="Unable to avoid copy"):
                    la.__array__(copy=False)
                return
            v = np.asarray(la)
            assert_same_values(np.array(v), self.model, t)
        elif kind == "memoryview":
            if not (_strided(t, shape) and _has_pep3118(t)):
                with pytest.raises(xs.ShapeBufferError):
                    memoryview(la)
                return
            v = memoryview(la)
            assert v.shape == self.model.shape
        elif kind == "physical":
            v = la.physical
            assert v.nbytes == tiling.plan(shape).size_in_bytes
        elif kind == "physical_array":
            if _packed(t, shape):
                with pytest.raises(xs.ShapeBufferError, match="packs"):
                    la.physical_array()
                return
            v = la.physical_array()
            assert v.shape == tuple(tiling.plan(shape).physical_dimensions)
        else:
            v = LayoutArray.frombuffer(la.physical, shape)
            assert_same_values(v.to_numpy(), self.model, t)
        self.views.append((kind, v))

    @precondition(lambda self: not self.released and any(
        k in ("asarray", "frombuffer") for k, _ in self.views) and self.model.size)
    @rule(data=st.data())
    def write_through_view(self, data):
        kind, v = data.draw(st.sampled_from(
            [(k, v) for k, v in self.views if k in ("asarray", "frombuffer")]))
        idx = tuple(data.draw(st.integers(0, d - 1)) for d in self.model.shape)
        val = scalar_value(data, self.t)
        if kind == "asarray" and not v.flags.writeable:
            return
        v[idx] = val
        self.model[idx] = val

    @precondition(lambda self: self.views)
    @rule(data=st.data())
    def drop_view(self, data):
        kind, v = self.views.pop(data.draw(st.integers(0, len(self.views) - 1)))
        if kind in ("memoryview", "physical") and data.draw(st.booleans()):
            v.release()
        elif kind == "frombuffer" and data.draw(st.booleans()):
            v.release()
        del v
        gc.collect()

    # -- release -------------------------------------------------------------------------

    @precondition(lambda self: not self.released)
    @rule()
    def release(self):
        if self.views:
            with pytest.raises(xs.ShapeBufferError,
                               match=f"while {len(self.views)} buffer export"):
                self.la.release()
            return
        self.la.release()
        self.la.release()                  # twice is fine
        self.released = True

    @precondition(lambda self: self.released)
    @rule(data=st.data())
    def everything_raises_after_release(self, data):
        la = self.la
        ops = [lambda: la[(0,) * la.ndim], lambda: la[...], lambda: la.to_numpy(),
               lambda: la.fill(scalar_value(data, self.t)), lambda: la.copy(),
               lambda: la.relayout(la.layout), lambda: la.physical, lambda: np.asarray(la),
               lambda: la.physical_array(), lambda: memoryview(la), lambda: iter(la),
               lambda: la.__setitem__(Ellipsis, scalar_value(data, self.t)),
               lambda: la.__reduce__(), lambda: float(la)]
        op = data.draw(st.sampled_from(ops))
        with pytest.raises(xs.ReleasedArrayError,
                           match=r"operation on a released LayoutArray \(release\(\) was called\)"):
            op()
        assert repr(la).startswith("<released LayoutArray")
        assert la.shape == self.model.shape          # metadata stays

    @precondition(lambda self: self.released)
    @rule(shape=array_shapes(), data=st.data())
    def start_over(self, shape, data):
        if shape.dimensions == self.model.shape and shape.element_type == self.t:
            self._new(shape, self.model)
        else:
            self._new(shape, raw_values(data, shape.element_type, shape.dimensions))

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self):
        if self.released:
            return
        got = self.la.to_numpy()
        assert_same_values(got, self.model, self.t)
        check_physical(self.la, got, self.t)
        assert pred_bytes_clean(self.la)

    @invariant()
    def exports_count_the_views(self):
        if not self.released:
            assert self.la.exports == len(self.views)

    def teardown(self):
        self.views.clear()
        gc.collect()


LayoutArrayMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("XLASHAPE_STATE_EXAMPLES", "40")),
    stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large])
test_layout_array_state_machine = LayoutArrayMachine.TestCase
