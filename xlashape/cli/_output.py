"""The writers every command prints through: text lines, tables, JSON, CSV.

Everything a command prints goes through this module, so two promises hold in
one place:

- **Printable.** Text and CSV output pass through :func:`printable`
  (:mod:`xlashape.safe_text`, the rule the HTML page follows too): a control
  character, a bidirectional override or an unpaired surrogate that came from
  the input (a file, an argument, standard input) is written as its Python
  escape (``\\x1b``, ``\\u202e``), never raw, so input cannot send terminal
  control sequences. JSON output is ASCII with ``\\uXXXX`` escapes (the
  values read back unchanged).
- **Consistent.** JSON documents are written by :func:`write_json` (indented,
  one document) or :class:`JsonArrayWriter` (a streamed list, one item per
  line); CSV by :class:`CsvWriter` (header first); fixed-width tables by
  :class:`Table`; ``key  value`` blocks by :func:`field`.

Output goes to ``sys.stdout`` as it is when the writer is made (so tests can
redirect it).
"""

from __future__ import annotations

import csv
import json
import sys
from typing import Iterable, Sequence

from ..reporters.tables import Table as _Table

# the rule lives below the commands, shared with the HTML page
from ..safe_text import printable

__all__ = [
    "printable",
    "json_str",
    "write_json",
    "write_lines",
    "field",
    "Table",
    "JsonArrayWriter",
    "CsvWriter",
]

#: A string as a JSON string literal, ASCII only (C-accelerated when available).
json_str = json.encoder.encode_basestring_ascii


def write_json(obj) -> None:
    """One JSON document, indented, ASCII only, then a newline. A float that
    is not finite (a NaN padding value) is written as the string ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"`` (``float()`` reads each back), so the
    output stays strict JSON."""
    sys.stdout.write(json.dumps(_finite(obj), indent=2, ensure_ascii=True, allow_nan=False)
                     + "\n")


def _finite(obj):
    if isinstance(obj, float):
        if obj != obj:
            return "NaN"
        if obj in (float("inf"), float("-inf")):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_lines(lines: Iterable[str]) -> None:
    """Text lines, each made :func:`printable`."""
    sys.stdout.write("".join(printable(line) + "\n" for line in lines))


def field(key: str, value: str, indent: str = "", width: int = 15) -> str:
    """One ``key   value`` line of a description block (keys left-aligned in
    ``width`` columns)."""
    return f"{indent}{key:<{width}} {value}"


class Table(_Table):
    """:class:`xlashape.reporters.tables.Table` that can also write a row to
    standard output, made printable (:meth:`row`)."""

    def row(self, *values) -> None:
        """Write one row to standard output, made printable."""
        sys.stdout.write(printable(self._template.format(*values)) + "\n")


class JsonArrayWriter:
    """A JSON list streamed to standard output, one item per line: call
    :meth:`item` (an object to encode) or :meth:`raw` (already encoded JSON,
    for hot loops), then :meth:`close`."""

    def __init__(self):
        self._write = sys.stdout.write
        self._first = True
        self._write("[")

    def raw(self, encoded: str) -> None:
        self._write(("\n" if self._first else ",\n") + encoded)
        self._first = False

    def raw_many(self, encoded) -> None:
        """Several already encoded items (a list of str), in one write."""
        if encoded:
            self._write(("\n" if self._first else ",\n") + ",\n".join(encoded))
            self._first = False

    def raw_prefixed(self, text: str) -> None:
        """Already encoded items, each preceded by ",\\n" (one str), in one write."""
        if text:
            self._write("\n" + text[2:] if self._first else text)
            self._first = False

    def item(self, obj) -> None:
        self.raw(json.dumps(obj, ensure_ascii=True))

    def close(self) -> None:
        self._write("]\n" if self._first else "\n]\n")


class CsvWriter:
    """CSV rows on standard output, the header first; text cells are made
    :func:`printable`, ``None`` is an empty cell."""

    def __init__(self, header: Sequence[str]):
        self._w = csv.writer(sys.stdout, lineterminator="\n")
        self._w.writerow(header)

    def row(self, values: Sequence) -> None:
        self._w.writerow(["" if v is None else printable(v) if isinstance(v, str) else v
                          for v in values])

