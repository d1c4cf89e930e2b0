"""The compiled HLO line scanner (xlashape/_hloscan.pyx) tested on its own
contract, line by line, not through whole reads (test_hloscan.py does that).

``feed_simple_lines(reader, chunk, i, out)`` takes the lines that are
complete one-line instructions, computation headers, ``}`` or blank, and
returns where the first line it did not take starts; the reader's Python
code (``HloReader._feed``) reads that line. Each test here says which lines
it must take, where it must stop, and what it must leave in the reader
(``lines_read``, ``_current``, ``_ready``, the instructions in ``out``, the
calls recorded). Expected values are written from the text by hand, or come
from feeding the same lines to the Python reader one by one (``_feed``):
never from the scanner itself.

``scan_calls_chunk(chunk, kinds, call_kind)`` is the call-graph pass of
``scan_calls``: what it records for each caller opcode.

Everything runs with the compiled module whatever ``XLASHAPE_PURE_PYTHON``
says (it only chooses what ``HloReader.read`` uses). The JSON row writer
(``JsonSink``, ``json_row``, the ``sink=`` argument) is tested with
``xlashape hlo --json``, not here.
"""

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from xlashape import hlo_calls, hlo_model, hlo_reader
from xlashape.errors import ShapeIndexError, ShapeTypeError

hs = pytest.importorskip("xlashape._hloscan")
feed = hs.feed_simple_lines

ROOT = Path(__file__).parent.parent

# the shapes the Python reader has parsed (and cached) in the tests below
SHAPES = ("f32[8]{0}", "f32[]", "s32[]", "pred[]", "f32[8,128]{1,0}",
          "(s32[], f32[8]{0})", "bf16[4,8]{1,0:T(4,128)(2,1)}")


@pytest.fixture(autouse=True, scope="module")
def _configured():
    # hlo_reader configures the scanner (the Instruction class it creates)
    # the first time it looks for it, whether or not it then uses it
    hlo_reader._fast_scanner()


def plain_reader(shapes=SHAPES, **kw):
    """A reader in its plain HLO state (what the scanner needs), with
    ``shapes`` already parsed by the Python code."""
    r = hlo_reader.HloReader(**kw)
    for s in shapes:
        shape, end = r.shape_at(s, 0)
        assert end == len(s) and s in r._cache
    return r


def fields(ins):
    return (ins.computation, ins.name, str(ins.shape), ins.opcode, ins.is_root, ins.line,
            ins.operands_text, ins.attributes_text,
            None if ins._comp is None else ins._comp.name)


def comp_state(c):
    return None if c is None else (c.name, c.is_entry, c.signature, c.line, sorted(c.kinds))


def state(r, out):
    """Everything the scanner may change in a reader, comparable."""
    return dict(
        out=[fields(i) for i in out],
        ready=None if r._ready is None else (fields(r._ready[0]), r._ready[1], r._ready[2]),
        current=comp_state(r._current),
        lines_read=r.lines_read,
        computations=[comp_state(c) for c in r.computations.values()],
        call_kinds={k: sorted(v) for k, v in r.call_kinds.items()},
        fused=sorted(r.fused_computations), applied=sorted(r.applied_computations),
        pending=r._pending, skipping=r._skipping, in_comment=r._in_comment,
        warnings=list(r.warnings))


def python_feed(lines, reader=None):
    """The Python reader's state after reading ``lines`` one by one."""
    r = reader if reader is not None else plain_reader()
    out = []
    for raw in lines:
        r.lines_read += 1
        got = r._feed(raw, r.lines_read)
        if got:
            out.extend(got)
    return r, out


def scan_list(lines, start=0, reader=None):
    """feed_simple_lines on a list: (index returned, reader, out)."""
    r = reader if reader is not None else plain_reader()
    out = []
    return feed(r, lines, start, out), r, out


def line_starts(text):
    starts = [0]
    for k, c in enumerate(text):
        if c == "\n":
            starts.append(k + 1)
    return starts


def scan_block(lines, start=0, reader=None):
    """feed_simple_lines on the same lines as one block of text (offsets),
    with the offset returned turned back into a line index: (index, reader,
    out). The offset must be a line start, or len(text) + 1 (all read)."""
    text = "\n".join(lines)
    starts = line_starts(text)
    r = reader if reader is not None else plain_reader()
    out = []
    got = feed(r, text, starts[start] if start < len(starts) else len(text) + 1, out)
    if got == len(text) + 1:
        return len(lines), r, out
    assert got in starts, f"offset {got} is not a line start"
    return starts.index(got), r, out


SCANS = {"list": scan_list, "block": scan_block}


@pytest.fixture(params=sorted(SCANS))
def scan(request):
    return SCANS[request.param]


def expect_stop(scan, lines, stop):
    """The scanner takes lines[:stop] and stops at lines[stop]; its state is
    the Python reader's after lines[:stop]."""
    got, r, out = scan(lines)
    assert got == stop, f"stopped at line {got} ({lines[got] if got < len(lines) else 'end'!r})" \
                        f", expected {stop} ({lines[stop] if stop < len(lines) else 'end'!r})"
    pr, pout = python_feed(lines[:stop])
    assert state(r, out) == state(pr, pout)
    return r, out


