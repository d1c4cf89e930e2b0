"""The HLO module reader (xlashape.hlo_module) as a Python API.

Golden inputs are the module texts in tests/data (written for these tests in
the form XLA prints) and the seed 002 examples; expected values are read off
the text or computed by hand in the test.
"""

import io
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from xlashape import HloParseError, Shape, parse_shape
from xlashape.hlo_module import (
    HloReader,
    HloWarning,
    iter_instructions,
    memory_footprint,
    parse_hlo_module,
    read_hlo_file,
)
from xlashape.render import element_label, memory_order_line

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def tpu():
    return read_hlo_file(DATA / "tpu_module.hlo")


def test_module_name_and_header_attributes(tpu):
    assert tpu.name == "jit_train_step"
    assert tpu.attributes["is_scheduled"] == "true"
    assert tpu.attributes["entry_computation_layout"] == (
        "{(f32[8,1,1024]{1,2,0:T(8,128)}, bf16[256,512]{1,0:T(8,128)(2,1)}, s32[]{:T(128)})"
        "->(f32[8,1024]{1,0:T(8,128)}, s32[])}")
    assert tpu.attributes["allow_spmd_sharding_propagation_to_output"] == "{true}"
    assert tpu.warnings == []


def test_computations_in_order_with_entry(tpu):
    assert [c.name for c in tpu.computations] == [
        "region_add.1", "fused_computation.7", "fused_computation.8", "while_body.2",
        "while_cond.2", "main.42"]
    assert tpu.entry.name == "main.42" and tpu.entry.is_entry
    assert [c.is_entry for c in tpu.computations].count(True) == 1
    assert tpu.entry.signature.startswith("(Arg_0.1: f32[8,1,1024]")
    assert tpu.entry.root.name == "tuple.43"
    assert len(tpu.computation("%while_body.2")) == 8
    with pytest.raises(KeyError, match="no computation named 'nope'"):
        tpu.computation("nope")


def test_fusion_bodies_and_reducers_are_known(tpu):
    assert tpu.fused_computations == {"fused_computation.7", "fused_computation.8"}
    assert tpu.applied_computations == {"region_add.1"}


def test_instruction_parts(tpu):
    ins = tpu.instruction("fusion.7")
    assert ins.opcode == "fusion" and ins.kind == "kLoop"
    assert ins.computation == "main.42"
    assert ins.shape == parse_shape("f32[8,1024]{1,0:T(8,128)}")
    assert [o.name for o in ins.operands] == ["Arg_0.1", "scale.1"]
    assert ins.operands[0].shape == parse_shape("f32[8,1,1024]{1,2,0:T(8,128)}")
    assert ins.called_computations == ("fused_computation.7",)
    assert ins.line == 52
    w = tpu.instruction("while.1")
    assert w.called_computations == ("while_cond.2", "while_body.2")
    assert w.operands[0].shape.is_tuple and len(w.operands[0].shape.tuple_shapes) == 3


def test_parameters_and_constants_have_no_operands(tpu):
    p = tpu.instruction("Arg_1.2")
    assert p.parameter_number == 1 and p.operands == ()
    assert p.attributes["metadata"] == '{op_name="w"}'
    c = tpu.instruction("scale.1")
    assert c.opcode == "constant" and c.argument == "0.5" and c.operands == ()
    assert c.parameter_number is None


def test_attribute_blocks_with_braces_and_strings(tpu):
    copy = tpu.instruction("copy.5")
    assert copy.attributes["backend_config"] == (
        '{"flag_configs":[],"scoped_memory_configs":[],'
        '"note":"a } and a { in a string, with \\"quotes\\""}')
    red = tpu.instruction("reduce.2")
    assert red.attributes["dimensions"] == "{1}"
    assert red.attributes["to_apply"] == "%region_add.1"
    assert red.metadata == {"op_type": "reduce_sum",
                            "op_name": "jit(train_step)/reduce_sum[axes=(1,)]",
                            "source_file": "model.py", "source_line": "44"}


def test_tuples_tokens_and_index_comments(tpu):
    many = tpu.instruction("many.1")
    assert len(many.shape.tuple_shapes) == 6
    assert [o.name for o in many.operands] == ["scale.1"] * 6
    tok = tpu.instruction("token.0")
    assert tok.shape.is_token and tok.operands == ()
    assert tpu.instruction("gte.2").shape.is_token


def test_repeated_shape_strings_are_parsed_once(tpu):
    a = tpu.instruction("gte.9").shape
    b = tpu.instruction("fusion.7").shape
    assert a is b   # the same cached Shape object


def test_seed_002_examples_written_across_lines():
    m = read_hlo_file(DATA / "seed_examples.hlo")
    add, fusion = list(m.instructions())
    assert (add.name, add.opcode, add.computation) == ("add.936", "add", None)
    assert add.shape == parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}")
    assert [o.name for o in add.operands] == ["exponential.183", "broadcast.3115"]
    assert fusion.line == 4
    assert fusion.shape.layout.memory_space == 1
    assert fusion.operands[0].shape == parse_shape("bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}")
    assert fusion.kind == "kCustom"
    assert fusion.called_computations == ("all-reduce-scatter.3",)


def test_attributes_continued_on_a_line_starting_with_a_comma():
    text = "ENTRY e {\n  ROOT %x = f32[2]{0} negate(f32[2]{0} %p)\n    , metadata={op_name=\"n\"}\n}\n"
    (ins,) = list(iter_instructions(text))
    assert ins.metadata == {"op_name": "n"}


