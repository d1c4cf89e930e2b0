"""numpy's protocols for :class:`~xlashape.LayoutArray`, in Python.

The compiled class keeps thin methods that call into this module: ufuncs
(NEP 13, ``__array_ufunc__``), numpy functions (NEP 18,
``__array_function__``), the operators, the numpy-style methods (``astype``,
``reshape``, ``sum``, ...), zero-copy views (``.T``, ``transpose``,
``reshape``) and advanced indexing (integer arrays and boolean masks).

What comes back
---------------
* An elementwise ufunc (``np.add``, ``np.sin``, ``la + 1``, ``la < lb``, ...)
  whose array operands are LayoutArrays of **one layout** (same dimensions,
  dimension order, tiles and legacy padding; the element types may differ),
  mixed with scalars only, runs on the physical buffers directly (padding
  slots are masked out, never computed) and returns a **LayoutArray in that
  layout**, with numpy's result dtype and the layout's ``padding_value`` in
  every padding slot (0 when the result type cannot hold that value exactly).
  Sub-byte layouts packed with ``E(n)`` take the same result but compute
  through the logical array.
* Anything else (numpy arrays or LayoutArrays of other layouts among the
  operands, broadcasting between different shapes, ``where=``, reductions,
  ``accumulate``, ``outer``, gufuncs such as ``matmul``, and numpy functions
  such as ``np.sum``, ``np.concatenate``, ``np.mean``) gives exactly numpy's
  result on the logical arrays in C order (a zero-copy view for row-major
  layouts, else a copy; so float sums do not depend on the layout), as
  numpy arrays or numpy scalars. A 0-d numpy array counts as a scalar. A result
  dtype that has no XLA element type (``object``, ``float128``, strings)
  also comes back as numpy.
* ``out=`` a LayoutArray writes into its buffer (directly when the layouts
  match, otherwise through the logical array) and returns it, as numpy
  returns ``out``.
* ``np.transpose``, ``np.swapaxes``, ``np.moveaxis``, ``np.permute_dims``,
  ``np.reshape`` and ``np.astype`` of a LayoutArray give what the methods of
  the same name give (LayoutArrays; the transposes are zero-copy views).
"""

from __future__ import annotations

import numbers
import operator
import functools
import warnings
from functools import lru_cache

import numpy as np

from .errors import (InvalidShapeError, ReadOnlyBufferError, ShapeAxisError, ShapeIndexError,
                     ShapeTypeError, XlaShapeError, as_family as _as_family)
from . import errors as _errors
from .layout import Layout
from .primitive_types import PrimitiveType, primitive_type_from_dtype
from .shape import Shape
from . import tiling
from .views import permuted_shape, reshaped_shape

try:
    from numpy.lib.array_utils import normalize_axis_tuple as _normalize_axis_tuple
except ImportError:  # numpy < 2
    from numpy.core.numeric import normalize_axis_tuple as _normalize_axis_tuple

_LA = None


