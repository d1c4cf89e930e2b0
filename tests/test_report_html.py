"""``xlashape memory --html``: the offline memory viewer page.

Browser-free checks (run everywhere): the page holds the numbers of
``--json`` and XLA's own ``memory_analysis()`` figures recorded with the
dumps, it escapes every string from an artifact, it references nothing
outside itself, and 100,000 allocations are grouped into a bounded table.
One test opens the page in headless Chromium (Debian's ``chromium``; skipped
where it is absent) and checks the script ran with no console error and the
rendered table holds the JSON's sizes.
"""

import json
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser

import pytest

import corpora
import sort_probe
from cli_util import DATA, ok, run
from xlashape.tiling import format_bytes
from xlashape.memory import Allocation, ModuleMemory
from xlashape.reporters.html import MAX_ROWS, SMALL_BYTES, render_html

EXAMPLE_XLA = json.loads((DATA / "tpu_corpus" / "example_conv_rgb" / "memory_analysis.json")
                         .read_text())["memory_analysis"]
GPU_SGD = DATA / "gpu_corpus" / "dev_sgd_donated"


class _Page(HTMLParser):
    """The parts of the page the tests read: each card's bytes, the
    allocation table's size cells, the live-at-peak bars, the tags used."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cards = {}
        self.sizes = []
        self.bars = []
        self.tags = Counter()
        self.attrs = []
        self._key = None
        self._in_alloc = False
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] += 1
        self.attrs.extend(attrs)
        cls = a.get("class") or ""
        if tag == "table" and "allocations" in cls:
            self._in_alloc = True
        if tag == "td" and self._in_alloc and "size" in cls.split():
            self.sizes.append(int(a["data-v"]))
        if tag == "div" and cls == "k":
            self._key = True
        if tag == "div" and cls == "v" and "data-bytes" in a and isinstance(self._key, str):
            self.cards[self._key] = int(a["data-bytes"])
        if tag == "div" and "bar" in cls.split():
            self.bars.append(int(a["data-bytes"]))

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_alloc = False

    def handle_data(self, data):
        self.text.append(data)
        if self._key is True:
            self._key = data.strip()


def _parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


def _example(tmp_path, *extra):
    out = tmp_path / "r.html"
    ok("memory", "--example", "--html", out, *extra)
    return out.read_text(encoding="utf-8")


def test_the_example_page_holds_xlas_figures_and_the_jsons_numbers(tmp_path):
    page = _parse(_example(tmp_path))
    doc = json.loads(ok("memory", "--example", "--json").stdout)
    (m,) = doc["modules"]
    # XLA's memory_analysis() of the compiled program, recorded with the dump
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "peak_memory_in_bytes",
              "total_allocation_bytes", "indefinite_allocations", "peak_unpadded_heap_bytes"):
        assert page.cards[k] == EXAMPLE_XLA[k], k
    assert "temp_size_in_bytes" not in page.cards  # null on TPU, with its reason
    # every allocation of --json, by size (7 allocations: none grouped)
    assert sorted(page.sizes) == sorted(a["size_in_bytes"] for a in m["allocations"])
    # the live-at-peak bars: the buffers of 16K and more, one by one, then the rest in one bar
    live = [b["size"] for b in m["peak"]["live_at_peak"]]
    big = [s for s in live if s >= SMALL_BYTES]
    assert page.bars == big + [sum(live) - sum(big)]
    assert sum(page.bars) == EXAMPLE_XLA["peak_memory_in_bytes"]


def test_the_page_is_self_contained(tmp_path):
    text = _example(tmp_path)
    assert not re.search(r"https?://", text)
    page = _parse(text)
    assert not page.tags["link"] and not page.tags["img"] and not page.tags["iframe"]
    assert not [v for k, v in page.attrs if k in ("src", "href")]
    assert page.tags["svg"] >= 1 and page.tags["script"] == 1 and page.tags["style"] == 1


def test_the_verdict_is_on_the_page(tmp_path):
    text = _example(tmp_path, "--limit", "4M")
    assert "does not fit by" in text and "--limit 4M" in text
    text = _example(tmp_path, "--device", "v5e")
    assert 'class="verdict fits"' in text


EVIL = '<script>alert(1)</script>'


def test_text_from_the_artifact_is_escaped(tmp_path):
    hlo = tmp_path / "evil.hlo"
    hlo.write_text(
        "HloModule jit_evil, entry_computation_layout={(f32[4096]{0})->f32[4096]{0}}\n\n"
        "ENTRY %main (p: f32[4096]) -> f32[4096] {\n"
        "  %p = f32[4096]{0} parameter(0)\n"
        f'  ROOT %n = f32[4096]{{0}} negate(%p), metadata={{op_name="{EVIL}&amp;\\"x" '
        f'source_file="\\"><img src=x onerror=alert(2)>.py" source_line=3}}\n'
        "}\n")
    out = tmp_path / "r.html"
    ok("memory", hlo, "--html", out)
    text = out.read_text(encoding="utf-8")
    assert "<script>alert" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # shown, as text
    page = _parse(text)
    assert page.tags["script"] == 1 and page.tags["img"] == 0


def test_fields_of_the_model_are_escaped():
    m = ModuleMemory(EVIL, "hlo")
    m.warnings.append(EVIL)
    m.allocations = [Allocation("temporary", 1 << 20, 1 << 19, 0, 'f32[8]{0} "><b onclick=x>',
                                 [EVIL], op_name=EVIL)]
    m.allocation_count = 1
    text = render_html([m], title=EVIL)
    assert EVIL not in text and "<b onclick" not in text
    assert _parse(text).tags["script"] == 1



# Bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069
# isolates, the marks U+200E/U+200F and U+061C) and other invisible format
# characters: written raw, U+202E showed an op path reversed ("jit(step)/‮gnp.exe"
# reads "jit(step)/exe.png"). The page shows them as the terminal does: \u202e.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
HOSTILE_OP = "jit(step)/\u202egnp.exe\u202c" + BIDI + INVISIBLE + "/dot_general"


def _escape(c):
    """Python's escape of one character, as repr() writes it: \\xNN, \\uNNNN."""
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _escaped(text):
    """The op path as it should be shown: each of BIDI + INVISIBLE escaped."""
    return "".join(_escape(c) if c in BIDI + INVISIBLE else c for c in text)