def test_an_attribute_block_spanning_lines():
    text = ("%x = f32[2]{0} custom-call(), custom_call_target=\"foo\", backend_config={\n"
            "  \"a\": 1,\n  \"b\": {\"c\": 2}\n}\n%y = f32[2]{0} negate(%x)\n")
    m = parse_hlo_module(text)
    x, y = list(m.instructions())
    assert x.attributes["backend_config"].replace(" ", "") == '{"a":1,"b":{"c":2}}'
    assert y.operands[0].name == "x"
    assert m.warnings == []


def test_malformed_lines_become_warnings():
    got = []
    m = read_hlo_file(DATA / "malformed.hlo", on_warning=got.append)
    assert [i.name for i in m.instructions()] == ["p", "ok.1", "ok.2"]
    assert [w.line for w in m.warnings] == [5, 6, 7, 8]
    assert got == m.warnings
    assert all(isinstance(w, HloWarning) for w in got)
    assert "kRbrace" in got[0].message
    assert "f33" in got[1].message
    assert "opcode" in got[2].message
    assert str(got[3]).startswith("line 8: not an HLO instruction")
    assert m.instruction("ok.2").metadata == {"op_name": "a, b {c}"}


def test_an_instruction_cut_off_at_the_end_is_reported():
    m = parse_hlo_module("ENTRY e {\n  %a = f32[2]{0} parameter(0)\n  %b = f32[2]{0} add(%a,\n")
    assert [i.name for i in m.instructions()] == ["a"]
    assert len(m.warnings) == 1 and m.warnings[0].line == 3
    assert "incomplete instruction" in m.warnings[0].message


def test_a_new_instruction_ends_an_unfinished_one():
    m = parse_hlo_module("%a = f32[2]{0} add(%x,\n%b = f32[2]{0} negate(%x)\n")
    assert [i.name for i in m.instructions()] == ["b"]
    assert [w.line for w in m.warnings] == [1]


def test_stack_frame_tables_are_skipped(tpu):
    # FileNames / FunctionNames / FileLocations / StackFrames after the module
    assert tpu.warnings == []
    assert sum(len(c) for c in tpu.computations) == 38


def test_an_out_of_memory_report_is_not_hlo():
    # one reader per format: the HLO reader reads HLO only (it had a second
    # mode that yielded a report's allocations as instructions); the report is
    # oom_report's to read (tests/test_oom_report.py), and `xlashape hlo` lists
    # it through that (tests/test_cli_hlo.py)
    path = DATA / "oom_report.txt"
    m = read_hlo_file(path)
    assert list(m.instructions()) == [] and m.computations == []
    lines = path.read_text().splitlines()
    entries = [n for n, line in enumerate(lines, 1) if re.match(r"\s+\d+\. Size:", line)]
    assert len(entries) == 3
    # its lines are reported as what they are, not HLO (none is dropped silently)
    assert set(entries) <= {w.line for w in m.warnings}
    assert {w.line for w in m.warnings} == {n for n, line in enumerate(lines, 1) if line.strip()}
    assert all(w.message.startswith("not an HLO instruction") for w in m.warnings)


def test_prose_before_a_module_is_reported_as_it_comes():
    # the reader used to hold such warnings until it knew whether the input was
    # HLO or a report, and dropped them past MAX_KEPT_WARNINGS without telling
    # on_warning; now each reaches on_warning, and the module is read
    from xlashape.hlo_module import MAX_KEPT_WARNINGS

    seen = []
    n = MAX_KEPT_WARNINGS + 5
    m = parse_hlo_module(["prose"] * n + ["ENTRY e {", "  ROOT x = f32[] constant(1)", "}"],
                         on_warning=seen.append)
    assert [i.name for i in m.instructions()] == ["x"]
    assert [w.line for w in seen] == list(range(1, n + 1))
    assert m.warnings.total == n and len(m.warnings) == MAX_KEPT_WARNINGS


def test_reading_from_a_file_object_and_a_list():
    text = (DATA / "seed_examples.hlo").read_text()
    a = [i.name for i in iter_instructions(io.StringIO(text))]
    b = [i.name for i in iter_instructions(text.splitlines(True))]
    assert a == b == ["add.936", "fusion.3"]


def test_a_very_long_tuple_line():
    n = 3000
    shape = "(" + ", ".join(
        (f"/*index={i}*/" if i % 5 == 0 and i else "") + "f32[8,128]{1,0:T(8,128)}"
        for i in range(n)) + ")"
    ops = ", ".join(f"%p.{i}" for i in range(n))
    (ins,) = list(iter_instructions(f"ROOT %t = {shape} tuple({ops})"))
    assert len(ins.shape.tuple_shapes) == n
    assert len(ins.operands) == n and ins.is_root
    assert memory_footprint(ins.shape).bytes == n * 8 * 128 * 4


def test_operand_with_a_bad_inline_shape_raises_on_access():
    (ins,) = list(iter_instructions("%x = f32[2]{0} negate(f33[2]{0} %p)"))
    with pytest.raises(HloParseError, match="operand of x: "):
        ins.operands


# -- memory_footprint -------------------------------------------------------------


