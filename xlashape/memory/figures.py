"""The names of XLA's memory figures, once.

XLA's ``CompiledMemoryStats`` (``compiled.memory_analysis()``) holds the size
figures (:data:`STATS_FIELDS`, each with a ``host_`` twin for host memory,
``S(5)``) and, in newer XLA, the peak figures (:data:`PEAK_FIELDS`); an
out-of-memory report gives what it used and its limit (:data:`OOM_FIELDS`).
Every builder and view of :mod:`xlashape.memory` names them from here.
"""

from typing import Tuple

__all__ = ["DEVICE_SIZE_FIELDS", "STATS_FIELDS", "PEAK_FIELDS", "OOM_FIELDS", "TEXT_FIELDS",
           "SHOWN_FIELDS", "HEADER_FIELDS", "DIFF_FIELDS", "host_twin"]

#: the size figures of device memory, each with a ``host_`` twin
DEVICE_SIZE_FIELDS: Tuple[str, ...] = ("argument_size_in_bytes", "output_size_in_bytes",
                                       "alias_size_in_bytes", "temp_size_in_bytes")


def host_twin(field: str) -> str:
    """The host-memory twin of a size figure (``host_argument_size_in_bytes``)."""
    return "host_" + field


#: ``CompiledMemoryStats``' eight size figures, device memory then host memory
STATS_FIELDS: Tuple[str, ...] = DEVICE_SIZE_FIELDS + tuple(host_twin(f) for f in DEVICE_SIZE_FIELDS)

#: the peak figures of ``CompiledMemoryStats`` (:mod:`xlashape.memory.peak`)
PEAK_FIELDS: Tuple[str, ...] = ("total_allocation_bytes", "indefinite_allocations",
                                "peak_memory_in_bytes", "peak_unpadded_heap_bytes")

#: an out-of-memory report's figures (``None`` elsewhere)
OOM_FIELDS: Tuple[str, ...] = ("memory_used_bytes", "memory_limit_bytes")

#: the size figures an HLO module's text determines (its entry's parameters,
#: result and aliases), device memory and host memory
TEXT_FIELDS: Tuple[str, ...] = STATS_FIELDS[:3] + STATS_FIELDS[4:7]

#: the size figures the views show (the host temporaries XLA reports as 0)
SHOWN_FIELDS: Tuple[str, ...] = STATS_FIELDS[:6]

#: a module's figures in the ``--json`` document, in this order
HEADER_FIELDS: Tuple[str, ...] = SHOWN_FIELDS + OOM_FIELDS

#: the figures ``memory diff`` compares, in this order
DIFF_FIELDS: Tuple[str, ...] = HEADER_FIELDS + PEAK_FIELDS