def test_bidirectional_and_invisible_controls_in_a_dump_are_shown_as_escapes(tmp_path):
    d = tmp_path / "dump"
    shutil.copytree(DATA / "cpu_dump", d)
    (hlo,) = d.glob("*after_optimizations.txt")
    text = hlo.read_text(encoding="utf-8")
    assert text.count('op_name="jit(step)/dot_general"') == 4
    hlo.write_text(text.replace('op_name="jit(step)/dot_general"', f'op_name="{HOSTILE_OP}"'),
                   encoding="utf-8")
    out = tmp_path / "r.html"
    ok("memory", d, "--html", out)
    page_text = out.read_text(encoding="utf-8")
    assert not [c for c in BIDI + INVISIBLE if c in page_text]
    page = _parse(page_text)
    shown = "".join(page.text)
    # the op path of the dot's buffers is on the page, its controls visible
    assert _escaped(HOSTILE_OP) in shown
    assert any(_escaped(HOSTILE_OP) in v for k, v in page.attrs if k in ("data-v", "title"))
    # and the diff page, through the same function
    diff = tmp_path / "d.html"
    ok("memory", "diff", DATA / "cpu_dump", d, "--html", diff)
    assert not [c for c in BIDI + INVISIBLE if c in diff.read_text(encoding="utf-8")]