def test_footprint_of_a_tuple_by_memory_space():
    fp = memory_footprint(parse_shape("(f32[3,5]{1,0:T(2,2)}, s32[]{:S(1)}, token[])"))
    # doc figure 1: f32[3,5] tiled (2,2) takes 4x6 slots
    assert fp.bytes == 15 * 4 + 4
    assert fp.padded_bytes == 24 * 4 + 4
    assert fp.memory_space is None
    assert fp.by_space == ((0, 60, 96), (1, 4, 4))


def test_footprint_of_token_and_opaque_is_zero():
    assert memory_footprint(Shape.token())[:3] == (0, 0, None)
    assert memory_footprint(Shape.opaque())[:2] == (0, 0)


def test_footprint_of_unbounded_and_invalid_shapes_says_why():
    fp = memory_footprint(parse_shape("f32[?,4]"))
    assert fp.bytes is None and "unbounded" in fp.problem
    fp = memory_footprint(parse_shape("f32[2,3]{0,0}"))
    assert fp.bytes is None and fp.padded_bytes is None and fp.problem


def test_footprint_of_a_bounded_dynamic_shape_uses_the_bound():
    assert memory_footprint(parse_shape("f32[<=10]"))[:2] == (40, 40)


# -- robustness ----------------------------------------------------------------------

_pieces = st.sampled_from([
    "%a", " = ", "f32[2]{0}", "(", ")", "{", "}", "[", "]", ",", "\"", "\\\"", "/*", "*/",
    "//", "ROOT ", "ENTRY ", "HloModule m", "add", "fusion", "kind=kLoop", "calls=%c",
    "metadata={op_name=\"x\"}", "bf16[8,128]{1,0:T(8,128)(2,1)}", "token[]", " -> ",
    "\n", "\n", "Size: 1.00G", "Shape: ", "s32[]{:T(128)}", "x", "=", ":",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, max_size=60))
def test_any_text_is_read_without_exceptions(pieces):
    text = "".join(pieces)
    m = parse_hlo_module(text)          # never raises: bad lines become warnings
    for ins in m.instructions():
        assert isinstance(ins.shape, Shape)
        assert ins.line >= 1
    for w in m.warnings:
        assert 1 <= w.line <= text.count("\n") + 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_random_unicode_is_read_without_exceptions(text):
    m = parse_hlo_module(text)
    assert isinstance(m.warnings, list)


# -- render helpers ---------------------------------------------------------------


def test_element_labels():
    assert [element_label(k) for k in (0, 25, 26, 51, 52, 701, 702)] == [
        "a", "z", "aa", "az", "ba", "zz", "aaa"]
    with pytest.raises(ValueError, match="must be >= 0"):
        element_label(-1)


def test_memory_order_line_seeds():
    assert memory_order_line("f32[2,3]{0,1}") == "a d b e c f"
    assert memory_order_line("f32[2,3]{1,0}") == "a b c d e f"
    s = parse_shape("f32[2,3]{0,1}")
    s = s.with_layout(s.layout.replace(padded_dimensions=(3, 5)))
    assert memory_order_line(s) == "a d 0 b e 0 c f 0 0 0 0 0 0 0"


def test_reader_keeps_state_between_reads():
    r = HloReader()
    list(r.read(["HloModule m", "ENTRY %e {"]))
    assert r.module_name == "m" and "e" in r.computations and r.lines_read == 2


def test_single_attribute_lookup_skips_strings_and_blocks():
    line = ('%f = f32[2]{0} fusion(%p), metadata={op_name="x, kind=kFake"}, '
            'backend_config={kind=inner, calls=%no}, kind=kOutput, calls=%fused.1, '
            'custom_call_target="a,b"')
    (ins,) = list(iter_instructions(line))
    assert ins.attribute("kind") == "kOutput"          # before any full parse
    assert ins.called_computations == ("fused.1",)
    assert ins.attribute("custom_call_target") == '"a,b"'
    assert ins.attribute("backend_config") == "{kind=inner, calls=%no}"
    assert ins.attribute("nope", "default") == "default"
    assert ins.attributes["kind"] == "kOutput"         # the full parse agrees
    assert ins.attribute("metadata") == '{op_name="x, kind=kFake"}'


def test_newer_print_style_without_percent_signs_or_signatures():
    text = """HloModule m, entry_computation_layout={(f32[8]{0})->((f32[8]{0}), f32[8]{0})}

region_0.1 {
  a.1 = f32[] parameter(0)
  ROOT b.1 = f32[] negate(a.1)
}

ENTRY main.5 {
  p.1 = f32[8]{0} parameter(0)
  ars.1 = ((f32[8]{0}), f32[8]{0}) all-reduce-start(p.1), replica_groups={{0,1}}, to_apply=region_0.1
  ROOT ard.1 = f32[8]{0} all-reduce-done(ars.1)
}
"""
    m = parse_hlo_module(text)
    assert m.warnings == []
    assert [c.name for c in m.computations] == ["region_0.1", "main.5"]
    assert m.entry.name == "main.5" and m.entry.signature == ""
    ars = m.instruction("ars.1")
    assert ars.shape.tuple_shapes[0].is_tuple
    assert ars.attributes["replica_groups"] == "{{0,1}}"
    assert m.applied_computations == {"region_0.1"}
    assert memory_footprint(ars.shape).bytes == 2 * 8 * 4