def _family(fn):
    """The one boundary where numpy's errors become xlashape's: every entry
    point that LayoutArray's methods and numpy's protocols call is wrapped,
    and a builtin or numpy exception raised inside (numpy's AxisError,
    casting errors of ``out=``, out-of-range indices of ``np.take`` /
    ``np.put`` / ``ufunc.at``, unknown dtypes, ...) leaves as its
    ``XlaShapeError`` twin with the same message (``errors.as_family``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            new = _as_family(e)
            if new is e:
                raise
            raise new from None
    return wrapper


def _la_type():
    """The LayoutArray class (imported late: this module is loaded by it)."""
    global _LA
    if _LA is None:
        from ._core import LayoutArray
        _LA = LayoutArray
    return _LA


# -- layouts ----------------------------------------------------------------

def _packed(la) -> bool:
    """True when several elements share a byte (``E(n)`` below 8 bits)."""
    return la.plan.element_bits < 8


def _geometry(la):
    """What decides where every logical element sits, element type aside."""
    p = la.plan
    return (p.dimensions, p.minor_to_major, p.layout.tiles, p.padded_dimensions)


def _element_bits_for(layout: Layout, et: PrimitiveType) -> int:
    """``E(n)`` of ``layout`` if it still means something for type ``et``."""
    bits = layout.element_size_in_bits
    if bits == et.byte_width * 8 or (et.bit_width < 8 and bits == et.bit_width):
        return bits
    return 0


def _padding_for(pv, dtype):
    """``pv`` if ``dtype`` holds it exactly, else 0."""
    if pv == 0:
        return pv
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = np.array(pv, dtype=dtype)
            same = bool(v == pv) or (pv != pv and bool(v != v))
    except (OverflowError, ValueError, TypeError):
        return 0
    return pv if same else 0


def result_shape(shape: Shape, dtype) -> Shape:
    """``shape``'s dimensions and layout for elements of numpy ``dtype``.

    ``E(n)`` is kept when it is the new type's natural width or its packed
    sub-byte width, ``padding_value`` when the new type holds it exactly.
    Raises :class:`~xlashape.InvalidShapeError` for a dtype without an XLA
    element type.
    """
    et = primitive_type_from_dtype(np.dtype(dtype))
    layout = shape.layout
    layout = layout.replace(element_size_in_bits=_element_bits_for(layout, et),
                            padding_value=_padding_for(layout.padding_value, et.dtype))
    return Shape(et, shape.dimensions, layout, shape.dynamic_dimensions)


@lru_cache(maxsize=16)
def _logical_mask(geometry_shape: Shape):
    """Bool array over the physical dimensions: True at logical elements,
    None when there is no padding slot inside them (cached per layout)."""
    p = tiling.plan(geometry_shape)
    n_phys = 1
    for d in p.physical_dimensions:
        n_phys *= d
    if n_phys == p.unpadded_element_count:
        return None
    m = _la_type()(geometry_shape)
    m.fill(True)
    arr = m.physical_array()
    arr.flags.writeable = False
    return arr


def _axis_dims(p):
    """For each physical axis, the logical dimension its coordinate comes
    from (None for an axis that is always 0); None when '*' mixes two."""
    deps = {d: {d} for d in range(p.rank)}
    for op, dst, a, b, c in p.ops:
        deps[dst] = deps.get(a, set()) | (deps.get(b, set()) if op == tiling.OP_MULADD else set())
    out = []
    for r in getattr(p, "_final_regs", ()):
        ds = deps.get(r, set())
        if len(ds) > 1:
            return None
        out.append(next(iter(ds)) if ds else None)
    return out if len(out) == len(p.physical_dimensions) else None


def _runs(flags):
    """Maximal runs of True in a 1-D bool array, as slices."""
    out, start = [], None
    for i, f in enumerate(flags.tolist() + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i))
            start = None
    return out


def _dim_boxes(m):
    """Boxes (tuples of (start, stop)) covering exactly the True cells of
    the small bool array m, or None if that takes too many."""
    if m.ndim == 0:
        return [()] if m else []
    boxes = []
    for lo, hi in _runs(m.any(axis=tuple(range(1, m.ndim)))):
        # rows lo..hi-1 of axis 0: split further where they differ
        groups = []
        for i in range(lo, hi):
            if groups and np.array_equal(m[groups[-1][0]], m[i]):
                groups[-1][1] = i + 1
            else:
                groups.append([i, i + 1])
        for a, b in groups:
            inner = _dim_boxes(m[a])
            if inner is None:
                return None
            boxes.extend(((a, b),) + box for box in inner)
        if len(boxes) > 8:
            return None
    return boxes


@lru_cache(maxsize=16)
def _mask_boxes(geometry_shape: Shape):
    """Boxes of the physical array that hold only logical elements and
    together hold them all: the product, over logical dimensions, of each
    dimension's own boxes. None if the layout mixes dimensions ('*') or
    needs too many boxes (then the mask is used)."""
    mask = _logical_mask(geometry_shape)
    p = tiling.plan(geometry_shape)
    owner = _axis_dims(p)
    if mask is None or owner is None:
        return None
    per_dim = []
    for d in range(p.rank):
        axes = [a for a, o in enumerate(owner) if o == d]
        others = tuple(a for a in range(mask.ndim) if a not in axes)
        md = mask.any(axis=others) if others else mask
        boxes = _dim_boxes(md)
        if boxes is None:
            return None
        per_dim.append((axes, boxes))
    result = [[slice(None)] * mask.ndim]
    for axes, boxes in per_dim:
        result = [_with(r, axes, box) for r in result for box in boxes]
        if len(result) > 16:
            return None
    result = [tuple(r) for r in result]
    # every logical slot covered exactly once: the boxes partition the mask
    count = np.zeros(mask.shape, np.int8)
    for r in result:
        count[r] += 1
    if not np.array_equal(count, mask.astype(np.int8)):
        return None
    return result


def _with(row, axes, box):
    row = list(row)
    for a, (lo, hi) in zip(axes, box):
        row[a] = slice(lo, hi)
    return row


def _geometry_shape(la):
    layout = la.layout.replace(element_size_in_bits=0, padding_value=0,
                               tail_padding_alignment_in_elements=1, memory_space=0)
    return Shape(PrimitiveType.PRED, la.shape, layout)


def _mask_of(la):
    return _logical_mask(_geometry_shape(la))


def _new(shape: Shape):
    """A LayoutArray whose padding holds padding_value; its logical elements
    are about to be overwritten."""
    return _la_type()._empty(shape)


def _dense_shape(la, dims) -> Shape:
    """``dims`` in XLA's default (row-major) layout, keeping the element
    type, a packed ``E(n)``, the memory space and the padding value."""
    lay = la.layout
    bits = lay.element_size_in_bits if _packed(la) else 0
    layout = Layout(tuple(range(len(dims) - 1, -1, -1)), element_size_in_bits=bits,
                    memory_space=lay.memory_space, padding_value=lay.padding_value)
    return Shape(la.xla_shape.element_type, tuple(dims), layout)


def logical(la):
    """The logical array in C order: a zero-copy view when the layout is
    row-major (strided and C-contiguous), else a copy. Reductions and numpy
    functions use it, so their results (float sums included) do not depend
    on the layout."""
    if la.strides is not None and la.flags.c_contiguous:
        arr = np.asarray(la)
        if arr.dtype == np.bool_:
            # PRED: a wrapped buffer may hold other nonzero bytes than 1,
            # which numpy's functions would pass on (np.take, np.sort): read
            # as 0/1 like every other read
            raw = arr.view(np.uint8)
            if raw.size and raw.max() > 1:
                return raw != 0
        return arr
    return la.to_numpy()


# -- ufuncs (NEP 13) --------------------------------------------------------

_NO = object()


def _foreign(x) -> bool:
    """An operand with its own ``__array_ufunc__`` that numpy should ask."""
    f = getattr(type(x), "__array_ufunc__", None)
    return f is not None and f is not np.ndarray.__array_ufunc__ and \
        not isinstance(x, _la_type())


def _is_scalar(x) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) or (
        isinstance(x, np.ndarray) and x.ndim == 0)


@_family
def array_ufunc(self, ufunc, method, inputs, kwargs):
    LA = _la_type()
    out = kwargs.get("out", ())
    if out is None:
        out = ()
    elif not isinstance(out, tuple):
        out = (out,)
    for x in inputs + out:
        if x is not None and _foreign(x):
            return NotImplemented
    for o in out:
        if isinstance(o, LA) and o.readonly:
            raise ReadOnlyBufferError(
                "output array is read-only (the LayoutArray wraps a read-only buffer)")
    if method == "__call__" and ufunc.signature is None:
        r = _same_layout_call(ufunc, inputs, kwargs, out)
        if r is not _NO:
            return r
    return _logical_call(ufunc, method, inputs, kwargs, out)


# ml_dtypes' integer floor_divide and remainder loops for the 1-, 2- and 4-bit
# types crash the process (SIGSEGV) on a zero divisor in arrays of a few
# hundred elements or more (ml_dtypes 0.6.0, numpy 2.4: np.ones(5000, int4) //
# np.zeros(5000, int4)). numpy's own 8-bit loops give the same values for every
# pair of operands (0 for a zero divisor, the same wrap-around, the same
# divide-by-zero warning), so these calls run on 8-bit copies and the results
# are cast back to the type numpy resolves.
_FRAGILE_UFUNCS = (np.floor_divide, np.remainder)


def _small_ints():
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a dependency
        return {}
    wide = {}
    for name in ("int1", "int2", "int4", "uint1", "uint2", "uint4"):
        t = getattr(ml_dtypes, name, None)
        if t is not None:
            wide[np.dtype(t)] = np.dtype(np.int8 if name.startswith("i") else np.uint8)
    return wide


_SMALL_INTS = _small_ints()


def _widened(x):
    dt = getattr(x, "dtype", None)
    wide = _SMALL_INTS.get(dt) if dt is not None else None
    if wide is None:
        return x
    return np.asarray(x).astype(wide)


# numpy 2.4.6 crashes (SIGSEGV) comparing an unsigned or small integer array
# with a Python int outside its range under ``where=``:
# np.greater(np.zeros(8, np.uint16), -2, where=mask). The masked path of a
# padded layout passes where=; such comparisons run without it, then the
# selected results are copied (comparing padding slots costs nothing and
# raises nothing).
_COMPARISONS = (np.equal, np.not_equal, np.less, np.less_equal, np.greater,
                np.greater_equal)


def _compare_without_where(ufunc, args, kw):
    kw = dict(kw)
    where = kw.pop("where")
    out = kw.pop("out", None)
    if isinstance(out, np.ndarray):
        out = (out,)
    result = ufunc(*args, **kw)
    if out is None or out[0] is None:
        return result
    np.copyto(out[0], result, where=where, casting=kw.get("casting", "same_kind"))
    return out[0]


def _stand_ins(args):
    """Empty arrays of the operands' types and ranks (scalars as they are):
    numpy's type resolution and errors without computing anything."""
    return [np.empty((0,) * max(np.ndim(x), 1), x.dtype) if isinstance(x, np.ndarray) else x
            for x in args]