HEAD = ["ENTRY %main (p: f32[8]) -> f32[8] {",
        "  %p = f32[8]{0} parameter(0)"]


# -- what it reads through ---------------------------------------------------------------


def test_reads_a_whole_computation(scan):
    lines = ["",
             "%add (x: f32[], y: f32[]) -> f32[] {",
             "  %x = f32[] parameter(0)",
             "  %y = f32[] parameter(1)",
             "  ROOT %s = f32[] add(f32[] %x, f32[] %y)",
             "}",
             "   ",
             "ENTRY %main (p: f32[8]) -> f32[8] {",
             "  %p = f32[8]{0} parameter(0)",
             "  %c = f32[] constant(0)",
             "  ROOT %r = f32[] reduce(f32[8]{0} %p, f32[] %c), dimensions={0}, to_apply=%add",
             "}"]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert r.lines_read == len(lines)
    # the last instruction waits in _ready: the next line could continue it
    # with ", attr=..."; the "}" after it completed it
    assert r._ready is None and r._current is None
    assert [fields(i) for i in out] == [
        ("add", "x", "f32[]", "parameter", False, 3, "0", "", "add"),
        ("add", "y", "f32[]", "parameter", False, 4, "1", "", "add"),
        ("add", "s", "f32[]", "add", True, 5, "f32[] %x, f32[] %y", "", "add"),
        ("main", "p", "f32[8]{0}", "parameter", False, 9, "0", "", "main"),
        ("main", "c", "f32[]", "constant", False, 10, "0", "", "main"),
        ("main", "r", "f32[]", "reduce", True, 11, "f32[8]{0} %p, f32[] %c",
         "dimensions={0}, to_apply=%add", "main")]
    assert [comp_state(c) for c in r.computations.values()] == [
        ("add", False, "(x: f32[], y: f32[]) -> f32[]", 2, ["to_apply"]),
        ("main", True, "(p: f32[8]) -> f32[8]", 8, ["entry"])]
    assert r.applied_computations == {"add"} and r.call_kinds == {"add": {"to_apply"}}
    # the shape objects are the reader's cached ones, and each instruction
    # knows its computation object
    assert out[3].shape is r._cache["f32[8]{0}"]
    assert out[0]._comp is r.computations["add"] and out[5]._comp is r.computations["main"]
    assert all(i._reader is r for i in out)
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_the_last_instruction_is_held_in_ready(scan):
    lines = HEAD + ["  ROOT %n = f32[8]{0} negate(%p)  "]
    got, r, out = scan(lines)
    assert got == 3 and r.lines_read == 3
    assert [i.name for i in out] == ["p"]
    ins, line, text = r._ready
    assert (ins.name, ins.opcode, ins.is_root, ins.line, line) == ("n", "negate", True, 3, 3)
    # the text kept for a continuation: the line without its end, trailing
    # spaces included, as the Python reader keeps it
    assert text == lines[2]
    assert r._current is r.computations["main"]
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_header_forms(scan):
    lines = ["ENTRY main {",
             "}",
             "%c.1 (a: f32[]) -> f32[] {",
             "}",
             "region_0.2 {",
             "}",
             "ENTRY   %e.3   (a: f32[8]) -> (s32[], f32[8]) {",
             "  %t = (s32[], f32[8]{0}) tuple(s32[] %i, f32[8]{0} %a)"]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert [comp_state(c) for c in r.computations.values()] == [
        ("main", True, "", 1, ["entry"]),
        ("c.1", False, "(a: f32[]) -> f32[]", 3, []),
        ("region_0.2", False, "", 5, []),
        ("e.3", True, "(a: f32[8]) -> (s32[], f32[8])", 7, ["entry"])]
    assert r._current is r.computations["e.3"]
    assert fields(r._ready[0]) == ("e.3", "t", "(s32[], f32[8]{0})", "tuple", False, 8,
                                   "s32[] %i, f32[8]{0} %a", "", "e.3")
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_instructions_outside_any_computation(scan):
    lines = ["%a = f32[] constant(1)", "%b = f32[] negate(%a)", ""]
    got, r, out = scan(lines)
    assert got == 3
    assert [(i.computation, i._comp, i.name, i.line) for i in out] == [
        (None, None, "a", 1), (None, None, "b", 2)]


def test_crlf_and_lf_line_ends_are_not_part_of_any_field():
    lines = HEAD + ["  %m = f32[8]{0} multiply(%p, %p), metadata={op_name=\"m\"}",
                    "  ROOT %n = f32[8]{0} negate(%m)", "}"]
    want = scan_list(lines)
    for end in ("\n", "\r\n", "\r\r\n"):
        got, r, out = scan_list([ln + end for ln in lines])
        assert (got, state(r, out)) == (want[0], state(want[1], want[2])), repr(end)
    # a block whose lines end with "\r\n" (a file opened without newline
    # translation): the "\r" is not part of the line either
    got, r, out = scan_block([ln + "\r" for ln in lines])
    assert (got, state(r, out)) == (want[0], state(want[1], want[2]))
    assert out[1].attributes_text == 'metadata={op_name="m"}'