def test_escaped_quotes_in_strings():
    # backend_config="a\"b" holds one escaped quote; "\"\\" an escaped quote
    # then an escaped backslash; "c\\" ends with an escaped backslash, so its
    # last quote closes it and kind= after it is a top-level attribute.
    text = ("ENTRY %e {\n"
            '  %a = u8[3]{0} custom-call(), metadata={op_name="jit(f)/5\\" screen"}\n'
            '  %b = u8[3]{0} custom-call(), backend_config="a\\"b"\n'
            '  %c = u8[3]{0} custom-call(), backend_config="\\"\\\\"\n'
            '  %d = u8[3]{0} fusion(), backend_config="c\\\\", kind=kLoop\n'
            "  ROOT %r = u8[3]{0} negate(%a)\n"
            "}\n")
    m = parse_hlo_module(text)
    assert m.warnings == []
    assert [i.name for i in m.entry.instructions] == ["a", "b", "c", "d", "r"]
    assert m.instruction("a").metadata["op_name"] == 'jit(f)/5" screen'
    assert m.instruction("b").attribute("backend_config") == '"a\\"b"'
    assert m.instruction("c").attribute("backend_config") == '"\\"\\\\"'
    assert m.instruction("d").attribute("kind") == "kLoop"
    assert m.instruction("d").attributes["backend_config"] == '"c\\\\"'


def test_buffer_shaped_result():
    m = parse_hlo_module("ENTRY %e {\n"
                         '  %buf = b(f32[16]{0:T(256)}) custom-call(), custom_call_target="alloc"\n'
                         "}\n")
    assert m.warnings == []
    buf = m.instruction("buf")
    assert buf.shape.is_buffer
    assert buf.shape == parse_shape("b(f32[16]{0:T(256)})")
    assert buf.attribute("custom_call_target") == '"alloc"'


# -- what current XLA prints -----------------------------------------------------------

# The layout of `jax.jit(f).lower(...).compile().as_text()` from jax 0.12 /
# libtpu 0.0.50: the header, then the stack-frame sections, then the
# computations (written here by hand in that form).
CURRENT_XLA = """HloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }, entry_computation_layout={(f32[128,256]{1,0:T(8,128)}, f32[33,17]{0,1:T(8,128)})->(f32[128,256]{1,0:T(8,128)}, s8[33,17]{0,1:T(8,128)(4,1)})}, frontend_attributes={arg_layout_modes="default;default"}

FileNames
1 "gen.py"

FunctionNames
1 "<module>"
2 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=22 end_line=22 column=8 end_column=37}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=1 parent_frame_id=2}


%add.clone (x: f32[], y: f32[]) -> f32[] {
  %x = f32[]{:T(128)} parameter(0)
  %y = f32[]{:T(128)} parameter(1)
  ROOT %sum = f32[]{:T(128)} add(%x, %y)
}

%fused_computation (param_0: f32[128,256]) -> f32[128,256] {
  %param_0 = f32[128,256]{1,0:T(8,128)} parameter(0)
  /* a comment
     over two lines */
  %constant.0 = f32[]{:T(128)} constant(1)
  %add.1 = f32[128,256]{1,0:T(8,128)} broadcast(%constant.0), dimensions={}, metadata={op_name="jit(f)/add" stack_frame_id=2}
  ROOT %add.0 = f32[128,256]{1,0:T(8,128)} /* between shape and opcode */ add(%param_0, %add.1)
}

%body (s: (s32[], f32[33,17])) -> (s32[], f32[33,17]) {
  %s = (s32[]{:T(128)}, f32[33,17]{0,1:T(8,128)}) parameter(0)
  %i = s32[]{:T(128)} get-tuple-element(%s), index=0
  %v = f32[33,17]{0,1:T(8,128)} get-tuple-element(%s), index=1
  %one = s32[]{:T(128)} constant(1)
  %next = s32[]{:T(128)} add(%i, %one)
  %b = f32[33,17]{1,0:T(8,128)} bitcast(%v)
  ROOT %t = (s32[]{:T(128)}, f32[33,17]{0,1:T(8,128)}) tuple(%next, %v)
}

%cond (s.1: (s32[], f32[33,17])) -> pred[] {
  %s.1 = (s32[]{:T(128)}, f32[33,17]{0,1:T(8,128)}) parameter(0)
  %i.1 = s32[]{:T(128)} get-tuple-element(%s.1), index=0
  %n = s32[]{:T(128)} constant(3)
  ROOT %lt = pred[]{:T(512)} compare(%i.1, %n), direction=LT
}

ENTRY %main.1 (a.1: f32[128,256], b.1: f32[33,17]) -> (f32[128,256], s8[33,17]) {
  %a.1 = f32[128,256]{1,0:T(8,128)} parameter(0), sharding={mesh[], [{}, {}]}, metadata={op_name="a"}
  %b.1 = f32[33,17]{0,1:T(8,128)} parameter(1)
  %copy-start = (f32[33,17]{0,1:T(8,128)S(1)}, f32[33,17]{0,1:T(8,128)}, u32[]{:S(2)}) copy-start(%b.1), backend_config={"flag_configs":[],"dma_priority":1}
  %copy-done = f32[33,17]{0,1:T(8,128)S(1)} copy-done(%copy-start)
  %fusion = f32[128,256]{1,0:T(8,128)} fusion(%a.1), kind=kLoop, calls=%fused_computation, backend_config={"window_config":{"output_window_bounds":["16","2"]},"aliasing_operands":{"lists":[{"indices":["0","1"]}]}}
  %zero = s32[]{:T(128)} constant(0)
  %init = (s32[]{:T(128)}, f32[33,17]{0,1:T(8,128)}) tuple(%zero, %b.1)
  %loop = (s32[]{:T(128)}, f32[33,17]{0,1:T(8,128)}) while(%init), condition=%cond, body=%body
  %r = f32[] reduce(%copy-done, %zero), dimensions={0,1}, to_apply=%add.clone
  %c = s8[33,17]{0,1:T(8,128)(4,1)} convert(%copy-done)
  %tok = token[] after-all()
  ROOT %tuple = (f32[128,256]{1,0:T(8,128)}, s8[33,17]{0,1:T(8,128)(4,1)}) tuple(%fusion, %c)
}
"""