def test_every_invisible_character_is_escaped_and_letters_are_kept():
    from xlashape.reporters.html import esc
    for c in BIDI + INVISIBLE + "\x1b\x9b\u2028\u2029\udcff":
        assert esc(f"a{c}b") == f"a{_escape(c)}b" == "a" + repr(c)[1:-1] + "b", hex(ord(c))
    # letters of every script, line breaks and tabs, markup as before
    assert esc("caf\u00e9 \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \u65e5\u672c\n\t"
               "<a href='x'>&") == ("caf\u00e9 \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628"
                                     "\u0627 \u65e5\u672c\n\t&lt;a href=&#x27;x&#x27;&gt;&amp;")


def test_100000_allocations_are_grouped_into_a_bounded_table():
    m = ModuleMemory("jit_big", "hlo")
    sizes = [(i * 7919) % (64 << 10) + 1 for i in range(100_000)]
    m.allocations = [Allocation("temporary" if i % 3 else "parameter", s, s - s // 8, 0, "f32[8]{0}",
                                 [f"v.{i}"]) for i, s in enumerate(sizes)]
    m.allocation_count = len(sizes)
    text = render_html([m])
    page = _parse(text)
    assert len(page.sizes) == MAX_ROWS
    assert page.sizes == sorted(sizes, reverse=True)[:MAX_ROWS]
    # the rest: one row per kind and memory space, and no byte lost
    rows = re.findall(r'<tr class="agg">.*?<td class="n" data-v="(\d+)">', text)
    assert len(rows) == 2
    assert sum(page.sizes) + sum(map(int, rows)) == sum(sizes)
    assert f"under {format_bytes(SMALL_BYTES)}" in text


def test_an_out_of_memory_report_says_why_there_is_no_heap(tmp_path):
    out = tmp_path / "r.html"
    ok("memory", DATA / "tpu_corpus" / "oom_temps" / "oom" / "tpu_driver.WARNING.txt",
       "--html", out)
    text = out.read_text(encoding="utf-8")
    assert "No heap over program order" in text and "not the schedule" in text
    assert _parse(text).tags["svg"] == 0


@pytest.mark.parametrize("dump", [DATA / "cpu_corpus" / "sgd_donated" / "dump",
                                  GPU_SGD / "dump",
                                  DATA / "tpu_corpus" / "train_step_donated" / "dump"])
def test_pages_of_cpu_gpu_tpu_dumps_hold_xlas_peak(tmp_path, dump):
    out = tmp_path / "r.html"
    ok("memory", dump, "--html", out)
    page = _parse(out.read_text(encoding="utf-8"))
    xla = json.loads((dump.parent / "memory_analysis.json").read_text())["memory_analysis"]
    assert page.cards["peak_memory_in_bytes"] == xla["peak_memory_in_bytes"]
    assert page.cards["argument_size_in_bytes"] == xla["argument_size_in_bytes"]
    assert page.tags["svg"] >= 1


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (headless)")
def test_the_page_renders_in_headless_chromium(tmp_path):
    out = tmp_path / "r.html"
    ok("memory", GPU_SGD / "dump", "--html", out)
    doc = json.loads(ok("memory", GPU_SGD / "dump", "--json").stdout)
    # a probe after the page's own script clicks every header of every sortable table
    text = out.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    out.write_text(text.replace("</body>", sort_probe.script() + "</body>"), encoding="utf-8")
    try:
        r = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox",
                            "--enable-logging=stderr", "--v=0", "--dump-dom",
                            out.as_uri()], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:  # pragma: no cover - a loaded shared machine
        pytest.skip("chromium did not finish in 120 s")
    assert r.returncode == 0, r.stderr[-2000:]
    # the inline script ran to its end (it marks the body), and the console is clean
    assert 'data-ready="1"' in r.stdout
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
    page = _parse(r.stdout)
    sizes = [a["size_in_bytes"] for m in doc["modules"] for a in m["allocations"]]
    assert sorted(page.sizes) == sorted(sizes)
    assert page.tags["svg"] >= 1
    # every column of every table sorts both ways, text columns (no data-v) and the audit's
    # byte columns (numbers, not their digits' order) too
    tables = sort_probe.read(r.stdout)
    assert any(c[0]["name"] == "donated" for c in tables)   # the audit's table is there
    assert sort_probe.check(tables) >= 6