def test_trailing_spaces_and_tabs(scan):
    lines = HEAD + ["\t%a = f32[8]{0} add(%p, %p) ,  dimensions={0}\t \t",
                    "  %b = f32[8]{0} abs(%a)     ", "}  "]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert [(i.name, i.operands_text, i.attributes_text) for i in out] == [
        ("p", "0", ""), ("a", "%p, %p", "dimensions={0}"), ("b", "%a", "")]
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_empty_operand_lists_and_names_without_percent(scan):
    lines = HEAD + ["  after-all.1 = token[] after-all()",
                    "  %id = u32[] partition-id()",
                    "  ROOT tuple.2 = () tuple()"]
    r = plain_reader(SHAPES + ("token[]", "u32[]", "()"))
    got, r, out = scan(lines, reader=r)
    assert got == len(lines)
    assert [(i.name, i.opcode, i.operands_text, i.is_root) for i in out + [r._ready[0]]] == [
        ("p", "parameter", "0", False), ("after-all.1", "after-all", "", False),
        ("id", "partition-id", "", False), ("tuple.2", "tuple", "", True)]


def test_quoted_strings_with_braces_and_commas_in_attributes(scan):
    lines = HEAD + [
        '  %cc = f32[8]{0} custom-call(%p), custom_call_target="a}b,c", '
        'backend_config="{\\"x\\": [1, 2]}"',
        '  %m = f32[8]{0} negate(%cc), metadata={op_name="jit(f)/neg{" source_file="a,b.py"}',
        "}"]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert out[1].attributes_text == lines[2].split("), ", 1)[1]
    assert out[2].attributes_text == lines[3].split("), ", 1)[1]
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_index_comments_are_read_through(scan):
    lines = HEAD + ["  %t = (s32[], f32[8]{0}) tuple(%i, /*index=1*/%p)",
                    "  %g = f32[8]{0} get-tuple-element(%t), index=1 /*index=5*/", "}"]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert out[1].operands_text == "%i, /*index=1*/%p"
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_a_tiled_layout_with_parentheses(scan):
    lines = HEAD + ["  %b = bf16[4,8]{1,0:T(4,128)(2,1)} convert(%p)", "}"]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert str(out[1].shape) == "bf16[4,8]{1,0:T(4,128)(2,1)}"


# -- where it stops ---------------------------------------------------------------------


STOPS = {
    "line comment": "  // a comment",
    "comment after an instruction": "  %a = f32[8]{0} negate(%p) // why",
    "comment after the attributes": "  %a = f32[8]{0} negate(%p), metadata={} // why",
    "block comment": "  /* a comment */",
    "other /* comment": "  %a = f32[8]{0} negate(%p), metadata={} /*id=5*/",
    "stack-frame section": "FileNames",
    "instruction continued (operands)": "  %a = f32[8]{0} add(%p,",
    "instruction continued (attribute block)": "  %a = f32[8]{0} add(%p, %p), metadata={op_name=\"a\"",
    "instruction continued (trailing comma)": "  %a = f32[8]{0} add(%p, %p), dimensions={0},",
    "instruction continued (shape)": "  %a = (f32[8]{0},",
    "attribute continuation": "  , dimensions={0}",
    "cache miss": "  %a = f32[9]{0} negate(%p)",
    "cache miss (tuple)": "  %a = (f32[], f32[]) tuple(%x, %y)",
    "non-ASCII name": "  %\u00e9 = f32[8]{0} negate(%p)",
    "HloModule": "HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}",
    "HloModule header-like": "HloModule m {",
    "HloModule as a header name": "HloModule {",
    "HloModule with a signature": "HloModule (x: f32[]) -> f32[] {",
    "open string in attributes": '  %a = f32[8]{0} custom-call(%p), custom_call_target="abc',
    "unbalanced brackets in attributes": "  %a = f32[8]{0} add(%p, %p), sharding={{replicated}",
    "quote in operands": '  %a = f32[8]{0} custom-call("x")',
    "text after the operands": "  %a = f32[8]{0} add(%p, %p) junk",
    "header with a layout in its signature": "%c (a: f32[8]{0}) -> f32[8]{0} {",
    "header without a signature in parentheses": "%c something {",
    "ENTRY and an instruction ending in {": "ENTRY %a = f32[] constant(1), sharding={",
    "no opcode": "  %a = f32[8]{0} (%p)",
    "prose": "This is not HLO.",
}


@pytest.mark.parametrize("what", sorted(STOPS))
def test_stops_at(scan, what):
    lines = HEAD + ["  %q = f32[8]{0} negate(%p)", STOPS[what], "  %z = f32[8]{0} abs(%p)", "}"]
    if scan is scan_block and not STOPS[what].isascii():
        # a block with any non-ASCII character is refused whole (below)
        assert expect_stop(scan, lines, 0)[0].lines_read == 0
        return
    r, out = expect_stop(scan, lines, 3)
    # the line before is complete but still held: the line stopped at could
    # be its ", attr=..." continuation, which the Python code decides
    assert r._ready is not None and r._ready[0].name == "q" and r._ready[2] == lines[2]
    assert r.lines_read == 3 and [i.name for i in out] == ["p"]