@pytest.fixture(scope="module")
def current():
    return parse_hlo_module(CURRENT_XLA)


def test_current_print_style_is_read_whole(current):
    # the stack-frame sections after the header no longer hide the module
    assert current.warnings == []
    names = [c.name for c in current.computations]
    assert names == ["add.clone", "fused_computation", "body", "cond", "main.1"]
    expected = sum(1 for line in CURRENT_XLA.splitlines() if re.match(r"\s*(ROOT )?%[\w.\-]+ = ", line))
    assert sum(len(c) for c in current.computations) == expected == 30
    add0 = current.instruction("add.0")
    assert add0.opcode == "add" and add0.operand_names == ("param_0", "add.1")
    assert current.instruction("add.1").metadata["stack_frame_id"] == "2"


def test_computation_kinds(current):
    kinds = {c.name: c.kind for c in current.computations}
    assert kinds == {"add.clone": "to_apply", "fused_computation": "fusion", "body": "while_body",
                     "cond": "while_condition", "main.1": "entry"}
    assert current.computation("fused_computation").is_embedded
    assert not current.computation("body").is_embedded
    assert current.instruction("sum").computation_kind == "to_apply"


def test_result_kinds(current):
    result = {i.name: i.result for i in current.instructions()}
    # entry parameters and the instructions that compute something are buffers
    for name in ("a.1", "b.1", "copy-start", "fusion", "zero", "c", "r", "one", "next", "n", "lt"):
        assert result[name] == "buffer", name
    # a parameter of a called computation, get-tuple-element, bitcast, tuple,
    # while, the done half of an asynchronous pair: views
    for name in ("s", "i", "v", "b", "t", "s.1", "i.1", "init", "loop", "copy-done", "tuple"):
        assert result[name] == "view", name
    for name in ("x", "y", "sum", "param_0", "constant.0", "add.1", "add.0"):
        assert result[name] == "embedded", name
    assert result["tok"] == "none"


def test_header_attributes_parsed(current):
    ecl = current.entry_computation_layout
    assert [str(p) for p in ecl.parameters] == ["f32[128,256]{1,0:T(8,128)}",
                                                "f32[33,17]{0,1:T(8,128)}"]
    assert str(ecl.result) == "(f32[128,256]{1,0:T(8,128)}, s8[33,17]{0,1:T(8,128)(4,1)})"
    (alias,) = current.input_output_alias
    assert alias == ((0,), 0, (), "may-alias")
    assert current.buffer_donor == ((1, ()),)
    assert current.attributes["frontend_attributes"] == '{arg_layout_modes="default;default"}'


def test_header_attribute_parsers_edge_cases():
    from xlashape.hlo_module import (parse_buffer_donor, parse_entry_computation_layout,
                                     parse_input_output_alias)

    ecl = parse_entry_computation_layout("{()->token[]}")
    assert ecl.parameters == () and ecl.result.is_token
    ecl = parse_entry_computation_layout("{((f32[2]{0}, s32[]))->f32[2]{0}}")
    assert len(ecl.parameters) == 1 and ecl.parameters[0].is_tuple
    with pytest.raises(HloParseError, match="no '->'"):
        parse_entry_computation_layout("{(f32[2]{0})}")
    with pytest.raises(HloParseError):
        parse_entry_computation_layout("{(f33[2])->f32[]}")
    assert parse_input_output_alias("{ {}: (2, {1,0}, must-alias), {3}: (0, {}) }") == (
        ((), 2, (1, 0), "must-alias"), ((3,), 0, (), "may-alias"))
    assert parse_input_output_alias("") == ()
    assert parse_buffer_donor("{ (0, {}), (2, {1}) }") == ((0, ()), (2, (1,)))


def test_scan_calls_agrees_with_the_reader(current):
    from xlashape.hlo_module import scan_calls

    kinds = scan_calls(CURRENT_XLA)
    assert kinds == {"add.clone": {"to_apply"}, "fused_computation": {"fusion"},
                     "body": {"while_body"}, "cond": {"while_condition"}}
    assert scan_calls(CURRENT_XLA.encode()) == kinds


def test_scan_calls_on_one_line_of_text(tmp_path):
    # one line without braces or a newline (an XLA:GPU out-of-memory message)
    # is text, not a path to open
    from xlashape.hlo_module import scan_calls

    line = ("JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
            "37.25GiB with allocator GPU_0_bfc on device 0.")
    assert scan_calls(line) == {}
    p = tmp_path / "m.txt"
    p.write_text(CURRENT_XLA)
    assert scan_calls(str(p)) == scan_calls(CURRENT_XLA)


