"""``xlashape memory DUMP --png FILE`` / ``--svg FILE``: the heap over
program order and the buffers live at the peak, drawn with matplotlib (the
optional ``plot`` extra), from the model :func:`xlashape.memory.analyze`
builds (:attr:`ModuleMemory.peak <xlashape.memory.ModuleMemory>`): nothing
is computed here.

Left: one curve per memory space (padded: filled; unpadded: dashed), XLA's
peak marked. Right: the buffers live at the peak, largest first, the part
without padding solid and the padding hatched, each named with its kind (its
memory space on TPU, a cuBLAS / cuDNN workspace marked); the buffers not
drawn (under :data:`xlashape.reporters.html.SMALL_BYTES`, or beyond the 20
largest) share one grey bar that says how many and how large.
"""

from __future__ import annotations

from typing import Optional

from ..memory.model import space_label, space_tag
from ..render import MissingMatplotlib
from ..tiling import format_bytes
from .html import MAX_BARS, SMALL_BYTES, _ticks
from .tables import clip_middle as _clip_middle

__all__ = ["save_memory_picture", "picture_module"]

_COLORS = ("#0969da", "#8250df", "#bf3989", "#1a7f37", "#9a6700", "#57606a")



def picture_module(modules):
    """The module a picture is drawn for: the one with the highest peak
    among those with a heap (a dump holds helper modules too)."""
    with_heap = [m for m in modules if getattr(m, "peak", None) is not None and m.peak.heap]
    if not with_heap:
        return None
    return max(with_heap, key=lambda m: m.peak.live_at_peak_bytes)


def _fmt_axis(ax, axis: str, top: int):
    """Round byte ticks (as XLA prints sizes) from 0 to ``top``."""
    ticks = _ticks(max(int(top), 1))
    if axis == "y":
        ax.set_yticks(ticks)
        ax.set_yticklabels([format_bytes(t) for t in ticks])
        ax.set_ylim(0, ticks[-1])
    else:
        ax.set_xticks(ticks)
        ax.set_xticklabels([format_bytes(t) for t in ticks], fontsize=8)
        ax.set_xlim(0, ticks[-1])


def save_memory_picture(module, path: str, fmt: Optional[str] = None) -> None:
    """Draw the heap and the live-at-peak bars of ``module`` to ``path`` (PNG
    or SVG, by ``fmt`` or the extension). Raises
    :class:`~xlashape.render.MissingMatplotlib` without matplotlib, and
    ``ValueError`` for a module without a heap (an out-of-memory report, HLO
    text without a dump)."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise MissingMatplotlib(
            "drawing pictures needs matplotlib: pip install 'xlashape[plot]' "
            f"(or pip install matplotlib); import failed: {e}") from None
    pa = getattr(module, "peak", None)
    if pa is None or not pa.heap:
        raise ValueError(f"{module.name or 'the module'} has no heap over program order (it needs "
                         "a dump's buffer assignment and live ranges)")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    try:
        for k, color in enumerate(sorted(pa.heap)):
            h = pa.heap[color]
            padded = list(h["padded"])
            if not padded or max(padded) == 0:
                continue
            c = _COLORS[k % len(_COLORS)]
            xs = range(len(padded))
            label = f"S({color}) {space_label(color)}"
            ax.fill_between(xs, padded, step="mid", alpha=0.25, color=c)
            ax.step(xs, padded, where="mid", color=c, lw=1.2, label=label + " (with padding)")
            un = list(h.get("unpadded", ()))
            if len(un) == len(padded) and un != padded:
                ax.step(xs, un, where="mid", color=c, lw=1, ls="--", label="  without padding")
        if pa.peak_time is not None:
            ax.axvline(pa.peak_time, color="#cf222e", lw=1.2)
            ax.annotate(f"XLA's peak: position {pa.peak_time}\n{pa.peak_instruction or ''}",
                        (pa.peak_time, 1), xycoords=("data", "axes fraction"),
                        xytext=(4, -4), textcoords="offset points", va="top", fontsize=8,
                        color="#cf222e")
        fig_peak = pa.figures.get("peak_memory_in_bytes")
        ax.set_title(f"{module.name or '?'}: heap over program order"
                     + (f" (peak_memory_in_bytes {format_bytes(fig_peak)})" if fig_peak else ""),
                     fontsize=10)
        ax.set_xlabel("position in program order (the schedule)")
        _fmt_axis(ax, "y", max(max(h["padded"], default=0) for h in pa.heap.values()))
        ax.legend(fontsize=7, loc="best", framealpha=0.9)
        ax.grid(axis="y", color="#eaeef2")

        live = pa.live_at_peak
        shown = [b for b in live if b.size >= SMALL_BYTES][:min(MAX_BARS, 20)]
        rest = live[len(shown):] if shown == live[:len(shown)] else [b for b in live if b not in shown]
        platform = getattr(module, "platform", None)
        tagged = platform == "tpu" or len({b.color for b in live}) > 1
        labels = [_clip_middle((f"{space_tag(b.color, platform)} " if tagged else "")
                               + f"{b.label} ({b.kind}"
                               + (f", {b.workspace} workspace" if b.workspace else "") + ")", 56)
                  for b in shown]
        unpadded = [max(0, min(b.unpadded_size, b.size)) for b in shown]
        padding = [b.size - u for b, u in zip(shown, unpadded)]
        if rest:
            labels.append(f"{len(rest)} more buffer{'s' if len(rest) != 1 else ''}, "
                          f"{format_bytes(max(b.size for b in rest))} or less each")
            unpadded.append(sum(b.size for b in rest))
            padding.append(0)
        ys = list(range(len(labels)))[::-1]
        colors = ["#0969da"] * len(shown) + (["#8c959f"] if rest else [])
        bx.barh(ys, unpadded, color=colors, label="without padding")
        bx.barh(ys, padding, left=unpadded, color="#ffd8b5", edgecolor="#fb8f44", hatch="///",
                lw=0.5, label="padding")
        bx.set_yticks(ys)
        bx.set_yticklabels(labels, fontsize=7, family="monospace")
        _fmt_axis(bx, "x", max([u + p for u, p in zip(unpadded, padding)] + [1]))
        bx.set_title(f"live at the peak: {len(live)} buffers, {format_bytes(pa.live_at_peak_bytes)}",
                     fontsize=10)
        bx.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fig.savefig(path, format=fmt, dpi=90)
    finally:
        plt.close(fig)