def _small_int_loop(ufunc, method, args, kw) -> bool:
    """Whether numpy would run ``ufunc`` on ``args`` with a 2- or 4-bit
    integer loop (the one that can crash), from its type resolution on empty
    stand-ins."""
    dtype = kw.get("dtype")
    if method in ("__call__", "outer"):
        stand_ins = _stand_ins(args)
        try:
            res = getattr(ufunc, method)(*stand_ins, **({"dtype": dtype} if dtype else {}))
        except Exception:       # numpy's own error comes from the real call
            return False
        return res.dtype in _SMALL_INTS
    first = np.dtype(dtype) if dtype is not None else getattr(args[0], "dtype", None)
    return first in _SMALL_INTS


def _operand_dtype(x):
    """What numpy's type resolution sees of an operand: a Python int, float
    or complex stays a weak scalar (its type), anything else its dtype."""
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(np.bool_)
    for t in (int, float, complex):
        if isinstance(x, t) and not isinstance(x, np.generic):
            return t
    return x.dtype if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x).dtype


def _loop_dtypes(ufunc, args, dtype):
    """The input dtypes of the loop numpy resolves for ``ufunc(*args)``
    (``uint2 // float8_e4m3fn`` runs the uint2 loop, on 1.5 cast to 1), or
    None when numpy cannot say."""
    try:
        ins = tuple(_operand_dtype(x) for x in args)
        sig = {} if dtype is None else \
            {"signature": (None,) * ufunc.nin + (np.dtype(dtype),) * ufunc.nout}
        dts = ufunc.resolve_dtypes(ins + (None,) * ufunc.nout, **sig)
    except Exception:       # numpy's own error comes from the real call
        return None
    return dts[:ufunc.nin]


def _cast_to_loop(args, loop):
    """Every operand cast to the dtype of numpy's resolved loop (a float8
    divisor of a uint2 loop is truncated, as numpy's loop sees it), before
    the small integers are widened; unchanged when the loop is unknown."""
    if loop is None:
        return list(args)
    return [np.asarray(x).astype(t) if isinstance(x, (np.ndarray, np.generic))
            or t != _operand_dtype(x) else x
            for x, t in zip(args, loop)]


def _refuse_out(ufunc, method, args, out):
    """numpy's own error for a bad ``out=`` (a string, a list, a tuple of
    the wrong length), from a call on int8 stand-ins that runs no loop."""
    stand_ins = [np.zeros(1, np.int8) for _ in args]
    getattr(ufunc, method)(*stand_ins, out=out)
    raise TypeError(f"'out' must be None or a tuple of {ufunc.nout} array(s), "
                    f"got {type(out).__name__}")


def _ufunc(ufunc, method, *args, **kw):
    """``getattr(ufunc, method)(*args, **kw)`` on numpy operands, through
    8-bit copies where ml_dtypes' own loop could crash, and comparisons
    with Python ints without ``where`` (see above). numpy's object loop
    raises AttributeError for an operand without the ufunc's method
    (``np.arctan2(None, a)``): that leaves as a ShapeTypeError that is also
    an AttributeError."""
    try:
        return _ufunc_body(ufunc, method, *args, **kw)
    except AttributeError as e:
        if isinstance(e, XlaShapeError) or not any(
                not isinstance(x, (np.ndarray, np.generic, int, float, complex))
                or getattr(x, "dtype", None) == object for x in args):
            raise
        new = BaseException.__new__(_errors._twin_class(ShapeTypeError, AttributeError))
        new.args = e.args
        raise new from None


