"""What XLA did with your buffers (issue 27): the audit of every module.

The corpus ``data/audit_corpus`` (``oracle/gen_audit_corpus.py``) holds
programs compiled by XLA:CPU (jax 0.10.2 and 0.12.0.1) and XLA:TPU v5e
(compile-only, jax 0.12.0.1 with libtpu 0.0.50.1) whose donations, layout
copies and host moves are known by construction (each ``truth.json``'s
``expect``, written from the program: the shapes, the requested layouts, the
bytes computed by hand); the generator checked them against what jax and XLA
say (jax's donation warning, ``alias_size_in_bytes``) and recorded every
``copy-start`` of the compiled text with its memory spaces (``text_moves``,
read with its own regular expression). Each dump is read both ways, from its
text files and from its ``.hlo.pb``.
"""

import collections
import json
import os
import subprocess
import sys

import pytest

from xlashape import memory
from xlashape.memory.model import DONATION_WHY

import corpora

AUDIT = corpora.DATA / "audit_corpus"
VARIANTS = ("cpu_jax010", "cpu_jax012", "tpu_v5e")
PROGRAMS = sorted(p.parent for v in VARIANTS for p in (AUDIT / v).glob("*/truth.json"))


def _id(d):
    return f"{d.parent.name}/{d.name}"


def truth(d):
    with open(d / "truth.json") as f:
        return json.load(f)


def audited(d, prefer="text", source=None):
    t = truth(d)
    result = memory.analyze(str(source or d / "dump"), prefer=prefer)
    mods = [m for m in result.modules if m.name == "jit_" + t["program"]]
    assert len(mods) == 1, [m.name for m in result.modules]
    return t, mods[0]


def _layout(shape_text):
    """The layout of a shape's text without its memory space (as the truth
    writes it)."""
    layout = shape_text[shape_text.index("{"):]
    if "S(" in layout:
        layout = layout[: layout.index("S(")] + "}"
    return layout


def test_the_corpus_is_there():
    # the three variants, each with its controls and every kind of case
    names = {v: {d.name for d in PROGRAMS if d.parent.name == v} for v in VARIANTS}
    for v in VARIANTS:
        assert {"donate_aliased", "two_donors_one_output", "donation_dropped_by_jax",
                "layout_in_2d", "layout_in_3d", "layout_out_2d", "layout_out_3d",
                "control_elementwise"} <= names[v], v
    assert {"donate_padded_tpu", "padded_param_relaid_tpu",
            "host_offload_roundtrip_tpu"} <= names["tpu_v5e"]
    for d in PROGRAMS:
        t = truth(d)
        assert t["versions"]["jax"] == {"cpu_jax010": "0.10.2"}.get(d.parent.name, "0.12.0.1")
        if d.parent.name == "tpu_v5e":
            assert t["versions"]["libtpu"].startswith("0.0.50")
        assert any(f.endswith("before_optimizations.txt") for f in t["dump_files"])
        assert any(f.endswith("before_optimizations.hlo.pb") for f in t["dump_files"])


@pytest.mark.parametrize("prefer", ["text", "proto"])
@pytest.mark.parametrize("d", PROGRAMS, ids=_id)
def test_every_donation_xla_sees_and_whether_it_is_reused(d, prefer):
    t, m = audited(d, prefer)
    e = t["expect"]
    a = m.audit
    assert a.donations_from == "before optimizations"
    want = [(x["parameter"], tuple(x["shape_index"]), x["aliased"],
             tuple(x["output_index"]) if x["aliased"] else None, x.get("why"), x["bytes"])
            for x in e.get("donations", [])]
    got = [(x.parameter, x.shape_index, x.aliased, x.output_index, x.why, x.bytes)
           for x in a.donations]
    assert got == want
    # a donation jax dropped (its warning) never reached XLA: not in the dump
    dropped = e.get("dropped_by_jax", [])
    assert not {x.parameter for x in a.donations} & set(dropped)
    if dropped:
        assert any("donated buffers were not usable" in w for w in t["jax_warnings"])
    # the reused donations are XLA's alias_size_in_bytes
    assert sum(x.bytes for x in a.donations if x.aliased) == \
        t["memory_analysis"]["alias_size_in_bytes"] == m.alias_size_in_bytes
    for x in a.donations:
        if x.aliased:
            assert x.reason is None and x.why is None
        else:
            assert x.why in DONATION_WHY and x.reason and x.fix
            assert f"{x.bytes} bytes" in x.reason


