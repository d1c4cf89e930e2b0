"""The accounting step of xlashape's own packing and predictions: the
temporaries packed as XLA does (:mod:`xlashape.memory.packing`), the figures
after the edits asked for (:mod:`xlashape.memory.whatif`), and the peak after
each padding fix xlashape suggests. Called from
:func:`xlashape.memory.account.account` when ``Options.packing`` or
``Options.what_if`` asks."""

from __future__ import annotations

from .model import FixPrediction
from .packing import HeapModel, pack_module
from .whatif import fix_prediction, what_if

__all__ = ["predict", "FIXES_PREDICTED"]

#: how many of the most padded allocations get their fix's peak predicted
FIXES_PREDICTED = 3


def predict(mm, rec, opts) -> None:
    """Fill ``mm.packing``, ``mm.what_if`` and ``mm.fix_predictions``."""
    if rec.allocations is None and not opts.what_if:
        return
    model = HeapModel(rec, mm.platform) if rec.allocations is not None else None
    mm.packing = pack_module(rec, mm.platform, model)
    if opts.what_if:
        mm.what_if = what_if(mm, rec, opts.what_if, opts, model)
    if mm.packing is None or mm.peak is None:
        return
    before = mm.peak.figures.get("peak_memory_in_bytes")
    for a in mm.padding_wasters[:FIXES_PREDICTED]:
        e = a.explanation()
        if e is None or not e.fixes or a.index is None:
            continue
        fix = e.fixes[0]
        if fix.size_in_bytes is None or fix.size_in_bytes >= (a.size_in_bytes or 0):
            continue
        got = fix_prediction(mm, rec, a.index, fix.size_in_bytes, opts, model)
        if got is None:
            continue
        after, name, base = got
        mm.fix_predictions.append(FixPrediction(a.index, fix, base if base is not None
                                                else before, after, name))