def _ufunc_body(ufunc, method, *args, **kw):
    if ufunc in _COMPARISONS and method == "__call__" and \
            kw.get("where", True) is not True and \
            any(isinstance(x, int) and not isinstance(x, bool) for x in args):
        return _compare_without_where(ufunc, args, kw)
    if ufunc not in _FRAGILE_UFUNCS or not any(
            getattr(x, "dtype", None) in _SMALL_INTS for x in args):
        return getattr(ufunc, method)(*args, **kw)
    if not _small_int_loop(ufunc, method, args, kw):
        # another loop (a float operand: int2 // bf16 is computed in float32)
        return getattr(ufunc, method)(*args, **kw)
    kw = dict(kw)
    out = raw_out = kw.pop("out", None)
    if isinstance(out, np.ndarray):
        out = (out,)
    if out is not None and not (
            isinstance(out, tuple) and len(out) == ufunc.nout
            and all(o is None or isinstance(o, np.ndarray) for o in out)):
        _refuse_out(ufunc, method, args, raw_out)
    dtype = kw.pop("dtype", None)
    kw.pop("signature", None)
    casting = kw.pop("casting", "same_kind")
    if method in ("__call__", "outer"):
        # numpy's type resolution and casting errors, on empty stand-ins
        stand_ins = _stand_ins(args)
        probe_kw = {"casting": casting}
        if dtype is not None:
            probe_kw["dtype"] = dtype
        probe = getattr(ufunc, method)(*stand_ins, **probe_kw)
        if out is not None and out[0] is not None:
            getattr(ufunc, method)(*stand_ins, out=np.empty(probe.shape, out[0].dtype),
                                   **probe_kw)
        res_dtype = probe.dtype
        args = _cast_to_loop(args, _loop_dtypes(ufunc, args, dtype))
    else:   # reduce, accumulate, reduceat, at: the operand's own type
        res_dtype = np.dtype(dtype) if dtype is not None else args[0].dtype
        if method == "at" and len(args) == 3:
            # ufunc.at(target, indices, values): the loop numpy resolves
            # for (target, values)
            loop = _loop_dtypes(ufunc, (args[0], args[2]), dtype)
            if loop is not None:
                # a copy of the target in the loop's type (8-bit for a small
                # integer loop), the values cast to it, the result cast back
                work = _widened(args[0].astype(loop[0]))
                values = _widened(_cast_to_loop(args[2:], loop[1:])[0])
                ufunc.at(work, args[1], values, **kw)
                np.copyto(args[0], work.astype(res_dtype))
                return None
    wide = [_widened(x) for x in args]
    if method == "at":
        target = wide[0]
        ufunc.at(target, *wide[1:], **kw)
        np.copyto(args[0], target.astype(res_dtype))
        return None
    # `where` applies to the 8-bit computation too: unselected slots (a
    # layout's padding) are not divided at all
    where = kw.get("where", True) if method == "__call__" else True
    if where is not True:
        w_probe = ufunc(*_stand_ins(wide))
        kw["out"] = np.zeros(np.broadcast_shapes(*(np.shape(x) for x in wide),
                                                 np.shape(where)), w_probe.dtype)
    result = getattr(ufunc, method)(*wide, **kw)
    # astype wraps around as the small types' own loops do (int1: -1 // -1
    # is -1); a 0-d result comes back as a scalar, as numpy gives it
    result = np.asarray(result).astype(res_dtype)
    if result.ndim == 0:
        result = result[()]
    if out is None or out[0] is None:
        return result
    np.copyto(out[0], result, casting="unsafe", where=where)
    return out[0]