def test_png_and_svg_of_the_heap_and_the_live_buffers(tmp_path):
    pytest.importorskip("matplotlib")
    png, svg = tmp_path / "m.png", tmp_path / "m.svg"
    ok("memory", "--example", "--png", png, "--svg", svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]


def test_no_picture_without_a_heap(tmp_path):
    r = run("memory", DATA / "tpu_corpus" / "oom_temps" / "oom" / "tpu_driver.WARNING.txt",
            "--png", tmp_path / "m.png")
    assert r.returncode == 2 and "needs a dump" in r.stderr
    assert not (tmp_path / "m.png").exists()


def test_the_text_report_has_a_bar_chart_of_the_heap():
    text = ok("memory", "--example").stdout
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith("S(1) VMEM")
               and "highest" in ln]
    # 9 positions: highest at 6 (the peak: 12.01M), 8.00M at 7, nothing at 8
    bars = line.split("12.01M")[1].strip()
    assert bars[-2:] == "█▆"


def test_the_allocation_timeline_draws_each_buffer_of_the_peaks_allocation(tmp_path):
    text = _example(tmp_path)
    doc = json.loads(ok("memory", "--example", "--json").stdout)
    (m,) = doc["modules"]
    head = re.search(r"Allocation timeline: allocation (\d+), S\((\d+)\)", text)
    assert head and int(head.group(2)) == m["peak"]["peak_memory_space"]
    (alloc,) = [a for a in m["allocations"] if a.get("index") == int(head.group(1))]
    svg = text.split('<svg class="timeline"', 1)[1].split("</svg>", 1)[0]
    # one rectangle per array value of that allocation, each named in its hover text
    values = [v for v in alloc["value_details"] if not v["shape"].startswith("(")]
    assert svg.count("<rect") == len(values) > 0
    for v in values:
        assert f"{v['size_in_bytes']:,} bytes) at offset {v['offset']:,}" in svg


def test_the_example_page_reads_its_files_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = _example(tmp_path)
    assert "jit(conv_layer)/conv_general_dilated" in text.split("allocations", 1)[1]
    assert 'class="timeline"' in text


def _corpus_dumps():
    return [p for p in corpora.programs() if p.dump_dir is not None]


@pytest.mark.parametrize("prog", _corpus_dumps(), ids=corpora.program_id)
def test_every_corpus_dump_has_a_page_with_xlas_figures(prog):
    from xlashape.memory import analyze
    result = analyze(str(prog.dump_dir), chip=prog.chip, top=3)
    (m,) = [m for m in result.modules if m.name == prog.module]
    page = _parse(render_html([m]))
    # every figure the page shows is XLA's (the nulls are not shown as numbers)
    for k, v in page.cards.items():
        if k in prog.memory_analysis:
            assert v == prog.memory_analysis[k], k
    assert "peak_memory_in_bytes" in page.cards or prog.platform == "cpu"
    assert page.tags["svg"] >= 1


def test_a_cpu_page_does_not_call_the_heaps_top_xlas_peak(tmp_path):
    out = tmp_path / "r.html"
    ok("memory", DATA / "cpu_corpus" / "remat_scan" / "dump", "--html", out)
    text = out.read_text(encoding="utf-8")
    xla = json.loads((DATA / "cpu_corpus" / "remat_scan" / "memory_analysis.json").read_text()
                     )["memory_analysis"]
    # XLA:CPU's peak_memory_in_bytes leaves the temporaries out: the heap's top is not it
    assert _parse(text).cards["peak_memory_in_bytes"] == xla["peak_memory_in_bytes"]
    assert "XLA's peak is here" not in text
    assert "XLA:CPU counts the buffers that live for the whole program only" in text


# -- issue 25: every label true of what it labels --------------------------------------------

