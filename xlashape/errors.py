"""One exception family for xlashape.

Every exception raised on purpose by xlashape derives from :class:`XlaShapeError`
*and* from the builtin a caller would naturally catch (``ValueError``,
``IndexError``, ``TypeError``, ``BufferError``), the way pyarrow's
``ArrowInvalid`` is also a ``ValueError``.
"""

from __future__ import annotations

import threading as _threading

__all__ = [
    "XlaShapeError",
    "HloParseError",
    "InvalidShapeError",
    "ShapeIndexError",
    "ShapeAxisError",
    "ShapeTypeError",
    "ShapeBufferError",
    "ReadOnlyBufferError",
    "UnreadableInputError",
    "ShapeValueError",
    "ShapeOverflowError",
    "ShapeMemoryError",
    "ReleasedArrayError",
    "ProtoDecodeError",
    "MissingDependencyError",
]


class XlaShapeError(Exception):
    """Base class of every error xlashape raises on purpose."""


class InvalidShapeError(XlaShapeError, ValueError):
    """A shape or layout that XLA would reject (``ShapeUtil::ValidateShape``).

    The message is XLA's own wording where XLA has one.
    """


class ShapeIndexError(XlaShapeError, IndexError):
    """An index (logical or physical) outside the array."""


class ShapeTypeError(XlaShapeError, TypeError):
    """An argument of the wrong Python type."""


class ShapeBufferError(XlaShapeError, BufferError):
    """A buffer that cannot be exported, wrapped or reallocated."""


class ReadOnlyBufferError(ShapeBufferError, ValueError):
    """A write to a LayoutArray that wraps a read-only buffer.

    Also a ``ValueError``, which is what numpy raises for the same mistake.
    """


class UnreadableInputError(XlaShapeError, ValueError):
    """A file or text that is not what the reader was asked to read: empty,
    binary, cut off before anything readable, or of another kind (e.g. not
    an HLO module, dump directory or out-of-memory report)."""


class ShapeValueError(XlaShapeError, ValueError):
    """A value that cannot be used where it was given: one that does not
    convert to the element type (``'a'`` into ``f32``), an array that does
    not broadcast, a zero slice step, ... The message is numpy's where numpy
    has one for the same mistake."""


class ShapeOverflowError(XlaShapeError, OverflowError):
    """A number the element type cannot hold (``300`` into ``s8``), as numpy
    raises ``OverflowError`` for it."""


class ShapeMemoryError(XlaShapeError, MemoryError):
    """A buffer too big to allocate, or to address with 64-bit offsets."""


class MissingDependencyError(XlaShapeError, ImportError):
    """An optional package a feature needs is not installed (jax, libtpu);
    the message names it and the command that installs it."""


def _axis_error_class() -> type:
    """numpy's ``AxisError``: imported when first needed, so that importing
    this module (and ``xlashape --version``) does not import numpy."""
    try:
        from numpy.exceptions import AxisError
    except ImportError:  # pragma: no cover - numpy < 1.25
        from numpy import AxisError
    return AxisError


def _make_shape_axis_error() -> type:
    numpy_axis_error = _axis_error_class()

    class ShapeAxisError(ShapeIndexError, ShapeValueError, numpy_axis_error):
        """An axis argument outside the array's dimensions (``la.sum(axis=5)``,
        ``la.swapaxes(0, 5)``): numpy's ``AxisError``, which is both a
        ``ValueError`` and an ``IndexError``, and so is this. (Made on first
        use, with numpy's class as a base.)"""

        def __init__(self, message: str):
            # numpy's AxisError(axis, ndim, prefix) formats its own message; a
            # single argument is the message itself
            numpy_axis_error.__init__(self, message)

        def __reduce__(self):
            return (type(self), (str(self),))

    ShapeAxisError.__module__ = __name__
    ShapeAxisError.__qualname__ = "ShapeAxisError"
    return ShapeAxisError


_AXIS_LOCK = _threading.Lock()


def __getattr__(name: str):
    # PEP 562: ShapeAxisError derives from numpy's AxisError, so it is made
    # (once, under a lock) the first time it is asked for
    if name == "ShapeAxisError":
        with _AXIS_LOCK:
            cls = globals().get("ShapeAxisError")
            if cls is None:
                cls = globals()["ShapeAxisError"] = _make_shape_axis_error()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ReleasedArrayError(ShapeValueError):
    """An operation on a :class:`~xlashape.LayoutArray` after its
    ``release()``: its storage is gone. Also a ``ValueError``, as Python
    raises for a released ``memoryview``."""


class ProtoDecodeError(UnreadableInputError, ShapeValueError):
    """Bytes that are not the protobuf message they were read as (cut off,
    a bad wire type, invalid UTF-8, ...), or a message xlashape cannot turn
    into its objects (an unknown element type, a tuple with dimensions,
    ...). The message names the field: ``ShapeProto.tuple_shapes[1].layout:
    ...``. Both an :class:`UnreadableInputError` and a
    :class:`ShapeValueError` (so a ``ValueError``)."""