@pytest.mark.parametrize("what", sorted(STOPS))
def test_stops_at_the_first_line(scan, what):
    lines = [STOPS[what], "}"]
    got, r, out = scan(lines)
    assert got == 0
    assert r.lines_read == 0 and out == [] and r._ready is None and r._current is None
    assert r.computations == {} and r.call_kinds == {}


def test_a_continued_instruction_is_left_to_python_with_what_came_before():
    # the scanner stops at the continuation; the Python code then joins it
    # to the held instruction: the reader reads both as one instruction
    lines = HEAD + ["  %a = f32[8]{0} add(%p, %p)", "    , dimensions={0}", "}"]
    got, r, out = scan_list(lines)
    assert got == 3
    pr, pout = python_feed(lines[got:], reader=r)
    assert [fields(i) for i in out + pout] == [
        ("main", "p", "f32[8]{0}", "parameter", False, 2, "0", "", "main"),
        ("main", "a", "f32[8]{0}", "add", False, 3, "%p, %p", "dimensions={0}", "main")]


def test_resumes_after_the_python_code_read_a_line():
    # what HloReader.read does: scan, let Python read the line stopped at,
    # scan again from the next one
    lines = HEAD + ["  // note", "  %a = f32[8]{0} negate(%p)", "  %b = f32[8]{0} abs(%a)", "}"]
    r = plain_reader()
    out = []
    i = feed(r, lines, 0, out)
    assert i == 2
    r.lines_read += 1
    out.extend(r._feed(lines[i], r.lines_read) or [])
    assert feed(r, lines, i + 1, out) == len(lines)
    assert [(x.name, x.line) for x in out] == [("p", 2), ("a", 4), ("b", 5)]
    assert r.lines_read == len(lines)


def test_a_non_ascii_line_stops_a_list_and_a_non_ascii_block_is_refused():
    lines = HEAD + ["  %a = f32[8]{0} negate(%p), metadata={op_name=\"\u00fc\"}", "}"]
    got, r, out = scan_list(lines)
    assert got == 2 and r.lines_read == 2
    # a block: the scanner reads it as bytes, so any non-ASCII character
    # anywhere refuses the whole block, even lines before it
    r = plain_reader()
    out = []
    text = "\n".join(lines)
    assert feed(r, text, 0, out) == 0
    assert out == [] and r.lines_read == 0 and r._current is None and r.computations == {}


def test_list_items_that_are_not_str_stop_the_scan():
    class S(str):
        pass

    for item in (None, 3, b"}", S("}"), ["}"]):
        got, r, out = scan_list(HEAD + [item, "}"])
        assert got == 2 and r.lines_read == 2, item
        assert r._ready[0].name == "p"


# -- the block form: offsets ---------------------------------------------------------------


def test_block_offsets():
    lines = HEAD + ["  %a = f32[8]{0} negate(%p)", "}", "", "// end"]
    text = "\n".join(lines)
    starts = line_starts(text)
    r = plain_reader()
    out = []
    # from each line start: it stops at the comment, the start of the last line
    for k in range(len(lines) - 1):
        r = plain_reader()
        assert feed(r, text, starts[k], out) == starts[-1]
        assert r.lines_read == len(lines) - 1 - k
    # all read: len + 1 (there is no "\n" after the last line)
    r = plain_reader()
    text2 = "\n".join(lines[:-1])
    assert feed(r, text2, 0, []) == len(text2) + 1
    assert r.lines_read == len(lines) - 1
    # a block ending with "\n" has an empty last line, read as a blank line
    r = plain_reader()
    assert feed(r, text2 + "\n", 0, []) == len(text2) + 2
    assert r.lines_read == len((text2 + "\n").split("\n")) == len(lines)
    # at the end already: nothing to read
    for at in (len(text2) + 1, len(text2) + 7):
        r = plain_reader()
        assert feed(r, text2, at, []) == at and r.lines_read == 0


def test_an_empty_block_is_one_blank_line_and_an_empty_list_is_nothing():
    r = plain_reader()
    assert feed(r, "", 0, []) == 1
    assert r.lines_read == len("".split("\n")) == 1
    r = plain_reader()
    assert feed(r, [], 0, []) == 0 and r.lines_read == 0


def test_an_index_past_the_end_reads_nothing():
    lines = HEAD + ["}"]
    for at in (3, 4, 10 ** 9):
        r = plain_reader()
        out = []
        assert feed(r, lines, at, out) == at
        assert out == [] and r.lines_read == 0 and r._ready is None


def test_list_and_block_agree_from_every_start():
    lines = HEAD + ["  %a = f32[8]{0} negate(%p)", "}", "", "%c (x: f32[]) -> f32[] {",
                    "  ROOT %x = f32[] parameter(0)", "}", "// end", "  %z = f32[] constant(1)"]
    for start in range(len(lines)):
        a = scan_list(lines, start)
        b = scan_block(lines, start)
        assert a[0] == b[0] and state(a[1], a[2]) == state(b[1], b[2]), start


