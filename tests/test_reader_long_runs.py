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

from xlashape import hlo_reader, hlo_syntax, hlo_text
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
@given(_QUOTED)
def test_the_quoted_string_pattern_is_the_plain_alternation(text):
    # hlo_text.DQ_STRING (possessive on Python >= 3.11, else unrolled: both
    # checked) matches where the alternation does and ends where it ends
    plain = re.compile(r'"(?:[^"\\]|\\.)*"')
    unrolled = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
    for flags in (0, re.S):
        old = re.compile(plain.pattern, flags)
        for new in (re.compile(hlo_text.DQ_STRING, flags), re.compile(unrolled.pattern, flags)):
            assert new.findall(text) == old.findall(text)
            for q in (i for i, c in enumerate(text) if c == '"'):
                m, n = old.match(text, q), new.match(text, q)
                assert (m and m.end()) == (n and n.end())


def _layout_follows(text, at):
    """Independently: blanks and comments (each ends at its first "*/", as
    XLA's lexer ends it) from ``at``, then "{", blanks and a digit or ":"."""
    i = at
    while True:
        while i < len(text) and text[i] in " \t\n\r\f\v":
            i += 1
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return None
            i = end + 2
            continue
        break
    if not text.startswith("{", i):
        return None
    i += 1
    while i < len(text) and text[i] in " \t\n\r\f\v":
        i += 1
    return i + 1 if i < len(text) and text[i] in "0123456789:" else None


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=" \n/*{0:x", max_size=24))
def test_the_layout_lookahead_skips_blanks_and_comments_as_xla_does(text):
    for at in range(len(text) + 1):
        n = hlo_syntax._LAYOUT_FOLLOWS.match(text, at)
        assert (n and n.end()) == _layout_follows(text, at)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="  \tab-1.G", max_size=24))
def test_an_oom_breakdown_label_is_read_as_the_alternation_reads_it(text):
    from xlashape import oom_report
    old = re.compile(r"\s{2,}([A-Za-z](?:[\w\-]| (?! ))*)\s{2,}(" + oom_report._SIZE[1:-1]
                     + r"|unknown size)\b(.*)$")
    for line in (text, "  " + text, "  HLO " + text):
        m, n = old.match(line), oom_report._BREAKDOWN.match(line)
        n = n if n and "  " not in n.group(1) else None
        assert bool(m) == bool(n), line
        if m:
            assert (m.group(1).strip(), m.group(2), m.group(3)) == \
                (n.group(1).strip(), n.group(2), n.group(3))


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


_LONG_OP_NAME = r"""
import resource, sys
from xlashape.memory import analyze
def vm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
# an 8 MB op_name (and one of 4 MB of escapes), 8 MB of blanks after an
# operand's shape: the text itself, a few copies of it, no more (a regex group
# repeated per character held ~150 bytes each: 1.4 GB)
for op, blanks in (("ab(c)" * 1_600_000, ""), ("\\'" * 2_000_000, ""), ("x", " " * 8_000_000)):
    text = ("HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n"
            "ENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n"
            "  ROOT %n = f32[4]{0} negate(f32[4]" + blanks + "{0} %p), "
            'metadata={op_name="' + op + '"}\n}\n')
    path = sys.argv[1]
    with open(path, "w") as f:
        f.write(text)
    del text
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm() + 400 * 2**20, hard))
    a = analyze(path)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert a.modules[0].name == "m", a.modules[0].name
# an out-of-memory report's breakdown line with an 8 MB label
from xlashape import oom_report
lines = ["RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
         "space hbm. Used 18.94G of 15.75G hbm. Exceeded hbm capacity by 3.19G.", "",
         "Total hbm usage >= 19.44G:", "    " + "ab " * 2_700_000 + "x  1.0G", ""]
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm() + 400 * 2**20, hard))
reports = oom_report.read_oom_reports(lines)
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
assert len(reports) == 1 and ("ab " * 3 + "ab") in list(reports[0].usage)[0], reports[0].usage
# shapes with an 8 MB NxN or padding token where a dimension belongs: refused
from xlashape import hlo_text
from xlashape.errors import HloParseError
for bad in ("f32[" + "1x" * 4_000_000 + "1]", "f32[0_0" + "x0_0" * 2_000_000 + "]"):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm() + 400 * 2**20, hard))
    try:
        hlo_text.parse_shape(bad)
    except HloParseError:
        pass
    else:
        raise AssertionError("parsed")
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
# a shape followed by 8 MB of blanks or of comments, read where the reader
# reads an operand
from xlashape import hlo_syntax
text = "f32[4]" + " " * 4_000_000 + "/**/" * 1_000_000 + "{0} %p"
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm() + 400 * 2**20, hard))
shape, end = hlo_syntax._shape_at(text, 0, {})
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
assert end == len(text) - 3, end
print("ok")
"""


def test_a_long_op_name_is_read_without_memory_per_character(tmp_path):
    # found by the fuzz harness (seed 2929): an 8 MB op_name took 1.4 GB
    proc = subprocess.run([sys.executable, "-c", _LONG_OP_NAME, str(tmp_path / "m.hlo")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["ok"]
