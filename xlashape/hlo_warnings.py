"""What the text readers report of the lines they skip: :class:`HloWarning`
(a line number and a reason), :class:`WarningList` (the first
:data:`MAX_KEPT_WARNINGS` of them, and how many there were in all), and
:func:`_clip`, the short excerpt of a line a message quotes.

The HLO reader (:mod:`xlashape.hlo_reader`), the out-of-memory report parser
(:mod:`xlashape.oom_report`) and the dump readers (:mod:`xlashape.xla_dump`)
all report through these, so a file of any number of unreadable lines costs
bounded memory and every message quotes a bounded excerpt.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["HloWarning", "WarningList", "MAX_KEPT_WARNINGS"]


class HloWarning(NamedTuple):
    """A line that was skipped: 1-based ``line`` and ``message``."""

    line: int
    message: str

    def __str__(self):
        return f"line {self.line}: {self.message}"


#: How many warnings a :class:`WarningList` keeps by default (it counts them all).
MAX_KEPT_WARNINGS = 1000


class WarningList(list):
    """The first ``limit`` warnings (a list), and how many there were in all
    (:attr:`total`): what readers keep, so that a file of any number of
    unreadable lines costs bounded memory.

    >>> w = WarningList(limit=2)
    >>> for i in range(5):
    ...     w.append(HloWarning(i + 1, "bad"))
    >>> len(w), w.total, w.dropped
    (2, 5, 3)
    """

    def __init__(self, items=(), limit: int = MAX_KEPT_WARNINGS):
        super().__init__()
        self.limit = limit
        self.total = 0
        self.extend(items)

    def append(self, w) -> None:
        self.total += 1
        if len(self) < self.limit:
            super().append(w)

    def extend(self, items) -> None:
        for w in items:
            self.append(w)

    def add_uncounted(self, n: int) -> None:
        """Count ``n`` warnings that were not given (dropped earlier)."""
        self.total += n

    @property
    def dropped(self) -> int:
        """How many warnings were counted but not kept."""
        return self.total - len(self)


def _clip(text: str, n: int = 60) -> str:
    """``text`` on one line (blanks collapsed), cut to ``n`` characters with
    "...": what a message quotes of a line.

    >>> _clip("a   b\tc"), _clip("x" * 70)
    ('a b c', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...')
    """
    # only the start of the text is looked at: a warning about a line of a
    # gigabyte costs what one about a short line does
    head = text[:8 * n + 64]
    clipped = " ".join(head.split())
    if len(clipped) <= n and len(head) == len(text):
        return clipped
    return clipped[: n - 3] + "..."
