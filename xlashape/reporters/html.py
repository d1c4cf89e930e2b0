"""An offline memory viewer page: ``xlashape memory DUMP --html report.html``.

One self-contained HTML file (inline CSS, inline SVG, a few lines of inline
JavaScript to sort the table; no network, no external file) drawn from the
model :func:`xlashape.memory.analyze` builds -- nothing is computed here that
the model does not already hold, and no input file is opened; this module
only lays it out:

- per module, XLA's figures (null ones with the reason) and the verdict
  against a device or a limit when one was given;
- per memory space, the heap over program order (:attr:`PeakAnalysis.heap
  <xlashape.memory.PeakAnalysis>`: padded and unpadded curves), the peak
  marked, each column's highest point and instruction on hover;
- the buffers live at the peak as horizontal bars, largest first, the
  padding part hatched; buffers under :data:`SMALL_BYTES` share one bar;
- a sortable table of the allocations (kind, size, unpadded, padding, shape,
  values, JAX op path, source line); when a module has more than
  :data:`MAX_ROWS` allocations, the ones under :data:`SMALL_BYTES` (and any
  beyond the :data:`MAX_ROWS` largest) are summed into one row per kind and
  memory space, so a dump with 100,000 buffers stays a page a browser opens
  at once;
- the padding explanations and fixes of the allocations wasting most;
- for an out-of-memory report, what the report says, and why there is no
  heap over program order (a report lists allocations, not a schedule).

The page is a fragment (:func:`render_fragment`: one ``<div>`` of class
:data:`ROOT_CLASS`, its style scoped under that class, its script sorting
its own tables) in a document of its own (:func:`render_html`); a notebook
shows the fragment alone (``MemoryAnalysis._repr_html_``), where it restyles
nothing around it and its charts shrink to a narrow cell.

Every string that comes from an artifact (instruction names, op paths,
shapes, file names, metadata) is HTML-escaped before it is written, its
bidirectional and other invisible controls shown as escapes (:func:`esc`).
"""

from __future__ import annotations

import heapq
import html
import io
import os
import uuid
from typing import Dict, Iterable, List, Optional, Tuple

from ..memory.diff import memory_bytes
from ..memory.figures import PEAK_FIELDS, SHOWN_FIELDS
from ..memory.model import SMALL_BUFFER_BYTES, TIMELINE_BUFFERS, space_label, space_tag
from ..tiling import format_bytes
from ..safe_text import printable
from .predictions import prediction_html

__all__ = ["render_html", "write_html", "render_fragment", "write_fragment", "SMALL_BYTES",
           "MAX_ROWS", "MAX_BARS", "ROOT_CLASS"]

#: allocations / live buffers under this many bytes are grouped (in a module
#: with more than :data:`MAX_ROWS` allocations, and always in the bars)
SMALL_BYTES = SMALL_BUFFER_BYTES
#: at most this many allocation rows per module
MAX_ROWS = 2000
#: at most this many bars of live-at-peak buffers per module
MAX_BARS = 40
#: columns of a heap chart (each the highest of its positions)
CHART_COLUMNS = 480
#: at most this many rows of op paths live at the peak (the rest summed in one)
OP_PATH_ROWS = 15




def _axis(pa) -> str:
    if getattr(pa, "time_axis", "") == "trace events":
        return "event of the heap simulator's trace (the .hlo.pb)"
    return "position in program order (the schedule)"


def _steps(pa) -> str:
    return "trace events" if getattr(pa, "time_axis", "") == "trace events" else "positions"


def _when(pa) -> str:
    """Where the peak is: a position in program order, or (the proto route)
    an event of the heap simulator's trace."""
    if getattr(pa, "time_axis", "") == "trace events":
        return f"event {pa.peak_time} of the heap simulator's trace"
    return f"position {pa.peak_time}"

def esc(text) -> str:
    """``text`` made safe for HTML text and attribute values: markup escaped,
    and every character that is not printable written as its Python escape
    as the terminal output does (:mod:`xlashape.safe_text`): a
    bidirectional control (U+202E shows an op path reversed, U+2066-U+2069,
    U+200E/U+200F, U+061C) or an invisible one (zero-width space and
    joiners, U+FEFF, soft hyphen) is shown as ``\\u202e``, not obeyed.
    Line breaks and tabs are kept (HTML shows them as spaces). An
    HTML character reference would not do: the browser decodes it back."""
    return html.escape(printable("" if text is None else str(text), keep="\t\n\r"), quote=True)