@pytest.mark.parametrize("prefer", ["text", "proto"])
@pytest.mark.parametrize("d", PROGRAMS, ids=_id)
def test_every_layout_copy_a_requested_layout_makes(d, prefer):
    t, m = audited(d, prefer)
    e = t["expect"]
    copies = m.audit.layout_copies
    made = [c for c in copies if c.made_by is not None]
    if e.get("control"):
        assert copies == []
        return
    if "layout_copies" not in e:
        # the point of the program is elsewhere; XLA's own relayouts (made by no
        # entry layout) may be there
        return
    want = sorted((x["made_by"], x["bytes"], x["from_layout"], x["to_layout"])
                  for x in e["layout_copies"])
    got = sorted((c.made_by, c.bytes, _layout(c.source), _layout(c.target)) for c in made)
    assert got == want
    assert len(copies) == len(want)
    for c in made:
        assert c.fix and c.cause and c.requested is True
        # the fix names the layout to request (or to go back to XLA's default)
        assert ("drop the requested layout" in c.fix) or "Format(Layout(" in c.fix
        assert c.live_at_peak in (True, False)


@pytest.mark.parametrize("prefer", ["text", "proto"])
@pytest.mark.parametrize("d", PROGRAMS, ids=_id)
def test_every_move_between_memory_spaces(d, prefer):
    t, m = audited(d, prefer)
    e = t["expect"]
    moves = m.audit.space_moves
    got = {(x.instruction, x.from_space, x.to_space) for x in moves if x.done is not None}
    assert got == {(x["instruction"], x["from_space"], x["to_space"]) for x in t["text_moves"]}
    if "host_moves" in e:
        host = collections.Counter((x.kind, x.bytes) for x in m.audit.host_moves)
        assert host == collections.Counter((x["kind"], x["bytes"]) for x in e["host_moves"])
    if e.get("control"):
        assert moves == []


@pytest.mark.parametrize("d", [d for d in PROGRAMS if truth(d)["expect"].get("control")], ids=_id)
def test_controls_report_nothing(d):
    t, m = audited(d)
    a = m.audit
    assert (a.donations, a.layout_copies, a.space_moves) == ([], [], [])
    assert not a.something_to_say()
    from xlashape.reporters.text import module_lines
    assert not any("what XLA did" in line for line in module_lines(m, 5))


@pytest.mark.parametrize("d", PROGRAMS, ids=_id)
def test_from_the_module_text_alone(d):
    # compiled.as_text(): no module before optimizations, no buffer assignment
    t, m = audited(d, source=d / "module.hlo")
    e = t["expect"]
    a = m.audit
    assert a.donations_from == "after optimizations"
    want = sorted((x["parameter"], x["aliased"], x.get("why")) for x in e.get("donations", []))
    assert sorted((x.parameter, x.aliased, x.why) for x in a.donations) == want
    if e.get("donations"):
        assert a.notes and "before optimizations" in a.notes[0]
    if "layout_copies" in e:
        assert sorted((c.made_by, c.bytes) for c in a.layout_copies if c.made_by) == \
            sorted((x["made_by"], x["bytes"]) for x in e["layout_copies"])
        assert all(c.live_at_peak is None for c in a.layout_copies)   # no peak from text alone


def test_the_reasons_in_words():
    # the sentences a user reads, on the cases of each reason
    def reason(variant, name):
        _, m = audited(AUDIT / variant / name)
        return next(x for x in m.audit.donations if not x.aliased)

    r = reason("cpu_jax010", "donate_no_output_of_that_size")
    assert "bf16[64,128]{1,0}" in r.reason and "16384 bytes" in r.reason
    assert "stop donating parameter 0" in r.fix
    r = reason("cpu_jax012", "two_donors_one_output")
    assert "output {0} by parameter 0" in r.reason and "already taken" in r.reason
    r = reason("tpu_v5e", "donate_padded_tpu")
    assert "12000 bytes of data" in r.reason and "f32[3000]{0:T(1024)}" in r.reason
    r = reason("tpu_v5e", "donate_other_layout")
    assert "another layout" in r.reason and "65536 bytes" in r.reason
    assert "Format(Layout(major_to_minor=(0,1), tiling=((8,128),)))" in r.fix
    _, m = audited(AUDIT / "tpu_v5e" / "padded_param_relaid_tpu")
    c = m.audit.layout_copies[0]
    assert c.requested and "{1,0:T(8,128)}" in c.cause
    assert "XLA's default {0,1:T(1,128)}" in c.fix