class HloParseError(XlaShapeError, ValueError):
    """HLO text that XLA's parser would reject.

    Attributes
    ----------
    text : str
        The whole text that was being parsed.
    message : str
        What was wrong, in XLA's words where XLA has some.
    position : int
        0-based character offset of the offending token in ``text``.
    line, column : int
        1-based line and column of ``position``.
    """

    def __init__(self, message: str, text: str = "", position: int = 0):
        self.message = message
        self.text = text
        position = max(0, min(position, len(text)))
        self.position = position
        self.line = text.count("\n", 0, position) + 1
        line_start = text.rfind("\n", 0, position) + 1
        self.column = position - line_start + 1
        line_end = text.find("\n", position)
        if line_end < 0:
            line_end = len(text)
        self.source_line = text[line_start:line_end]
        super().__init__(self._format())

    def _format(self) -> str:
        if not self.text:
            return self.message
        # Keep very long lines readable: show a window around the caret.
        src = self.source_line
        col = self.column - 1
        if len(src) > 120:
            lo = max(0, col - 60)
            hi = min(len(src), lo + 120)
            prefix = "..." if lo > 0 else ""
            src = prefix + src[lo:hi] + ("..." if hi < len(self.source_line) else "")
            col = col - lo + len(prefix)
        return (
            f"{self.message} (line {self.line}, column {self.column})\n"
            f"{src}\n{' ' * col}^"
        )

    def __reduce__(self):
        return (type(self), (self.message, self.text, self.position))


_TWINS: dict = {}


def _twin_class(family: type, numpy_class: type) -> type:
    """A class that is both ``family`` and numpy's own exception class (its
    ``LinAlgError``, its ufunc casting errors), so that code catching
    numpy's class still catches it. Named as the family class."""
    key = (family, numpy_class)
    cls = _TWINS.get(key)
    if cls is None:
        cls = type(family.__name__, (family, numpy_class), {
            "__module__": __name__,
            "__doc__": f"{family.__name__} raised where numpy raises "
                       f"{numpy_class.__module__}.{numpy_class.__qualname__}.",
            "__reduce__": _reduce_twin,
        })
        _TWINS[key] = cls
    return cls


def _reduce_twin(self):
    family = next(c for c in type(self).__mro__[1:] if c.__module__ == __name__)
    numpy_class = next(c for c in type(self).__mro__[1:] if c.__module__ != __name__)
    return (_rebuild_twin, (family, numpy_class, self.args, dict(self.__dict__)))


def _rebuild_twin(family, numpy_class, args, state):
    new = BaseException.__new__(_twin_class(family, numpy_class))
    new.args = args
    new.__dict__.update(state)
    return new


def as_family(error: BaseException) -> BaseException:
    """The xlashape twin of a builtin or numpy exception (same message).

    The one place where errors that numpy (or a value's own ``__index__``,
    ``__float__``, ...) raised while serving a LayoutArray become the
    ``XlaShapeError`` family: ``AxisError`` -> :class:`ShapeAxisError`,
    ``IndexError`` -> :class:`ShapeIndexError`, ``OverflowError`` ->
    :class:`ShapeOverflowError`, ``TypeError`` -> :class:`ShapeTypeError`,
    ``ValueError`` -> :class:`ShapeValueError`, ``MemoryError`` ->
    :class:`ShapeMemoryError`. numpy's (and ml_dtypes') own subclasses of
    those (``LinAlgError``, the ufunc casting errors) become a class that
    derives from both the xlashape class and numpy's, with numpy's state and
    message, so ``except np.linalg.LinAlgError`` still catches them. An
    xlashape error, a caller's own exception class (raised by a callback
    such as a value's ``__float__``) and anything else (warnings turned into
    errors, ``KeyboardInterrupt``, ...) is returned as it is.
    """
    if isinstance(error, XlaShapeError):
        return error
    etype = type(error)
    module = etype.__module__ or ""
    builtin = module == "builtins"
    if not builtin and module.split(".")[0] not in ("numpy", "ml_dtypes"):
        return error        # a caller's own exception class (from a callback) stays
    axis_error_class = __getattr__("ShapeAxisError")
    if isinstance(error, _axis_error_class()):
        cls = axis_error_class
    elif isinstance(error, IndexError):
        cls = ShapeIndexError
    elif isinstance(error, OverflowError):
        cls = ShapeOverflowError
    elif isinstance(error, TypeError):
        cls = ShapeTypeError
    elif isinstance(error, ValueError):
        cls = ShapeValueError
    elif isinstance(error, MemoryError):
        cls = ShapeMemoryError
    else:
        return error
    if builtin or cls is axis_error_class:
        new = cls(str(error))
    else:
        try:
            new = BaseException.__new__(_twin_class(cls, etype))
            new.args = error.args
            new.__dict__.update(getattr(error, "__dict__", {}))
            str(new)
        except Exception:       # a class that cannot be combined: the family class
            new = cls(str(error))
    new.__cause__ = error.__cause__
    new.__suppress_context__ = True
    return new
