"""The rows of ``xlashape hlo --json`` (``xlashape/cli/_hlo_json.pyx``) and the
sink through which the compiled scanner hands them its instructions.

The rows have three routes (the Python writer, the C writer fed by the
command's loop, the C writer fed by the scanner through ``JsonRows``); they
must give the same bytes and the same summary as the Python writer alone,
which is what ``XLASHAPE_PURE_PYTHON=1`` (``compiled=False``) runs.
``tests/test_hloscan.py`` compares the command's output both ways; here the
same is done in-process, with the summary's counts, on every test module, a
generated module and mutated text, and the reader's side of the contract
(``InstructionSink``) is checked on its own.
"""

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

from corpora import hlo_texts
from strategies import edited_lines
from xlashape import _hloscan
from xlashape.errors import ShapeTypeError
from xlashape.cli import _hlo_json
from xlashape.cli._output import JsonArrayWriter
from xlashape.cli.hlo import _ALIASED_ELEMENT, HloSummary
from xlashape.hlo_module import HloReader, TextBlocks, scan_calls, uses_compiled_scanner

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))

pytestmark = pytest.mark.skipif(not uses_compiled_scanner(),
                                reason="the compiled scanner is off (XLASHAPE_PURE_PYTHON=1)")


TEXTS = hlo_texts()


def rows_and_summary(text, compiled, top=5):
    """(--json output, the summary's counts and report) of ``text``, written
    with or without the compiled routes."""
    warnings = []
    reader = HloReader(warnings.append, call_kinds=scan_calls(text), streaming=True)
    summary = HloSummary(top)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jsonw = JsonArrayWriter()
        lines = TextBlocks(io.StringIO(text))
        if compiled:
            _hlo_json.write_rows(reader, lines, summary, jsonw, warnings.append,
                                 _ALIASED_ELEMENT, compiled=True)
        else:
            # the scanner off too, as XLASHAPE_PURE_PYTHON=1 does
            os.environ["XLASHAPE_PURE_PYTHON"] = "1"
            try:
                _hlo_json.write_rows(reader, lines, summary, jsonw, warnings.append,
                                     _ALIASED_ELEMENT, compiled=False)
            finally:
                os.environ.pop("XLASHAPE_PURE_PYTHON", None)
        jsonw.close()
    counts = (summary.count, summary.views, summary.embedded, summary.tokens, summary.unknown,
              summary.embedded_state[1])
    assert reader.instruction_sink is None     # the sink is taken off the reader again
    return out.getvalue(), counts, summary.report(), [str(w) for w in warnings]


def _count_instruction_lines(text):
    # independent of the reader: lines "  [ROOT ]%?name = ..." inside braces,
    # in modules whose instructions are all on one line
    n = 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("ROOT "):
            s = s[5:]
        head = s.split(" = ", 1)[0]
        if " = " in s and head and " " not in head and not s.startswith(("HloModule", "ENTRY")):
            n += 1
    return n


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_rows_and_summary_are_the_python_writers(name):
    fast = rows_and_summary(TEXTS[name], True)
    slow = rows_and_summary(TEXTS[name], False)
    assert fast == slow
    rows = json.loads(fast[0])
    assert len(rows) == fast[1][0]


@pytest.fixture(scope="module")
def generated():
    import bench_hlo
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "module.txt"
        bench_hlo.generate(str(p), 1.0, seed=11)
        return p.read_text()


def test_a_generated_module(generated):
    fast = rows_and_summary(generated, True, top=3)
    assert fast == rows_and_summary(generated, False, top=3)
    rows = json.loads(fast[0])
    # one row per instruction line, counted without the reader
    assert len(rows) == _count_instruction_lines(generated) == fast[1][0]
    assert {r["result"] for r in rows} >= {"buffer", "view", "embedded"}
    # every row's sizes are its shape's
    for r in rows[:2000]:
        if r["bytes"] is not None:
            assert r["waste"] == r["padded_bytes"] - r["bytes"]


_BASE = (TEXTS.get("tpu_module.hlo", "") + "\n" + TEXTS.get("seed_examples.hlo", "")).splitlines()
_NOISE = list(' ,={}()[]"\\%/*\t') + ["ROOT ", "/*index=5*/", ", kind=kLoop", ', kind="a\\"b"',
                                         "\u00e9", "\x01", ", calls=%x", ", to_apply={%a, %b}",
                                         "f32[2]{0} "]


@settings(max_examples=120, deadline=None)
@given(edited_lines(_BASE, _NOISE))
def test_mutated_text_gives_the_same_rows(text):
    # escapes, control characters, inline operand shapes and odd attributes
    # send rows to the Python writer in the middle of a scan: the order and
    # the bytes must not change
    assert rows_and_summary(text, True) == rows_and_summary(text, False)


def _read(text, sink):
    reader = HloReader(call_kinds=scan_calls(text))
    reader.instruction_sink = sink
    return [(i.computation, i.name, str(i.shape), i.opcode, i.is_root, i.line, i.operands_text,
             i.attributes_text, i.result) for i in reader.read(io.StringIO(text))]


@pytest.mark.parametrize("name", ["tpu_module.hlo", "small_dump.hlo"])
def test_a_sink_that_takes_nothing_changes_nothing(name):
    # the base InstructionSink declines every instruction: each becomes an
    # Instruction, in order, as with no sink at all
    text = TEXTS[name]
    got = _read(text, _hloscan.InstructionSink())
    assert got == _read(text, None)
    assert len(got) == _count_instruction_lines(text) > 10


def test_a_sink_must_be_an_instruction_sink():
    reader = HloReader()
    reader.instruction_sink = object()
    with pytest.raises(ShapeTypeError, match="InstructionSink, not object"):
        list(reader.read(io.StringIO("ENTRY %e {\n  ROOT %p = f32[2]{0} parameter(0)\n}\n")))


def test_the_reader_and_scanner_know_no_output_format():
    # what a consumer makes of instructions lives with the consumer (cli/)
    assert not [n for n in dir(_hloscan) if "json" in n.lower()]
    assert not [n for n in vars(HloReader()) if "json" in n.lower()]
    source = (Path(_hloscan.__file__).parent / "_hloscan.pyx")
    if source.exists():
        code = [ln for ln in source.read_text().splitlines()
                if not ln.lstrip().startswith("#")]
        assert "json" not in "\n".join(code).split('"""', 2)[-1].lower()