# -- when it must not start ------------------------------------------------------------------


def _busy(what, r):
    if what == "_pending":
        r._pending = [1, ["%a = f32[8]{0} add(%p,"]]
    elif what == "_skipping":
        r._skipping = True
    elif what == "_in_comment":
        r._in_comment = True


@pytest.mark.parametrize("what", ["_pending", "_skipping", "_in_comment"])
@pytest.mark.parametrize("kind", ["list", "block"])
def test_refuses_to_start_unless_plain(what, kind):
    lines = HEAD + ["  %a = f32[8]{0} negate(%p)", "}"]
    chunk = lines if kind == "list" else "\n".join(lines)
    r = plain_reader()
    _busy(what, r)
    ready = r._ready = ["sentinel", 7, "text"]
    before = state_without_ready(r)
    out = []
    for start in (0, 1) if kind == "list" else (0, len(lines[0]) + 1):
        assert feed(r, chunk, start, out) == start
    assert out == [] and r._ready is ready and state_without_ready(r) == before
    assert gc.isenabled()


def state_without_ready(r):
    return (r._pending, r._skipping, r._in_comment, r.lines_read, r._current,
            dict(r.computations), dict(r.call_kinds))


# -- recording calls -------------------------------------------------------------------------


CALLERS = [
    # (instruction line, {callee: kinds}, fused, applied): written from the
    # kinds XLA gives these attributes (see hlo_model.call_kind's docs)
    ("%f = f32[8]{0} fusion(%p), kind=kLoop, calls=%fused_computation",
     {"fused_computation": {"fusion"}}, {"fused_computation"}, set()),
    ("%w = (s32[], f32[8]{0}) while(%t), condition=%cond, body=%body",
     {"cond": {"while_condition"}, "body": {"while_body"}}, set(), set()),
    ("%w = (s32[], f32[8]{0}) while(%t), body=%body, condition=%cond",
     {"cond": {"while_condition"}, "body": {"while_body"}}, set(), set()),
    ("%c = f32[8]{0} call(%p), to_apply=%callee",
     {"callee": {"call"}}, set(), {"callee"}),
    ("%r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add",
     {"add": {"to_apply"}}, set(), {"add"}),
    ("%r = f32[8]{0} reduce-window(%p, %z), window={size=2}, to_apply=%max",
     {"max": {"to_apply"}}, set(), {"max"}),
    ("%s = f32[8]{0} sort(%p), dimensions={0}, to_apply=%less",
     {"less": {"to_apply"}}, set(), {"less"}),
    ("%a = f32[8]{0} all-reduce(%p), replica_groups={}, to_apply=%sum",
     {"sum": {"to_apply"}}, set(), {"sum"}),
    ("%a = f32[8]{0} all-reduce-start(%p), to_apply=%sum",
     {"sum": {"to_apply"}}, set(), {"sum"}),
    ("%m = f32[8]{0} map(%p), dimensions={0}, to_apply=%neg",
     {"neg": {"to_apply"}}, set(), {"neg"}),
    # the ones the Python code records (the compiled part hands them over)
    ("%k = f32[8]{0} conditional(%b, %p, %p), branch_computations={%br0, br1}",
     {"br0": {"conditional_branch"}, "br1": {"conditional_branch"}}, set(), set()),
    ("%k = f32[8]{0} conditional(%b, %p, %p), true_computation=%t, false_computation=%f",
     {"t": {"conditional_branch"}, "f": {"conditional_branch"}}, set(), set()),
    ("%cc = f32[8]{0} custom-call(%p), custom_call_target=\"x\", called_computations={%g}",
     {"g": {"custom_call"}}, set(), set()),
    ("%ss = f32[8]{0} select-and-scatter(%p, %s, %z), select=%ge, scatter=%add",
     {"ge": {"to_apply"}, "add": {"to_apply"}}, set(), set()),
    ("%as = f32[8]{0} async-start(%p), calls=%wrapped",
     {"wrapped": {"async"}}, set(), set()),
    ("%ad = f32[8]{0} all-gather-done(%p), calls=%wrapped",
     {"wrapped": {"async"}}, set(), set()),
    # not callers: nothing recorded
    ("%n = f32[8]{0} negate(%p), metadata={op_name=\"x\"}, to_apply=%nope", {}, set(), set()),
    ("%f = f32[8]{0} fusion(%p), kind=kLoop", {}, set(), set()),
    # a value that is not a name list: nothing
    ("%f = f32[8]{0} fusion(%p), calls={a=b}", {}, set(), set()),
    # ", calls=" inside a quoted string is still an attribute start, for
    # the Python code as for the compiled one
    ("%f = f32[8]{0} fusion(%p), metadata={op_name=\"x, calls=%q\"}, calls=%g",
     {"q": {"fusion"}, "g": {"fusion"}}, {"q", "g"}, set()),
]


