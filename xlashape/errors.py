"""One exception family for xlashape.

Every exception raised on purpose by xlashape derives from :class:`XlaShapeError`
*and* from the builtin a caller would naturally catch (``ValueError``,
``IndexError``, ``TypeError``, ``BufferError``), the way pyarrow's
``ArrowInvalid`` is also a ``ValueError``.
"""

from __future__ import annotations

__all__ = [
    "XlaShapeError",
    "HloParseError",
    "InvalidShapeError",
    "ShapeIndexError",
    "ShapeTypeError",
    "ShapeBufferError",
    "ReadOnlyBufferError",
    "UnreadableInputError",
    "ShapeValueError",
    "ShapeOverflowError",
    "ShapeMemoryError",
    "ReleasedArrayError",
    "ProtoDecodeError",
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
