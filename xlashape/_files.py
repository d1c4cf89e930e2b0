"""Opening the files the readers read, and telling a path from text.

- :func:`check_regular_file`: a FIFO, a device, a socket or a directory is
  refused before ``open()`` (reading one could block forever or never end);
- :func:`open_text` / :func:`_open_binary`: a text file (UTF-8, undecodable
  bytes replaced) or its bytes, ``.gz`` files decompressed;
- :func:`source_kind`: whether a reader's ``source`` argument is a path,
  the text itself, or lines.

Every reader of text files (HLO modules, dumps, out-of-memory reports) opens
them through here, so one rule holds for all of them.
"""

from __future__ import annotations

import gzip
import os as _os
import re
import stat
from typing import Optional

from .errors import UnreadableInputError

__all__ = ["check_regular_file", "open_text", "source_kind"]

_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISDIR, "a directory"))


def check_regular_file(path) -> str:
    """``path`` as a str, if it names a regular file (a symbolic link to one is
    fine). A FIFO, a device, a socket or a directory raises
    :class:`~xlashape.UnreadableInputError` naming it (reading one could block
    or never end: ``/dev/urandom``); a missing path, a dangling or looping
    link raise ``OSError`` (``FileNotFoundError``, ...) as ``open`` would.

    >>> check_regular_file("/dev/null")
    Traceback (most recent call last):
    ...
    xlashape.errors.UnreadableInputError: /dev/null is a character device, not a regular file: xlashape reads files (or a symbolic link to one)
    """
    path = _os.fspath(path)
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    try:
        mode = _os.stat(path).st_mode
    except ValueError as e:          # a NUL in the name
        raise UnreadableInputError(f"{path!r} is not a file name ({e})") from None
    what = _not_regular(mode)
    if what is not None:
        raise UnreadableInputError(f"{path} is {what}, not a regular file: xlashape reads "
                                   "files (or a symbolic link to one)")
    return path


def _not_regular(mode: int) -> Optional[str]:
    """What a file of this ``st_mode`` is, if not a regular file (else None)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _NOT_REGULAR if test(mode)), "a special file")


def _open_binary(path):
    path = check_regular_file(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")



def open_text(path):
    """Open an HLO text file (or out-of-memory report) for reading as text:
    UTF-8, undecodable bytes replaced by U+FFFD, ``.gz`` files decompressed.
    Anything but a regular file is refused (:func:`check_regular_file`)."""
    path = check_regular_file(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "r", encoding="utf-8", errors="replace")


# One line of text that is what a reader reads, not a file name: an HLO
# instruction, header, computation header or "}", a line of an out-of-memory
# report, of a buffer assignment or of a memory-usage report.
_TEXT_LINE = re.compile(
    r"\s*(?:HloModule\s|ENTRY\s|ROOT\s|BufferAssignment:|allocation\s+\d+:|value:\s*<"
    r"|Memory Space:|%?[A-Za-z_][\w.\-]*\s*=\s*(?:\(|b\(|[a-z][a-z0-9]*\[))"
    r"|.*(?:[{}]|Ran out of memory|RESOURCE_EXHAUSTED|Largest program allocations)", re.S)


def source_kind(source) -> str:
    """How the readers that take a path or text (:func:`~xlashape.hlo_module.scan_calls`,
    :func:`xlashape.memory.analyze`,
    :func:`xlashape.xla_dump.read_memory_usage_report`) take ``source``:
    ``"path"``, ``"text"`` or ``"lines"`` (a file object or any other
    iterable of lines). (:func:`~xlashape.hlo_module.parse_hlo_module` and
    :func:`~xlashape.hlo_module.iter_instructions`
    take every ``str`` as text, and only an ``os.PathLike`` as a path.)

    - ``os.PathLike`` (``pathlib.Path``): always a path.
    - ``bytes`` / ``bytearray``: text.
    - ``str``: text if it holds a line break or a NUL, is blank or longer
      than any path (4096 characters), or is one line of what the readers read (an HLO instruction, header or brace, an
      out-of-memory report, a buffer assignment or memory-usage report
      line), even if a file of that name exists; otherwise a path (a missing
      one then raises ``FileNotFoundError`` naming it, rather than being read
      as one line of text). Pass a ``pathlib.Path`` to name any file.

    >>> source_kind("ROOT r = f32[] constant(1)"), source_kind("dump/module.txt")
    ('text', 'path')
    >>> import pathlib; source_kind(pathlib.Path("ENTRY e {")), source_kind(["a = f32[] abs(b)"])
    ('path', 'lines')
    """
    if isinstance(source, _os.PathLike):
        return "path"
    if isinstance(source, (bytes, bytearray)):
        return "text"
    if isinstance(source, str):
        if ("\n" in source or "\r" in source or "\0" in source or len(source) > 4096
                or not source.strip()):
            return "text"
        if _TEXT_LINE.match(source) is not None:
            return "text"
        return "path"
    return "lines"