@pytest.mark.parametrize("line,kinds,fused,applied", CALLERS, ids=lambda v: str(v)[:48])
def test_records_calls(scan, line, kinds, fused, applied):
    lines = HEAD + ["  " + line, "}"]
    got, r, out = scan(lines)
    assert got == len(lines)
    assert r.call_kinds == kinds
    assert r.fused_computations == fused and r.applied_computations == applied
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_a_call_adds_its_kind_to_a_computation_already_read():
    lines = ["%body (t: (s32[], f32[8])) -> (s32[], f32[8]) {", "}",
             "ENTRY %e (p: f32[8]) -> f32[8] {",
             "  %w = (s32[], f32[8]{0}) while(%t), condition=%cond, body=%body",
             "  %w2 = (s32[], f32[8]{0}) while(%w), condition=%cond, body=%body",
             "}"]
    got, r, out = scan_list(lines)
    assert got == len(lines)
    assert r.computations["body"].kinds == {"while_body"}
    assert r.call_kinds == {"cond": {"while_condition"}, "body": {"while_body"}}
    pr, pout = python_feed(lines)
    assert state(r, out) == state(pr, pout)


def test_calls_are_not_recorded_when_the_call_graph_is_given_for_streaming():
    r = plain_reader(call_kinds={"g": frozenset({"fusion"})}, streaming=True)
    got, r, out = scan_list(HEAD + ["  %f = f32[8]{0} fusion(%p), calls=%other", "}"], reader=r)
    assert got == 4
    assert r.call_kinds == {"g": frozenset({"fusion"})} and r.fused_computations == set()


def test_more_than_sixteen_calls_on_one_line():
    # past what the compiled part keeps per line, the Python code records them
    keys = ", ".join(f"to_apply=%f{k}" for k in range(20))
    lines = HEAD + ["  %r = f32[] reduce(%p, %z), " + keys, "}"]
    got, r, out = scan_list(lines)
    assert got == len(lines)
    assert r.call_kinds == {f"f{k}": {"to_apply"} for k in range(20)}
    assert r.applied_computations == {f"f{k}" for k in range(20)}


# -- scan_calls_chunk -------------------------------------------------------------------------


CHUNKS = [
    (b"  %f = f32[8]{0} fusion(%p), kind=kLoop, calls=%fc\n", {"fc": {"fusion"}}),
    (b"  %w = (s32[], f32[8]{0}) while((s32[], f32[8]{0}) %t), condition=%c, body=%b\n",
     {"c": {"while_condition"}, "b": {"while_body"}}),
    (b"  %k = f32[] call(%p), to_apply=%g\n", {"g": {"call"}}),
    (b"  %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add\n", {"add": {"to_apply"}}),
    (b"  %s = f32[8]{0:T(256)} sort(%p), to_apply=%lt\n", {"lt": {"to_apply"}}),
    (b"  %k = f32[] conditional(%b), branch_computations={%x, %y.1}\n",
     {"x": {"conditional_branch"}, "y.1": {"conditional_branch"}}),
    (b"  %k = f32[] conditional(%b), true_computation=%t, false_computation=%f\n",
     {"t": {"conditional_branch"}, "f": {"conditional_branch"}}),
    (b"  %c = f32[] custom-call(%p), custom_call_target=\"t\", called_computations={%h}\n",
     {"h": {"custom_call"}}),
    (b"  %s = f32[8]{0} select-and-scatter(%p), select=%ge, scatter=%add\n",
     {"ge": {"to_apply"}, "add": {"to_apply"}}),
    (b"  %a = ((f32[]), f32[], u32[]) async-start(%p), calls=%w\n", {"w": {"async"}}),
    (b"  %d = f32[] all-gather-done(%p), calls=%w\n", {"w": {"async"}}),
    (b"  %d = f32[] async-done(%a), calls=%w\n", {"w": {"async"}}),
    (b"  %q = f32[] all-reduce(%p), to_apply=%sum\n", {"sum": {"to_apply"}}),
    # another opcode with calls=: "called"
    (b"  %o = f32[] other(%p), calls=%z\n", {"z": {"called"}}),
    # no ", " before the key, no "=", a value that does not close on its line,
    # a value with "=" or "{" inside: not calls
    (b"  %f = f32[] fusion(%p),calls=%fc\n", {}),
    (b"  %f = f32[] fusion(%p), calls %fc\n", {}),
    (b"  %k = f32[] conditional(%b), branch_computations={%x,\n  %y}\n", {}),
    (b"  %k = f32[] conditional(%b), branch_computations={a=b}\n", {}),
    (b"  %k = f32[] conditional(%b), branch_computations={{a}}\n", {}),
    (b"", {}),
    (b"\n\n", {}),
    # two lines: each with its own opcode
    (b"  %f = f32[] fusion(%p), calls=%a\n  %r = f32[] reduce(%p), to_apply=%a\n",
     {"a": {"fusion", "to_apply"}}),
    # a layout with parentheses before the opcode: "b(" and "T(" are not opcodes
    (b"  %f = bf16[8]{0:T(256)(2,1)} fusion(%p), calls=%q\n", {"q": {"fusion"}}),
    # b(...) is a buffer type, not an opcode
    (b"  %f = b(f32[8]{0}) fusion(%p), calls=%q\n", {"q": {"fusion"}}),
]


