"""Will it fit: a module's peak against a device's memory or a limit.

:func:`module_peak` says which peak to judge (an out-of-memory report's use,
XLA's ``peak_memory_in_bytes`` or xlashape's device-memory peak, each under
its own name), :func:`judge` makes the :class:`Verdict`, and
:func:`parse_size` reads the sizes people write (``80G``, ``16GiB``,
``80GB``, ``1048576``).
"""

import re
from typing import List, NamedTuple, Optional, Tuple

from ..devices import lookup, usable_bytes
from ..errors import ShapeTypeError, ShapeValueError
from ..tiling import format_bytes, format_bytes_apart

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


def positive_size(value, what: str) -> int:
    """A budget given in Python: bytes (an int) or a size as
    :func:`parse_size` reads it, more than 0; ``what`` names the argument
    in the error (:class:`~xlashape.ShapeTypeError` for another type,
    :class:`~xlashape.ShapeValueError` for 0 or less)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ShapeTypeError(f"{what}: expected bytes (an int) or a size such as '16G', not "
                             f"{type(value).__name__}")
    n = parse_size(value) if isinstance(value, str) else value
    if n <= 0:
        raise ShapeValueError(f"{what} {value!r}: expected a positive size")
    return n


def device_limit(device: str) -> Tuple[int, str, str, str]:
    """``(usable bytes, name, basis, platform)`` of a device of
    :mod:`xlashape.devices` (``h100``, ``v5e``, ``v5e:2x2``, jax's
    ``device_kind``): what one program may use on it, the name a verdict
    gives it (a GPU's says when the figure is an estimate: jax's 75% of its
    memory), where the figure comes from (:attr:`~xlashape.devices.Device.basis`)
    and the kind of device (``tpu``/``gpu``) -- the arguments of
    :func:`judge` after the module. Raises :class:`~xlashape.ShapeValueError`
    for an unknown device."""
    d = lookup(device)
    name = d.name
    if d.platform == "gpu" and d.basis == "estimated":
        name += f" (estimated: jax's 75% of {format_bytes(d.memory_bytes)})"
    return usable_bytes(d), name, d.basis, d.platform


class Verdict(NamedTuple):
    """Whether a program fits: ``peak_bytes`` against ``limit_bytes``,
    ``peak_name`` (which figure was used: XLA's ``peak_memory_in_bytes``, an
    out-of-memory report's ``memory_used_bytes``, or xlashape's own
    ``device_memory_peak_bytes``) and ``limit_name`` (the device or
    ``--limit``); ``limit_basis``: where the device's usable memory comes
    from (:attr:`xlashape.devices.Device.basis`: ``estimated`` for a GPU
    whose 75% share of its memory is computed, not measured; ``None`` for
    ``--limit``); ``device_platform`` / ``module_platform``: the kind of
    device judged against and the one the input was compiled for
    (:attr:`platform_mismatch` when they differ); ``report_excess_bytes``:
    an out-of-memory report's own excess when it is judged against its own
    limit (the report's figure is the one computation of it, so the verdict
    and the report print the same); ``report_limit_bytes``: the report's
    limit when the verdict's is another one.

    ``margin_bytes`` is limit - peak (negative when it does not fit), or
    minus the report's excess; ``fits`` is ``margin_bytes >= 0``."""

    peak_bytes: int
    limit_bytes: int
    peak_name: str
    limit_name: str
    limit_basis: Optional[str] = None
    device_platform: Optional[str] = None
    module_platform: Optional[str] = None
    report_excess_bytes: Optional[int] = None
    report_limit_bytes: Optional[int] = None

    @property
    def margin_bytes(self) -> int:
        if self.report_excess_bytes is not None:
            return -self.report_excess_bytes
        return self.limit_bytes - self.peak_bytes

    @property
    def fits(self) -> bool:
        return self.margin_bytes >= 0

    @property
    def fraction(self) -> float:
        return self.peak_bytes / self.limit_bytes if self.limit_bytes else float("inf")

    @property
    def platform_mismatch(self) -> bool:
        """The device is not of the kind the input was compiled for (a GPU
        dump against a TPU, a TPU report against a GPU): its layouts and
        sizes there would not be these."""
        return (self.device_platform is not None and self.module_platform is not None
                and self.device_platform != self.module_platform)

    def lines(self) -> List[str]:
        """The verdict as the report prints it: ``fits: peak X of Y (N%) on
        DEVICE`` or ``does not fit by Z: ...`` (sizes that print the same
        with their bytes), then what qualifies it: another limit than the
        out-of-memory report's own, another kind of device."""
        peak, limit = format_bytes_apart(self.peak_bytes, self.limit_bytes)
        if self.peak_name != "peak_memory_in_bytes":
            # the figure's name in the size's brackets, or in its own: one pair
            peak = (f"{peak[:-1]}, {self.peak_name})" if peak.endswith(")")
                    else f"{peak} ({self.peak_name})")
        if self.fits:
            out = [f"fits: peak {peak} of {limit} ({100 * self.fraction:.1f}%) "
                   f"on {self.limit_name}"]
        else:
            out = [f"does not fit by {format_bytes(-self.margin_bytes)}: peak {peak} of "
                   f"{limit} on {self.limit_name}"]
        if self.report_limit_bytes is not None:
            out.append(f"  (the report's own limit is {format_bytes(self.report_limit_bytes)}: "
                       f"it was compiled for a device with that memory, not "
                       f"{format_bytes(self.limit_bytes)})")
        if self.platform_mismatch:
            device = self.limit_name.split(" (", 1)[0]
            out.append(f"warning: {device} is a {self.device_platform.upper()}, and "
                       f"this input was compiled for {self.module_platform.upper()}: its layouts "
                       "and sizes there would not be these (judged anyway: --force-device)")
        return out

    def to_json(self) -> dict:
        d = self._asdict()
        d.update(fits=self.fits, margin_bytes=self.margin_bytes,
                 platform_mismatch=self.platform_mismatch)
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


def judge(module, limit_bytes: int, limit_name: str, *, limit_basis: Optional[str] = None,
          device_platform: Optional[str] = None) -> Optional[Verdict]:
    """:class:`Verdict` of ``module`` against ``limit_bytes`` (``None`` when
    no peak is known for it); ``device_platform``: the kind of device the
    limit is (``tpu``, ``gpu``; ``None`` for a size given as such)."""
    got = module_peak(module)
    if got is None:
        return None
    excess = report_limit = None
    oom = getattr(module, "oom", None)
    if got[1] == "memory_used_bytes" and oom is not None and oom.limit is not None:
        if format_bytes(oom.limit) == format_bytes(limit_bytes):
            # the report's own limit (as it prints it): its excess, not a second one
            excess = oom.excess
        else:
            report_limit = oom.limit
    return Verdict(got[0], limit_bytes, got[1], limit_name, limit_basis, device_platform,
                   getattr(module, "platform", None), excess, report_limit)
