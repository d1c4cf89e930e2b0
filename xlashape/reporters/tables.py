"""Fixed-width tables (:class:`Table`), for the terminal views and the
commands. Nothing here writes: the views return lines, the command prints
them (through ``cli/_output``, which makes them printable). Light: the
command's start-up imports it."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

__all__ = ["Table", "wrapped", "text_width"]


def text_width(width: Optional[int]) -> int:
    """The width the views wrap their sentences at on a terminal ``width``
    characters wide (``None``: no terminal): at most 100, at least 40."""
    return 100 if width is None else max(min(width, 100), 40)


def wrapped_items(head: str, items: List[str], width: int = 100) -> List[str]:
    """``head`` and the ``items`` joined by ", " in lines of at most
    ``width`` characters, an item never split (``name value`` pairs stay on
    one line), the lines after the first indented by two spaces.

    >>> wrapped_items("figures:", ["a_size 10", "b_size 20", "c_size 30"], 24)
    ['figures: a_size 10,', '  b_size 20, c_size 30']
    """
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = "  " + piece
        else:
            line = (line + " " + piece) if line else piece
    lines.append(line)
    return lines


def wrapped(text: str, width: int = 100, indent: str = "  ") -> List[str]:
    """``text`` in lines of at most ``width`` characters (a word longer than
    that on a line of its own, never cut), the first indented by
    ``indent``, the others by two more spaces.

    >>> wrapped("applied: parameter 0 -> output {0}, parameter 1 -> output {1}", 40)
    ['  applied: parameter 0 -> output {0},', '    parameter 1 -> output {1}']
    """
    import textwrap      # only where a view wraps (the command's start-up imports this module)
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


class Table:
    """A fixed-width table: ``columns`` is a list of ``(title, width, align)``
    (``align`` ``"<"`` or ``">"``; width 0 for a last, free column) and
    ``gaps`` the text before each column (default one space, two before a
    free last column).

    >>> t = Table([("name", 6, "<"), ("bytes", 5, ">"), ("shape", 0, "<")], indent="  ")
    >>> t.header()
    '  name   bytes  shape'
    >>> t.format("x", "96B", "f32[24]")
    '  x        96B  f32[24]'
    """

    def __init__(self, columns: Sequence[Tuple[str, int, str]], indent: str = "",
                 gaps: Optional[Sequence[str]] = None):
        self.titles = [c[0] for c in columns]
        if gaps is None:
            gaps = [""] + [("  " if w == 0 else " ") for _, w, _ in columns[1:]]
        parts = [indent]
        for gap, (_, width, align) in zip(gaps, columns):
            parts.append(gap.replace("{", "{{").replace("}", "}}"))
            parts.append("{}" if width == 0 else "{:" + align + str(width) + "}")
        self._template = "".join(parts)

    def format(self, *values) -> str:
        """One row as text (not yet made printable: :meth:`row` does that)."""
        return self._template.format(*values)

    def header(self) -> str:
        return self._template.format(*self.titles)
