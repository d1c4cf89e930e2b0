"""What a fuzz case may do, and how its two sides are compared.

Imported by the worker (``worker.py``) in the child process that runs the
cases. ``PRELUDE`` is the text every case (and every reproducer) starts
with: it defines the hostile argument objects the generators use.
"""

from __future__ import annotations

import numbers
import re

import numpy as np

PRELUDE = '''\
import numpy as np, ml_dtypes, xlashape
from xlashape import LayoutArray

class Idx:                       # an object with __index__ (hostile when huge)
    def __init__(self, v): self.v = v
    def __index__(self): return self.v
    def __repr__(self): return f"Idx({self.v!r})"

class OracleFailure(Exception):  # a check of the case itself failed
    pass

class Flt:                       # an object with __float__ only
    def __init__(self, v): self.v = v
    def __float__(self): return self.v
    def __repr__(self): return f"Flt({self.v!r})"
'''


class OracleFailure(Exception):
    """Raised by a case's own checks (e.g. too many warnings kept): the
    message's first word is the signature's detail."""


def is_oracle_failure(exc: BaseException) -> bool:
    return type(exc).__name__ == "OracleFailure"


def is_family(exc: BaseException) -> bool:
    from xlashape.errors import XlaShapeError
    return isinstance(exc, XlaShapeError)


def _as_value(r):
    """A comparable value: ndarrays for arrays (LayoutArray through
    ``to_numpy``), tuples recursively, Python scalars as they are."""
    from xlashape._core import LayoutArray   # not xlashape.LayoutArray: a planted bug may replace that
    if isinstance(r, LayoutArray):
        return np.array(r.to_numpy(), copy=True)
    if isinstance(r, (tuple, list)) and not isinstance(r, str):
        return type(r)(_as_value(v) for v in r) if isinstance(r, tuple) else list(_as_value(v) for v in r)
    return r


def _is_py_scalar(v):
    return isinstance(v, (bool, int, float, complex)) and not isinstance(v, np.generic)


def _item(v):
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, np.generic):
        try:
            return v.item()
        except Exception:
            return float(v)
    return v


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Element by element, the same bits, or NaN on both sides."""
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    n = a.dtype.itemsize
    ua = a.view(np.uint8).reshape(a.shape + (n,))
    ub = b.view(np.uint8).reshape(b.shape + (n,))
    same = (ua == ub).all(axis=-1) if a.ndim or n else np.asarray((ua == ub).all())
    if same.all():
        return True
    try:
        nan = np.isnan(a) & np.isnan(b)
    except TypeError:
        return False
    return bool((same | nan).all())


def compare(got, want) -> str | None:
    """None if ``got`` (xlashape's side) equals ``want`` (numpy's), else the
    kind of difference: ``dtype``, ``shape``, ``value``, ``type``."""
    got, want = _as_value(got), _as_value(want)
    if isinstance(want, (tuple, list)) and not isinstance(want, np.ndarray):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return "type"
        for g, w in zip(got, want):
            d = compare(g, w)
            if d:
                return d
        return None
    if want is None or got is None:
        return None if got is want else "type"
    if _is_py_scalar(got) or _is_py_scalar(want):
        g, w = _item(got), _item(want)
        if isinstance(g, np.ndarray) or isinstance(w, np.ndarray):
            return "shape"
        if isinstance(g, bool) != isinstance(w, bool):
            return "type"
        return None if repr(g) == repr(w) else "value"
    if isinstance(want, (np.ndarray, np.generic)):
        if not isinstance(got, (np.ndarray, np.generic)):
            try:
                got = np.asarray(got)
            except Exception:
                return "type"
        ga, wa = np.asarray(got), np.asarray(want)
        if ga.dtype != wa.dtype or ga.dtype.char != wa.dtype.char:
            return "dtype"
        if ga.shape != wa.shape:
            return "shape"
        if wa.dtype.kind == "O":
            # each side makes its own object() scalars: compare them by type
            g, w = (_ADDRESS.sub(" at 0x", repr(x.tolist())) for x in (ga, wa))
            return None if g == w else "value"
        return None if _bits_equal(ga, wa) else "value"
    if isinstance(want, (str, bytes, type)) or isinstance(want, numbers.Number):
        return None if repr(got) == repr(want) else "value"
    return None  # opaque objects (capsules, memoryviews): only that both succeed
