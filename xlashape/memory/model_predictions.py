"""The result types of xlashape's own packing and predictions (issue 28):
the temporaries packed as XLA's heap simulator packs them
(:class:`PackedAllocation` of :class:`PackedValue`), the figures after
edits (:class:`WhatIf`) and the peak after a padding fix
(:class:`FixPrediction`). Part of the model (:mod:`xlashape.memory.model`
re-exports them); the views read them."""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

__all__ = ["PackedValue", "PackedAllocation", "WhatIf", "FixPrediction"]


class PackedValue(NamedTuple):
    """One value of a :class:`PackedAllocation`: XLA's value ``id``, its
    ``offset`` and ``size`` in bytes."""

    id: int
    offset: int
    size: int

    def to_json(self) -> dict:
        return {"id": self.id, "offset": self.offset, "size": self.size}


class PackedAllocation(NamedTuple):
    """xlashape's packing of one temporary allocation
    (:mod:`xlashape.memory.packing`): XLA's ``allocation`` index, its memory
    space (``color``), the ``size_in_bytes`` and each value's place
    (``values``: :class:`PackedValue`), or ``size_in_bytes`` ``None`` and
    ``reason`` when it is not rebuilt; ``equal_to_dump``: whether the dump
    says the same offsets and size (``None`` when not packed);
    ``order_note``: why the blocks XLA put end to end may be in another
    order."""

    allocation: int
    color: int
    size_in_bytes: Optional[int]
    values: Tuple[PackedValue, ...]
    equal_to_dump: Optional[bool]
    reason: Optional[str] = None
    order_note: Optional[str] = None

    def to_json(self) -> dict:
        d = {"allocation": self.allocation, "memory_space": self.color,
             "size_in_bytes": self.size_in_bytes,
             "values": [v.to_json() for v in self.values],
             "equal_to_dump": self.equal_to_dump}
        if self.reason is not None:
            d["reason"] = self.reason
        if self.order_note is not None:
            d["order_note"] = self.order_note
        return d


class WhatIf:
    """A prediction (:mod:`xlashape.memory.whatif`): the figures the module
    would have after ``edits`` (their texts), computed by xlashape with
    XLA's rules and its own packing -- never XLA's report. ``before`` and
    ``after``: figure name -> bytes (``None`` with the reason in
    ``reasons``), for ``argument_size_in_bytes``, ``output_size_in_bytes``,
    ``alias_size_in_bytes``, ``temp_size_in_bytes``, ``peak_memory_in_bytes``
    (and ``device_memory_peak_bytes``); ``applied`` (what each edit did),
    ``refused`` (edits that could not be applied faithfully, with why),
    ``assumptions`` (sentences), ``verdict`` (against the limit given, or
    ``None``)."""

    FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "peak_memory_in_bytes")

    def __init__(self, edits):
        self.edits = list(edits)
        self.before: Dict[str, Optional[int]] = {}
        self.after: Dict[str, Optional[int]] = {}
        self.reasons: Dict[str, str] = {}
        self.applied: List[str] = []
        self.refused: List[str] = []
        self.assumptions: List[str] = []
        self.verdict = None

    def to_json(self) -> dict:
        d = {"prediction": True, "edits": list(self.edits)}
        for k in self.FIELDS:
            d[k] = self.after.get(k)
        d["device_memory_peak_bytes"] = self.after.get("device_memory_peak_bytes")
        d["before"] = dict(self.before)
        d["reasons"] = dict(self.reasons)
        d["applied"] = list(self.applied)
        d["refused"] = list(self.refused)
        d["assumptions"] = list(self.assumptions)
        d["verdict"] = None if self.verdict is None else self.verdict.to_json()
        return d


class FixPrediction(NamedTuple):
    """What a padding fix would do to the peak (a prediction, with
    :mod:`xlashape.memory.whatif`): the ``allocation`` it applies to, the
    ``fix`` (:class:`xlashape.padding.Fix`), the peak ``before`` and
    ``after`` under ``peak_name`` (``peak_memory_in_bytes``, or
    ``device_memory_peak_bytes`` where XLA's peak counts other memory)."""

    allocation: int
    fix: object
    before: int
    after: int
    peak_name: str

    def to_json(self) -> dict:
        return {"prediction": True, "allocation": self.allocation, "fix": self.fix.to_json(),
                "before": self.before, "after": self.after, "peak_name": self.peak_name}


#: why no output reuses a donated buffer (:attr:`Donation.why`): ``size`` (no
#: output of its byte size in its memory space), ``padding`` (an output with
#: the same data bytes, padded to another size on this chip), ``layout`` (the
#: same array, in another layout of another size), ``taken`` (every output of
#: its size reuses another parameter), ``memory-space`` (no output in its
#: memory space), ``dynamic`` (a dynamic result), ``unexplained`` (an output
#: fits and is free: not XLA's rule as xlashape knows it), ``unknown``