def _same_layout_call(ufunc, inputs, kwargs, out):
    """Elementwise on LayoutArrays of one layout: physical buffers, or the
    logical arrays for packed sub-byte layouts; _NO when not applicable."""
    LA = _la_type()
    where = kwargs.get("where", True)
    if not (where is True or (isinstance(where, (bool, np.bool_)) and where)):
        return _NO
    ref = next((x for x in inputs if isinstance(x, LA)), None)
    if ref is None:
        return _NO
    geom = _geometry(ref)
    for x in inputs:
        if isinstance(x, LA):
            if _geometry(x) != geom:
                return _NO
        elif not _is_scalar(x):
            return _NO
    if len(out) not in (0, ufunc.nout):
        return _NO
    for o in out:
        if o is not None and not (isinstance(o, LA) and _geometry(o) == geom):
            return _NO
    kw = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
    # numpy's own dtype resolution and errors (casting, Python int
    # overflow), on empty stand-ins for the arrays
    probe_kw = dict(kw)
    if out:     # numpy's casting check of out= happens here too
        probe_kw["out"] = tuple(None if o is None else np.empty((0,), o.dtype) for o in out)
    probe = ufunc(*[np.empty((0,), x.dtype) if isinstance(x, LA) else x
                    for x in inputs], **probe_kw)
    probe = probe if isinstance(probe, tuple) else (probe,)
    outs = list(out) if out else [None] * ufunc.nout
    try:
        for i, o in enumerate(outs):
            if o is None:
                outs[i] = _new(result_shape(ref.xla_shape, probe[i].dtype))
    except XlaShapeError:
        return _NO      # a result type XLA does not have: numpy's answer
    packed = any(_packed(x) for x in list(inputs) + outs if isinstance(x, LA))
    if packed:
        # several elements per byte: through the logical arrays
        tmp = _ufunc(ufunc, "__call__", *[np.asarray(x) if isinstance(x, LA) else x
                                         for x in inputs],
                     out=tuple(np.empty(o.shape, o.dtype) for o in outs), **kw)
        tmp = tmp if isinstance(tmp, tuple) else (tmp,)
        for o, t in zip(outs, tmp):
            o[...] = t
    else:
        mask = _mask_of(ref)
        phys_in = [x.physical_array() if isinstance(x, LA) else x for x in inputs]
        phys_out = tuple(o.physical_array() for o in outs)
        # Unary loops stay on the masked path: numpy 2.4's unary loops can
        # ignore the input stride of a strided view written to a strided out
        # (np.negative(a[::8], out=o[::8]) on float64 reads a[0], a[1], ...).
        boxes = None if mask is None or ufunc.nin < 2 else \
            _mask_boxes(_geometry_shape(ref))
        if mask is None:
            _ufunc(ufunc, "__call__", *phys_in, out=phys_out, **kw)
        elif boxes is not None:
            # padding-free boxes: numpy's fast unmasked loops, box by box
            for box in boxes:
                _ufunc(ufunc, "__call__", *[x[box] if isinstance(x, np.ndarray) and x.ndim
                                            else x for x in phys_in],
                       out=tuple(o[box] for o in phys_out), **kw)
        else:
            _ufunc(ufunc, "__call__", *phys_in, out=phys_out, where=mask, **kw)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _writable_target(o, writeback):
    """A numpy array that receives results for LayoutArray ``o``: its
    zero-copy view when the layout is strided, else a copy written back."""
    if o.readonly:
        raise ReadOnlyBufferError(
            "output array is read-only (the LayoutArray wraps a read-only buffer)")
    if o.strides is not None and o.dtype != np.bool_:
        return np.asarray(o)
    # tiled layouts, and PRED (whose bytes must stay 0/1: the write-back
    # through la[...] = tmp folds whatever numpy stored)
    tmp = o.to_numpy()
    writeback.append((o, tmp))
    return tmp


def _logical_call(ufunc, method, inputs, kwargs, out):
    LA = _la_type()
    writeback = []
    ins = list(inputs)
    if method == "at" and ins and isinstance(ins[0], LA):
        ins[0] = _writable_target(ins[0], writeback)
    ins = [logical(x) if isinstance(x, LA) else x for x in ins]
    kw = dict(kwargs)
    if out:
        kw["out"] = tuple(_writable_target(o, writeback) if isinstance(o, LA) else o
                          for o in out)
    for k in ("where", "initial"):
        if isinstance(kw.get(k), LA):
            kw[k] = logical(kw[k])
    result = _ufunc(ufunc, method, *ins, **kw)
    for o, tmp in writeback:
        o[...] = tmp
    if out and any(isinstance(o, LA) for o in out):
        if isinstance(result, tuple):
            return tuple(o if isinstance(o, LA) else r for o, r in zip(out, result))
        if isinstance(out[0], LA):
            return out[0]
    return result


# -- operators ---------------------------------------------------------------

def _defers(other) -> bool:
    """numpy's rule: give way to an operand that opts out of ufuncs."""
    return getattr(type(other), "__array_ufunc__", 0) is None


@_family
def binop(ufunc, a, b):
    if _defers(b):
        return NotImplemented
    return ufunc(a, b)


@_family
def rbinop(ufunc, a, b):
    if _defers(b):
        return NotImplemented
    return ufunc(b, a)


@_family
def ibinop(ufunc, a, b):
    if _defers(b):
        return NotImplemented
    return ufunc(a, b, out=(a,))


@_family
def compare(ufunc, a, b):
    """``==`` / ``!=`` fall back like numpy's when no loop compares the types."""
    if _defers(b):
        return NotImplemented
    try:
        return ufunc(a, b)
    except TypeError:
        if ufunc is np.equal:
            return np.asarray(a).__eq__(b)
        if ufunc is np.not_equal:
            return np.asarray(a).__ne__(b)
        raise


def _fast_power(a, b):
    """The ufunc numpy's ``ndarray.__pow__`` uses instead of ``np.power`` for
    this exponent, or None: for float and complex arrays (numpy's own float
    types, not ml_dtypes'), an exact Python int -1 or 2 is ``reciprocal`` or
    ``square`` and an exact Python float 0.5 is ``sqrt`` (their results can
    differ from ``power``'s in the last bit)."""
    if a.dtype.kind not in "fc" or a.dtype.type.__module__ != "numpy":
        return None
    if type(b) is int:
        return np.reciprocal if b == -1 else np.square if b == 2 else None
    if type(b) is float and b == 0.5:
        return np.sqrt
    return None


@_family
def power(a, b, mod):
    """``a ** b`` as numpy's operator computes it (its fast exponents)."""
    if mod is not None or _defers(b):
        return NotImplemented
    fast = _fast_power(a, b)
    if fast is not None:
        return fast(a)
    return np.power(a, b)


@_family
def ipower(a, b):
    """``a **= b`` as numpy's operator computes it (its fast exponents)."""
    if _defers(b):
        return NotImplemented
    fast = _fast_power(a, b)
    if fast is not None:
        return fast(a, out=(a,))
    return np.power(a, b, out=(a,))


# -- numpy functions (NEP 18) ------------------------------------------------

def _convert(x):
    LA = _la_type()
    if isinstance(x, LA):
        return logical(x)
    if type(x) in (list, tuple):
        return type(x)(_convert(v) for v in x)
    return x


def _first_is_la(args, kwargs, name):
    LA = _la_type()
    a = args[0] if args else kwargs.get(name)
    return isinstance(a, LA)


def _fn_transpose(a, axes=None):
    return a.transpose(axes)


def _fn_swapaxes(a, axis1, axis2):
    return a.swapaxes(axis1, axis2)


