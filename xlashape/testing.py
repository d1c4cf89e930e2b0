"""Memory checks for a test suite: fail a test when a program stops fitting or its peak grows.

::

    import jax, jax.numpy as jnp
    from xlashape.testing import assert_fits

    def test_train_step_fits_on_an_h100():
        lowered = jax.jit(train_step, donate_argnums=0).lower(params, batch)
        assert_fits(lowered, device="h100")                # the device's usable memory
        assert_fits(lowered, max_peak="2G")                # or a budget: fails when the peak grows

:func:`assert_fits` analyses what it is given (:func:`xlashape.memory.analyze`:
a JAX lowered function, compiled here with a temporary dump; a compiled
object; a dump directory; an out-of-memory report; or an analysis already
made) and raises ``AssertionError`` when a module's peak is above the
device's usable memory, the ``limit`` or ``max_peak``: the message gives the
peak against the limit and the largest buffers live at the peak with their
JAX op paths and source lines -- what to look at first. It returns the
analysis, for more checks.
"""

from __future__ import annotations

from typing import List, Optional

from .errors import ShapeTypeError, ShapeValueError
from .memory import MemoryAnalysis, ModuleMemory, analyze, device_limit, module_peak, parse_size
from .tiling import format_bytes

__all__ = ["assert_fits"]


def _bytes(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ShapeTypeError(f"{what}: expected bytes (an int) or a size such as '16G', not "
                             f"{type(value).__name__}")
    n = parse_size(value) if isinstance(value, str) else value
    if n <= 0:
        raise ShapeValueError(f"{what} {value!r}: expected a positive size")
    return n


def _largest(m: ModuleMemory, top: int) -> List[str]:
    """The ``top`` largest buffers live at the peak (or, for an
    out-of-memory report, the allocations it lists), one line each."""
    lines = []
    pa = m.peak
    if pa is not None and pa.live_at_peak:
        buffers = sorted(pa.live_at_peak, key=lambda b: -b.size)
        lines.append(f"largest of the {len(buffers)} buffers live at the peak "
                     f"({format_bytes(pa.live_at_peak_bytes)}):")
        for b in buffers[:top]:
            where = b.op_name or b.instruction
            lines.append(f"  {format_bytes(b.size):>8}  {b.kind:<10} {where}  {b.shape}"
                         + (f" sharding={b.sharding}" if b.sharding else "")
                         + (f"  ({b.source})" if b.source else ""))
        return lines
    listed = sorted((a for a in m.allocations if a.size_in_bytes), key=lambda a: -a.size_in_bytes)
    if listed:
        lines.append(f"largest of the {len(listed)} allocations"
                     + (" the out-of-memory report lists:" if m.source == "oom" else ":"))
        for a in listed[:top]:
            where = a.op_name or (a.values[0] if a.values else "")
            lines.append(f"  {format_bytes(a.size_in_bytes):>8}  {a.kind:<10} {where}  "
                         f"{a.shape or ''}".rstrip())
    return lines


def assert_fits(source, *, device: Optional[str] = None, limit=None, max_peak=None,
                top: int = 5, **analyze_options) -> MemoryAnalysis:
    """Raise ``AssertionError`` unless every module of ``source`` fits.

    ``source``: anything :func:`xlashape.memory.analyze` takes (a JAX lowered
    function -- ``jax.jit(f).lower(*args)``, with arrays or
    ``jax.ShapeDtypeStruct`` -- is compiled with a temporary dump), or a
    :class:`~xlashape.memory.MemoryAnalysis` / :class:`~xlashape.memory.ModuleMemory`
    already made. ``analyze_options`` go to ``analyze()``.

    Against what: ``device`` (``h100``, ``v5e``, ... of :mod:`xlashape.devices`:
    its usable memory), ``limit`` (bytes, or ``"16G"``), ``max_peak`` (the
    same, as a budget the peak must stay under: a test that fails when a
    change makes the peak grow); any of them, all checked. With none, the
    device the program was compiled for when it is a known accelerator (a
    TPU topology's, :func:`xlashape.memory.lower_for_tpu`).

    The peak is the one ``xlashape memory`` judges
    (:func:`xlashape.memory.module_peak`: XLA's ``peak_memory_in_bytes`` where
    it is device memory's, else the device-memory peak; an out-of-memory
    report's use); a compile that ran out of memory fails. The message names
    the ``top`` largest buffers live at the peak with their op paths.
    Returns the analysis."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ShapeValueError(f"top: expected a count >= 0, not {top!r}")
    if device is not None and limit is not None:
        raise ShapeValueError("give device= or limit=, not both")
    if isinstance(source, MemoryAnalysis):
        result, modules = source, [m for m in source.modules if not m.superseded]
    elif isinstance(source, ModuleMemory):
        result, modules = None, [source]
    else:
        result = analyze(source, **analyze_options)
        modules = [m for m in result.modules if not m.superseded]
    checks = []
    if device is not None:
        checks.append(device_limit(device))
    if limit is not None:
        checks.append((_bytes(limit, "limit"), f"limit {limit}"))
    if max_peak is not None:
        checks.append((_bytes(max_peak, "max_peak"), f"max_peak {max_peak}"))
    if not checks:
        kinds = {m.device_kind for m in modules if m.device_kind}
        for kind in sorted(kinds):
            try:
                checks.append(device_limit(kind))
            except ShapeValueError:
                pass
        if not checks:
            raise ShapeValueError(
                "assert_fits: give device= (h100, v5e, ...), limit= or max_peak="
                + (f" (the program was compiled for {', '.join(sorted(kinds))}, which is not "
                   "in xlashape's table of devices)" if kinds else ""))
    failures = []
    for m in modules:
        name = m.name or "the program"
        got = module_peak(m)
        if got is None:
            failures.append(f"{name}: its peak is not known (an input with neither a buffer "
                            "assignment nor memory_analysis()), so whether it fits is not known")
            continue
        peak, peak_name = got
        for limit_bytes, limit_name in checks:
            if peak > limit_bytes or m.source == "oom":
                per = f" per device ({m.devices} devices)" if (m.devices or 1) > 1 else ""
                over = peak - limit_bytes
                text = (f"{name} does not fit {limit_name}: {peak_name} {format_bytes(peak)} "
                        f"({peak:,} bytes){per} against {format_bytes(limit_bytes)} "
                        f"({limit_bytes:,} bytes)"
                        + (f", {format_bytes(over)} too much" if over > 0 else ""))
                if m.source == "oom":
                    text += " -- the compile ran out of memory"
                failures.append("\n".join([text] + _largest(m, top)))
    if failures:
        raise AssertionError("\n".join(failures))
    return result if result is not None else modules[0]
