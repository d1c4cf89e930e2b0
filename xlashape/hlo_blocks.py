"""A text stream read in big blocks of whole lines rather than line by line:
what the HLO reader (:class:`xlashape.hlo_reader.HloReader`) reads fastest
from a big file (:class:`TextBlocks`), and the same with every computation
but the entry left out (:class:`EntryBlocks`: what the memory figures need).

A line of any length is read in linear time and held about twice at most
(its pieces, then the line): ``tests/test_hlo_module.py`` checks it.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional

__all__ = ["TextBlocks", "EntryBlocks", "lines_holding"]


def lines_holding(block: str, mark: str) -> Iterator[str]:
    """Each whole line of ``block`` (lines joined by "\\n") that holds
    ``mark``, once, found by ``str.find`` (the scanners that look at a few
    lines of a big block go straight to them).

    >>> list(lines_holding("a x\\nb\\nc x x\\n", "x"))
    ['a x', 'c x x']
    """
    find = block.find
    pos = find(mark)
    while pos >= 0:
        start = block.rfind("\n", 0, pos) + 1
        end = find("\n", pos)
        if end < 0:
            end = len(block)
        yield block[start:end]
        pos = find(mark, end)


class TextBlocks:
    """A text stream to read in big blocks rather than line by line: what
    ``HloReader.read`` gets faster from a big file (the stream must have
    been opened with newline translation, as ``open()`` does by default, so
    that its lines end with "\\n"). ``progress(characters read)`` is called
    after each block; ``observer(block)`` sees every block of whole lines
    as it is read (the whole text, before a subclass leaves parts out: a
    second reader of the same pass, such as the op paths'
    :class:`xlashape.live_range.LocationScanner`).

    >>> import io
    >>> list(TextBlocks(io.StringIO("a = f32[] constant(1)\\nROOT b = f32[] abs(a)\\n")))
    ['a = f32[] constant(1)', 'ROOT b = f32[] abs(a)']
    """

    def __init__(self, stream, progress: Optional[Callable[[int], None]] = None,
                 block: int = 1 << 20, observer: Optional[Callable[[str], None]] = None):
        self.stream = stream
        self.progress = progress
        self.block = block
        self.observer = observer

    def blocks(self) -> Iterator[str]:
        """Blocks of whole lines: each a str of lines joined by "\\n" (the
        last line of a block without its "\\n")."""
        observer = self.observer
        if observer is None:
            return self._blocks()
        return self._observed(observer)

    def _observed(self, observer) -> Iterator[str]:
        for block in self._blocks():
            observer(block)
            yield block

    def _blocks(self) -> Iterator[str]:
        # A line longer than a block is carried as a list of pieces, joined
        # once when its end arrives: each character is copied a bounded
        # number of times and searched for "\n" once, so a line of any length
        # is read in linear time (carry + data, re-searched, was quadratic).
        read = self.stream.read
        carry: List[str] = []
        done = 0
        while True:
            data = read(self.block)
            if not data:
                break
            done += len(data)
            if self.progress is not None:
                self.progress(done)
            cut = data.rfind("\n")
            if cut < 0:
                carry.append(data)
                continue
            if carry:
                # the long line alone (the reader then keeps no second copy
                # of it as a slice of a bigger block), then the lines after it
                first = data.find("\n")
                carry.append(data[:first])
                block = "".join(carry)
                carry.clear()
                yield block
                del block
                if first < cut:
                    yield data[first + 1:cut]
            else:
                yield data[:cut]
            if cut + 1 < len(data):
                carry.append(data[cut + 1:])
        if carry:
            block = "".join(carry)
            carry.clear()
            yield block

    def __iter__(self) -> Iterator[str]:
        for block in self.blocks():
            if "\n" in block:
                yield from block.split("\n")
            else:
                yield block             # a long line comes alone: not copied again


class EntryBlocks(TextBlocks):
    """TextBlocks that leave out every computation but the entry (and the
    module header, sections and anything outside computations): what the
    memory figures need, read without the fusion bodies and other
    computations that are most of a big dump. A computation is left out from
    a header line as XLA prints it (at column 0, ending with "{", not
    ``ENTRY``) to the line that starts with "}"; its lines are counted, so
    line numbers stay right."""

    def blocks(self):
        skipping = False
        for block in super().blocks():
            n = len(block)
            pos = 0
            while pos <= n:
                if skipping:
                    if block.startswith("}", pos):
                        k = pos
                    else:
                        k = block.find("\n}", pos)
                        if k < 0:
                            yield block.count("\n", pos) + 1
                            pos = n + 1
                            break
                        k += 1
                    e = block.find("\n", k)
                    if e < 0:
                        e = n
                    yield block.count("\n", pos, k) + 1
                    pos = e + 1
                    skipping = False
                    continue
                start = pos
                found = -1
                # a header ends with "{" (as XLA prints it: no space after):
                # look only at such lines, the block's last line too
                e = pos
                while True:
                    e = block.find("{\n", e)
                    if e < 0:
                        if block.endswith("{") and n - 1 >= pos:
                            e = n - 1
                        else:
                            break
                    nl = e + 1
                    ls = block.rfind("\n", pos, e) + 1
                    if ls < pos:
                        ls = pos
                    line = block[ls:nl]
                    if (line[:1] == "%" or line[:1].isalpha()) and \
                            not line.startswith(("ENTRY", "HloModule")) and \
                            "=" not in line.split("(", 1)[0]:
                        found = ls
                        break
                    if nl >= n:
                        break
                    e = nl
                if found < 0:
                    yield block[start:] if start else block
                    pos = n + 1
                    break
                if found > start:
                    yield block[start:found - 1]
                skipping = True
                pos = found