def _fn_moveaxis(a, source, destination):
    n = a.ndim
    source = _normalize_axis_tuple(source, n, "source")
    destination = _normalize_axis_tuple(destination, n, "destination")
    if len(source) != len(destination):
        raise InvalidShapeError(
            "`source` and `destination` arguments must have the same number of "
            f"elements, got {len(source)} and {len(destination)}")
    order = [d for d in range(n) if d not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return a.transpose(order)


def _fn_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if shape is None:
        shape = newshape
    return a.reshape(shape, order=order, copy=copy)


def _fn_astype(x, dtype, /, *, copy=True, device=None):
    if device not in (None, "cpu"):
        raise ShapeTypeError(f"LayoutArray lives on the CPU, got device={device!r}")
    return x.astype(dtype, copy=copy)


def _fn_shape(a):
    return a.shape


def _fn_ndim(a):
    return a.ndim


def _fn_size(a, axis=None):
    if axis is None:
        return a.size
    # numpy's own answer and errors (AxisError, a tuple of axes), on a
    # zero-stride stand-in of the same shape
    return np.size(np.broadcast_to(np.empty((), np.int8), a.shape), axis)


_SPECIAL = {
    np.transpose: ("a", _fn_transpose),
    np.swapaxes: ("a", _fn_swapaxes),
    np.moveaxis: ("a", _fn_moveaxis),
    np.reshape: ("a", _fn_reshape),
    np.shape: ("a", _fn_shape),
    np.ndim: ("a", _fn_ndim),
    np.size: ("a", _fn_size),
}
if hasattr(np, "permute_dims"):
    _SPECIAL[np.permute_dims] = ("a", _fn_transpose)
if hasattr(np, "astype"):
    _SPECIAL[np.astype] = ("x", _fn_astype)

# functions that write into their first argument
_WRITES_FIRST = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
                 np.put_along_axis}


@_family
def array_function(self, func, types, args, kwargs):
    LA = _la_type()
    for t in types:
        if not (issubclass(t, LA) or issubclass(t, np.ndarray)):
            return NotImplemented
    special = _SPECIAL.get(func)
    if special is not None and _first_is_la(args, kwargs, special[0]):
        return special[1](*args, **kwargs)
    writeback = []
    args = list(args)
    if func in _WRITES_FIRST and args and isinstance(args[0], LA):
        args[0] = _writable_target(args[0], writeback)
    args = [_convert(a) for a in args]
    out = kwargs.get("out")
    kwargs = {k: (_convert(v) if k != "out" else v) for k, v in kwargs.items()}
    if isinstance(out, LA):
        kwargs["out"] = _writable_target(out, writeback)
    impl = getattr(func, "_implementation", func)
    result = impl(*args, **kwargs)
    for o, tmp in writeback:
        o[...] = tmp
    if isinstance(out, LA):
        return out
    return result


# -- views: transpose and reshape (their Shapes come from xlashape.views) ------

def _view(la, shape: Shape):
    """A LayoutArray on ``la``'s storage in ``shape`` (same bytes)."""
    return _la_type().frombuffer(la.physical, shape)


def _axes_arg(axes, n):
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    if axes is None or (isinstance(axes, (tuple, list)) and len(axes) == 0 and n != 0):
        return tuple(range(n - 1, -1, -1))
    try:
        axes = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise ShapeTypeError(
            f"transpose axes must be integers, got {axes!r}") from None
    if len(axes) != n:
        raise InvalidShapeError(
            f"axes don't match array: {len(axes)} axes given for a {n}-dimensional array")
    norm = []
    for a in axes:
        if not -n <= a < n:
            raise ShapeAxisError(
                f"axis {a} is out of bounds for array of dimension {n}")
        norm.append(a % n if n else a)
    if len(set(norm)) != n:
        raise InvalidShapeError(f"repeated axis in transpose: {axes}")
    return tuple(norm)


@_family
def transpose(la, axes):
    return _view(la, permuted_shape(la.xla_shape, _axes_arg(axes, la.ndim)))


@_family
def swapaxes(la, axis1, axis2):
    n = la.ndim
    a1, a2 = _normalize_axis_tuple((axis1, axis2), n, allow_duplicate=True)
    axes = list(range(n))
    axes[a1], axes[a2] = axes[a2], axes[a1]
    return transpose(la, (axes,))


def _shape_arg(args, size):
    if len(args) == 1 and not isinstance(args[0], (numbers.Integral, np.integer)):
        args = args[0]
    try:
        dims = [operator.index(d) for d in (args if isinstance(args, (tuple, list)) else [args])]
    except TypeError:
        raise ShapeTypeError(
            f"reshape takes integers (or a tuple of them), got {args!r}") from None
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise InvalidShapeError("can only specify one unknown dimension")
    if any(d < -1 for d in dims):
        raise InvalidShapeError(f"negative dimensions not allowed: {tuple(dims)}")
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if unknown:
        if known == 0 or size % known:
            raise InvalidShapeError(
                f"cannot reshape array of size {size} into shape {tuple(dims)}")
        dims[unknown[0]] = size // known
    elif known != size:
        raise InvalidShapeError(
            f"cannot reshape array of size {size} into shape {tuple(dims)}")
    return tuple(dims)


@_family
def reshape(la, args, order="C", copy=None):
    dims = _shape_arg(args, la.size)
    if order == "A":
        f = la.flags
        order = "F" if f.f_contiguous and not f.c_contiguous else "C"
    if order not in ("C", "F"):
        raise InvalidShapeError(f"order must be one of 'C', 'F', 'A', got {order!r}")
    if copy is not True:
        if order == "C":
            shape = reshaped_shape(la.xla_shape, dims)
        else:
            # Fortran order is C order on the reversed dimensions
            rev = tuple(range(la.ndim - 1, -1, -1))
            shape = reshaped_shape(permuted_shape(la.xla_shape, rev), dims[::-1])
            if shape is not None:
                shape = permuted_shape(shape, tuple(range(len(dims) - 1, -1, -1)))
        if shape is not None:
            return _view(la, shape)
        if copy is False:
            raise InvalidShapeError(
                f"cannot reshape {la.xla_shape} into {dims} without copying: no "
                f"layout of the new dimensions keeps every element where it is")
    return _la_type().from_numpy(np.asarray(la).reshape(dims, order=order),
                                 _dense_shape(la, dims))