def test_scan_calls_on_a_file_across_chunk_boundaries(tmp_path, monkeypatch):
    from xlashape import hlo_calls

    p = tmp_path / "m.txt"
    p.write_text(CURRENT_XLA * 3)
    expected = hlo_calls.scan_calls(CURRENT_XLA)
    for chunk in (1, 2, 37, 64, 1000):                     # cut lines anywhere
        monkeypatch.setattr(hlo_calls, "_SCAN_CHUNK", chunk)
        assert hlo_calls.scan_calls(p) == expected, chunk


def test_streaming_with_call_kinds_knows_them_before_the_caller():
    from xlashape.hlo_module import scan_calls

    seen = []
    reader = HloReader(call_kinds=scan_calls(CURRENT_XLA))
    for ins in reader.read(CURRENT_XLA.splitlines()):
        seen.append((ins.name, ins.result))     # asked while streaming
    assert ("add.0", "embedded") in seen and ("s", "view") in seen
    # without the pre-pass, a fusion body is not known as one until its caller
    seen = [(i.name, i.result) for i in HloReader().read(CURRENT_XLA.splitlines())]
    assert ("add.0", "buffer") in seen


def test_stack_frame_sections_at_the_top_with_a_bad_line_after():
    text = "HloModule m\n\nFileNames\n1 \"a.py\"\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n" \
           "what is this\nENTRY %e {\n  ROOT %c = f32[] constant(1)\n}\n"
    m = parse_hlo_module(text)
    assert [i.name for i in m.instructions()] == ["c"]
    assert [w.line for w in m.warnings] == [8]


def test_comments_in_strings_are_not_comments():
    text = ('ENTRY %e {\n  %a = f32[2]{0} parameter(0), metadata={op_name="x/*y"}\n'
            '  ROOT %b = f32[2]{0} negate(%a), metadata={op_name="*/ z"}\n}\n')
    m = parse_hlo_module(text)
    assert m.warnings == [] and [i.name for i in m.instructions()] == ["a", "b"]
    assert m.instruction("a").metadata["op_name"] == "x/*y"


def test_an_unclosed_comment_swallows_the_rest():
    text = "ENTRY %e {\n  %a = f32[2]{0} parameter(0) /* never closed\n  %b = f32[2]{0} negate(%a)\n}\n"
    m = parse_hlo_module(text)
    assert [i.name for i in m.instructions()] == ["a"]


def test_async_and_collective_starts_with_tuple_shapes():
    text = """HloModule m
%wrapped (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %ag = f32[8]{0} all-gather(%p), dimensions={0}
}
ENTRY %e (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %s = ((f32[8]{0}), f32[8]{0}, u32[]{:S(2)}) async-start(%x), calls=%wrapped
  %d = f32[8]{0} async-done(%s)
  %ags = (f32[8]{0}, f32[16]{0}) all-gather-start(%d), dimensions={0}
  ROOT %agd = f32[16]{0} all-gather-done(%ags)
}
"""
    m = parse_hlo_module(text)
    assert m.warnings == []
    assert m.computation("wrapped").kind == "async"
    assert not m.computation("wrapped").is_embedded
    assert m.instruction("ag").result == "buffer" and m.instruction("p").result == "view"
    assert [m.instruction(n).result for n in ("s", "d", "ags", "agd")] == [
        "buffer", "view", "buffer", "view"]
    assert m.instruction("s").shape.tuple_shapes[0].is_tuple


# -- hardening, round two: long lines, warnings, input kinds -----------------------------

# A child process reads a module whose text is one long line (a metadata
# string of N MiB) in small blocks, and reports the minor page faults and
# the tracemalloc peak of the read alone. With MALLOC_MMAP_THRESHOLD_ fixed,
# every big string is a fresh mmap whose pages fault in as they are written:
# the fault count measures the bytes allocated and written, i.e. the work of
# copying, without timing anything. Carrying the line as "carry + data" (the
# old reader) copies it once per block: quadratic in the line.
_LONG_LINE_CHILD = r"""
import json, os, resource, sys, tracemalloc
from pathlib import Path
from xlashape import hlo_calls, hlo_module as h
what, path = sys.argv[1], sys.argv[2]
hlo_calls._SCAN_CHUNK = 1 << 16

def run():
    if what == "scan":
        return h.scan_calls(Path(path))
    with h.open_text(path) as f:
        return [i.name for i in h.HloReader(streaming=True).read(h.TextBlocks(f, block=1 << 16))]

run()                                     # warm up: imports, caches
tracemalloc.start()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
got = run()
f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"faults": f1 - f0, "peak": peak, "got": sorted(got)}))
"""


