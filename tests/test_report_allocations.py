"""What an allocation is, as each view shows it (issue 25): one array's
shape, or an arena of N values and its largest -- never one value's shape as
the allocation's -- and XLA:GPU's cuBLAS / cuDNN workspaces marked.

Expected values are read from XLA's own files here, independently of the
package: each allocation's values from the buffer-assignment text (``value:
<id label @0> (size=..,offset=..): shape``), and the workspaces from the
module's text (a custom call to ``__cublas$...`` / ``__cudnn$...`` whose
result tuple ends with an ``s8[N]`` / ``u8[N]`` array: XLA's gemm and cuDNN
rewriters put the library's scratch memory there).
"""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cli_util import DATA, ok

_ALLOC = re.compile(r"^allocation (\d+): size (\d+)")
_VALUE = re.compile(r"^ value: <(\d+) (\S+)[^@>]* @\d+> \(size=(\d+),offset=(\d+)\): (.*)$")


def _dumps(corpus):
    # the dumps of one module
    return sorted(p for p in (DATA / corpus).glob("*/dump")
                  if len(list(p.glob("*after_optimizations-buffer-assignment.txt"))) == 1)


GPU_DUMPS = _dumps("gpu_corpus")
ALL_DUMPS = GPU_DUMPS + _dumps("tpu_corpus") + _dumps("cpu_corpus")


def _assignment(dump: Path):
    """``{allocation number: [(label, size, offset, shape text), ...]}`` of the
    dump's one module, read from XLA's buffer-assignment text."""
    (f,) = dump.glob("*after_optimizations-buffer-assignment.txt")
    out, cur = {}, None
    for line in f.read_text().splitlines():
        m = _ALLOC.match(line)
        if m:
            cur = out.setdefault(int(m.group(1)), [])
            continue
        m = _VALUE.match(line)
        if m and cur is not None:
            cur.append((m.group(2), int(m.group(3)), int(m.group(4)), m.group(5).strip()))
        elif not line.startswith(" "):
            cur = None
    return out


def _doc(dump):
    (m,) = json.loads(ok("memory", dump, "--json").stdout)["modules"]
    return m


@pytest.mark.parametrize("dump", ALL_DUMPS, ids=lambda p: p.parent.name)
def test_an_allocation_is_one_array_or_an_arena_never_a_values_shape(dump):
    files = _assignment(dump)
    m = _doc(dump)
    for a in m["allocations"]:
        values = files[a["index"]]
        assert a["value_count"] == len(values)
        shapes = {s for _, _, _, s in values}
        if len(shapes) > 1 or len({off for _, _, off, _ in values}) > 1:
            # values of several shapes, or at several offsets: the allocation has no one
            # shape; it says how many values it holds and which is the largest (any of the
            # largest when several tie)
            assert a["shape"] is None, (a["index"], a["shape"])
            got = re.fullmatch(r"arena of ([\d,]+) values, the largest (.+?) \([^()]*\)(; .*)?",
                               a["holds"])
            assert got, a["holds"]
            assert int(got.group(1).replace(",", "")) == len(values)
            top = max(size for _, size, _, _ in values)
            assert got.group(2) in {s for _, size, _, s in values if size == top}
            assert a["largest_value"]["size_in_bytes"] == top
        elif values:
            # one array (one value, or one array under several names, all at offset 0)
            (shape,) = shapes
            assert a["shape"] == shape and a["holds"].startswith(shape)


def test_the_h200s_temporary_arena_is_not_shown_as_its_workspace():
    # the report: "largest allocations" printed one value's shape (here the
    # cuBLAS workspace s8[33554432]) under a 48 MiB temporary allocation of 7 values
    dump = DATA / "gpu_corpus" / "dev_mlp_f32" / "dump"
    values = _assignment(dump)[7]
    assert len(values) == 7 and sum(1 for v in values if v[3] == "s8[33554432]{0}") == 2
    text = ok("memory", dump).stdout.splitlines()
    head = next(i for i, ln in enumerate(text) if "allocation 7, temporary" in ln)
    head += text[head + 1].startswith(" " * 16)   # the head, wrapped at 100 columns
    under = text[head + 1:head + 3]
    assert under[0].startswith("      arena") and under[1].startswith("        ")
    assert " ".join(ln.strip() for ln in under) == (
        "arena of 7 values, the largest s8[33554432]{0} (32.00M, custom-call.1{1}: "
        "cuBLAS workspace); 2 cuBLAS workspaces (32.00M of memory)")
    # the workspace live at the peak, in the terminal's table (custom-call.0's: live 8-8)
    assert any(ln.endswith(" custom-call.0{1} (cuBLAS workspace)") for ln in text)


