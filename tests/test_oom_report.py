"""xlashape.oom_report: TPU out-of-memory reports, against what libtpu
itself printed (``tests/data/tpu_corpus/*/oom``: the exception text of a
compile that ran out of HBM, and libtpu's WARNING log of the same compile
with ``--xla_tpu_no_crash_on_oom=true``, glog prefixes included), and the
hand-written report in ``tests/data/oom_report.txt``.

Golden values are the files' own text, read with the regular expressions
in this file; the padded sizes libtpu prints are checked against
``tiling.format_bytes(physical_size_in_bytes(shape))``, XLA's arithmetic
written out independently in ``xlashape.tiling``.
"""

import io
import re
from pathlib import Path

import pytest

from xlashape import tiling
from xlashape.hlo_module import MAX_KEPT_WARNINGS
from xlashape.memory import analyze
from xlashape.oom_report import (
    BREAKDOWN_HINT,
    looks_like_oom_report,
    parse_size,
    read_oom_reports,
)

DATA = Path(__file__).parent / "data"
OOM_DIRS = sorted(p for p in (DATA / "tpu_corpus").glob("*/oom") if p.is_dir())

_DETAILED = re.compile(r"Ran out of memory in memory space (\w+)\. Used (\S+) of (\S+) \w+\. "
                       r"Exceeded \w+ capacity by (\S+)\.")
_ENTRY = re.compile(r"^\s+(\d+)\. Size: (\S+)$")
_SHAPE = re.compile(r"^\s+Shape: (.*)$")


def _detailed_lines(path):
    """Independent reading of a log: per report (space, used, limit, excess)
    and its allocations [(rank, size text, shape text)]."""
    reports = []
    for line in Path(path).read_text().splitlines():
        m = _DETAILED.search(line)
        if m:
            reports.append((m.groups(), []))
            continue
        m = _ENTRY.match(line)
        if m and reports:
            reports[-1][1].append([int(m.group(1)), m.group(2), None])
            continue
        m = _SHAPE.match(line)
        if m and reports and reports[-1][1]:
            reports[-1][1][-1][2] = m.group(1).strip()
    return reports


def test_the_fixtures_are_there():
    assert len(OOM_DIRS) >= 3


@pytest.mark.parametrize("d", OOM_DIRS, ids=lambda p: p.parent.name)
def test_libtpu_logs_read_as_libtpu_printed_them(d):
    log = d / "tpu_driver.WARNING.txt"
    expected = _detailed_lines(log)
    seen = []
    reports = read_oom_reports(log.read_text(), on_warning=seen.append)
    assert seen == []
    assert [(r.memory_space, r.used_text, r.limit_text, r.excess_text) for r in reports] == [
        e[0] for e in expected]
    assert all(r.form == "detailed" and r.has_breakdown for r in reports)
    for r, (_, entries) in zip(reports, expected):
        assert [(a.rank, a.size_text, a.shape_text) for a in r.allocations] == [
            tuple(e) for e in entries]
        for a in r.allocations:
            if a.shape_text is not None:
                assert a.shape is not None and str(a.shape) == a.shape_text
        assert r.excess_bytes == parse_size(r.excess_text)
    # a file object and the lines read the same as the text
    with open(log) as f:
        from_file = read_oom_reports(f)
    assert [len(r.allocations) for r in from_file] == [len(r.allocations) for r in reports]


@pytest.mark.parametrize("d", OOM_DIRS, ids=lambda p: p.parent.name)
def test_padded_sizes_are_what_the_tiling_gives(d):
    # "Size:" is the padded size of the array, as libtpu rounds it
    checked = 0
    for r in read_oom_reports((d / "tpu_driver.WARNING.txt").read_text()):
        for a in r.allocations:
            if a.shape is None or a.shape.is_tuple or a.shape.layout is None:
                continue
            assert tiling.format_bytes(tiling.physical_size_in_bytes(a.shape)) == a.size_text, (
                a.shape_text)
            checked += 1
    assert checked > 0 or "arguments" in d.parent.name


@pytest.mark.parametrize("d", OOM_DIRS, ids=lambda p: p.parent.name)
def test_the_two_line_exception_holds_totals_only(d):
    text = (d / "exception.txt").read_text()
    m = re.search(r"Ran out of memory on (\w+), .*\((\S+)\) exceeds available \w+ \((\S+)\)\. "
                  r"HLO module: (\S+)\.", text)
    assert looks_like_oom_report(text)
    (r,) = read_oom_reports(text)
    assert (r.form, r.memory_space, r.used_text, r.limit_text, r.module_name) == (
        "short", m.group(1).lower(), m.group(2), m.group(3), m.group(4))
    assert not r.has_breakdown and r.allocations == []
    assert r.excess_bytes == parse_size(m.group(2)) - parse_size(m.group(3))
    (mm,) = analyze(text).modules
    assert any(BREAKDOWN_HINT in w for w in mm.warnings)


def test_a_log_path_and_its_text_give_the_same_analysis():
    d = OOM_DIRS[0]
    log = d / "tpu_driver.WARNING.txt"
    a = analyze(log)
    b = analyze(log.read_text())
    assert a.kind == b.kind == "oom"
    assert [m.memory_used_bytes for m in a.modules] == [m.memory_used_bytes for m in b.modules]


def test_hand_written_report_entries():
    (r,) = read_oom_reports((DATA / "oom_report.txt").read_text())
    assert (r.used_text, r.limit_text, r.excess_text) == ("18.94G", "15.75G", "3.19G")
    first = r.allocations[0]
    assert (first.size_text, first.unpadded_text, first.instruction_name) == (
        "2.00G", "2.00G", "fusion.1265")


def test_sizes_as_libtpu_prints_them():
    assert [parse_size(t) for t in ("512B", "1.0K", "2.00G", "1.50G", "0B")] == [
        512, 1024, 2 << 30, 3 << 29, 0]
    assert parse_size("lots") is None and parse_size(None) is None


def test_bad_shapes_in_a_long_report_are_counted_not_all_kept():
    head = ("Ran out of memory in memory space hbm. Used 18.94G of 15.75G hbm. "
            "Exceeded hbm capacity by 3.19G.\n  Largest program allocations in hbm:\n")
    n = 2 * MAX_KEPT_WARNINGS + 5
    entries = "".join(f"  {i + 1}. Size: 1.00K\n     Shape: f32[zz]\n     ==========\n"
                      for i in range(n))
    seen = []
    (r,) = read_oom_reports(io.StringIO(head + entries), on_warning=seen.append)
    assert len(r.allocations) == n and len(seen) == n
    assert all(a.shape is None and a.shape_text == "f32[zz]" for a in r.allocations)
    result = analyze(head + entries)
    assert result.warnings.total == n and len(result.warnings) == MAX_KEPT_WARNINGS