@pytest.mark.parametrize("chunk,want", CHUNKS, ids=lambda v: repr(v)[:48])
def test_scan_calls_chunk(chunk, want):
    kinds = {}
    assert hs.scan_calls_chunk(chunk, kinds, hlo_model.call_kind) is None
    assert kinds == want
    slow = {}
    hlo_calls._scan_chunk_python(chunk, slow)
    assert slow == want


def test_scan_calls_chunk_adds_to_the_sets_given_and_asks_call_kind_once_per_pair():
    asked = []

    def kind(opcode, key):
        asked.append((opcode, key))
        return f"{opcode}/{key}"

    kinds = {"fc": {"earlier"}}
    chunk = b"".join(b"  %%f%d = f32[] fusion(%%p), calls=%%fc\n" % k for k in range(5))
    chunk += b"  %w = f32[] while(%t), condition=%c, body=%b\n"
    hs.scan_calls_chunk(chunk, kinds, kind)
    assert kinds == {"fc": {"earlier", "fusion/calls"}, "c": {"while/condition"},
                     "b": {"while/body"}}
    assert sorted(asked) == [("fusion", "calls"), ("while", "body"), ("while", "condition")]


def test_a_key_split_between_chunks_is_not_seen_so_scan_calls_splits_at_line_ends(
        tmp_path, monkeypatch):
    line = b"  %f = f32[] fusion(%p), kind=kLoop, calls=%fused.1\n"
    cut = line.index(b"calls") + 2
    for part in (line[:cut], line[cut:]):
        kinds = {}
        hs.scan_calls_chunk(part, kinds, hlo_model.call_kind)
        assert kinds == {}
    # scan_calls reads a file in chunks cut at line ends: with chunks far
    # shorter than a line, every call is still found once
    text = b"".join(line.replace(b"fused.1", b"fused.%d" % k) for k in range(30))
    p = tmp_path / "m.hlo"
    p.write_bytes(text)
    monkeypatch.setattr(hlo_calls, "_SCAN_CHUNK", 7)
    assert hlo_calls.scan_calls(p) == {f"fused.{k}": frozenset({"fusion"}) for k in range(30)}


# -- the garbage collector ---------------------------------------------------------------------


def test_gc_is_enabled_again_after_a_scan_and_stays_disabled_if_it_was():
    lines = HEAD + ["  %a = f32[8]{0} negate(%p)", "}"]
    assert gc.isenabled()
    assert scan_list(lines)[0] == 4
    assert gc.isenabled()
    gc.disable()
    try:
        assert scan_list(lines)[0] == 4
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Boom(RuntimeError):
    pass


class _FailingReader(hlo_reader.HloReader):
    def _new_computation(self, *a):
        assert not gc.isenabled()      # the scan runs with the collector off
        raise _Boom("no computation")


class _FailingCalls(hlo_reader.HloReader):
    def _record_calls(self, *a):
        raise _Boom("no calls")


@pytest.mark.parametrize("cls,line", [
    (_FailingReader, "%c (a: f32[]) -> f32[] {"),
    (_FailingCalls, "  %k = f32[8]{0} conditional(%b), branch_computations={%x}")])
def test_gc_is_enabled_again_after_an_exception(cls, line):
    r = cls()
    r.shape_at("f32[8]{0}", 0)
    assert gc.isenabled()
    with pytest.raises(_Boom):
        feed(r, ["", line, "}"], 0, [])
    assert gc.isenabled()


def test_the_shape_cache_is_looked_up_at_each_call():
    # the Python code clears its cache when it is full: the scanner must see
    # the cache as it is now, and leave a shape no longer in it to Python
    r = plain_reader()
    lines = HEAD + ["  %a = f32[8]{0} negate(%p)", "}"]
    assert feed(r, lines, 0, []) == len(lines)
    r = plain_reader()
    assert feed(r, lines[:1], 0, []) == 1
    r._cache.clear()
    assert feed(r, lines, 1, []) == 1 and r.lines_read == 1


# -- hostile input -----------------------------------------------------------------------------


def test_a_very_long_line():
    big = "x" * (4 << 20)
    lines = HEAD + [f'  %a = f32[8]{{0}} negate(%p), metadata={{op_name="{big}"}}',
                    "  %b = f32[8]{0} add(" + ", ".join(["%p"] * 100000) + ")",
                    "  %c = f32[8]{0} add(%p, %p), sharding=" + "{" * 100000,
                    "}"]
    for scan_ in (scan_list, scan_block):
        got, r, out = scan_(lines)
        assert got == 4
        assert len(out[1].attributes_text) == len(big) + len('metadata={op_name=""}')
        assert r._ready[0].operands_text.count("%p") == 100000