# -- methods -------------------------------------------------------------------

@_family
def astype(la, dtype, order="K", casting="unsafe", subok=True, copy=True):
    dt = np.dtype(dtype)
    if dt == la.dtype and not copy:
        return la
    try:
        shape = result_shape(la.xla_shape, dt)
    except XlaShapeError:
        return np.asarray(la).astype(dt, order=order, casting=casting, subok=subok)
    if _packed(la) or tiling.plan(shape).element_bits < 8:
        values = np.asarray(la).astype(dt, casting=casting)
        return _la_type().from_numpy(values, shape)
    out = _new(shape)
    mask = _mask_of(la)
    np.copyto(out.physical_array(), la.physical_array(), casting=casting,
              where=True if mask is None else mask)
    return out


@_family
def item(la, args):
    if not args:
        if la.size != 1:
            raise InvalidShapeError(
                f"can only convert an array of size 1 to a Python scalar; this one "
                f"has shape {la.shape} ({la.size} elements)")
        return la[(0,) * la.ndim]
    if len(args) == 1 and isinstance(args[0], tuple):
        args = args[0]
    if len(args) == 1 and la.ndim != 1:
        i = operator.index(args[0])
        if not -la.size <= i < la.size:
            raise ShapeIndexError(f"index {i} is out of bounds for size {la.size}")
        return la[tuple(int(x) for x in np.unravel_index(i % la.size, la.shape))]
    if len(args) != la.ndim:
        raise ShapeIndexError(
            f"incorrect number of indices for array: {len(args)} given for a "
            f"{la.ndim}-dimensional array")
    return la[tuple(operator.index(a) for a in args)]


class LayoutArrayFlags:
    """numpy-style flags of a LayoutArray (``la.flags``).

    ``writeable`` can be set: False makes the array read-only; True is
    refused for an array that wraps a read-only buffer. ``c_contiguous`` and
    ``f_contiguous`` describe the logical array in the buffer (always False
    for tiled or packed layouts), ``owndata`` is False for views and wrapped
    buffers.
    """

    __slots__ = ("_la",)
    _NAMES = {"W": "writeable", "WRITEABLE": "writeable", "C": "c_contiguous",
              "C_CONTIGUOUS": "c_contiguous", "CONTIGUOUS": "c_contiguous",
              "F": "f_contiguous", "F_CONTIGUOUS": "f_contiguous",
              "FORTRAN": "f_contiguous", "O": "owndata", "OWNDATA": "owndata",
              "A": "aligned", "ALIGNED": "aligned"}

    def __init__(self, la):
        self._la = la

    @property
    def writeable(self):
        return not self._la.readonly

    @writeable.setter
    def writeable(self, value):
        self._la._set_writeable(bool(value))

    def _contiguous(self, c_order):
        la = self._la
        st = la.strides
        if st is None:
            return False
        acc = la.itemsize
        dims = range(la.ndim - 1, -1, -1) if c_order else range(la.ndim)
        for d in dims:
            if la.shape[d] > 1 and st[d] != acc:
                return False
            acc *= la.shape[d]
        return True

    @property
    def c_contiguous(self):
        return self._contiguous(True)

    @property
    def f_contiguous(self):
        return self._contiguous(False)

    @property
    def owndata(self):
        return self._la.base is None

    @property
    def aligned(self):
        return True

    def __getitem__(self, name):
        try:
            return getattr(self, self._NAMES[name.upper()])
        except (KeyError, AttributeError):
            raise KeyError(f"unknown flag {name!r}") from None

    def __setitem__(self, name, value):
        if self._NAMES.get(name.upper()) != "writeable":
            raise KeyError(f"only WRITEABLE can be set, got {name!r}")
        self.writeable = value

    def __repr__(self):
        return "\n".join(f"  {k} : {getattr(self, v)}" for k, v in [
            ("C_CONTIGUOUS", "c_contiguous"), ("F_CONTIGUOUS", "f_contiguous"),
            ("OWNDATA", "owndata"), ("WRITEABLE", "writeable"), ("ALIGNED", "aligned")])


# -- advanced indexing -----------------------------------------------------------

def is_advanced_item(x) -> bool:
    """An index entry numpy treats as advanced: a bool, a list or an array."""
    return isinstance(x, (bool, np.bool_, list, tuple, np.ndarray, _la_type()))


def _key_array(la):
    """A LayoutArray used as an index: its logical array, PRED as 0/1 (a
    wrapped buffer may hold other nonzero bytes)."""
    arr = np.asarray(la)
    if arr.dtype == np.bool_:
        arr = arr.view(np.uint8) != 0
    return arr


def is_integer_item(x) -> bool:
    """An index entry numpy reads as one integer: an int, a numpy integer,
    or any other object with ``__index__`` (numpy calls ``operator.index``
    on every entry that is not an array, a list or a bool)."""
    return hasattr(type(x), "__index__") and not is_advanced_item(x)


_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) "
              "and integer or boolean arrays are valid indices")


def index_value(x) -> int:
    """``operator.index(x)`` for an index entry; when its ``__index__``
    fails, numpy's IndexError (as ShapeIndexError)."""
    try:
        return operator.index(x)
    except (TypeError, ValueError, OverflowError):
        raise ShapeIndexError(_BAD_INDEX) from None


