"""Text made printable: the one rule, for the terminal (every command prints
through :func:`xlashape.cli._output.printable`) and the HTML page
(:func:`xlashape.reporters.html.esc`).

A character that is not printable -- a control (ESC, C1 controls), a
bidirectional control (U+202A-U+202E embeddings and overrides, U+2066-U+2069
isolates, U+200E/U+200F marks, U+061C), another invisible format character
(zero-width space and joiners, U+2060, U+FEFF, soft hyphen), a line or
paragraph separator, an unpaired surrogate from an undecodable argument --
is written as its Python escape (``\\x1b``, ``\\u202e``), so text from the
input can neither send terminal control sequences nor show itself reversed
or hidden. Letters of every script are kept. (Python's
:meth:`str.isprintable` decides, with the characters ``keep`` names kept.)
"""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str, keep: str = "\t") -> str:
    """``text`` with every character that is not printable replaced by its
    Python escape; the characters of ``keep`` (a tab by default) and
    ordinary letters of any script are kept.

    >>> printable("f32[2] \\x1b[31mred\\x1b[0m")
    'f32[2] \\\\x1b[31mred\\\\x1b[0m'
    >>> printable("caf\\u00e9\\tok")
    'café\\tok'
    >>> printable("jit(f)/\\u202egnp.exe", keep="")
    'jit(f)/\\\\u202egnp.exe'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in text)


def _escape(c: str) -> str:
    n = ord(c)
    if n < 0x100:
        return {"\n": "\\n", "\r": "\\r"}.get(c, f"\\x{n:02x}")
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"