def test_nul_and_control_characters_read_as_the_python_code_reads_them(scan):
    for odd in ("\x00", "\x0b", "\x1c", "\x7f"):
        lines = HEAD + [f"  %a = f32[8]{{0}} negate(%p),{odd}metadata={{}}", f"{odd}}}",
                        f"  %b{odd}= f32[8]{{0}} abs(%p)", "}"]
        got, r, out = scan(lines)
        # what Python's str.isspace() counts as space is space here too; the
        # others make "\x00}" no HLO line: the Python code warns about it
        assert got == (len(lines) if odd.isspace() else 3), repr(odd)
        pr, pout = python_feed(lines[:got])
        assert state(r, out) == state(pr, pout), repr(odd)


def _child(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


_CHILD_HEAD = """
    from xlashape import hlo_reader
    from xlashape._hloscan import feed_simple_lines as feed, configure
    from xlashape.errors import ShapeIndexError, ShapeTypeError
    hlo_reader._fast_scanner()
    r = hlo_reader.HloReader()
    r.shape_at("f32[]", 0)
"""


@pytest.mark.parametrize("call,err", [
    # a negative start read before the list's items / the block's characters
    # (a crash, or "returned NULL without setting an exception" for -1)
    ('feed(r, ["a = f32[] constant(1)"] * 3, -1000000, [])', "ShapeIndexError"),
    ('feed(r, ["}"], -1, [])', "ShapeIndexError"),
    ('feed(r, "\\n\\n\\n}", -1, [])', "ShapeIndexError"),
    ('feed(r, "a = f32[] constant(1)\\n", -10**7, [])', "ShapeIndexError"),
    # anything but an exact str or a list was read as a list's memory
    ('feed(r, ("}",) * 3, 0, [])', "ShapeTypeError"),
    ('feed(r, b"}\\n", 0, [])', "ShapeTypeError"),
    ('feed(r, type("S", (str,), {})("}\\n}"), 0, [])', "ShapeTypeError"),
    ('feed(r, None, 0, [])', "ShapeTypeError"),
    ('feed(r, ["a = f32[] constant(1)", ""], 0, None)', "ShapeTypeError"),
    # the scanner writes InstructionBase's fields into what the class makes
    ('configure(object, []); feed(r, ["a = f32[] constant(1)", ""], 0, [])', "ShapeTypeError"),
])
def test_bad_arguments_raise_instead_of_crashing(call, err):
    # these crashed (segmentation fault) before the checks: a child process
    p = _child(_CHILD_HEAD + f"""
    try:
        {call}
    except ({err}) as e:
        assert isinstance(e, (IndexError, TypeError))
        print("raised", type(e).__name__)
    """)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == f"raised {err}"


def test_a_list_subclass_is_read_as_a_list():
    class L(list):
        pass

    got, r, out = scan_list(L(HEAD + ["}"]))
    assert got == 3 and [i.name for i in out] == ["p"]


# -- every line it takes, it takes as the Python code would ---------------------------------


_POOL = (list(STOPS.values()) + HEAD + [c[0] for c in CALLERS] + [
    "}", "", "  ", "%c (x: f32[]) -> f32[] {", "ENTRY e {", "  ROOT %r = f32[] negate(%x)",
    "  %t = (s32[], f32[8]{0}) tuple(%i, /*index=1*/%p)", "  , dimensions={0}",
    "  %a = f32[8,128]{1,0} add(%p, %p), metadata={op_name=\"a}b\"}"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_POOL), min_size=1, max_size=12),
       st.lists(st.sampled_from(["", "\r", " ", "\t"]), min_size=12, max_size=12))
def test_random_line_sequences(picked, ends):
    lines = [p + e for p, e in zip(picked, ends)]
    a = scan_list(lines)
    b = scan_block(lines)
    # list and block stop at the same line with the same state, which is the
    # Python reader's after the lines taken (a block with a non-ASCII
    # character anywhere is refused whole)
    if "\n".join(lines).isascii():
        assert a[0] == b[0]
        assert state(a[1], a[2]) == state(b[1], b[2])
    else:
        assert b[0] == 0 and state(b[1], b[2]) == state(*python_feed([]))
    pr, pout = python_feed(lines[:a[0]])
    assert state(a[1], a[2]) == state(pr, pout)
    # and it stops only at a line that is not blank: a blank line is always taken
    if a[0] < len(lines):
        assert lines[a[0]].strip()


def test_a_call_kinds_value_that_is_not_a_set_is_a_family_error():
    # the scanner adds to these sets in C; anything else was a SystemError
    import io

    with pytest.raises(ShapeTypeError, match=r"call_kinds\['body'\] must be a set"):
        hs.scan_calls_chunk(b"  %f = f32[] fusion(%a), kind=kLoop, calls=%body\n",
                            {"body": frozenset()}, hlo_model.call_kind)
    reader = hlo_reader.HloReader()
    reader.call_kinds["body"] = frozenset()
    text = ("HloModule m\n\nENTRY %e (a: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
            "  ROOT %f = f32[] fusion(f32[] %a), kind=kLoop, calls=%body\n}\n")
    with pytest.raises(ShapeTypeError, match=r"call_kinds\['body'\] must be a set"):
        list(reader.read(io.StringIO(text)))