def _b(n) -> str:
    return "?" if n is None else format_bytes(int(n))


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px;color:#1b1f24;max-width:1400px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 6px;border-top:2px solid #d0d7de;padding-top:14px}
h3{font-size:15px;margin:18px 0 6px} .sub{color:#57606a} code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;min-width:150px;background:#f6f8fa}
.card .k{font-size:11px;color:#57606a;font-family:ui-monospace,Menlo,Consolas,monospace}.card .v{font-size:17px;font-weight:600}
.card.null .v{color:#8c959f;font-weight:400}
.verdict{padding:8px 12px;border-radius:6px;font-weight:600;margin:8px 0;display:inline-block}
.fits{background:#dafbe1;border:1px solid #4ac26b}.nofit{background:#ffebe9;border:1px solid #ff8182}
.note{color:#57606a;font-size:12px;margin:2px 0}
svg text{font:11px system-ui,sans-serif;fill:#1b1f24}
.bars{margin:6px 0}.bar{display:flex;align-items:center;gap:8px;margin:1px 0;font-size:12px}
.bar .lab{width:560px;flex:none;overflow-wrap:anywhere;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px;line-height:1.25}
.bar .lab .op{color:#57606a}.bar{padding:1px 0}
.sp{display:inline-block;font:600 10px system-ui,sans-serif;padding:0 4px;border-radius:3px;color:#fff;margin-right:4px;background:#57606a}
.sp0{background:#0969da}.sp1{background:#8250df}.sp2{background:#1a7f37}.sp5{background:#9a6700}
.ws{font:600 10px system-ui,sans-serif;padding:0 4px;border-radius:3px;background:#fff8c5;border:1px solid #d4a72c;margin-left:4px}
.c1 .u{background:#8250df}.c2 .u{background:#1a7f37}.c5 .u{background:#9a6700}
.bar .sz{width:70px;text-align:right;font-variant-numeric:tabular-nums}
.bar .track{flex:1;min-width:200px;height:14px;display:flex}
.u{background:#0969da;height:14px}.p{height:14px;background:repeating-linear-gradient(45deg,#fb8f44,#fb8f44 3px,#ffd8b5 3px,#ffd8b5 6px)}
.agg .u{background:#8c959f}
.legend span{display:inline-block;width:12px;height:12px;vertical-align:middle;margin:0 4px 0 12px}
table{border-collapse:collapse;font-size:12px;margin:6px 0}th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa;cursor:pointer;user-select:none;position:sticky;top:0}th:after{content:" \\2195";color:#8c959f}
td.mono{max-width:420px;overflow-wrap:anywhere}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}tr.agg td{color:#57606a;font-style:italic}
.tw{max-height:520px;overflow:auto;border:1px solid #d0d7de;display:inline-block;max-width:100%}
.tw table{margin:0}.why{margin:4px 0 10px 0}.headline{font-size:15px;margin:10px 0;padding:8px 12px;background:#ddf4ff;border:1px solid #54aeff;border-radius:6px}.why li{margin:2px 0}
"""

# sorts the tables of ``root`` (the page's document, or one fragment's element): a column by
# its cells' data-v (numbers where its header has data-num), else by their text
_JS = """
root.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),num=th.dataset.num==='1';
  var dir=th.dataset.dir==='d'?1:-1;th.dataset.dir=dir===1?'a':'d';
  function key(r){var d=r.cells[i];return d.dataset.v!==undefined?d.dataset.v:d.textContent;}
  rows.sort(function(x,y){var a=key(x),c=key(y);
   if(num){a=parseFloat(a);c=parseFloat(c);a=isNaN(a)?-1:a;c=isNaN(c)?-1:c;return (a-c)*dir;}
   return String(a).localeCompare(String(c))*dir;});
  rows.forEach(function(r){b.appendChild(r);});});});});
"""


#: the class of a fragment's outer element: every rule of its style is scoped under it
ROOT_CLASS = "xlashape-memory"

# a fragment in a notebook's cell: charts shrink to the cell down to a width
# where their 11px text is still 7px, then scroll (a heap chart in its own
# box, the timeline with the fragment); bar labels give way
_FRAGMENT_CSS = """
body{overflow-x:auto;margin:0}
svg.heap,svg.timeline{max-width:100%;min-width:640px;height:auto}
.space{overflow-x:auto}
.bar .lab{width:auto;flex:0 1 420px;min-width:0}.bar .track{min-width:80px}
"""


def _scoped(css: str, root: str) -> str:
    """``css`` with every rule scoped under the class ``root``: a rule on
    ``body`` styles the fragment's own element, any other selector is
    prefixed with it (no rule reaches the page around the fragment)."""
    out = []
    for rule in css.split("}"):
        if "{" not in rule:
            continue
        selectors, body = rule.split("{", 1)
        scoped = []
        for sel in selectors.split(","):
            sel = " ".join(sel.split())
            if not sel:
                continue
            scoped.append(f".{root}" if sel == "body" else f".{root} {sel}")
        out.append(",".join(scoped) + "{" + body.strip() + "}")
    return "\n".join(out)


_FRAGMENT_STYLE = _scoped(_CSS + _FRAGMENT_CSS, ROOT_CLASS)


# -- the heap chart ------------------------------------------------------------------


def _columns(padded, unpadded, n_cols: int):
    """``(first, last, highest padded, its position, highest unpadded)`` per
    column: each column the highest of its positions."""
    n = len(padded)
    cols = []
    if n == 0:
        return cols
    c = min(n, n_cols)
    for k in range(c):
        a, b = k * n // c, max(k * n // c + 1, (k + 1) * n // c)
        seg = padded[a:b]
        hi = max(seg)
        pos = a + list(seg).index(hi)
        u = max(unpadded[a:b]) if len(unpadded) == n else None
        cols.append((a, b - 1, hi, pos, u))
    return cols


def _ticks(top: int) -> List[int]:
    """Round byte values (1, 2 or 5 times a power of ten of the unit XLA
    prints: B, K, M, G) from 0 to at least ``top``, about four steps."""
    if top <= 0:
        return [0]
    unit = 1
    while top >= unit * 1024 and unit < 1 << 40:
        unit *= 1024
    raw = top / unit / 4
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 10 * mag)
    step_b = max(1, int(step * unit))
    n = -(-top // step_b)
    return [step_b * i for i in range(n + 1)]


def heap_svg(padded, unpadded, *, schedule=None, peak_pos: Optional[int] = None,
             peak_label: str = "", width: int = 1000, height: int = 250,
             ymax: Optional[int] = None, axis: str = "position in program order (the schedule)"
             ) -> str:
    """An inline SVG of one heap over program order (``axis`` names the x
    axis: the proto route's heap is over the heap simulator's trace events):
    the padded heap as a filled area, the unpadded heap as a line, the peak as
    a red line, and a hover title per column (positions, highest bytes, the
    instruction)."""
    n = len(padded)
    left, right, top, bottom = 78, 12, 24, 34
    pw, ph = width - left - right, height - top - bottom
    cols = _columns(padded, unpadded, CHART_COLUMNS)
    ymax = max([c[2] for c in cols] + [1, ymax or 0])
    ticks = _ticks(ymax)
    ymax = max(ticks[-1], 1)
    out = [f'<svg class="heap" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    # axes and grid
    for t in ticks:
        y = top + ph - ph * t / ymax
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eaeef2"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(_b(t))}</text>')
    for i in range(5):
        pos = (n - 1) * i // 4 if n else 0
        x = left + pw * (pos + 0.5) / max(n, 1)
        out.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{pos}</text>')
    out.append(f'<text x="{left + pw / 2:.0f}" y="{height - 3}" text-anchor="middle" '
               f'fill="#57606a">{esc(axis)}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="#8c959f"/>')
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#8c959f"/>')
    if cols:
        cw = pw / len(cols)

        def y_of(v):
            return top + ph - ph * v / ymax

        pts = []
        upts = []
        for k, c in enumerate(cols):
            x0, x1 = left + k * cw, left + (k + 1) * cw
            pts.append(f"{x0:.1f},{y_of(c[2]):.1f} {x1:.1f},{y_of(c[2]):.1f}")
            if c[4] is not None:
                upts.append(f"{x0:.1f},{y_of(c[4]):.1f} {x1:.1f},{y_of(c[4]):.1f}")
        base = f"{left + pw:.1f},{top + ph:.1f} {left:.1f},{top + ph:.1f}"
        out.append(f'<polygon class="padded" points="{" ".join(pts)} {base}" '
                   'fill="#b6d7ff" stroke="#0969da" stroke-width="1"/>')
        if upts:
            out.append(f'<polyline class="unpadded" points="{" ".join(upts)}" fill="none" '
                       'stroke="#1a7f37" stroke-width="1.5" stroke-dasharray="4 2"/>')
        if peak_pos is not None and 0 <= peak_pos < n:
            x = left + pw * (peak_pos + 0.5) / n
            out.append(f'<line class="peak" x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" '
                       'stroke="#cf222e" stroke-width="1.5"/>')
            anchor = "end" if x > left + pw * 0.6 else "start"
            dx = -4 if anchor == "end" else 4
            out.append(f'<text x="{x + dx:.1f}" y="{top - 8}" text-anchor="{anchor}" '
                       f'fill="#cf222e" style="fill:#cf222e;font-weight:600">{esc(peak_label)}</text>')
        # hover: one transparent rectangle per column
        for k, c in enumerate(cols):
            ins = schedule[c[3]] if schedule is not None and c[3] < len(schedule) else None
            span = f"position {c[0]}" if c[0] == c[1] else f"positions {c[0]}-{c[1]}"
            tip = f"{span}: {_b(c[2])} ({c[2]} bytes)"
            if c[4] is not None:
                tip += f", unpadded {_b(c[4])}"
            if ins:
                tip += f"\nat {c[3]}: {ins}"
            out.append(f'<rect x="{left + k * cw:.2f}" y="{top}" width="{cw:.2f}" height="{ph}" '
                       f'fill="transparent"><title>{esc(tip)}</title></rect>')
    out.append("</svg>")
    return "".join(out)


# -- the allocation timeline ---------------------------------------------------------

_KIND_COLORS = {"temporary": "#0969da", "parameter": "#8250df", "output": "#1a7f37",
                "constant": "#9a6700", "thread-local": "#57606a"}


def timeline_svg(m, width: int = 1000, height: int = 300) -> Optional[str]:
    """XProf's buffer allocation timeline, offline: the temporary
    allocation of the memory space where XLA's peak is, each buffer a
    rectangle from its first to its last position in program order (x) at
    its offset in the allocation (y); the peak's position marked. Drawn from
    the model's :class:`~xlashape.memory.model.Timeline`; ``None`` where the
    module has none (no live ranges)."""
    pa = m.peak
    tl = pa.timeline if pa is not None else None
    if tl is None:
        return None
    rects = [(b.size, b.offset, b.start, b.end, b.label, b.shape) for b in tl.buffers]
    dropped = tl.dropped
    n = tl.positions
    top_b = max(tl.size, max(x[0] + x[1] for x in rects), 1)
    ticks = _ticks(top_b)
    top_b = ticks[-1] or 1
    left, right, top, bottom = 78, 12, 10, 34
    pw, ph = width - left - right, height - top - bottom
    out = [f'<svg class="timeline" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    for t in ticks:
        y = top + ph - ph * t / top_b
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eaeef2"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(_b(t))}</text>')
    for i in range(5):
        pos = (n - 1) * i // 4
        out.append(f'<text x="{left + pw * (pos + 0.5) / n:.1f}" y="{top + ph + 16}" '
                   f'text-anchor="middle">{pos}</text>')
    out.append(f'<text x="{left + pw / 2:.0f}" y="{height - 3}" text-anchor="middle" '
               'fill="#57606a">position in program order; height: offset in the allocation</text>')
    kind = "temporary"
    for size, off, s0, s1, label, shape in rects:
        x0 = left + pw * s0 / n
        x1 = left + pw * (s1 + 1) / n
        y1 = top + ph - ph * off / top_b
        y0 = top + ph - ph * (off + size) / top_b
        tip = f"{label} {shape}\n{_b(size)} ({size:,} bytes) at offset {off:,}\nlive {s0}-{s1}"
        out.append(f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{max(x1 - x0, 0.5):.2f}" '
                   f'height="{max(y1 - y0, 0.5):.2f}" fill="{_KIND_COLORS[kind]}" '
                   f'fill-opacity="0.55" stroke="#0a3069" stroke-width="0.3">'
                   f'<title>{esc(tip)}</title></rect>')
    if pa.peak_time is not None and 0 <= pa.peak_time < n:
        x = left + pw * (pa.peak_time + 0.5) / n
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" '
                   'stroke="#cf222e" stroke-width="1.5"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="#8c959f"/>')
    out.append("</svg>")
    head = (f'<h3>Allocation timeline: allocation {tl.allocation}, {esc(_space_name(tl.color, m.platform))} '
            f'temporaries ({esc(_b(tl.size))})</h3><div class="note">Each buffer from its first '
            'to its last position in program order, at its offset in the allocation (hover for '
            'its name); buffers at one offset share memory; the red line is XLA\'s peak.'
            + (f' The {TIMELINE_BUFFERS:,} largest of {len(rects) + dropped:,} buffers.'
               if dropped > 0 else "") + '</div>')
    return head + "".join(out)


# -- the page ------------------------------------------------------------------------


def _card(key: str, value, why: Optional[str] = None) -> str:
    if value is None:
        return (f'<div class="card null" title="{esc(why or "")}"><div class="k">{esc(key)}</div>'
                f'<div class="v">null</div></div>')
    return (f'<div class="card"><div class="k">{esc(key)}</div><div class="v" '
            f'data-bytes="{int(value)}">{esc(_b(value))}</div>'
            f'<div class="note">{int(value):,} bytes</div></div>')


def _verdict_html(v) -> str:
    if v is None:
        return ""
    first, *rest = v.lines()
    return (f'<div class="verdict {"fits" if v.fits else "nofit"}">{esc(first)}</div>'
            + "".join(f'<div class="note">{esc(x.strip())}</div>' for x in rest))


def _space_name(color: int, platform: Optional[str] = None) -> str:
    """``S(1) VMEM (fast on-chip memory)``; on TPU device memory says it is
    HBM (``S(0) device memory (HBM)``)."""
    name = f"S({color}) {space_label(color)}"
    tag = space_tag(color, platform)
    return name + (f" ({tag})" if platform == "tpu" and tag not in name else "")


def _peak_section(m, out: List[str]) -> None:
    pa = m.peak
    schedule = getattr(pa, "schedule", None)
    out.append('<h3>Heap over program order</h3>')
    out.append('<div class="legend note"><span style="background:#b6d7ff;border:1px solid #0969da">'
               '</span>bytes live, with padding<span style="border-top:2px dashed #1a7f37;height:0">'
               '</span>without padding<span style="background:#cf222e;width:2px"></span>the peak'
               ' &middot; hover the chart for the instruction at each point; buffers that live for '
               'the whole program (parameters, outputs, constants) are included</div>')
    highest = max((max(h["padded"]) for h in pa.heap.values() if len(h["padded"])), default=0)
    over = {x.memory_space: x for x in m.heaps_over_allocations()}
    for color in sorted(pa.heap):
        h = pa.heap[color]
        padded = h["padded"]
        if not len(padded):
            continue
        hi = max(padded)
        flat = min(padded) == hi
        # a space holding a hundredth of the largest (SMEM scalars, sflags): a short chart
        small = flat or 100 * hi < highest
        if color == pa.peak_memory_space and pa.peak_time is not None:
            pos = pa.peak_time
            what = ("XLA's peak is here" if pa.figures.get("peak_memory_in_bytes")
                    == pa.live_at_peak_bytes else "highest")
        elif flat:
            pos = None
            what = ""
        else:
            pos = list(padded).index(hi)
            what = "highest"
        ins = None
        if pos is not None:
            ins = schedule[pos] if schedule is not None and pos < len(schedule) else (
                pa.peak_instruction if color == pa.peak_memory_space else None)
        label = "" if pos is None else (
            f"{what}: {_b(padded[pos] if pos < len(padded) else hi)} at {pos}"
            + (f" ({ins})" if ins else ""))
        note = (" &mdash; flat: only buffers that live for the whole program" if flat else "")
        out.append(f'<div class="space" data-color="{color}"><div><b>{esc(_space_name(color, m.platform))}</b>'
                   f' &mdash; highest <span class="hi" data-bytes="{int(hi)}">{esc(_b(hi))}</span>'
                   f' ({int(hi):,} bytes) over {len(padded):,} {_steps(pa)}{note}</div>')
        if color in over:
            x = over[color]
            out.append(f'<div class="note over" data-heap="{x.heap_bytes}" '
                       f'data-allocated="{x.allocated_bytes}">{esc(x.sentence())}</div>')
        out.append(heap_svg(padded, h.get("unpadded", ()), schedule=schedule, peak_pos=pos,
                            peak_label=label, height=110 if small else 250, axis=_axis(pa)))
        out.append("</div>")
    # live at the peak
    live = pa.live_at_peak
    if not live:
        return
    total = pa.live_at_peak_bytes
    fixed = sum(b.size for b in live if b.start is None)
    where = ""
    if pa.peak_time is not None:
        where = (f" &mdash; the temporaries' heap in {esc(_space_name(pa.peak_memory_space))} is "
                 f"highest at {_when(pa)}: <code>{esc(pa.peak_instruction or '?')}</code>")
    out.append(f'<h3>Live at the peak: {len(live):,} buffers, {esc(_b(total))}</h3>')
    shown = [b for b in live if b.size >= SMALL_BYTES][:MAX_BARS]
    ids = {id(b) for b in shown}
    beyond = [b for b in live if id(b) not in ids and b.size >= SMALL_BYTES]
    small = [b for b in live if b.size < SMALL_BYTES]
    grey = []
    if beyond:
        grey.append((beyond, f"{len(beyond):,} more buffer{'s' if len(beyond) != 1 else ''} of "
                             f"{_b(SMALL_BYTES)} or more, beyond the {len(shown):,} largest"))
    if small:
        grey.append((small, f"{len(small):,} buffer{'s' if len(small) != 1 else ''} under "
                            f"{_b(SMALL_BYTES)} each"))
    spaces = sorted({b.color for b in live})
    tagged = m.platform == "tpu" or len(spaces) > 1   # else one memory space: no tag to read
    tags = "".join(f'<span class="sp sp{c}">{esc(space_tag(c, m.platform))}</span>'
                   f'{esc(_space_name(c))} ' for c in spaces)
    legend = ("Grey: the buffers not drawn one by one, summed: "
              + "; ".join(f"{what} ({_b(sum(b.size for b in xs))})" for xs, what in grey) + "."
              if grey else "")
    out.append(f'<div class="note">{esc(_b(fixed))} lives for the whole program (parameters, '
               f'outputs, constants) + {esc(_b(total - fixed))} of temporaries{where}. '
               + (f'Bar: bytes without padding, coloured by memory space ({tags.strip()}); '
                  if tagged else 'Blue: bytes without padding; ')
               + f'hatched orange: padding. {esc(legend)}</div>')
    biggest = max([b.size for b in shown] + [sum(b.size for b in xs) for xs, _ in grey] + [1])
    out.append('<div class="bars">')
    for b in shown:
        u = max(0, min(b.unpadded_size, b.size))
        tag = space_tag(b.color, m.platform)
        shape = b.shape + (f" (one device's part; sharding={b.sharding})" if b.sharding else "")
        tip = (f"{b.label} ({b.kind}, S({b.color}) {tag})\n{shape}\nsize {b.size:,} bytes, "
               f"unpadded {b.unpadded_size:,}, padding {b.padding:,}\n"
               + ("lives for the whole program" if b.start is None else f"live {b.start}-{b.end}")
               + (f"\n{b.workspace} workspace" if b.workspace else "")
               + (f"\nop: {b.op_name}" if b.op_name else "")
               + (f"\nsource: {b.source}" if b.source else ""))
        ws = f'<span class="ws">{esc(b.workspace)} workspace</span>' if b.workspace else ""
        op = f'<div class="op">{esc(b.op_name)}</div>' if b.op_name else ""
        out.append(f'<div class="bar c{b.color}" title="{esc(tip)}" data-bytes="{b.size}" '
                   f'data-space="{esc(tag)}"><div class="sz">{esc(_b(b.size))}</div>'
                   f'<div class="track"><div class="u" style="width:{100 * u / biggest:.3f}%"></div>'
                   f'<div class="p" style="width:{100 * (b.size - u) / biggest:.3f}%"></div></div>'
                   f'<div class="lab"><div>'
                   + (f'<span class="sp sp{b.color}">{esc(tag)}</span>' if tagged else '')
                   + f'{esc(b.kind)} &middot; {esc(b.label)} {esc(b.shape or "")}'
                   + (f' sharding={esc(b.sharding)}' if b.sharding else '') + f'{ws}</div>'
                   f'{op}</div></div>')
    for xs, what in grey:
        rb = sum(b.size for b in xs)
        out.append(f'<div class="bar agg" data-bytes="{rb}" data-count="{len(xs)}">'
                   f'<div class="sz">{esc(_b(rb))}</div>'
                   f'<div class="track"><div class="u" style="width:{100 * rb / biggest:.3f}%">'
                   f'</div></div><div class="lab">{esc(what)}</div></div>')
    out.append("</div>")
    rows, rest = pa.op_path_rows(OP_PATH_ROWS)
    bare_bytes, bare_count, bare_names = pa.without_op_path()
    if rows or bare_count:
        out.append('<h3>Live at the peak by JAX op path</h3><table class="oppaths"><thead><tr>'
                   '<th>bytes</th><th>share</th><th>buffers</th><th>op path</th></tr></thead>'
                   '<tbody>')

        def row(b, c, text, cls=""):
            out.append(f'<tr{cls}><td class="n" data-v="{b}">{esc(_b(b))}</td><td class="n">'
                       f'{100 * b / max(total, 1):.1f}%</td><td class="n">{c}</td>'
                       f'<td class="mono">{text}</td></tr>')

        for k, b, c in rows:
            row(b, c, esc(k))
        if rest:
            row(sum(g[1] for g in rest), sum(g[2] for g in rest),
                esc(f"{len(rest):,} more op path{'s' if len(rest) != 1 else ''}, "
                    f"{_b(rest[0][1])} or less each"), ' class="agg"')
        if bare_count:
            names = ", ".join(bare_names[:3]) + (f" and {len(bare_names) - 3:,} more"
                                                 if len(bare_names) > 3 else "")
            row(bare_bytes, bare_count, f'<i>no op path</i> (no metadata: {esc(names)})',
                ' class="agg noop"')
        out.append("</tbody></table>")


def _alloc_rows(m) -> Tuple[List, Dict[Tuple[str, int], List[int]], int]:
    """The allocations to list (largest first) and the sums of the rest per
    (kind, memory space); one pass over the model's allocations."""
    count = m.allocation_count or 0
    small: Dict[Tuple[str, int], List[int]] = {}
    if count and count <= MAX_ROWS:
        rows = list(m.allocations)
        return sorted(rows, key=lambda a: -(a.size_in_bytes or 0)), small, len(rows)
    big = []
    n = 0
    for i, a in enumerate(m.allocations):
        n += 1
        size = a.size_in_bytes or 0
        if size >= SMALL_BYTES:
            item = (size, -i, a)
            if len(big) < MAX_ROWS:
                heapq.heappush(big, item)
                continue
            if item[:2] > big[0][:2]:
                item = heapq.heapreplace(big, item)
            a = item[2]
        g = small.setdefault((a.kind, a.memory_space), [0, 0, 0])
        g[0] += 1
        g[1] += a.size_in_bytes or 0
        g[2] += a.padding_in_bytes
    rows = [x[2] for x in sorted(big, key=lambda x: (-x[0], -x[1]))]
    return rows, small, n


def _main_value(a) -> Optional[str]:
    if a.value_details:
        return max(a.value_details, key=lambda v: v.size_in_bytes or 0).name
    return a.values[0] if a.values else None


def _alloc_table(m, out: List[str]) -> None:
    rows, small, n = _alloc_rows(m)
    grouped = f"; allocations under {_b(SMALL_BYTES)} (and beyond the {MAX_ROWS:,} largest) are " \
              "summed per kind and memory space" if small else ""
    out.append(f'<h3>Allocations ({n:,}{esc(grouped)})</h3>')
    out.append('<div class="note">Click a column to sort. An allocation that holds one array '
               'shows its shape; an arena (a temporary allocation whose values the heap '
               'simulator packed at their offsets) how many values it holds and the largest. '
               'Op path and source: of the allocation\'s largest value, from the module\'s '
               'metadata.</div>')
    out.append('<div class="tw"><table class="sortable allocations"><thead><tr>'
               '<th data-num="1">#</th><th>kind</th><th>space</th><th data-num="1">size</th>'
               '<th data-num="1">unpadded</th><th data-num="1">padding</th><th>shape, or what it holds</th>'
               '<th>values</th><th>op path</th><th>source</th></tr></thead><tbody>')
    for a in rows:
        loc = m.location(_main_value(a))
        op = a.op_name or (loc.op_name if loc else None)
        src = loc.source if loc else None
        vals = ", ".join(a.values[:4]) + (f" and {len(a.values) - 4} more" if len(a.values) > 4 else "")
        size = a.size_in_bytes
        un = a.unpadded_size_in_bytes
        idx = "" if a.index is None else a.index
        holds = a.holds or ""
        ws = "".join(f' <span class="ws">{esc(lib)} workspace</span>'
                     for lib in sorted({v.workspace for v in a.workspaces}))
        out.append(
            f'<tr><td class="n" data-v="{esc(idx)}">{esc(idx)}</td>'
            f'<td data-v="{esc(a.kind)}">{esc(a.kind)}</td>'
            f'<td data-v="{a.memory_space}">S({a.memory_space})</td>'
            f'<td class="n size" data-v="{"" if size is None else size}" title="{esc(size)} bytes">'
            f'{esc(_b(size))}</td>'
            f'<td class="n" data-v="{"" if un is None else un}" title="{esc(un)} bytes">{esc(_b(un))}</td>'
            f'<td class="n" data-v="{a.padding_in_bytes}" title="{a.padding_in_bytes} bytes">'
            f'{esc(_b(a.padding_in_bytes)) if a.padding_in_bytes else "-"}</td>'
            f'<td class="mono" data-v="{esc(holds)}">{esc(holds)}{ws}</td>'
            f'<td class="mono" data-v="{esc(vals)}">{esc(vals)}</td>'
            f'<td class="mono" data-v="{esc(op)}">{esc(op)}</td>'
            f'<td class="mono" data-v="{esc(src)}">{esc(src)}</td></tr>')
    for (kind, space), (c, b, p) in sorted(small.items(), key=lambda x: -x[1][1]):
        out.append(f'<tr class="agg"><td class="n" data-v=""></td><td data-v="{esc(kind)}">'
                   f'{esc(kind)}</td><td data-v="{space}">S({space})</td>'
                   f'<td class="n" data-v="{b}">{esc(_b(b))}</td><td class="n" data-v="{b - p}">'
                   f'{esc(_b(b - p))}</td><td class="n" data-v="{p}">{esc(_b(p))}</td>'
                   f'<td data-v="">{c:,} smaller allocations</td><td data-v=""></td>'
                   f'<td data-v=""></td><td data-v=""></td></tr>')
    out.append("</tbody></table></div>")


def _padding_section(m, out: List[str]) -> None:
    wasters = [a for a in m.padding_wasters if a.explanation() is not None]
    if not wasters:
        total_pad = sum(t.padding for t in m.memory_spaces.values())
        out.append(f'<h3>Padding</h3><div class="note">{esc(_b(total_pad))} of padding in all: '
                   'nothing to explain.</div>' if total_pad else
                   '<h3>Padding</h3><div class="note">No allocation is padded.</div>')
        return
    out.append('<h3>Most padding, why, and what would fix it</h3>')
    for a in wasters:
        e = a.explanation()
        pv = a.padded_value()
        most = (f'<li>its most padded value: <code>{esc(pv.described)}</code>, '
                f'{esc(_b(pv.padding_in_bytes))} of padding</li>' if pv is not None else "")
        idx = f"allocation {a.index}, " if a.index is not None else ""
        out.append(f'<div class="why"><b>{esc(_b(a.size_in_bytes))}</b> ({esc(idx)}{esc(a.kind)}, '
                   f'unpadded {esc(_b(a.unpadded_size_in_bytes))}): <code>{esc(a.holds or "")}'
                   f'</code> {esc(", ".join(a.values[:3]))}<ul>{most}')
        for s in e.sources:
            out.append(f"<li>why: {esc(s)}</li>")
        for f in e.fixes[:3]:
            out.append(f"<li>fix: {esc(f)}</li>")
        out.append("</ul></div>")


_MOVE_KINDS = {"to-host": "to host memory", "from-host": "back from host memory",
               "prefetch": "into on-chip memory", "eviction": "out of on-chip memory",
               "move": "between other memory spaces"}


def _audit_section(m, out: List[str], limit: int = 200) -> None:
    """What XLA did with the buffers (the module's audit): its donations,
    layout copies and moves between memory spaces, each a table; nothing
    when the module has none of them."""
    a = getattr(m, "audit", None)
    if a is None or not (a.donations or a.layout_copies or a.space_moves):
        return
    out.append("<h3>What XLA did with your buffers</h3>")
    if a.donations:
        unused = a.unused_donations
        out.append(f'<div class="note">{len(a.donations):,} donated buffer'
                   f'{"s" if len(a.donations) != 1 else ""}, {len(a.donations) - len(unused):,} '
                   f'reused by an output, {len(unused):,} not</div>')
        out.append('<table class="sortable"><thead><tr><th>donated</th><th data-num="1">bytes</th>'
                   '<th>shape</th><th>reused by</th><th>why not, and the fix</th></tr></thead>'
                   '<tbody>')
        for d in a.donations[:limit]:
            by = ("output {" + ",".join(map(str, d.output_index)) + "}") if d.aliased else "-"
            why = "" if d.aliased else f"{d.reason}. Fix: {d.fix}." if d.fix else d.reason or ""
            out.append(f'<tr><td>{esc(d.label)}</td><td class="n" data-v="{d.bytes or 0}">'
                       f'{esc(_b(d.bytes))}</td><td class="mono">{esc(d.shape or "")}</td>'
                       f'<td>{esc(by)}</td><td>{esc(why)}</td></tr>')
        out.append("</tbody></table>")
    if a.layout_copies:
        total = sum(c.bytes or 0 for c in a.layout_copies)
        out.append(f'<div class="note">{len(a.layout_copies):,} cop'
                   f'{"ies" if len(a.layout_copies) != 1 else "y"} made only to change a layout, '
                   f'{esc(_b(total))}</div>')
        out.append('<table class="sortable"><thead><tr><th>instruction</th><th data-num="1">bytes</th>'
                   '<th>from</th><th>to</th><th>live at the peak</th><th>made by</th>'
                   '<th>why, and the fix</th></tr></thead><tbody>')
        for c in a.layout_copies[:limit]:
            live = {True: "yes", False: "no", None: "?"}[c.live_at_peak]
            why = c.cause + (f". Fix: {c.fix}." if c.fix else "")
            out.append(f'<tr><td class="mono">{esc(c.instruction)}</td><td class="n" '
                       f'data-v="{c.bytes or 0}">{esc(_b(c.bytes))}</td><td class="mono">'
                       f'{esc(c.source)}</td><td class="mono">{esc(c.target)}</td><td>{live}</td>'
                       f'<td>{esc(c.made_by or "-")}</td><td>{esc(why)}</td></tr>')
        out.append("</tbody></table>")
    if a.space_moves:
        host = a.host_moves
        out.append(f'<div class="note">{len(a.space_moves):,} move'
                   f'{"s" if len(a.space_moves) != 1 else ""} between memory spaces'
                   + (f', {len(host):,} to or from host memory' if host else '') + '</div>')
        out.append('<table class="sortable"><thead><tr><th>move</th><th data-num="1">bytes</th><th>from</th>'
                   '<th>to</th><th>what</th><th>moved</th></tr></thead><tbody>')
        for mv in a.space_moves[:limit]:
            name = mv.instruction + (f" / {mv.done}" if mv.done else "")
            out.append(f'<tr><td class="mono">{esc(name)}</td><td class="n" '
                       f'data-v="{mv.bytes or 0}">{esc(_b(mv.bytes))}</td>'
                       f'<td>{esc(_space_name(mv.from_space))}</td>'
                       f'<td>{esc(_space_name(mv.to_space))}</td>'
                       f'<td>{esc(_MOVE_KINDS.get(mv.kind, mv.kind))}</td>'
                       f'<td class="mono">{esc(mv.operand or "")}</td></tr>')
        out.append("</tbody></table>")
    for n in a.notes:
        out.append(f'<div class="note">{esc(n)}</div>')


def _oom_section(m, out: List[str]) -> None:
    o = m.oom
    what = ("an XLA:GPU out-of-memory error says what could not be allocated"
            if o.form == "gpu" else
            "an out-of-memory report lists the allocations the compiler could not place")
    out.append(f'<div class="note"><b>No heap over program order:</b> {what}, not the '
               'schedule, so there is no program order to draw. The dump of the same program '
               '(XLA_FLAGS=--xla_dump_to=DIR) has it: <code>xlashape memory DIR --html</code>.'
               '</div>')
    if o.used is not None and o.limit is not None:
        ex = f": {_b(o.excess)} too much" if o.excess is not None else ""
        out.append(f'<div class="verdict nofit">{esc(o.memory_space)}: needs {esc(_b(o.used))} of '
                   f'{esc(_b(o.limit))}{esc(ex)}</div>')
    out.append(f'<div class="note">{esc(o.note)}</div>')
    at = getattr(o, "autotune", None)
    if at is not None and at.failed:
        out.append('<div class="note"><b>Instructions the autotuner could not configure:</b><ul>'
                   + "".join(f"<li><code>{esc(f.name)}</code> <code>{esc(f.shape or '?')}</code>"
                             f" ({esc(_b(f.size_in_bytes))}): {f.configs_failed} configurations "
                             f"failed, {f.out_of_memory} out of memory</li>" for f in at.failed)
                   + "</ul></div>")
    advice = getattr(o, "advice", ())
    if advice:
        out.append('<div class="note"><b>What to do:</b><ul>'
                   + "".join(f"<li>{esc(a)}</li>" for a in advice) + "</ul></div>")
    for n in m.notes:
        out.append(f'<div class="note">{esc(n)}</div>')


def _module_section(m, out: List[str], verdict) -> None:
    where = {"hlo": "HLO text", "dump": "XLA dump",
             "jax": ("a JAX program, compiled with a dump" if m.buffer_assignment
                     else "a JAX compiled object"),
             "oom": "out-of-memory report"}.get(m.source, m.source)
    plat = (m.platform or "platform unknown").upper()
    many = m.devices is not None and m.devices > 1
    out.append(f'<h2 class="module">{esc(m.name or "?")} <span class="sub">({esc(where)}, '
               f'{esc(plat)}{esc(f", {m.devices} devices" if many else "")})</span></h2>')
    if many:
        out.append(f'<div class="note devices" data-devices="{m.devices}"><b>Every figure is per '
                   f'device:</b> the program runs on {m.devices} devices'
                   + esc(f" ({m.device_kind})" if m.device_kind else "")
                   + ', each with its own part of every sharded array (shapes are one '
                   "device's part).</div>")
    if m.path:
        out.append(f'<div class="note mono">{esc(os.path.basename(m.path))}</div>')
    out.append(_verdict_html(verdict))
    if m.source == "oom":
        _oom_section(m, out)
    if m.peak is not None and m.peak.live_at_peak:
        pa = m.peak
        total = pa.live_at_peak_bytes
        fixed = sum(b.size for b in pa.live_at_peak if b.start is None)
        xla = pa.figures.get("peak_memory_in_bytes")
        name = "peak_memory_in_bytes" if xla == total else "the heap's highest point"
        at = ""
        if pa.peak_time is not None:
            at = (f", the temporaries' heap in {_space_name(pa.peak_memory_space)} highest at "
                  f"{_when(pa)} ({pa.peak_instruction or '?'})")
        why = ""
        if xla is not None and xla != total:
            why = (f" XLA's peak_memory_in_bytes is {_b(xla)}: "
                   + ("XLA:CPU counts the buffers that live for the whole program only, not "
                      "the temporaries." if m.platform == "cpu" else
                      "it counts otherwise (see the figures' reasons)."))
        out.append(f'<div class="headline"><b>{esc(name)} {esc(_b(total))}</b> = {esc(_b(fixed))} '
                   f'of parameters, outputs and constants (live for the whole program) + '
                   f'{esc(_b(total - fixed))} of temporaries{esc(at)}.{esc(why)}</div>')
    out.append('<div class="cards">')
    for k in SHOWN_FIELDS:
        out.append(_card(k, getattr(m, k, None), m.reasons.get(k)))
    if m.source == "oom":
        out.append(_card("memory_used_bytes", m.memory_used_bytes))
        out.append(_card("memory_limit_bytes", m.memory_limit_bytes))
    pa = m.peak
    if pa is not None:
        for k in PEAK_FIELDS:
            out.append(_card(k, pa.figures.get(k), pa.reasons.get(k)))
    out.append("</div>")
    nulls = dict(m.reasons)
    if pa is not None:
        nulls.update(pa.reasons)
    if nulls or m.hbm_temp_allocation_bytes is not None:
        out.append(f'<details class="note"><summary>why {len(nulls)} figure'
                   f'{"s are" if len(nulls) != 1 else " is"} null</summary>')
        for k, why in nulls.items():
            out.append(f'<div class="note"><code>{esc(k)}</code> is null: {esc(why)}</div>')
        if m.hbm_temp_allocation_bytes is not None:
            out.append(f'<div class="note">hbm_temp_allocation_bytes '
                       f'{m.hbm_temp_allocation_bytes:,} (xlashape\'s figure: the buffer assignment\'s '
                       'temporaries in device memory S(0), not XLA\'s temp_size_in_bytes)</div>')
        out.append("</details>")
    if pa is not None and pa.heap:
        _peak_section(m, out)
        tl = timeline_svg(m)
        if tl is not None:
            out.append(tl)
    elif m.source not in ("oom",):
        out.append('<div class="note"><b>No heap over program order:</b> it needs the buffer '
                   'assignment and the live ranges of a dump (XLA_FLAGS=--xla_dump_to=DIR writes '
                   '*-buffer-assignment.txt and *-live-range.txt).</div>')
    _padding_section(m, out)
    _audit_section(m, out)
    out.extend(prediction_html(m, verdict, esc))
    _alloc_table(m, out)
    for w in m.warnings[:20]:
        out.append(f'<div class="note">warning: {esc(w)}</div>')


def render_html(modules: Iterable, *, title: str = "", verdicts: Optional[dict] = None) -> str:
    """The page for ``modules`` (:class:`~xlashape.memory.ModuleMemory`),
    with ``verdicts`` (``id(module) -> Verdict``) when a device or a limit
    was given."""
    buf = io.StringIO()
    write_html(buf, modules, title=title, verdicts=verdicts)
    return buf.getvalue()


def render_fragment(modules: Iterable, *, title: str = "", verdicts: Optional[dict] = None
                    ) -> str:
    """The page's content as an HTML fragment, for a notebook's cell
    (``_repr_html_``) or any page to hold: one ``<div class="xlashape-memory">``
    with its own style, every rule scoped under that class (none on
    ``body``, ``html``, ``:root`` or ``*``), and a script that sorts its
    tables only. Self-contained: nothing is loaded from anywhere."""
    buf = io.StringIO()
    write_fragment(buf, modules, title=title, verdicts=verdicts)
    return buf.getvalue()


def write_fragment(f, modules: Iterable, *, title: str = "",
                   verdicts: Optional[dict] = None) -> None:
    """:func:`render_fragment` written to the text stream ``f``."""
    _write_fragment(f, modules, title, verdicts, page=False)


def _write_fragment(f, modules, title, verdicts, *, page: bool) -> None:
    modules = [m for m in modules if not getattr(m, "superseded", False)]
    # an id per fragment: a notebook holds many, each script sorts its own
    uid = f"{ROOT_CLASS}-{uuid.uuid4().hex[:12]}"
    # in a page of its own (and only there) the page's body gets a margin
    # and, once the script has run, its data-ready mark
    style = _FRAGMENT_STYLE + ("\nbody{margin:20px}" if page else "")
    ready = "document.body.dataset.ready='1';" if page else ""
    f.write(f'<div class="{ROOT_CLASS}" id="{uid}"><style>{style}</style>')
    f.write(f'<h1>Where the memory goes: {esc(title)}</h1>')
    f.write('<div class="sub">xlashape memory &mdash; figures by XLA\'s names are XLA\'s numbers '
            '(null where an artifact does not determine them); sizes in powers of 1024 '
            '(1.00G = 2<sup>30</sup> bytes), as XLA prints them.</div>')
    if len(modules) > 1:
        f.write('<div class="note">' + f"{len(modules)} modules: "
                + ", ".join(esc(m.name or "?") for m in modules) + "</div>")
    for m in modules:
        out: List[str] = []
        _module_section(m, out, (verdicts or {}).get(id(m), getattr(m, "verdict", None)))
        f.write("\n".join(out))
    f.write(f"<script>(function(root){{{_JS}root.dataset.ready='1';{ready}}})"
            f"(document.getElementById('{uid}'));</script></div>")


def write_html(f, modules: Iterable, *, title: str = "", verdicts: Optional[dict] = None) -> None:
    """:func:`render_html` written to the text stream ``f``: the fragment
    (:func:`write_fragment`) in a page of its own."""
    f.write('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<title>{esc("xlashape memory: " + title)}</title></head><body>')
    _write_fragment(f, modules, title, verdicts, page=True)
    f.write("</body></html>\n")


# -- the diff page -------------------------------------------------------------------


def _diff_rows(title: str, items, out: List[str], limit: int = 200, memory=None,
               op_paths: bool = False) -> None:
    """A table of buffer pairs ``(a, b)`` (``None`` on the side without it);
    ``memory``: the bytes they take, each shared byte once (in the title);
    ``op_paths``: an op path column per side."""
    if not items:
        return
    what = f"{len(items):,}" + (f", {_b(memory)} of memory" if memory is not None else "")
    # values that share memory (one allocation, offset and size): the first one's row
    # counts it, the others say whose memory they share
    first: Dict[tuple, str] = {}
    sharing: Dict[int, str] = {}
    if memory is not None:
        for x, y in items[:limit]:
            one = y if y is not None else x
            if one.allocation is None or one.offset is None:
                continue
            k = (one.allocation, one.offset, one.size)
            if k in first:
                sharing[id(one)] = first[k]
            else:
                first[k] = one.label
    out.append(f"<h3>{esc(title)} ({esc(what)})</h3><table class=\"sortable\"><thead><tr>"
               '<th data-num="1">A bytes</th><th data-num="1">B bytes</th><th data-num="1">delta</th>'
               "<th>kind</th><th>buffer</th><th>shape</th>"
               + ("<th>op path in A</th><th>op path in B</th>" if op_paths else "<th>op path</th>")
               + "</tr></thead><tbody>")
    for x, y in items[:limit]:
        one = y if y is not None else x
        xs, ys = (x.size if x else None), (y.size if y else None)
        d = (ys or 0) - (xs or 0)
        shares = sharing.get(id(one))
        shape = (x.shape if x else "") if (y is None or x is None or x.shape == y.shape) else \
            f"{x.shape} -> {y.shape}"
        if x is None:
            shape = y.shape
        out.append(f'<tr><td class="n" data-v="{"" if xs is None else xs}">{esc(_b(xs) if xs is not None else "-")}</td>'
                   f'<td class="n" data-v="{"" if ys is None else ys}">{esc(_b(ys) if ys is not None else "-")}</td>'
                   + (f'<td class="n shared" data-v="0">{esc(f"the memory of {shares}")}</td>'
                      if shares is not None else
                      f'<td class="n" data-v="{d}">{"+" if d > 0 else "-" if d < 0 else ""}'
                      f'{esc(_b(abs(d)))}</td>')
                   + f'<td>{esc(one.kind)}</td><td class="mono">{esc(one.label)}</td>'
                   f'<td class="mono">{esc(shape)}</td>'
                   + (f'<td class="mono">{esc(x.key[0])}</td><td class="mono">{esc(y.key[0])}</td>'
                      if op_paths else f'<td class="mono">{esc(one.key[0])}</td>') + '</tr>')
    out.append("</tbody></table>")
    if len(items) > limit:
        out.append(f'<div class="note">... {len(items) - limit:,} more (see --json)</div>')


def write_diff_html(f, d, a_path: str, b_path: str) -> None:
    """The page of ``xlashape memory diff A B --html``: the figures, both
    heaps, and the buffers that changed (a :class:`~xlashape.memory.diff.ModuleDiff`)."""
    out: List[str] = []
    out.append('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
               f'<title>{esc("xlashape memory diff")}</title><style>{_CSS}</style></head><body>')
    out.append(f"<h1>Memory: A = {esc(a_path)} vs B = {esc(b_path)}</h1>")
    out.append('<table><thead><tr><th>figure</th><th>A</th><th>B</th><th>delta</th></tr></thead><tbody>')
    for k, (x, y, delta) in d.figures.items():
        out.append(f'<tr><td class="mono">{esc(k)}</td><td class="n">{"null" if x is None else f"{x:,}"}</td>'
                   f'<td class="n">{"null" if y is None else f"{y:,}"}</td><td class="n">'
                   f'{"" if delta is None else f"{delta:+,}"}</td></tr>')
    out.append("</tbody></table>")
    for name, x, y in d.growths():
        out.append(f'<div class="verdict {"nofit" if y > x else "fits"}">{esc(name)}: {esc(_b(x))} -> '
                   f'{esc(_b(y))} ({"+" if y >= x else "-"}{esc(_b(abs(y - x)))}'
                   + (f", {100 * (y - x) / x:+.1f}%" if x else "") + ")</div>")
    n = lambda xs: sum(x.size for x in xs)  # noqa: E731
    cost = sum(y.size - x.size for x, y in d.layouts)
    items = [f"{len(d.layouts)} layouts changed ({'+' if cost >= 0 else '-'}{_b(abs(cost))})",
             f"{len(d.donations_lost)} donations lost, {len(d.donations_gained)} gained",
             f"{len(d.copies_added)} copies/transposes added ({_b(n(d.copies_added))}), "
             f"{len(d.copies_removed)} removed",
             f"{len(d.added)} buffers added ({_b(memory_bytes(d.added))} of memory), "
             f"{len(d.removed)} removed ({_b(memory_bytes(d.removed))} of memory), "
             f"{len(d.changed)} resized ({len(d.dtypes)} of them by their element type), "
             f"{len(d.moved)} in another kind of allocation"]
    if d.op_path_changed:
        items.append(f"the op paths changed (e.g. checkpointing, another fusion): "
                     f"{len(d.op_path_changed)} buffers matched by name, role and shape instead")
    out.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>")
    _diff_rows("layouts changed", d.layouts, out)
    _diff_rows("buffers added in B", [(None, y) for y in d.added], out,
               memory=memory_bytes(d.added))
    _diff_rows("buffers removed from A", [(x, None) for x in d.removed], out,
               memory=memory_bytes(d.removed))
    _diff_rows("dtype changed", d.dtypes, out)
    dtypes = {(id(x), id(y)) for x, y in d.dtypes}
    _diff_rows("buffers grown or shrunk", [p for p in d.changed if (id(p[0]), id(p[1])) not in dtypes],
               out)
    _diff_rows("the op paths changed: buffers matched by name, role and shape", d.op_path_changed,
               out, op_paths=True)
    _diff_rows("buffers in another kind of allocation", d.moved, out)
    for title, xs in (("donations lost", d.donations_lost), ("donations gained", d.donations_gained)):
        if xs:
            out.append(f"<h3>{esc(title)}</h3><ul>" + "".join(
                f"<li>parameter {p}: {esc(_b(n))}</li>" for p, n in xs) + "</ul>")
    spaces = sorted(set((d.a.peak.heap if d.a.peak else {}))
                    | set((d.b.peak.heap if d.b.peak else {})))
    if spaces:
        out.append("<h3>Heap over program order, A (left) and B (right), one scale per memory "
                   "space</h3>")
    for color in spaces:
        sides = []
        for m in (d.a, d.b):
            pa = m.peak
            h = pa.heap.get(color) if pa is not None else None
            sides.append((pa, h))
        top = max([max(h["padded"]) for _, h in sides if h is not None and len(h["padded"])]
                  + [1])
        out.append(f"<div><b>{esc(_space_name(color))}</b></div><div style=\"display:flex;gap:8px\">")
        for (pa, h), name in zip(sides, ("A", "B")):
            if h is None or not len(h["padded"]):
                out.append(f'<div class="note" style="width:560px">{name}: nothing in this '
                           'memory space</div>')
                continue
            at = pa.peak_time if color == pa.peak_memory_space else None
            # XLA's peak only where its figure is this heap's top (not XLA:CPU's)
            what = ("XLA's peak" if pa.figures.get("peak_memory_in_bytes")
                    == pa.live_at_peak_bytes else "highest")
            out.append(heap_svg(h["padded"], h.get("unpadded", ()),
                                schedule=getattr(pa, "schedule", None), peak_pos=at,
                                peak_label=f"{name}: {what} at {at}" if at is not None else "",
                                width=560, height=180, ymax=top, axis=_axis(pa)))
        out.append("</div>")
    _diff_rows("live at the peak only in B", [(None, y) for y in d.live_added], out)
    _diff_rows("live at the peak only in A", [(x, None) for x in d.live_removed], out)
    out.append(f"<script>(function(root){{{_JS}}})(document);</script></body></html>\n")
    f.write("\n".join(out))