def _key_entry(k, LA):
    if isinstance(k, LA):
        return _key_array(k)
    if type(k) is not int and not isinstance(k, np.integer) and is_integer_item(k):
        return index_value(k)   # its __index__ runs here, before storage is touched
    return k


def _key(key):
    """LayoutArrays inside a key become numpy arrays, objects with
    ``__index__`` Python ints (so numpy runs no code of theirs later)."""
    LA = _la_type()
    if type(key) is tuple:
        return tuple(_key_entry(k, LA) for k in key)
    return _key_entry(key, LA)


def _read_bools(la, out):
    """PRED values read from the storage as 0/1, as every other read gives
    them (a wrapped buffer may hold any nonzero byte for True)."""
    if la.dtype == np.bool_ and isinstance(out, (np.ndarray, np.bool_)):
        folded = np.asarray(out).view(np.uint8) != 0
        return folded if isinstance(out, np.ndarray) else folded[()]
    return out


def _selected_offsets(la, key):
    """Element offsets of ``la[key]`` in the physical buffer, shaped like the
    result. numpy does the indexing (and its checks) on zero-copy index
    grids, so every form numpy accepts works and nothing out of range gets
    through."""
    shape = la.shape
    n = len(shape)
    coords = []
    for d in range(n):
        grid = np.arange(shape[d], dtype=np.intp).reshape(
            [shape[d] if i == d else 1 for i in range(n)])
        try:
            coords.append(np.asarray(np.broadcast_to(grid, shape)[key]))
        except IndexError as e:
            raise ShapeIndexError(str(e)) from None
    from .index_maps import linear_indices  # compiled; imports _core, which imports us

    return linear_indices(la.xla_shape, np.stack(coords, axis=-1))


def _codes_info(la):
    bits = la.plan.element_bits
    return bits, (1 << bits) - 1


def _gather(la, offs):
    if _packed(la):
        bits, mask = _codes_info(la)
        raw = np.frombuffer(la.physical, np.uint8)
        bit = offs * bits
        codes = (raw[bit >> 3] >> (bit & 7).astype(np.uint8)) & mask
        return codes.astype(np.uint8).view(la.dtype)
    return np.frombuffer(la.physical, la.dtype)[offs]


def _scatter(la, offs, values):
    offs = offs.ravel()
    vals = values.ravel()
    if offs.size > 1:
        # the last write to an offset wins, as in numpy
        _, first_in_reversed = np.unique(offs[::-1], return_index=True)
        keep = offs.size - 1 - first_in_reversed
        offs, vals = offs[keep], vals[keep]
    if _packed(la):
        bits, mask = _codes_info(la)
        raw = np.frombuffer(la.physical, np.uint8)
        codes = vals.view(np.uint8).astype(np.int64) & mask
        bit = offs * bits
        byte, shift = bit >> 3, bit & 7
        # Each touched byte is computed in full first and stored once: a
        # reader in another thread sees its old or its new value, never one
        # with the codes cleared and not yet set.
        ubyte, slot = np.unique(byte, return_inverse=True)
        clear = np.zeros(ubyte.size, np.uint8)
        put = np.zeros(ubyte.size, np.uint8)
        np.bitwise_or.at(clear, slot, (mask << shift).astype(np.uint8))
        np.bitwise_or.at(put, slot, (codes << shift).astype(np.uint8))
        raw[ubyte] = (raw[ubyte] & ~clear) | put
    else:
        flat = np.frombuffer(la.physical, la.dtype)
        flat[offs] = vals


def _clean(la, value):
    """PRED stores 0 or 1: a bool array holding other bytes is folded."""
    if la.dtype == np.bool_ and isinstance(value, np.ndarray) and value.dtype == np.bool_:
        return value.view(np.uint8) != 0
    return value


@_family
def getitem(la, key):
    """``la[key]`` with integer arrays or boolean masks (numpy's advanced
    indexing): a new numpy array, read straight from the tiled buffer."""
    key = _key(key)
    if la.strides is not None:
        view = np.asarray(la)
        try:
            out = view[key]
        except IndexError as e:
            raise ShapeIndexError(str(e)) from None
        if isinstance(out, np.ndarray) and np.may_share_memory(out, view):
            out = out.copy()
        return _read_bools(la, out)
    if la.ndim == 0 or la.size == 0:
        try:
            return la.to_numpy()[key]
        except IndexError as e:
            raise ShapeIndexError(str(e)) from None
    offs = _selected_offsets(la, key)
    out = _read_bools(la, _gather(la, offs))
    return out[()] if out.ndim == 0 else out


@_family
def setitem(la, key, value):
    """``la[key] = value`` with integer arrays or boolean masks: numpy's
    rules (broadcasting, conversion, last write wins), written through to
    the tiled buffer; padding is never touched."""
    key = _key(key)
    value = _clean(la, value)
    mask = key[0] if type(key) is tuple and len(key) == 1 else key
    if isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == la.shape \
            and np.ndim(value) > 1:
        # numpy's rule for one boolean mask over the whole array
        raise ShapeTypeError(
            f"NumPy boolean array indexing assignment requires a 0 or 1-dimensional "
            f"input, input has {np.ndim(value)} dimensions")
    try:
        if la.strides is not None:
            np.asarray(la)[key] = value
            return
        if la.ndim == 0 or la.size == 0:
            tmp = la.to_numpy()
            tmp[key] = value
            la[...] = tmp
            return
        offs = _selected_offsets(la, key)
        vals = np.empty(offs.shape, la.dtype)
        vals[...] = value
    except IndexError as e:
        raise (e if isinstance(e, XlaShapeError) else ShapeIndexError(str(e))) from None
    except (ValueError, TypeError, OverflowError) as e:
        raise _as_family(e) from None
    _scatter(la, offs, _clean(la, vals))
