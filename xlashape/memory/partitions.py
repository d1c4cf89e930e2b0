"""An accounting step: the devices a partitioned program runs on, and its parameters' shardings.

A program jax partitions over several devices (``NamedSharding``,
``shard_map``, ``pmap``) is compiled into one module per device: XLA's SPMD
partitioner rewrites every shape to one device's part, and the buffer
assignment, the peak and ``memory_analysis()`` are all per device. This step
says so in the model (:class:`~xlashape.memory.model.ModuleMemory`):

- ``devices``: how many devices the program was compiled for -- what the
  JAX object's shardings say when the source had one, else the module
  header's ``num_partitions`` x ``replica_count`` (``None`` when neither is
  given: one device, as far as the input tells);
- ``parameter_shardings``: each entry parameter's sharding -- as jax states
  it when the input was a JAX object (``P('data', None) over mesh data=8``,
  from its ``input_shardings``), else the ``sharding={...}`` XLA prints on
  the parameter (``{devices=[8,1]<=[8]}``: dimension 0 split 8 ways;
  ``{replicated}``: a whole copy on each device; XLA of jax 0.12 prints none
  in the optimized module) -- and the same on each parameter buffer live at
  the peak (:attr:`PeakBuffer.sharding <xlashape.memory.model.PeakBuffer>`),
  beside its per-device shape.

The proto route reads no sharding of its own (the ``OpSharding`` message is
not among the fields xlashape decodes); a JAX object still gives them.
"""

from __future__ import annotations

from typing import Optional

from .model import ModuleMemory
from .records import ModuleRecords

__all__ = ["apply"]


def _int(text) -> Optional[int]:
    try:
        n = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def devices_of(rec: ModuleRecords) -> Optional[int]:
    """The number of devices of ``rec``'s program (see the module docstring)."""
    if rec.devices is not None:
        return rec.devices
    attrs = rec.entry.attributes if rec.entry is not None else {}
    parts, reps = _int(attrs.get("num_partitions")), _int(attrs.get("replica_count"))
    if parts is None and reps is None:
        return None
    return (parts or 1) * (reps or 1)


def apply(mm: ModuleMemory, rec: ModuleRecords) -> None:
    """Fill ``mm.devices``, ``mm.device_kind``, ``mm.parameter_shardings``
    and the shardings of the parameters live at the peak."""
    mm.devices = devices_of(rec)
    mm.device_kind = rec.device_kind
    entry = rec.entry
    if entry is None or not (mm.devices or 1) > 1:
        return   # one device: a sharding says nothing (jax may still print one)
    shardings = entry.shardings
    jax_side = rec.parameter_shardings
    if jax_side and len(jax_side) == len(entry.params):
        shardings = jax_side   # as the user wrote them (newer XLA prints none in the module)
    if not shardings:
        return
    mm.parameter_shardings = dict(shardings)
    pa = mm.peak
    if pa is None or not pa.live_at_peak:
        return
    by_name = {entry.params[n][0]: text for n, text in shardings.items()
               if n in entry.params and entry.params[n][0]}
    if by_name:
        pa.live_at_peak = [b._replace(sharding=by_name[b.instruction])
                           if b.kind == "parameter" and b.instruction in by_name else b
                           for b in pa.live_at_peak]