class _Peak(HTMLParser):
    """The live-at-peak part of a page: each bar (its attributes and text),
    the rows of the by-op-path table (bytes, buffers, text), the notes'
    text, and each memory space's heap top."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.bars, self.rows, self.notes, self.tops, self.overs = [], [], [], {}, []
        self._bar = self._row = self._note = 0
        self._space = None
        self._in_oppaths = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "div" and "space" in cls:
            self._space = int(a["data-color"])
        if tag == "span" and "hi" in cls and self._space is not None:
            self.tops[self._space] = int(a["data-bytes"])
            self._space = None
        if tag == "div" and "bar" in cls:
            self.bars.append({**a, "text": ""})
            self._bar = 1
        elif tag == "div" and self._bar:
            self._bar += 1
        if tag == "div" and "note" in cls:
            self.notes.append("")
            self._note = 1
            if "over" in cls:
                self.overs.append({**a, "note": len(self.notes) - 1})
        elif tag == "div" and self._note:
            self._note += 1
        if tag == "table" and "oppaths" in cls:
            self._in_oppaths = True
        if tag == "tr" and self._in_oppaths:
            self.rows.append({**a, "cells": []})
        if tag == "td" and self._in_oppaths:
            self.rows[-1]["cells"].append({**a, "text": ""})
            self._row = 1

    def handle_endtag(self, tag):
        if tag == "div" and self._bar:
            self._bar -= 1
        if tag == "div" and self._note:
            self._note -= 1
        if tag == "td":
            self._row = 0
        if tag == "table":
            self._in_oppaths = False

    def handle_data(self, data):
        if self._bar:
            self.bars[-1]["text"] += data
        if self._note:
            self.notes[-1] += data
        if self._row and self.rows and self.rows[-1]["cells"]:
            self.rows[-1]["cells"][-1]["text"] += data


def _peak_page(dump, tmp_path):
    out = tmp_path / "p.html"
    ok("memory", dump, "--html", out)
    (m,) = json.loads(ok("memory", dump, "--json").stdout)["modules"]
    p = _Peak()
    p.feed(out.read_text(encoding="utf-8"))
    return p, m, out.read_text(encoding="utf-8")


BOTTLENECK = DATA / "tpu_corpus" / "bottleneck_train" / "dump"
#: XLA:TPU's memory spaces (XLA's TPU memory-space colours: 0 HBM, 1 VMEM, 2 SMEM)
TPU_SPACES = {0: "HBM", 1: "VMEM", 2: "SMEM"}


def test_the_grey_bar_says_what_it_sums(tmp_path):
    # the issue: "the legend says the grey bar is 'buffers under 16.0K' while it holds 224
    # buffers totalling 1.72 GiB"
    p, m, _ = _peak_page(BOTTLENECK, tmp_path)
    live = m["peak"]["live_at_peak"]
    small = [b["size"] for b in live if b["size"] < SMALL_BYTES]
    (grey,) = [b for b in p.bars if "agg" in b["class"].split()]
    assert int(grey["data-bytes"]) == sum(small) and int(grey["data-count"]) == len(small)
    # the bar's size, then what it holds
    assert grey["text"] == (f"{format_bytes(sum(small))}{len(small)} buffers under "
                            f"{format_bytes(SMALL_BYTES)} each")
    (legend,) = [n for n in p.notes if n.startswith(format_bytes(
        sum(b["size"] for b in live if b["start"] is None)))]
    assert (f"Grey: the buffers not drawn one by one, summed: {len(small)} buffers under "
            f"{format_bytes(SMALL_BYTES)} each ({format_bytes(sum(small))})") in legend


def test_a_grey_bar_of_large_buffers_beyond_the_drawn_ones_says_so():
    from xlashape.memory.model import PeakAnalysis, PeakBuffer
    from xlashape.reporters.html import MAX_BARS
    m = ModuleMemory("jit_many", "hlo")
    m.platform = "gpu"
    pa = PeakAnalysis("gpu")
    sizes = [(1 << 20) * (i + 1) for i in range(MAX_BARS + 25)] + [100] * 7
    pa.live_at_peak = [PeakBuffer(f"fusion.{i}", f"fusion.{i}", 0, 0, s, s, 0, 1, 2, "temporary",
                                  "f32[8]{0}", None, None) for i, s in enumerate(sizes)]
    pa.live_at_peak.sort(key=lambda b: -b.size)
    pa.peak_time = 1
    whole = sum(b.size for b in pa.live_at_peak)
    pa.heap = {0: {"padded": [0, whole, 0], "unpadded": [0, whole, 0]}}
    m.peak = pa
    p = _Peak()
    p.feed(render_html([m]))
    greys = [b for b in p.bars if "agg" in b["class"].split()]
    beyond = sorted(sizes, reverse=True)[MAX_BARS:MAX_BARS + 25]
    assert [(int(b["data-count"]), int(b["data-bytes"])) for b in greys] == \
        [(25, sum(beyond)), (7, 700)]
    assert greys[0]["text"] == (f"{format_bytes(sum(beyond))}25 more buffers of "
                                f"{format_bytes(SMALL_BYTES)} or more, beyond the {MAX_BARS} "
                                "largest")
    assert sum(int(b["data-bytes"]) for b in p.bars) == sum(sizes)


@pytest.mark.parametrize("dump", [BOTTLENECK, DATA / "tpu_corpus" / "attention" / "dump"],
                         ids=lambda p: p.parent.name)
def test_tpu_bars_say_hbm_or_vmem_and_their_whole_label(dump, tmp_path):
    p, m, text = _peak_page(dump, tmp_path)
    drawn = [b for b in m["peak"]["live_at_peak"] if b["size"] >= SMALL_BYTES][:40]
    bars = [b for b in p.bars if "agg" not in b["class"].split()]
    assert len(bars) == len(drawn) > 0
    for bar, b in zip(bars, drawn):
        assert int(bar["data-bytes"]) == b["size"]
        tag = TPU_SPACES[b["color"]]
        assert bar["data-space"] == tag
        assert bar["text"].startswith(format_bytes(b["size"]) + tag + b["kind"])
        # the buffer's name, its shape and its op path whole, never cut
        assert f" {b['label']} {b['shape']}" in bar["text"]
        if b["op_name"]:
            assert bar["text"].endswith(b["op_name"])
    assert {bar["data-space"] for bar in bars} >= {"HBM", "VMEM"}
    # the heap charts too: XLA:TPU's device memory is HBM
    assert "<b>S(0) device memory (HBM)</b>" in text and "<b>S(1) VMEM (fast on-chip" in text
    css = text.split(".bar .lab{", 1)[1].split("}", 1)[0]
    assert "ellipsis" not in css and "nowrap" not in css


def test_the_op_path_table_keeps_buffers_without_metadata_apart(tmp_path):
    p, m, _ = _peak_page(BOTTLENECK, tmp_path)
    live = m["peak"]["live_at_peak"]
    total = sum(b["size"] for b in live)
    bare = [b for b in live if not b["op_name"]]
    rows = [r for r in p.rows if r["cells"]]
    assert sum(int(r["cells"][0]["data-v"]) for r in rows) == total
    (noop,) = [r for r in rows if "noop" in (r.get("class") or "")]
    assert int(noop["cells"][0]["data-v"]) == sum(b["size"] for b in bare)
    assert int(noop["cells"][2]["text"]) == len(bare)
    assert noop["cells"][3]["text"].startswith("no op path (no metadata: ")
    # no instruction name stands among the op paths
    names = {b["instruction"] for b in bare}
    assert not names & {r["cells"][3]["text"] for r in rows}
    ops = {b["op_name"] for b in live if b["op_name"]}
    for r in rows:
        if not r.get("class"):
            assert r["cells"][3]["text"] in ops


def test_the_op_path_table_is_bounded():
    # the issue: "the by-op-path table runs to 40 rows of 16M/1K entries"
    from xlashape.memory.model import PeakAnalysis, PeakBuffer
    from xlashape.reporters.html import OP_PATH_ROWS
    m = ModuleMemory("jit_many", "hlo")
    m.platform = "gpu"
    pa = PeakAnalysis("gpu")
    sizes = [16 << 20] * 10 + [1024] * 30
    pa.live_at_peak = [PeakBuffer(f"f.{i}", f"f.{i}", 0, 0, s, s, 0, 1, 2, "temporary",
                                  "f32[8]{0}", f"jit(f)/op{i}", None) for i, s in enumerate(sizes)]
    pa.live_at_peak.append(PeakBuffer("tuple.1", "tuple.1", 0, 0, 64, 64, 0, 1, 2, "temporary",
                                      "(f32[8]{0})", None, None))
    pa.peak_time = 1
    whole = sum(b.size for b in pa.live_at_peak)
    pa.heap = {0: {"padded": [0, whole, 0], "unpadded": [0, whole, 0]}}
    m.peak = pa
    p = _Peak()
    p.feed(render_html([m]))
    rows = [r for r in p.rows if r["cells"]]
    assert len(rows) <= OP_PATH_ROWS + 2
    # the 10 op paths of 16M hold 99.98% of the bytes: one row each, then one row for the rest
    assert [r["cells"][3]["text"] for r in rows[:10]] == sorted(f"jit(f)/op{i}" for i in range(10))
    assert rows[10]["cells"][3]["text"] == "30 more op paths, 1.0K or less each"
    assert int(rows[10]["cells"][0]["data-v"]) == 30 * 1024
    assert rows[11]["cells"][3]["text"] == "no op path (no metadata: tuple.1)"
    assert sum(int(r["cells"][0]["data-v"]) for r in rows) == sum(sizes) + 64


@pytest.mark.parametrize("prog", _corpus_dumps(), ids=corpora.program_id)
def test_no_heap_is_drawn_above_the_memory_its_space_allocates(prog):
    # the issue: "a VMEM heap of 123 MiB over a 100.7 MiB VMEM allocation"
    from xlashape.memory import analyze
    result = analyze(str(prog.dump_dir), chip=prog.chip, top=3)
    (m,) = [m for m in result.modules if m.name == prog.module]
    text = render_html([m])
    p = _Peak()
    p.feed(text)
    allocated = Counter()
    for a in m.allocations:
        allocated[a.memory_space] += a.size_in_bytes or 0
    over = {int(a["data-heap"]): a for a in p.overs}
    for color, top in p.tops.items():
        if top <= allocated[color]:
            continue
        # XLA's heap simulator counts buffers that share memory each (in-place programs of
        # the TPU corpus: kv_decode, while_dus...): drawn, then said, with both numbers
        note = over[top]
        note["text"] = p.notes[note["note"]]
        assert int(note["data-allocated"]) == allocated[color]
        assert note["text"].startswith(
            f"at its highest XLA's heap simulator counts {format_bytes(top)} live, more than "
            f"the {format_bytes(allocated[color])} the buffer assignment allocates in S({color})")
        if color == m.peak.peak_memory_space:
            # what the buffers live at the peak take, each shared byte once, fits
            taken = re.search(r"the buffers live at the peak take (\S+) of memory", note["text"])
            (x,) = [x for x in m.heaps_over_allocations() if x.memory_space == color]
            assert taken.group(1) == format_bytes(x.memory_at_peak)
            assert x.memory_at_peak <= allocated[color]
            live = [b for b in m.peak.live_at_peak if b.color == color]
            assert sum(b.size for b in live) == top > x.memory_at_peak
    head = re.search(r"Allocation timeline: allocation (\d+)", text)
    if head:
        (alloc,) = [a for a in m.allocations if a.index == int(head.group(1))]
        svg = text.split('<svg class="timeline"', 1)[1].split("</svg>", 1)[0]
        for size, off in re.findall(r"\(([\d,]+) bytes\) at offset ([\d,]+)", svg):
            assert int(off.replace(",", "")) + int(size.replace(",", "")) <= alloc.size_in_bytes
