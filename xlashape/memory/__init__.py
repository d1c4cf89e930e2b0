"""XLA's memory accounting, from what XLA writes.

:func:`analyze` takes an HLO module (text or file), an XLA dump directory,
XLA's protobufs, a TPU or GPU out-of-memory report, or a JAX compiled object,
and returns the figures XLA reports for it, computed the way XLA computes
them (see :mod:`xlashape.memory.account` for each rule):

- from HLO text alone, the ``CompiledMemoryStats`` figures the text
  determines: ``argument_size_in_bytes``, ``output_size_in_bytes`` (a
  tuple's table of pointers included), ``alias_size_in_bytes`` and the
  ``host_`` twins for buffers in host memory (``S(5)``); each buffer takes
  the bytes of its tiled layout (:func:`buffer_size`);
- from a dump directory, in addition, every allocation of XLA's buffer
  assignment with its padded and unpadded bytes and the values in it,
  ``temp_size_in_bytes`` on CPU and GPU (on TPU ``None``: libtpu's allocator
  decides it; the device-memory temporaries are ``hbm_temp_allocation_bytes``),
  totals per memory space, the peak and what is live at it
  (:class:`PeakAnalysis`, in :attr:`ModuleMemory.peak`), the JAX op path and
  source line of each instruction, and a warning for any value whose size
  differs from xlashape's size of its shape;
- from an out-of-memory report, the limit, the excess, the listed
  allocations, and whether the program would fit without padding;
- from a JAX lowered function (``jax.jit(f).lower(*args)``), everything a
  dump gives, from a compile made here with a temporary dump, with that
  compile's own ``memory_analysis()`` beside it (:mod:`~xlashape.memory.source_jax`).
- with ``packing=True``, xlashape's own packing of each temporary allocation
  as XLA's heap simulator does it (:mod:`~xlashape.memory.packing`), and
  with ``what_if=[...]`` a prediction of the figures after edits -- a
  donation undone or made, another element type, another layout, a buffer
  dropped (:mod:`~xlashape.memory.whatif`) -- never shown as XLA's numbers.

``print(analysis)`` prints the terminal report of ``xlashape memory``, and a
notebook shows the memory page inline (:mod:`~xlashape.memory.display`).

Every allocation with padding says why (:func:`xlashape.padding.padding_report`:
which dimension and tile level) and what would make it smaller.

How it is built: a *source* per kind of input reads it, each file once, into
the same records (:mod:`~xlashape.memory.records`); one pass accounts for
them (:mod:`~xlashape.memory.account`, :mod:`~xlashape.memory.peak`) into the
model (:mod:`~xlashape.memory.model`) that every view
(:mod:`xlashape.reporters`) reads.

>>> m = analyze('''HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout={(f32[8,1,1024]{1,2,0:T(8,128)}, f32[]{:T(128)})->(f32[8,1,1024]{1,2,0:T(8,128)}, s32[]{:T(128)})}
... ENTRY %main (p: f32[8,1,1024], q: f32[]) -> (f32[8,1,1024], s32[]) {
...   %p = f32[8,1,1024]{1,2,0:T(8,128)} parameter(0)
...   %q = f32[]{:T(128)} parameter(1)
...   %c = s32[]{:T(128)} constant(1)
...   ROOT %t = (f32[8,1,1024]{1,2,0:T(8,128)}, s32[]{:T(128)}) tuple(%p, %c)
... }''').modules[0]
>>> m.argument_size_in_bytes, m.output_size_in_bytes, m.alias_size_in_bytes
(4194816, 4195328, 4194304)
>>> [(a.kind, a.size_in_bytes, a.unpadded_size_in_bytes) for a in m.allocations]
[('parameter', 4194304, 32768), ('parameter', 512, 4), ('output', 512, 512), ('output', 512, 4)]

(Dimension 1, of size 1, is tiled by 128 in ``T(8,128)``: the parameter
takes 128 times its 32K. The output reuses it, as ``input_output_alias``
says; the tuple's table of two pointers takes 512 bytes on TPU.)
"""

from ..sizes import (HOST_MEMORY_SPACE, buffer_size, normalize_chip, tuple_table_size,
                     unpadded_size)
from .analyze import EXAMPLE_DUMP, PLATFORMS, analyze, match_oom_dump
from .figures import PEAK_FIELDS
from .model import (Allocation, FixPrediction, GpuOomSummary, MemoryAnalysis, ModuleMemory,
                    OomSummary, PackedAllocation, PackedValue, PaddingExplanation, PeakAnalysis,
                    PeakBuffer, ValueInfo, WhatIf, explain_padding, space_label)
from .peak import VERIFIED
from .topology import lower_for_tpu, tpu_topology
from .verdict import Verdict, device_limit, judge, module_peak, parse_size, positive_size
from .whatif import judge_what_if, parse_edit
from . import display as _display

_display.install()   # print() and a notebook's inline page (the views sit above the model)

__all__ = [
    "analyze",
    "lower_for_tpu",
    "tpu_topology",
    "MemoryAnalysis",
    "ModuleMemory",
    "Allocation",
    "ValueInfo",
    "PaddingExplanation",
    "OomSummary",
    "GpuOomSummary",
    "PeakAnalysis",
    "PeakBuffer",
    "Verdict",
    "judge",
    "device_limit",
    "judge_what_if",
    "parse_edit",
    "PackedAllocation",
    "PackedValue",
    "WhatIf",
    "FixPrediction",
    "module_peak",
    "parse_size",
    "positive_size",
    "PEAK_FIELDS",
    "VERIFIED",
    "buffer_size",
    "unpadded_size",
    "tuple_table_size",
    "normalize_chip",
    "explain_padding",
    "space_label",
    "match_oom_dump",
    "HOST_MEMORY_SPACE",
    "EXAMPLE_DUMP",
    "PLATFORMS",
]
