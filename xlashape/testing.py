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

from .errors import ShapeValueError
from .memory import (MemoryAnalysis, ModuleMemory, analyze, device_limit, judge,
                     positive_size)
from .tiling import format_bytes

__all__ = ["assert_fits"]


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
                top: int = 5, force_device: bool = False, **analyze_options):
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
    TPU topology's, :func:`xlashape.memory.lower_for_tpu`). A device of
    another kind than the program's (a TPU program against an H100) is an
    error, as ``xlashape memory --device`` makes it, unless ``force_device``.

    The peak is the one ``xlashape memory`` judges
    (:func:`xlashape.memory.judge`: XLA's ``peak_memory_in_bytes`` where it
    is device memory's, else the device-memory peak; an out-of-memory
    report's use); a compile that ran out of memory fails. The message names
    the ``top`` largest buffers live at the peak with their op paths.
    Returns the analysis (the module, when given one)."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ShapeValueError(f"top: expected a count >= 0, not {top!r}")
    if device is not None and limit is not None:
        raise ShapeValueError("give device= or limit=, not both")
    if isinstance(source, MemoryAnalysis):
        result, modules = source, [m for m in source.modules if not m.superseded]
    elif isinstance(source, ModuleMemory):
        result, modules = source, [source]
    else:
        result = analyze(source, **analyze_options)
        modules = [m for m in result.modules if not m.superseded]
    checks = []
    if device is not None:
        checks.append(device_limit(device))
    if limit is not None:
        checks.append((positive_size(limit, "limit"), f"limit {limit}", None, None))
    if max_peak is not None:
        checks.append((positive_size(max_peak, "max_peak"), f"max_peak {max_peak}", None, None))
    if not checks:
        kinds = sorted({m.device_kind for m in modules if m.device_kind})
        for kind in kinds:
            try:
                checks.append(device_limit(kind))
            except ShapeValueError:
                pass
        if not checks:
            raise ShapeValueError(
                "assert_fits: give device= (h100, v5e, ...), limit= or max_peak="
                + (f" (the program was compiled for {', '.join(kinds)}, which is not in "
                   "xlashape's table of devices)" if kinds else ""))
    failures = []
    for m in modules:
        name = m.name or "the program"
        for limit_bytes, limit_name, basis, platform in checks:
            v = judge(m, limit_bytes, limit_name, limit_basis=basis, device_platform=platform)
            if v is None:
                failures.append(f"{name}: its peak is not known (an input with neither a buffer "
                                "assignment nor memory_analysis()), so whether it fits is not "
                                "known")
                break
            if v.platform_mismatch and not force_device:
                raise ShapeValueError(
                    f"{limit_name.split(' (', 1)[0]} is a {v.device_platform.upper()} and {name} "
                    f"was compiled for {v.module_platform.upper()}: its layouts and sizes there "
                    "would not be these; give the device it was compiled for, a size "
                    "(limit=, max_peak=), or force_device=True")
            if v.fits and m.source != "oom":
                continue
            per = f" per device ({m.devices} devices)" if (m.devices or 1) > 1 else ""
            text = (f"{name} does not fit {limit_name}: {v.peak_name} {format_bytes(v.peak_bytes)} "
                    f"({v.peak_bytes:,} bytes){per} against {format_bytes(v.limit_bytes)} "
                    f"({v.limit_bytes:,} bytes)"
                    + (f", {format_bytes(-v.margin_bytes)} too much" if not v.fits else ""))
            if m.source == "oom":
                text += " -- the compile ran out of memory"
            failures.append("\n".join([text] + v.lines()[1:] + _largest(m, top)))
    if failures:
        raise AssertionError("\n".join(failures))
    return result
