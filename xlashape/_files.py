"""Opening the files the readers read: regular files only, and gzip with its
errors in the family; and telling a path from text.

Every reader that opens a path goes through here, so that one rule holds for
all of them:

- :func:`check_regular_file`: a FIFO, a device, a socket or a directory is
  refused before ``open()`` (reading one could block forever or never end);
- :func:`open_text` / :func:`_open_binary`: a text file (UTF-8, undecodable
  bytes replaced) or its bytes, ``.gz`` files decompressed (:func:`open_gzip`);
- :func:`open_gzip`: a ``.gz`` file whose stream is corrupt, cut off or not
  gzip at all raises :class:`~xlashape.errors.UnreadableInputError` naming the
  file, wherever the read that finds it happens (``zlib.error``,
  ``EOFError`` and ``gzip.BadGzipFile`` otherwise escape from the middle of a
  reader);
- :func:`gunzip`: a whole gzip stream into memory, decompressed piece by
  piece and stopped at a cap (a gzip "bomb" of 1 MB unpacks to 1 GB);
- :func:`source_kind`: whether a reader's ``source`` argument is a path,
  the text itself, or lines.

No third-party import here: the text readers use it, and ``import xlashape``
must not pay for protobuf.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import zlib
from typing import Optional, Union

from .errors import UnreadableInputError

__all__ = ["check_regular_file", "open_gzip", "gunzip", "GZIP_MAGIC", "open_text", "source_kind"]

#: The first two bytes of a gzip stream.
GZIP_MAGIC = b"\x1f\x8b"

_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISDIR, "a directory"))

# what a corrupt, cut-off or non-gzip stream raises from a read
_GZIP_ERRORS = (zlib.error, EOFError, gzip.BadGzipFile)


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
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    try:
        mode = os.stat(path).st_mode
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


def _gzip_error(name, e: BaseException) -> UnreadableInputError:
    return UnreadableInputError(f"{name}: not a readable gzip file ({e or type(e).__name__})")


class _GzipFile(gzip.GzipFile):
    """``gzip.GzipFile`` whose reads raise :class:`UnreadableInputError`
    naming the file for a corrupt stream."""

    def read(self, size=-1):
        try:
            return super().read(size)
        except _GZIP_ERRORS as e:
            raise _gzip_error(self.name, e) from None

    def read1(self, size=-1):
        try:
            return super().read1(size)
        except _GZIP_ERRORS as e:
            raise _gzip_error(self.name, e) from None

    def peek(self, n):
        try:
            return super().peek(n)
        except _GZIP_ERRORS as e:
            raise _gzip_error(self.name, e) from None

    def readline(self, size=-1):
        try:
            return super().readline(size)
        except _GZIP_ERRORS as e:
            raise _gzip_error(self.name, e) from None

    def seek(self, offset, whence=io.SEEK_SET):
        try:
            return super().seek(offset, whence)
        except _GZIP_ERRORS as e:
            raise _gzip_error(self.name, e) from None


def open_gzip(path, mode: str = "rb", *, encoding: Optional[str] = None,
              errors: Optional[str] = None):
    """Open the gzip file ``path`` for reading (``"rb"`` or ``"rt"``, as
    ``gzip.open``) after :func:`check_regular_file`; a corrupt, cut-off or
    non-gzip stream raises :class:`~xlashape.errors.UnreadableInputError`
    naming the file from whichever read meets it.

    >>> import gzip, io, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.txt.gz")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(gzip.compress(b"HloModule m")[:-12] + b"garbage and more")
    >>> with open_gzip(path, "rt", encoding="utf-8") as f:
    ...     f.read()
    Traceback (most recent call last):
    ...
    xlashape.errors.UnreadableInputError: ...m.txt.gz: not a readable gzip file (...)
    """
    if mode not in ("rb", "rt", "r"):
        raise ValueError(f"open_gzip reads: mode {mode!r}")
    path = check_regular_file(path)
    binary = _GzipFile(path, "rb")
    if mode == "rb":
        return binary
    return io.TextIOWrapper(binary, encoding=encoding, errors=errors)


#: Bytes of compressed input given to zlib at a time by :func:`gunzip`, and the
#: most it asks zlib for at a time (zlib's output is a new bytes object each
#: time, so asking for all that is left under the limit would hold it twice).
_IN_CHUNK = 64 << 10
_OUT_CHUNK = 8 << 20


def gunzip(source, limit: int, name: str, *, first: bytes = b"", hint: str = "") -> bytearray:
    """The decompressed bytes of the gzip stream ``source`` (bytes, or a file
    opened for binary reading; ``first``: bytes already read from it), if
    they are at most ``limit`` bytes; else
    :class:`~xlashape.errors.UnreadableInputError` saying so, naming
    ``name``, followed by ``hint`` (how to raise the limit).

    The output grows piece by piece in one ``bytearray`` and zlib is never
    asked for more than a few MiB at a time, so a gzip "bomb" (1 MB that
    unpacks to 1 GB) costs about ``limit`` bytes before it is refused, not
    its whole size, nor twice the limit. Several gzip members one after
    another (``cat a.gz b.gz``) are one stream, as for ``gzip.decompress``;
    a corrupt, cut-off or non-gzip stream raises ``UnreadableInputError``
    naming ``name``.

    >>> import gzip
    >>> bytes(gunzip(gzip.compress(b"abc") + gzip.compress(b"def"), 10, "x"))
    b'abcdef'
    >>> gunzip(gzip.compress(bytes(1000)), 999, "bomb.gz", hint=" (raise it with ...)")
    Traceback (most recent call last):
    ...
    xlashape.errors.UnreadableInputError: bomb.gz: decompresses to more than 999 bytes, the limit (raise it with ...)
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source).cast("B")
        position = [0]

        def more(n):
            start = position[0]
            position[0] = start + n
            return view[start:start + n]
    else:
        more = source.read
    out = bytearray()
    buf = bytes(first)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)   # the gzip header and trailer (CRC, size)
    try:
        while True:
            if not buf:
                buf = bytes(more(_IN_CHUNK))
                if not buf:
                    break
            if d.eof:                     # the next member
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(buf, min(_OUT_CHUNK, limit + 1 - len(out)))
            if len(out) > limit:
                raise UnreadableInputError(
                    f"{name}: decompresses to more than {limit} bytes, the limit{hint}")
            buf = d.unused_data if d.eof else d.unconsumed_tail
    except zlib.error as e:
        raise _gzip_error(name, e) from None
    if not d.eof:
        raise _gzip_error(name, "compressed file ended before the end-of-stream marker "
                                "was reached")
    return out


# -- the readers' ways in --------------------------------------------------------------


def _open_binary(path):
    path = check_regular_file(path)
    if path.endswith(".gz"):
        return open_gzip(path, "rb")
    return open(path, "rb")



def open_text(path):
    """Open an HLO text file (or out-of-memory report) for reading as text:
    UTF-8, undecodable bytes replaced by U+FFFD, ``.gz`` files decompressed.
    Anything but a regular file is refused (:func:`check_regular_file`)."""
    path = check_regular_file(path)
    if path.endswith(".gz"):
        return open_gzip(path, "rt", encoding="utf-8", errors="replace")
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
    if isinstance(source, os.PathLike):
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

