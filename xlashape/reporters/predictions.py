"""Views of xlashape's own packing and predictions (``ModuleMemory.packing``,
``.what_if``, ``.fix_predictions``): the lines of the terminal report and the
section of the HTML page. Pure functions of the model; every figure here is
labelled a prediction, never shown as XLA's report.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from ..tiling import format_bytes
from .tables import text_width, wrapped

__all__ = ["prediction_lines", "prediction_html", "before_after"]

_SHOWN = ("peak_memory_in_bytes", "device_memory_peak_bytes", "argument_size_in_bytes",
          "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")


def _b(n) -> str:
    return "null" if n is None else format_bytes(int(n))


def before_after(before: Optional[int], after: Optional[int]) -> str:
    """``12.00M -> 16.00M (+4.00M, +33.3%)``; ``null`` for an unknown side."""
    text = f"{_b(before)} -> {_b(after)}"
    if before is not None and after is not None and after != before:
        d = after - before
        sign = "+" if d > 0 else "-"
        text += f" ({sign}{format_bytes(abs(d))}"
        if before:
            text += f", {100 * d / before:+.1f}%"
        text += ")"
    return text


def _fits(peak: Optional[int], verdict) -> str:
    if peak is None or verdict is None:
        return ""
    if peak <= verdict.limit_bytes:
        return f" (fits in {format_bytes(verdict.limit_bytes)} on {verdict.limit_name})"
    return (f" (does not fit: {format_bytes(peak - verdict.limit_bytes)} over "
            f"{format_bytes(verdict.limit_bytes)} on {verdict.limit_name})")


def _packing_line(m) -> Optional[str]:
    packed = getattr(m, "packing", None)
    if not packed:
        return None
    done = [p for p in packed if p.size_in_bytes is not None]
    same = sum(1 for p in done if p.equal_to_dump)
    text = (f"packing (xlashape's, as XLA's heap simulator packs): {len(done)} of {len(packed)} "
            f"temporary allocations rebuilt")
    if done:
        text += f", {same} equal to the dump's offsets and size"
    return text


def prediction_lines(m, verdict=None, width: Optional[int] = None) -> List[str]:
    """The report's lines about the module's packing, the peak after each
    padding fix, and the what-if (``verdict``: the module's, whose limit the
    predictions are judged against), their sentences wrapped for a terminal
    ``width`` characters wide (at most 100)."""
    w = text_width(width)
    out: List[str] = []
    line = _packing_line(m)
    if line:
        out.extend(wrapped(line, w, ""))
        for p in m.packing:
            if p.size_in_bytes is None:
                out.extend(wrapped(f"allocation {p.allocation} (S({p.color})) not rebuilt: "
                                   f"{p.reason}", w))
            elif p.order_note and not p.equal_to_dump:
                out.extend(wrapped(f"allocation {p.allocation} (S({p.color})): {p.order_note}", w))
    for f in getattr(m, "fix_predictions", ()) or ():
        out.extend(wrapped(f"prediction: apply the fix of allocation {f.allocation} "
                           f"({f.fix.kind}) and {f.peak_name} becomes "
                           f"{before_after(f.before, f.after)}{_fits(f.after, verdict)}", w, ""))
    w_if = getattr(m, "what_if", None)
    if w_if is None:
        return out
    out.extend(wrapped(f"what if {', '.join(w_if.edits)} (a prediction by xlashape, not XLA's "
                       "report):", w, ""))
    for k in _SHOWN:
        if k not in w_if.after and k not in w_if.before:
            continue
        before, after = w_if.before.get(k), w_if.after.get(k)
        if k == "device_memory_peak_bytes" and after == w_if.after.get("peak_memory_in_bytes"):
            continue
        if before is None and after is None and w_if.refused and not w_if.applied:
            continue
        out.append(f"  {k:28} {before_after(before, after)}")
        if after is None and k in w_if.reasons:
            out.extend(wrapped(f"({w_if.reasons[k]})", w, "    "))
    for a in w_if.applied:
        out.extend(wrapped(f"applied: {a}", w))
    for r in w_if.refused:
        out.extend(wrapped(f"not applied: {r}", w))
    if w_if.verdict is not None:
        first, *rest = w_if.verdict.lines()
        out.extend(wrapped(f"predicted: {first}", w))
        for extra in rest:
            out.extend(wrapped(extra.strip(), w, "    "))
    for a in w_if.assumptions:
        out.extend(wrapped(f"assumes: {a}", w))
    return out


def prediction_html(m, verdict, esc: Callable[[object], str]) -> List[str]:
    """The page's section for the same (``esc``: the page's escaping)."""
    out: List[str] = []
    line = _packing_line(m)
    fixes = getattr(m, "fix_predictions", ()) or ()
    w = getattr(m, "what_if", None)
    if not line and not fixes and w is None:
        return out
    out.append('<h3>Predictions (xlashape\'s, not XLA\'s report)</h3>')
    if line:
        out.append(f'<div class="note">{esc(line)}</div>')
    for f in fixes:
        out.append(f'<div class="note">Apply the fix of allocation {f.allocation} '
                   f'(<code>{esc(f.fix.kind)}</code>: {esc(f.fix.text)}) and '
                   f'<code>{esc(f.peak_name)}</code> becomes '
                   f'<b>{esc(before_after(f.before, f.after))}</b>{esc(_fits(f.after, verdict))}'
                   '</div>')
    if w is None:
        return out
    out.append(f'<div class="headline">What if <code>{esc(", ".join(w.edits))}</code>: a '
               'prediction by xlashape (XLA would compile the edited program again)</div>')
    out.append('<table><thead><tr><th>figure</th><th>now</th><th>predicted</th><th>change</th>'
               '</tr></thead><tbody>')
    for k in _SHOWN:
        before, after = w.before.get(k), w.after.get(k)
        if k == "device_memory_peak_bytes" and after == w.after.get("peak_memory_in_bytes"):
            continue
        if before is None and after is None and w.refused and not w.applied:
            continue
        change = before_after(before, after).partition(" -> ")[2]
        out.append(f'<tr><td><code>{esc(k)}</code></td><td class="n">{esc(_b(before))}</td>'
                   f'<td class="n">{esc(_b(after))}</td><td>{esc(change)}'
                   f'{" — " + esc(w.reasons[k]) if after is None and k in w.reasons else ""}'
                   '</td></tr>')
    out.append('</tbody></table>')
    if w.verdict is not None:
        v = w.verdict
        cls = "fits" if v.fits else "nofit"
        out.append(f'<div class="verdict {cls}">'
                   + "<br>".join(esc(("predicted: " if i == 0 else "") + line.strip())
                                 for i, line in enumerate(v.lines()))
                   + '</div>')
    items = ([f"applied: {a}" for a in w.applied] + [f"not applied: {r}" for r in w.refused]
             + [f"assumes: {a}" for a in w.assumptions])
    out.append('<ul class="why">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>")
    return out
