"""Readers stay linear in what they read: long runs of blanks inside a line,
long unterminated strings, instructions over thousands of lines.

Found by the fuzz harness (``tests/fuzz/run.py``, seed 5151) and by timing
every reader's regular expressions on real lines with a run of blanks
inserted: patterns with a lazy group or an optional part between two
``\\s*`` backtracked quadratically when a line did not match (a 40 KB line
took 7 s, a megabyte hours); ``_balanced`` removed quoted strings with a
regular expression that retried at every later quote; and an instruction
continued over many lines was read whole again at every line.

The fixes are checked three ways, none of them by the clock: the new code
against the old definition on random input (the same answers), the
number of times the reader looks at a statement, and, for a hang guard,
every fixed reader on lines with a 400,000-character run in a child
process with a generous time limit (the old code needed hours there).
"""

import io
import re
import subprocess
import sys
import textwrap

from hypothesis import given, settings, strategies as st

from xlashape import hlo_reader, hlo_syntax
from xlashape.hlo_module import HloReader

# The definitions the fixes replace, kept here as the reference.
_OLD_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)

_QUOTED = st.text(alphabet='"\\{}()[] a\n', max_size=24)


@settings(max_examples=3000, deadline=None)
@given(_QUOTED)
def test_strings_are_removed_as_the_regular_expression_removes_them(text):
    assert hlo_syntax._without_strings(text) == _OLD_STRING.sub("", text)
    for q in (i for i, c in enumerate(text) if c == '"'):
        m = _OLD_STRING.match(text, q)
        assert hlo_syntax._string_end(text, q) == (m.end() if m else -1)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_QUOTED, min_size=1, max_size=6))
def test_brackets_fed_piece_by_piece_decide_as_balanced_on_the_whole(pieces):
    b = hlo_syntax._Brackets()
    text = ""
    for p in pieces:
        b.feed(p)
        text += p
        assert b.balanced() == hlo_syntax._balanced(text)


def _module(lines_of_attrs, tail):
    body = "\n".join(f'    x{i}="a{{b", y{i}=(1, 2),' for i in range(lines_of_attrs))
    return ("HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n"
            "  %p = f32[2]{0} parameter(0)\n"
            "  ROOT %n = f32[2]{0} negate(f32[2]{0} %p), frontend_attributes={\n"
            f"{body}\n    {tail}\n}}\n")


def test_a_long_attribute_block_is_parsed_once_it_can_be_complete(monkeypatch):
    calls = []
    parse = HloReader._parse_instruction

    def counting(self, stmt, line, comp):
        calls.append(len(stmt))
        return parse(self, stmt, line, comp)

    monkeypatch.setattr(HloReader, "_parse_instruction", counting)
    text = _module(1500, "z=1}")
    got = list(HloReader().read(io.StringIO(text)))
    root = got[-1]
    assert (root.name, root.opcode, root.line) == ("n", "negate", 5)
    assert root.attributes_text.startswith("frontend_attributes={")
    assert root.attributes_text.endswith("z=1}")
    assert root.attributes_text.count("x") == 1500
    # the parameter, the root's first line and its last: not once per line
    assert len(calls) <= 4


def test_a_block_that_never_closes_is_given_up_at_the_line_limit():
    warnings = []
    text = _module(hlo_reader._MAX_STATEMENT_LINES + 50, "z=1")   # no closing brace
    got = list(HloReader(warnings.append).read(io.StringIO(text)))
    assert [i.name for i in got] == ["p"]
    assert any("does not end" in str(w) for w in warnings)


_CHILD = r'''
import io
from xlashape import hlo_module, live_range, oom_report, xla_dump
from xlashape.memory import verdict as peak
RUN = " " * 400_000
TAB = "\t" * 400_000
for run in (RUN, TAB):
    # buffer assignment: value and allocation lines, a memory-usage report
    text = ("allocation 0: size 512" + run + "x\n"
            " value: <1 a @0> (size=512,offset=0): f32[]" + run + "x\n"
            " value: <1 a" + run + "x\n")
    allocs = list(xla_dump.iter_buffer_assignment(text, on_warning=lambda w: None))
    assert len(allocs) == 1 and allocs[0].values[0].shape_text == "f32[]" + run + "x"
    assert xla_dump.read_memory_usage_report("Memory Space: a" + run + "x\n") == []
    # live ranges' stack-frame tables
    live_range.read_locations(["FileNames", "1 " + run + "x", ""])
    # the HLO reader: module header, an unterminated string in attributes
    r = hlo_module.HloReader(lambda w: None)
    list(r.read(io.StringIO("HloModule m" + run + "x\nENTRY %e {\n  %p = f32[] parameter(0), "
                            "a=" + '"\\"' * 100_000 + "\n}\n")))
    # out-of-memory reports
    lines = ["Total hbm usage >= 1.0G" + run + "x", "Program hbm requirement 1.0G" + run + "x",
             "    HLO temp" + run + "1.0G" + run + "x", "  1. Size: 1.0G" + run + "x",
             "     Extra memory due to padding: 1.0K" + run + "x"]
    oom_report.read_oom_reports(lines)
    assert oom_report.parse_size("1" + run + "x") is None
    try:
        peak.parse_size("1" + run + "\x00")
    except Exception as e:
        assert type(e).__name__ == "ShapeValueError"
print("ok")
'''


def test_every_fixed_reader_on_long_runs_of_blanks():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["ok"]