def _long_line_module(path, n):
    head = ('HloModule long, entry_computation_layout={(f32[8]{0})->f32[8]{0}}\n\n'
            'ENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n'
            '  ROOT %n = f32[8]{0} call(f32[8]{0} %p), to_apply=%f, metadata={op_name="')
    path.write_text(head + "abcdefghij" * (n // 10) + '"}\n}\n')


@pytest.mark.parametrize("what", ["scan", "read"])
def test_one_long_line_is_read_in_linear_work_and_bounded_memory(tmp_path, what):
    import json
    import subprocess
    import sys

    res = {}
    for mib in (4, 16):
        p = tmp_path / f"long{mib}.hlo"
        _long_line_module(p, mib << 20)
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536",
                   PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        r = subprocess.run([sys.executable, "-c", _LONG_LINE_CHILD, what, str(p)],
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        res[mib] = json.loads(r.stdout)
        p.unlink()
    assert res[4]["got"] == res[16]["got"] == (["f"] if what == "scan" else ["n", "p"])
    # memory: at most about twice the line (the pieces, then the joined line)
    for mib in (4, 16):
        assert res[mib]["peak"] <= 2.25 * (mib << 20), res
    # work: a line 4 times longer costs about 4 times as many page faults
    # (quadratic copying: about 16 times), and the bytes faulted in are a
    # few times the line (the old reader: 130 times at 16 MiB)
    import resource

    assert res[16]["faults"] <= 8 * max(res[4]["faults"], 1), res
    for mib in (4, 16):
        assert res[mib]["faults"] * resource.getpagesize() <= 8 * (mib << 20), res


def test_text_blocks_keep_every_line_whatever_the_block_size():
    from xlashape.hlo_module import TextBlocks

    text = "a\n" + "x" * 1000 + "\nbb\n\n" + "y" * 300 + "\nc"
    for block in (1, 7, 64, 999, 1000, 1001, 5000):
        got = list(TextBlocks(io.StringIO(text), block=block))
        assert got == text.split("\n"), block
    assert list(TextBlocks(io.StringIO("z" * 50 + "\n"), block=8)) == ["z" * 50]


def test_scan_calls_on_long_lines_agrees_with_the_python_lane(monkeypatch):
    from xlashape.hlo_module import scan_calls

    # many values on one line, "{" values that never close, names far from
    # the line start: the compiled and the Python lanes read them the same
    line = ("  %f = f32[] fusion(a), kind=kLoop, calls=%c1" + ", calls={x" * 500
            + ", to_apply=%r" + " " * 10000 + ", calls=%c2")
    text = "\n".join([line, "  %w = (f32[]) while(t), condition=%cond, body=%body", line])
    fast = scan_calls(text)
    monkeypatch.setenv("XLASHAPE_PURE_PYTHON", "1")
    slow = scan_calls(text)
    assert fast == slow
    assert fast == {"c1": {"fusion"}, "r": {"fusion"}, "c2": {"fusion"},
                    "cond": {"while_condition"}, "body": {"while_body"}}
    # a "{" value holding another "{" or an "=" is not a list of computations
    assert scan_calls("f = f32[] fusion(a), calls={x, calls={p, q}") == {
        "p": {"fusion"}, "q": {"fusion"}}


def test_nested_call_values_cost_linear_work(monkeypatch):
    # ", calls={x" n times then "}" n times: each "{" value used to run to
    # the first "}", so n values named n computations each (n = 20000: 139 s)
    import xlashape.hlo_model as hm
    from xlashape.hlo_module import scan_calls

    n = 3000
    line = "  %f = f32[] fusion(a), kind=kLoop" + ", calls={x" * n + "}" * n + ", calls=%c1"
    text = "ENTRY e {\n" + line + "\n}\n"
    names = [0]
    real = hm._NAME_REF

    class Counting:
        def findall(self, value):
            got = real.findall(value)
            names[0] += len(got)
            return got

        def __getattr__(self, name):
            return getattr(real, name)

    for pure in ("", "1"):
        monkeypatch.setenv("XLASHAPE_PURE_PYTHON", pure)
        monkeypatch.setattr(hm, "_NAME_REF", Counting())
        m = parse_hlo_module(text)
        assert m.fused_computations == {"x", "c1"} and m.warnings == []
        assert scan_calls(text) == {"x": {"fusion"}, "c1": {"fusion"}}
    assert 0 < names[0] <= 4 * n    # names read (Python lane): linear, not n * n


def test_warnings_are_counted_and_only_the_first_are_kept():
    import tracemalloc

    from xlashape.hlo_module import MAX_KEPT_WARNINGS, WarningList

    def read(n):
        text = "HloModule g\n" + "garbage line ;;\n" * n
        seen = [0]

        def count(w):
            seen[0] += 1

        tracemalloc.start()
        m = parse_hlo_module(io.StringIO(text), on_warning=count)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return m, seen[0], peak

    m, seen, peak_small = read(3 * MAX_KEPT_WARNINGS)
    assert isinstance(m.warnings, WarningList)
    assert seen == m.warnings.total == 3 * MAX_KEPT_WARNINGS
    assert len(m.warnings) == MAX_KEPT_WARNINGS and m.warnings.dropped == 2 * MAX_KEPT_WARNINGS
    assert [w.line for w in m.warnings[:2]] == [2, 3]
    m, seen, peak_big = read(12 * MAX_KEPT_WARNINGS)
    assert seen == m.warnings.total == 12 * MAX_KEPT_WARNINGS
    assert len(m.warnings) == MAX_KEPT_WARNINGS
    # the warnings kept do not grow with the input (the text itself, read
    # line by line here, is not held)
    assert peak_big < 2 * peak_small + (1 << 20), (peak_small, peak_big)


def test_a_warning_about_a_huge_line_is_short():
    from xlashape.hlo_warnings import _clip

    assert _clip("a   b\tc") == "a b c"
    assert _clip("x" * 100) == "x" * 57 + "..."
    assert _clip(" " * 10000 + "tail") == "..."       # only the start is looked at
    seen = []
    parse_hlo_module(["HloModule m", "junk " * 200000], on_warning=seen.append)
    (w,) = seen
    assert len(w.message) < 200 and w.message.endswith("...")


def test_source_kind_decides_path_or_text():
    from xlashape.hlo_module import source_kind

    assert source_kind(Path("ENTRY e {")) == "path"          # a Path is always a path
    assert source_kind(b"anything") == "text"
    for text in ("r = f32[] call(a), to_apply=add", "  ROOT %x = (f32[], s32[]) tuple(a, b)",
                 "HloModule m", "ENTRY %main {", "}", "a\nb", "  ", "",
                 "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm.",
                 "BufferAssignment:", "allocation 0: size 8, parameter 0:",
                 "Memory Space: default (color=0)", "a\0b", "x" * 5000):
        assert source_kind(text) == "text", text
    for path in ("module.txt", "dump/module_0001.jit_f.after_optimizations.txt",
                 "/tmp/x.hlo.gz", "C:\\dumps\\m.txt"):
        assert source_kind(path) == "path", path
    assert source_kind(["a = f32[] constant(1)"]) == "lines"
    assert source_kind(io.StringIO("")) == "lines"


def test_scan_calls_takes_one_line_of_hlo_as_text(tmp_path, monkeypatch):
    from xlashape.hlo_module import scan_calls

    # one line, no "{" and no newline: it was opened as a file name
    assert scan_calls("r = f32[] call(a), to_apply=add") == {"add": {"call"}}
    assert scan_calls(b"w = (f32[]) while(t), condition=c, body=b") == {
        "c": {"while_condition"}, "b": {"while_body"}}
    # a file whose name reads as HLO: a Path names it
    monkeypatch.chdir(tmp_path)
    name = "r = f32[] call(a), to_apply=add"
    Path(name).write_text("x = f32[] fusion(a), kind=kLoop, calls=fc\n")
    assert scan_calls(Path(name)) == {"fc": {"fusion"}}
    assert scan_calls(name) == {"add": {"call"}}
    p = tmp_path / "m.hlo"
    p.write_text("x = f32[] map(a), to_apply=sq\n")
    assert scan_calls(str(p)) == scan_calls(p) == {"sq": {"to_apply"}}
    with pytest.raises(FileNotFoundError, match="missing.hlo"):
        scan_calls("missing.hlo")
    with pytest.raises(TypeError):
        scan_calls(42)
    from xlashape import UnreadableInputError

    with pytest.raises(UnreadableInputError, match="not a file name"):
        scan_calls(Path("a\0b"))
    assert scan_calls("a\0b") == {}              # a str with a NUL: text


_SPECIAL_CHILD = r"""
import re, sys
from xlashape import UnreadableInputError
from xlashape.hlo_module import check_regular_file, open_text, read_hlo_file, scan_calls
for path, what in zip(sys.argv[1::2], sys.argv[2::2]):
    for reader in (check_regular_file, open_text, read_hlo_file, scan_calls):
        try:
            reader(path)
            print("read", reader.__name__, path)
        except UnreadableInputError as e:
            print("refused", bool(re.match(re.escape(path) + " is (a|an) " + what, str(e))))
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/urandom"),
                    reason="needs FIFOs and /dev/urandom")
def test_special_files_are_refused_naming_them(tmp_path):
    import subprocess
    import sys

    from xlashape import UnreadableInputError, XlaShapeError
    from xlashape.hlo_module import check_regular_file, open_text, scan_calls

    fifo = tmp_path / "pipe.hlo"
    os.mkfifo(fifo)
    dev = tmp_path / "random.hlo"
    dev.symlink_to("/dev/urandom")
    ok = tmp_path / "ok.hlo"
    ok.write_text("a = f32[] constant(1)\n")
    link = tmp_path / "link.hlo"
    link.symlink_to(ok)
    assert check_regular_file(link) == str(link)            # a link to a file is fine
    assert [i.name for i in read_hlo_file(link).instructions()] == ["a"]
    for reader in (check_regular_file, open_text, read_hlo_file, scan_calls):
        with pytest.raises(UnreadableInputError, match=re.escape(str(tmp_path)) + " is a directory"):
            reader(tmp_path)
    # opening a FIFO blocks and /dev/urandom never ends: in a child with a time limit
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    r = subprocess.run([sys.executable, "-c", _SPECIAL_CHILD, str(fifo), "FIFO", str(dev),
                        "character device"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["refused True"] * 8
    assert issubclass(UnreadableInputError, XlaShapeError)
    with pytest.raises(FileNotFoundError):
        check_regular_file(tmp_path / "nothing")


def test_a_computation_header_with_a_long_run_of_spaces_reads_in_linear_time():
    # the header pattern backtracked quadratically over a run of spaces (the
    # reader blanks /*index=N*/ comments): minutes for a 270 KB header, found
    # by the fuzz harness; in a child process with a time limit
    import subprocess
    import sys
    code = (
        "from xlashape import hlo_module\n"
        "text = ('HloModule m\\n\\nENTRY %main.0 (p: f32[' + ' ' * 300000 + ']) -> f32[] {\\n'\n"
        "        '  ROOT %p = f32[] parameter(0)\\n}\\n')\n"
        "m = hlo_module.parse_hlo_module(text)\n"
        "print(m.entry.name)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "main.0"