@pytest.mark.parametrize("dump", ALL_DUMPS, ids=lambda p: p.parent.name)
def test_every_section_of_the_text_says_the_same_of_one_allocation(dump):
    # "on TPU one allocation gets different shapes in two sections": the largest
    # allocations and the most padding list each allocation by what --json says it holds
    m = _doc(dump)
    holds = {a["index"]: a["holds"] for a in m["allocations"]}
    lines = ok("memory", dump, "--top", "50").stdout.splitlines()
    seen = 0
    for i, ln in enumerate(lines):
        got = re.match(r"^ +\d+\. +\S+ +allocation (\d+), ", ln)
        if got and holds[int(got.group(1))] is not None:
            j = i + 1
            while re.match(r"^ {16}\S", lines[j]):      # the head's own continuation
                j += 1
            block = [lines[j]]
            while re.match(r"^ {8}\S", lines[j + 1]):   # the line under it, wrapped
                j += 1
                block.append(lines[j])
            assert block[0].startswith("      ") and not block[0].startswith("       "), ln
            assert " ".join(b.strip() for b in block) == holds[int(got.group(1))], ln
            seen += 1
    assert seen >= 1


def _workspaces(dump: Path):
    """The workspace values of the module, from its text: ``name{k}`` of each
    custom call to cuBLAS / cuDNN whose result tuple's last element (k) is an
    s8 / u8 array of one dimension."""
    (f,) = [p for p in dump.glob("*after_optimizations.txt")]
    out = set()
    for line in f.read_text().splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+) = \((.*)\) custom-call\(", line)
        if not m or not re.search(r'custom_call_target="__cu(blas|dnn)\$', line):
            continue
        elements = re.findall(r"[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?", m.group(2))
        if re.fullmatch(r"[su]8\[\d+\](\{0\})?", elements[-1]):
            out.add(f"{m.group(1)}{{{len(elements) - 1}}}")
    return out


class _Bars(HTMLParser):
    """The live-at-peak bars of a page: each bar's text, by its data-bytes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.bars, self._depth = [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and "bar" in (a.get("class") or "").split() and "agg" not in a["class"]:
            self.bars.append([a.get("data-space"), ""])
            self._depth = 1
        elif tag == "div" and self._depth:
            self._depth += 1

    def handle_endtag(self, tag):
        if tag == "div" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.bars[-1][1] += data


@pytest.mark.parametrize("dump", GPU_DUMPS, ids=lambda p: p.parent.name)
def test_cublas_and_cudnn_workspaces_are_marked(dump, tmp_path):
    expected = _workspaces(dump)
    m = _doc(dump)
    marked = {v["label"] for a in m["allocations"] for v in a.get("value_details", ())
              if v["workspace"]}
    assert marked == expected
    live = {b["label"] for b in m["peak"]["live_at_peak"]}
    # the terminal's live-at-peak rows, and the page's bars
    text = ok("memory", dump, "--top", "50").stdout
    page = tmp_path / "p.html"
    ok("memory", dump, "--html", page)
    p = _Bars()
    p.feed(page.read_text(encoding="utf-8"))
    for label in expected & live:
        # where the terminal lists it, and on its bar when it has one of its own
        for line in text.splitlines():
            if re.search(rf"(^| ){re.escape(label)}( |$)", line):
                assert re.search(rf" {re.escape(label)} \((cuBLAS|cuDNN) workspace\)$",
                                 line), line
        for _, bar in p.bars:
            if f" {label} " in bar:
                assert re.search(r"(cuBLAS|cuDNN) workspace", bar), bar
    for _, t in p.bars:
        if "workspace" in t:
            assert any(f" {label} " in t for label in expected), t


def test_the_corpus_has_workspaces_live_at_the_peak():
    # the test above checks something: cuBLAS workspaces (dev_mlp_f32) and a cuDNN one
    found = set()
    for dump in GPU_DUMPS:
        live = {b["label"] for b in _doc(dump)["peak"]["live_at_peak"]}
        if _workspaces(dump) & live:
            found.add(dump.parent.name)
    assert {"dev_mlp_f32", "dev_attention_cudnn"} <= found
