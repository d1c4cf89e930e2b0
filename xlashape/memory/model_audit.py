"""The result types of the audit (issue 27): what XLA did with a module's
buffers -- the donations (:class:`Donation`), the copies made only to
change a layout (:class:`LayoutCopy`) and the moves between memory spaces
(:class:`SpaceMove`), gathered in :class:`ModuleAudit`. Part of the model
(:mod:`xlashape.memory.model` re-exports them); the views read them."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

__all__ = ["DONATION_WHY", "Donation", "LayoutCopy", "SpaceMove", "ModuleAudit"]


DONATION_WHY = ("size", "padding", "layout", "taken", "memory-space", "dynamic", "unexplained",
                "unknown")


def _index_text(index) -> str:
    return "{" + ",".join(map(str, index or ())) + "}"


class Donation(NamedTuple):
    """One donated buffer of an entry parameter, as the module before
    optimizations marks it (jax's ``donate_argnums`` / ``donate_argnames``):
    ``parameter`` and ``shape_index`` (into a tuple parameter), its
    ``shape`` (with the layout the compiled program takes it in) and
    ``bytes`` (its buffer on this platform, padding included: what XLA
    compares); ``aliased``: an output reuses it in the compiled program, at
    ``output_index``; else ``reason`` (why XLA could not, in terms of the
    program's outputs) and ``fix`` (what would make the donation usable).
    ``marked``: ``"input_output_alias"`` when jax paired it with an output of
    its own type itself, ``"buffer_donor"`` when it left the choice to XLA;
    ``why``: the reason as one word of :data:`DONATION_WHY` (``None`` when
    aliased)."""

    parameter: int
    shape_index: Tuple[int, ...]
    shape: Optional[str]
    bytes: Optional[int]
    aliased: bool
    output_index: Optional[Tuple[int, ...]]
    reason: Optional[str]
    fix: Optional[str]
    marked: str
    why: Optional[str] = None

    @property
    def label(self) -> str:
        """``parameter 1`` (``parameter 1{0}`` in a tuple)."""
        return f"parameter {self.parameter}" + (_index_text(self.shape_index)
                                                 if self.shape_index else "")

    def to_json(self) -> dict:
        return {"parameter": self.parameter, "shape_index": list(self.shape_index),
                "shape": self.shape, "bytes": self.bytes, "aliased": self.aliased,
                "output_index": None if self.output_index is None else list(self.output_index),
                "reason": self.reason, "why": self.why, "fix": self.fix, "marked": self.marked}


class LayoutCopy(NamedTuple):
    """An instruction whose only effect is to change a value's layout or
    tiling: ``instruction`` (a ``copy``, a ``transpose`` that moves every
    element, or a fusion wrapping one: ``opcode``), in ``computation``
    (``None``: the entry), ``bytes`` (its result's buffer, padded),
    ``operand``, ``source`` and ``target`` (the array's shape with its layout
    before and after: JSON ``from`` / ``to``), ``live_at_peak`` (its result
    is among the buffers live at the peak; ``None`` without a peak);
    ``made_by``: the entry layout that made it (``"parameter 0"``, ``"output
    {1}"``; ``None`` for a copy between two instructions whose layouts XLA
    chose), ``requested`` (that layout is not the one XLA gives the shape by
    default: a jax ``Format``), ``cause`` (one sentence) and ``fix`` (what
    to request instead; ``None`` when no layout a program requests avoids it)."""

    instruction: str
    opcode: str
    computation: Optional[str]
    bytes: Optional[int]
    operand: Optional[str]
    source: str
    target: str
    live_at_peak: Optional[bool]
    made_by: Optional[str]
    requested: Optional[bool]
    cause: str
    fix: Optional[str]

    def to_json(self) -> dict:
        return {"instruction": self.instruction, "opcode": self.opcode,
                "computation": self.computation, "bytes": self.bytes, "operand": self.operand,
                "from": self.source, "to": self.target, "live_at_peak": self.live_at_peak,
                "made_by": self.made_by, "requested": self.requested, "cause": self.cause,
                "fix": self.fix}


class SpaceMove(NamedTuple):
    """A copy between memory spaces: ``instruction`` (a ``copy-start``, whose
    ``copy-done`` is ``done``; or a synchronous ``copy``), in ``computation``
    (``None``: the entry), ``bytes`` (the destination buffer), ``from_space``
    / ``to_space`` (``S(n)``), the ``operand`` moved and its ``shape`` at
    the destination; ``kind``: ``"to-host"`` / ``"from-host"`` (host
    offload, ``S(5)``), ``"prefetch"`` / ``"eviction"`` (into and out of
    on-chip memory, XLA's memory-space assignment), else ``"move"``."""

    instruction: str
    done: Optional[str]
    computation: Optional[str]
    bytes: Optional[int]
    from_space: int
    to_space: int
    operand: Optional[str]
    shape: str
    kind: str

    def to_json(self) -> dict:
        return {"instruction": self.instruction, "done": self.done,
                "computation": self.computation, "bytes": self.bytes,
                "from_space": self.from_space, "to_space": self.to_space,
                "operand": self.operand, "shape": self.shape, "kind": self.kind}


class ModuleAudit:
    """What XLA did with a module's buffers (:mod:`xlashape.memory.audit`):
    ``donations`` (:class:`Donation`, in parameter order), ``layout_copies``
    (:class:`LayoutCopy`, largest first), ``space_moves`` (:class:`SpaceMove`,
    in program order), ``donations_from`` (``"before optimizations"``: the
    module jax handed XLA; ``"after optimizations"``: the dump holds no such
    module, so the donations are the compiled module's aliases and the
    donors left over; ``None`` without a module header) and ``notes``."""

    def __init__(self):
        self.donations: List[Donation] = []
        self.layout_copies: List[LayoutCopy] = []
        self.space_moves: List[SpaceMove] = []
        self.donations_from: Optional[str] = None
        self.notes: List[str] = []

    @property
    def unused_donations(self) -> List[Donation]:
        return [d for d in self.donations if not d.aliased]

    @property
    def host_moves(self) -> List[SpaceMove]:
        return [m for m in self.space_moves if m.kind in ("to-host", "from-host")]

    def something_to_say(self) -> bool:
        """A donation no output reuses, a layout copy or a move to or from
        host memory: what a user may want to act on (XLA's own moves in
        on-chip memory alone are not)."""
        return bool(self.unused_donations or self.layout_copies or self.host_moves)

    def to_json(self) -> dict:
        return {"donations": [d.to_json() for d in self.donations],
                "donations_from": self.donations_from,
                "layout_copies": [c.to_json() for c in self.layout_copies],
                "space_moves": [m.to_json() for m in self.space_moves],
                "notes": list(self.notes)}

    def __repr__(self):
        return (f"<ModuleAudit: {len(self.donations)} donations "
                f"({len(self.unused_donations)} unused), {len(self.layout_copies)} layout copies, "
                f"{len(self.space_moves)} moves between memory spaces>")
