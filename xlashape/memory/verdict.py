"""Will it fit: a module's peak against a device's memory or a limit.

:func:`module_peak` says which peak to judge (an out-of-memory report's use,
XLA's ``peak_memory_in_bytes`` or xlashape's device-memory peak, each under
its own name), :func:`judge` makes the :class:`Verdict`, and
:func:`parse_size` reads the sizes people write (``80G``, ``16GiB``,
``80GB``, ``1048576``).
"""

import re
from typing import NamedTuple, Optional, Tuple

from ..devices import lookup, usable_bytes
from ..errors import ShapeValueError
from ..tiling import format_bytes

__all__ = ["parse_size", "Verdict", "module_peak", "judge", "device_limit"]

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10 ** 3, "kib": 1 << 10, "m": 1 << 20, "mb": 10 ** 6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10 ** 9, "gib": 1 << 30, "t": 1 << 40,
          "tb": 10 ** 12, "tib": 1 << 40}
# on the text with its blanks collapsed (\s* on both sides of the optional
# unit backtracked quadratically over a long run of spaces)
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(?:e(\d{1,3}))? ?([a-zA-Z]*)$")


def parse_size(text: str) -> int:
    """A byte count as a user writes it: ``80G`` / ``79.1G`` / ``16GiB``
    (powers of 1024, as XLA prints sizes), ``80GB`` (powers of 1000), or a
    plain number of bytes. Raises :class:`~xlashape.ShapeValueError`."""
    m = _SIZE.match(" ".join(str(text).split()))
    unit = m.group(3).lower() if m else ""
    if not m or unit not in _UNITS:
        raise ShapeValueError(f"not a size: {text!r} (write e.g. 80G, 16GiB, 80GB or 1048576)")
    try:
        value = float(m.group(1)) * (10.0 ** int(m.group(2)) if m.group(2) else 1.0) * _UNITS[unit]
    except OverflowError:           # 10.0 ** 400
        value = float("inf")
    if not value < 2.0 ** 63:       # inf from a huge exponent or mantissa too
        raise ShapeValueError(f"not a size: {text!r} (more bytes than a 64-bit count holds)")
    return int(round(value))


def device_limit(device: str) -> Tuple[int, str]:
    """``(usable bytes, name)`` of a device of :mod:`xlashape.devices`
    (``h100``, ``v5e``, ``v5e:2x2``, jax's ``device_kind``): what one program
    may use on it, and the name a verdict gives it (a GPU's says when the
    figure is jax's default share of an estimated capacity). Raises
    :class:`~xlashape.ShapeValueError` for an unknown device."""
    d = lookup(device)
    return usable_bytes(d), d.name + (f" ({format_bytes(d.memory_bytes)}, jax's 75%)"
                                      if d.platform == "gpu" and d.basis == "estimated" else "")


class Verdict(NamedTuple):
    """Whether a program fits: ``peak_bytes`` against ``limit_bytes``,
    ``fits``, ``margin_bytes`` (limit - peak: negative when it does not fit),
    ``peak_name`` (which figure was used: XLA's ``peak_memory_in_bytes``, an
    out-of-memory report's ``memory_used_bytes``, or xlashape's own
    ``device_memory_peak_bytes``) and ``limit_name`` (the device or ``--limit``)."""

    peak_bytes: int
    limit_bytes: int
    peak_name: str
    limit_name: str

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.limit_bytes

    @property
    def margin_bytes(self) -> int:
        return self.limit_bytes - self.peak_bytes

    @property
    def fraction(self) -> float:
        return self.peak_bytes / self.limit_bytes if self.limit_bytes else float("inf")

    def to_json(self) -> dict:
        d = self._asdict()
        d.update(fits=self.fits, margin_bytes=self.margin_bytes)
        return d


def module_peak(module) -> Optional[Tuple[int, str]]:
    """The peak to judge a module against a device's memory, and its name:
    an out-of-memory report's ``memory_used_bytes``; from a dump, the
    highest point of device memory (S(0)) over program order, named
    ``peak_memory_in_bytes`` when it is XLA's figure and
    ``device_memory_peak_bytes`` when XLA's peak also counts other memory
    (TPU VMEM, host memory); else ``memory_analysis()``'s
    ``peak_memory_in_bytes``."""
    if getattr(module, "memory_used_bytes", None) is not None:
        return module.memory_used_bytes, "memory_used_bytes"
    pa = getattr(module, "peak", None)
    if pa is not None:
        dev = pa.heap.get(0)
        if dev is not None and dev["padded"]:
            high = max(dev["padded"])
            if high == pa.figures.get("peak_memory_in_bytes"):
                return high, "peak_memory_in_bytes"
            return high, "device_memory_peak_bytes"
        if pa.figures.get("peak_memory_in_bytes") is not None:
            return pa.figures["peak_memory_in_bytes"], "peak_memory_in_bytes"
    ma = getattr(module, "memory_analysis", None) or {}
    if ma.get("peak_memory_in_bytes"):
        return ma["peak_memory_in_bytes"], "peak_memory_in_bytes"
    return None


def judge(module, limit_bytes: int, limit_name: str) -> Optional[Verdict]:
    """:class:`Verdict` of ``module`` against ``limit_bytes`` (``None`` when
    no peak is known for it)."""
    got = module_peak(module)
    if got is None:
        return None
    return Verdict(got[0], limit_bytes, got[1], limit_name)