def test_cli_text_json_and_page(tmp_path):
    d = AUDIT / "tpu_v5e" / "host_offload_roundtrip_tpu" / "dump"
    r = subprocess.run([sys.executable, "-m", "xlashape", "memory", str(d)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "what XLA did with your buffers" in r.stdout
    assert "sin.1 S(0) -> S(5) host memory" in r.stdout
    d = AUDIT / "cpu_jax010" / "two_donors_one_output" / "dump"
    r = subprocess.run([sys.executable, "-m", "xlashape", "memory", str(d), "--json",
                        "--html", str(tmp_path / "p.html")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    audit = doc["modules"][0]["audit"]
    assert [(x["parameter"], x["aliased"], x["output_index"], x["why"])
            for x in audit["donations"]] == [(0, True, [0], None), (1, False, None, "taken")]
    assert set(audit) >= {"donations", "layout_copies", "space_moves"}
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "What XLA did with your buffers" in page and "already taken" in page


# -- the one pass: the copies the sources collect ---------------------------------------------

import io  # noqa: E402

from xlashape.hlo_module import EntryBlocks  # noqa: E402
from xlashape.memory.source_hlo import CopyScanner, read_module_text  # noqa: E402

_TEXTS = sorted({p for p in corpora.DATA.glob("*/*/dump/*after_optimizations.txt")} |
                {p for p in AUDIT.glob("*/*/module.hlo")})


def _facts(text, block=None):
    warn = lambda w: None  # noqa: E731
    if block is None:
        got = read_module_text(text.splitlines(), warn).copies
    else:
        got = read_module_text(EntryBlocks(io.StringIO(text), block=block), warn).copies
    return got.copies, got.forwards


@pytest.mark.parametrize("path", _TEXTS, ids=lambda p: str(p.relative_to(corpora.DATA)))
def test_copies_read_in_blocks_equal_a_reading_by_lines(path):
    # the scanner sees the text in blocks that cut computations and lines
    # anywhere, or line by line (as_text()), and finds the same copies
    text = path.read_text()
    expected = _facts(text)
    for block in (64, 4096, 1 << 20):
        assert _facts(text, block) == expected, block


def test_copies_outside_the_entry_and_wrapping_fusions():
    # a loop body's copy (its operand defined in the body), a fusion whose
    # body only relayouts (called from the entry and from the loop body), a
    # fusion body with a copy and more work (not a relayout), a transpose
    text = """HloModule m, entry_computation_layout={(f32[64,128]{0,1})->f32[64,128]{1,0}}

%wrapped_copy_computation (p: f32[64,128]) -> f32[64,128] {
  %p = f32[64,128]{0,1} parameter(0)
  ROOT %copy.1 = f32[64,128]{1,0} copy(%p)
}

%work (q: f32[64,128]) -> f32[64,128] {
  %q = f32[64,128]{0,1} parameter(0)
  %copy.2 = f32[64,128]{1,0} copy(%q)
  ROOT %n = f32[64,128]{1,0} negate(%copy.2)
}

%body (t: (f32[64,128])) -> (f32[64,128]) {
  %t = (f32[64,128]{0,1}) parameter(0)
  %g = f32[64,128]{0,1} get-tuple-element(%t), index=0
  %c = f32[64,128]{1,0} copy(%g)
  %w = f32[64,128]{1,0} fusion(%g), kind=kLoop, calls=%wrapped_copy_computation
  %tr = f32[128,64]{1,0} transpose(%c), dimensions={1,0}
  ROOT %r = (f32[64,128]{0,1}) tuple(%g)
}

ENTRY %main (a: f32[64,128]) -> f32[64,128] {
  %a = f32[64,128]{0,1} parameter(0)
  %x = f32[64,128]{1,0} fusion(%a), kind=kLoop, calls=%work
  %b = f32[64,128]{0,1} bitcast(%a)
  ROOT %y = f32[64,128]{1,0} fusion(%b), kind=kLoop, calls=%wrapped_copy_computation
}
"""
    for block in (None, 40, 1 << 20):
        copies, forwards = _facts(text, block)
        got = {(c.name, c.opcode, c.computation, str(c.operand_shape), c.wrapped) for c in copies}
        assert got == {
            ("y", "fusion", None, "f32[64,128]{0,1}", "copy"),
            ("c", "copy", "body", "f32[64,128]{0,1}", None),
            ("w", "fusion", "body", "f32[64,128]{0,1}", "copy"),
            ("tr", "transpose", "body", "f32[64,128]{1,0}", None)}, block
        assert forwards == {"b": ("a", None)}
    # the audit: the entry's relayout traced to parameter 0 through the
    # bitcast; the loop body's copies made by no entry layout
    m = memory.analyze(text).modules[0]
    made = {c.instruction: c.made_by for c in m.audit.layout_copies}
    assert made == {"y": "parameter 0", "c": None, "w": None, "tr": None}
    assert m.audit.layout_copies[0].bytes == 32768


def test_the_proto_route_finds_what_the_text_route_finds():
    # every module of the corpora with a .hlo.pb: the same audit from its fields
    checked = 0
    for dump in sorted(corpora.DATA.glob("*/*/dump")) + sorted(AUDIT.glob("*/*/dump")):
        if not list(dump.glob("*after_optimizations.hlo.pb")):
            continue
        text = memory.analyze(str(dump)).modules
        proto = memory.analyze(str(dump), prefer="proto").modules
        for a, b in zip(text, proto):
            ja, jb = a.audit.to_json(), b.audit.to_json()
            ja["notes"] = jb["notes"] = None
            assert ja == jb, (str(dump), a.name)
            checked += 1
    assert checked > 100


def test_the_dump_files_are_each_opened_once(tmp_path):
    # the module before optimizations is read too, for its header, once
    from test_memory_reads import _opens
    d = AUDIT / "cpu_jax012" / "two_donors_one_output" / "dump"
    for extra in ([], ["--proto"]):
        counts = _opens([d], ["memory", str(d), "--json", "--html", str(tmp_path / "p.html")]
                        + extra)
        names = {os.path.basename(p) for p in counts}
        assert any(n.endswith("before_optimizations" + (".hlo.pb" if extra else ".txt"))
                   for n in names), names
        assert {p: n for p, n in counts.items() if n > 1} == {}


def test_memory_diff_reads_the_audit():
    # donations lost with why, layout copies added, from each side's audit
    def diff(a, b):
        r = subprocess.run([sys.executable, "-m", "xlashape", "memory", "diff", str(a / "dump"),
                            str(b / "dump"), "--json"], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    v = AUDIT / "cpu_jax010"
    doc = diff(v / "donate_aliased", v / "donate_no_output_of_that_size")
    assert [(x["parameter_number"], x["bytes"]) for x in doc["donations_lost"]] == [(0, 32768)]
    assert "16384 bytes" in doc["donations_lost"][0]["reason"]
    doc = diff(v / "control_elementwise", v / "layout_in_2d")
    assert [(x["label"], x["size_in_bytes"]) for x in doc["copies_added"]] == \
        [("wrapped_copy", 32768)]
    assert doc["copies_removed"] == []
    doc = diff(v / "layout_in_2d", v / "layout_in_2d")
    assert doc["copies_added"] == doc["copies_removed"] == doc["donations_lost"] == []


def test_the_proto_routes_two_ways_to_find_copies_agree():
    # the schedule's way (every optimized module) and the scan of every
    # computation (a module without a schedule) find the same copies
    from xlashape import protos
    from xlashape.memory.source_proto import _Module, _copy_facts, _copy_facts_scan
    checked = 0
    for pb in sorted(corpora.DATA.rglob("*after_optimizations.hlo.pb")):
        m = _Module(protos.read_hlo_proto(str(pb)).hlo_module)
        if not m.mp.HasField("schedule"):
            continue
        a, b = _copy_facts(m), _copy_facts_scan(m)
        assert sorted(map(repr, a.copies)) == sorted(map(repr, b.copies)), pb
        assert a.forwards == b.forwards, pb
        checked += 1
    assert checked > 100


def test_a_transpose_fix_makes_it_a_bitcast():
    # XLA:GPU transposes the convolution's filter (a parameter in jax's
    # default layout) and solve's result: the layout the fix asks for makes
    # the transpose move no element (ShapeUtil::TransposeIsBitcast)
    from xlashape import parse_shape
    from xlashape.shape_util import transpose_is_bitcast
    seen = 0
    for name in ("dev_conv3x3_f16", "dev_solve"):
        m = memory.analyze(str(corpora.DATA / "gpu_corpus" / name / "dump")).modules[0]
        for c in m.audit.layout_copies:
            if c.fix is None or c.opcode != "fusion":
                continue
            want = c.fix.split(" in layout ")[1].split(" ")[0]
            src, dst = parse_shape(c.source), parse_shape(c.target)
            dims = next(r.dimensions for r in _records(m, name) if r.name == c.instruction)
            if c.made_by.startswith("parameter"):
                src = parse_shape(c.source.split("{")[0] + want)
            else:
                dst = parse_shape(c.target.split("{")[0] + want)
            assert not transpose_is_bitcast(parse_shape(c.source), parse_shape(c.target), dims)
            assert transpose_is_bitcast(src, dst, dims), (name, c.instruction, want)
            seen += 1
    assert seen == 3


def _records(m, name):
    from xlashape.memory.source_hlo import read_module_text
    path = next((corpora.DATA / "gpu_corpus" / name / "dump").glob("*after_optimizations.txt"))
    with open(path) as f:
        return read_module_text(f, lambda w: None).copies.copies
