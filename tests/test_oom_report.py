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

from xlashape import parse_shape, tiling
from xlashape.hlo_module import MAX_KEPT_WARNINGS, memory_footprint
from xlashape.memory import analyze
from xlashape import oom_report
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


def test_hand_written_report_allocations():
    # (what the HLO reader's out-of-memory mode gave, before oom_report became
    # the one reader of reports)
    (r,) = read_oom_reports((DATA / "oom_report.txt").read_text())
    assert [a.instruction_name for a in r.allocations] == ["fusion.1265", "broadcast.3115",
                                                           "copy.77"]
    b = r.allocations[1]
    assert b.shape == parse_shape("bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)}")
    assert (b.size_text, b.unpadded_text, b.allocation_type) == ("2.50G", "320.00M", "HLO temp")
    assert b.line == 30 and b.report == 1
    fp = memory_footprint(b.shape)
    assert fp.bytes == 8 * 1280 * 16384 * 2
    assert fp.padded_bytes == 8 * 1280 * 8 * 16384 * 2


def test_a_bad_shape_in_a_report_warns_with_its_line():
    text = "Ran out of memory in memory space hbm.\n  1. Size: 1.00G\n     Shape: f32[2,{0}\n"
    seen = []
    (r,) = read_oom_reports(text, on_warning=seen.append)
    (a,) = r.allocations
    assert a.shape is None and a.shape_text == "f32[2,{0}"
    (w,) = seen
    assert w.line == 3 and "bad shape in report" in w.message


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


# -- XLA:GPU ---------------------------------------------------------------------------

GPU_OOM = DATA / "gpu_corpus" / "oom"
GPU_PROGRAMS = ["dev_oom_broadcast_output", "dev_oom_three_temps"]
_GPU_EXC = re.compile(r"Out of memory while trying to allocate (\S+) with allocator (\w+)")
_GPU_ROUNDED = re.compile(r"\(rounded to (\d+)\)")
_GPU_BASE = re.compile(r"exceeds the base limit \((\d+)\)")
_GPU_REMAT = re.compile(r"only reduced to \S+ \((\d+) bytes\)")


@pytest.mark.parametrize("name", GPU_PROGRAMS)
def test_gpu_exception_and_log_read_as_xla_printed_them(name):
    exc = (GPU_OOM / f"{name}.txt").read_text()
    log = (GPU_OOM / f"{name}.log.txt").read_text()
    size, allocator = _GPU_EXC.search(exc).groups()
    assert looks_like_oom_report(exc) and looks_like_oom_report(log)
    (r,) = read_oom_reports(exc)
    assert (r.platform, r.requested_text, r.allocator) == ("gpu", size, allocator)
    assert r.executable_name == "jit__lambda" and r.memory_limit_bytes is None
    # the log adds the allocator's rounding, the limit XLA compiled for, the remat warning
    (r,) = read_oom_reports(log + "\n" + exc)
    assert r.requested_text == size
    assert r.requested_bytes == r.rounded_bytes == int(_GPU_ROUNDED.search(log).group(1))
    assert r.memory_limit_bytes == int(_GPU_BASE.search(log).group(1))
    assert r.remat.reduced_to_bytes == int(_GPU_REMAT.search(log).group(1))
    # the printed size is the rounded request, as tsl prints it
    assert f"{r.rounded_bytes / (1 << 30):.2f}GiB" == size


@pytest.mark.parametrize("name", GPU_PROGRAMS)
def test_gpu_oom_with_the_dump_names_the_buffers_of_that_size(name):
    # the dump: the same jax program compiled by XLA:CPU (tests/oracle/gen_gpu_oom_dumps.py)
    text = (GPU_OOM / f"{name}.log.txt").read_text() + (GPU_OOM / f"{name}.txt").read_text()
    dump = GPU_OOM / f"{name}.cpu_dump"
    (mm,) = analyze(text, dump=dump).modules
    o = mm.oom
    rounded = int(_GPU_ROUNDED.search(text).group(1))
    assert (o.form, o.requested_bytes, o.allocator) == ("gpu", rounded, "GPU_0_bfc")
    assert mm.memory_limit_bytes == int(_GPU_BASE.search(text).group(1))
    ba = next(dump.glob("*buffer-assignment.txt")).read_text()
    sizes = [int(s) for s in re.findall(r"^allocation \d+: size (\d+)", ba, re.M)]
    expected = [s for s in sizes if -(-s // 256) * 256 == rounded]
    assert expected and [b["size_in_bytes"] for b in o.matching_buffers] == expected
    d = mm.to_json()
    assert d["oom"]["requested_bytes"] == rounded and d["oom"]["allocator"] == "GPU_0_bfc"
    assert d["memory_limit_bytes"] == mm.memory_limit_bytes


_BFC_OLD = """\
2021-10-12 20:59:07.627340: W tensorflow/core/common_runtime/bfc_allocator.cc:457] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.25KiB (rounded to 1280)requested by op Add
If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation.
Current allocation summary follows.
2021-10-12 20:59:07.627400: I tensorflow/core/common_runtime/bfc_allocator.cc:1010] BFCAllocator dump for GPU_0_bfc
2021-10-12 20:59:07.627500: I tensorflow/core/common_runtime/bfc_allocator.cc:1066] 3 Chunks of size 1073741824 totalling 3.00GiB
2021-10-12 20:59:07.627600: I tensorflow/core/common_runtime/bfc_allocator.cc:1070] Sum Total of in-use chunks: 3.00GiB
2021-10-12 20:59:07.627700: I tensorflow/core/common_runtime/bfc_allocator.cc:1072] total_region_allocated_bytes_: 3221225472 memory_limit_: 3221225472 available bytes: 0 curr_region_allocation_bytes_: 6442450944
2021-10-12 20:59:07.627800: I tensorflow/core/common_runtime/bfc_allocator.cc:1078] Stats: 
Limit:                      3221225472
InUse:                      3221225472
MaxInUse:                   3221225472
NumAllocs:                           3
MaxAllocSize:               1073741824
Reserved:                            0
PeakReserved:                        0
LargestFreeBlock:                    0
"""

_BFC_NEW = """\
W1126 01:17:38.730092    2958 bfc_allocator.cc:598] Allocator (GPU_1_bfc) ran out of memory trying to allocate 2.00MiB (rounded to 2097152) from the lower end requested by op 
If this is caused by memory fragmentation, the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' may improve the situation.
Current allocation summary follows.
I1126 01:17:38.730100    2958 bfc_allocator.cc:1100] Allocator memory summary: rounded request 2.00MiB, total free in pool 1.00MiB, largest free chunk usable by lower end 1.00MiB, unallocated bytes 0B, pool size 4.00GiB, pool limit 4.00GiB
"""


def test_gpu_allocator_log_variants_from_the_source_formats():
    # bfc_allocator.cc's failure line and DumpMemoryLog, AllocatorStats::DebugString
    (r,) = read_oom_reports(_BFC_OLD)
    assert (r.allocator, r.requested_text, r.rounded_bytes, r.requested_bytes) == (
        "GPU_0_bfc", "1.25KiB", 1280, 1280)
    # the summary's memory_limit_ and the stats' Limit: both exact, the first read is kept
    assert (r.memory_limit_bytes, r.memory_limit_source) == (
        3221225472, "the allocator's summary (memory_limit_)")
    (r,) = read_oom_reports(_BFC_OLD.replace("memory_limit_: 3221225472", ""))
    assert (r.memory_limit_bytes, r.memory_limit_source) == (
        3221225472, "the allocator's stats (Limit)")
    assert r.in_use_bytes == 3221225472 and r.chunks_in_use == [(3, 1073741824)]
    assert r.largest_free_block_bytes == 0 and r.op_name == "Add"
    (r,) = read_oom_reports(_BFC_NEW)
    assert (r.allocator, r.rounded_bytes) == ("GPU_1_bfc", 2097152)
    # only the rounded "pool limit" is printed: it is used, and said to be rounded
    assert r.memory_limit_bytes == 4 << 30 and "rounded" in r.memory_limit_source


def test_gpu_messages_variants_from_the_source_formats():
    # tf_allocator_adapter.cc: the byte count, device memory and host memory
    (r,) = read_oom_reports("RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                            "33762398024 bytes.")
    assert (r.requested_bytes, r.requested_exact, r.host_memory, r.allocator) == (
        33762398024, True, False, None)
    (r,) = read_oom_reports("RESOURCE_EXHAUSTED: Out of host memory while trying to allocate "
                            "1024 bytes. Please set the environment variable "
                            "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB to allocate larger host memory")
    assert r.host_memory and r.requested_bytes == 1024
    # the stream executor's allocator
    (r,) = read_oom_reports("Failed to allocate request for 10.01GiB (10750000000B) on device "
                            "ordinal 0")
    assert (r.requested_bytes, r.requested_exact, r.device) == (10750000000, True, 0)
    # the autotuner running out while trying algorithms: the program may still fit
    (r,) = read_oom_reports(
        "W0101 gpu_conv_algorithm_picker.cc:729] Failed to determine best cudnn convolution "
        "algorithm: Resource exhausted: Out of memory while trying to allocate 16777716 bytes.")
    assert r.origin == "autotuner" and r.requested_bytes == 16777716
    # the wording issue 18 quotes for XLA's autotuner ("Failed to get configs ... Out of memory")
    (r,) = read_oom_reports("E0000 autotuner_pass.cc:140] Failed to get configs for fusion.3: "
                            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.00GiB.")
    assert (r.origin, r.requested_bytes, r.requested_exact) == ("autotuner", 2 << 30, False)
    # the rematerialization warning without byte counts (older XLA), on its own
    (r,) = read_oom_reports("W0130 11:23:59.296923 hlo_rematerialization.cc:3204] Can't reduce "
                            "memory use below 2.52GiB by rematerialization; only reduced to "
                            "631.67GiB")
    assert r.requested_text is None and r.remat.reduced_to_bytes == round(631.67 * (1 << 30))
    # the allocator's "not a failure" warning alone is no failure
    assert read_oom_reports(
        "W bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
        "16.02GiB with freed_by_count=0. The caller indicates that this is not a failure, but "
        "this may mean that there could be performance gains if more memory were available.") == []


def test_tpu_logs_keep_xlas_remat_warning_with_the_report():
    # libtpu's log holds XLA's rematerialization warning too: it is no GPU report
    log = (DATA / "tpu_corpus" / "oom_arguments_v4" / "oom" / "tpu_driver.WARNING.txt").read_text()
    reports = read_oom_reports(log)
    assert all(r.platform == "tpu" for r in reports)
    m = _GPU_REMAT.search(log)
    assert reports[0].remat.reduced_to_bytes == int(m.group(1))


def test_several_reports_of_one_log_the_last_counts():
    log = (DATA / "tpu_corpus" / "oom_gather_v6e" / "oom" / "tpu_driver.WARNING.txt").read_text()
    reports = read_oom_reports(log)
    distinct = oom_report.distinct_reports(reports)
    assert len(distinct) < len(reports)
    assert oom_report.counted_report(reports) is distinct[-1]
    assert distinct[-1].line == max(r.line for r in reports if r.form == "detailed")


def test_gpu_log_numbers_of_thousands_of_digits_are_not_read():
    # int() of 4300+ digits raises a builtin ValueError: such a line is not
    # one of XLA's (its numbers are int64) and is skipped
    import io
    from xlashape.oom_report import read_oom_reports
    huge = "9" * 5000
    text = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 150.00GiB with allocator GPU_0_bfc\n"
            f"The byte size of input/output arguments ({huge}) exceeds the base limit ({huge})\n"
            f"Limit:      {huge}\n"
            f"{huge} Chunks of size {huge} totalling 1.00GiB\n")
    (report,) = read_oom_reports(io.StringIO(text))
    assert report.memory_limit_bytes is None
    assert report.chunks_in_use == []


# -- XLA:GPU's autotuner running out of memory (issue 25) -------------------------------
#
# One compile-time event: XLA's autotuner could not time any configuration of
# some instructions (data/gpu_oom_written: written in the formats of XLA's
# sources, see its README). The expected figures are read from the files with
# the regular expressions below, not from the parser.

AUTOTUNE = DATA / "gpu_oom_written"
_AT_SUMMARY = re.compile(r"Failed to get configs for: (\d+) out of (\d+) instructions")
_AT_INSTR = re.compile(r"Could not get config for HLO: %([\w.]+) = (\S+) ")
_AT_FAILURES = re.compile(r"^Failures \((\d+)\):$", re.M)
_AT_OOM = re.compile(r"^EXECUTION FAILED: RESOURCE_EXHAUSTED: Out of memory while trying to "
                     r"allocate (\S+) with allocator (\w+)", re.M)


def _autotune_expected(text):
    """What the text says, read independently: the summary's counts, the
    instructions the log names with their shapes, the failures listed per
    block (the log's blocks, before the exception's example), the request."""
    logged, _, example = text.partition("Example failure")
    summary = _AT_SUMMARY.search(text)
    return dict(failed=int(summary.group(1)), total=int(summary.group(2)),
                names=_AT_INSTR.findall(logged),
                logged_failures=[int(n) for n in _AT_FAILURES.findall(logged)],
                example_failures=[int(n) for n in _AT_FAILURES.findall(example)],
                oom_lines=len(_AT_OOM.findall(text)), logged_oom=len(_AT_OOM.findall(logged)),
                example_oom=len(_AT_OOM.findall(example)),
                requests=sorted(set(m[0] for m in _AT_OOM.findall(text))),
                allocators=sorted(set(m[1] for m in _AT_OOM.findall(text))),
                limit=[int(x) for x in _GPU_BASE.findall(text)])


def test_gpu_autotuner_oom_in_xlas_log_is_one_compile_time_event():
    from cli_util import ok
    path = AUTOTUNE / "autotuner_oom.log.txt"
    exp = _autotune_expected(path.read_text())
    assert exp["oom_lines"] == 39 and len(exp["names"]) == 2 and exp["limit"] == [120087904256]
    out = ok("memory", path).stdout
    lines = out.splitlines()
    # one report, not one per repeated line; nothing of libtpu's wording
    assert lines[0] == f"{path}: 1 out-of-memory report"
    assert "libtpu" not in out and "needs ? of ?" not in out and "earlier reports" not in out
    assert "the allocation failed when the program ran" not in out
    assert lines[1].startswith("XLA:GPU out of memory while compiling (XLA's autotuner)")
    text = " ".join(out.split())
    # which instructions, with their shapes, and how many configurations failed
    assert f"instructions it could not configure: {exp['failed']} of {exp['total']}" in text
    for (name, shape), n in zip(exp["names"], exp["logged_failures"]):
        assert re.search(rf"^    {re.escape(name)}  {re.escape(shape)} \(256\.00G\): {n} "
                         rf"configurations failed, {n} out of memory$", out, re.M), name
    # what each configuration asked for, against the limit the scheduler logged
    (request,) = exp["requests"]
    limit = exp["limit"][0]
    assert f"each configuration it tried asked for {request}, more than the " \
           f"{tiling.format_bytes(limit)} limit" in text
    assert f"memory limit: {tiling.format_bytes(limit)} ({limit} bytes, from XLA's scheduler's " \
           "base limit" in text
    assert tiling.format_bytes(limit) == "111.84G"
    # what to do
    advice = text.split("what to do:")[1]
    for hint in ("make the instruction smaller", "--xla_gpu_autotune_level",
                 "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        assert hint in advice
    # --json: the same event
    import json
    (m,) = json.loads(ok("memory", path, "--json").stdout)["modules"]
    o = m["oom"]
    assert o["origin"] == "autotuner" and m["memory_limit_bytes"] == limit
    at = o["autotune"]
    assert (at["failed_instructions"], at["instructions"]) == (exp["failed"], exp["total"])
    assert [(f["name"], f["shape"]) for f in at["failed"]] == exp["names"]
    assert [f["configs_failed"] for f in at["failed"]] == exp["logged_failures"]
    assert at["configs_failed"] == sum(exp["logged_failures"])
    assert at["out_of_memory"] == exp["logged_oom"] and at["repeats"] == exp["oom_lines"]
    assert at["requested"] == exp["requests"] and not at["from_example"]
    assert [f["size_in_bytes"] for f in at["failed"]] == [262144 * 262144 * 4] * 2
    assert o["requested_text"] == request and o["allocator"] in exp["allocators"]
    assert any("--xla_gpu_autotune_level" in a for a in o["advice"])
    # the arguments and outputs alone are over the limit: said once, as a note
    io = int(re.search(r"input/output arguments \((\d+)\)", path.read_text()).group(1))
    assert o["io_bytes"] == io > limit
    assert any(f"({io} bytes), more than the {tiling.format_bytes(limit)} limit" in n
               for n in m["notes"])


def test_gpu_autotuner_oom_from_the_exception_alone():
    from cli_util import ok
    path = AUTOTUNE / "autotuner_oom.txt"
    exp = _autotune_expected(path.read_text())
    assert exp["names"] == [] and exp["limit"] == []
    out = ok("memory", path).stdout
    assert out.splitlines()[0] == f"{path}: 1 out-of-memory report"
    assert "libtpu" not in out and "?" not in out.replace("?)", "")
    text = " ".join(out.split())
    assert (f"instructions it could not configure: {exp['failed']} of {exp['total']} "
            "(the exception names none)") in text
    (n,) = exp["example_failures"]
    assert f"the exception's example: {n} configurations failed, {exp['example_oom']} out of " \
           "memory" in text
    assert "Could not get config for HLO" in text          # where the names are
    assert "the memory limit is not in this text" in text
    import json
    (m,) = json.loads(ok("memory", path, "--json").stdout)["modules"]
    at = m["oom"]["autotune"]
    assert at["from_example"] and at["failed"] == [] and at["configs_failed"] == n
    assert m["memory_limit_bytes"] is None


def test_gpu_autotuner_variants_from_the_source_formats():
    oom = ("EXECUTION FAILED: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
           "8.00GiB with allocator GPU_0_bfc on device 0. [tf-allocator-allocation-error='']")
    # the exception pasted onto one line: still one event, three failures
    (r,) = read_oom_reports("NOT_FOUND: Failed to get configs for: 1 out of 3 instructions. "
                            "See logs for all failures. Example failure: All configs failed "
                            f"during profiling. Failures (3): {oom} {oom} {oom}")
    assert r.origin == "autotuner" and r.attempts == 3
    (b,) = r.autotune.blocks
    assert (b.listed, b.failures, b.out_of_memory, b.requests) == (3, 3, 3, ["8.00GiB"])
    # autotuner.cc's wording (an INTERNAL error naming the instruction), the
    # allocator's own lines between the failures, the scheduler's line after
    text = "\n".join([
        "E0101 00:00:01.000000 1 autotuner.cc:200] INTERNAL: Autotuning failed for HLO: "
        "%gemm_fusion_dot.1 = (bf16[65536,65536]{1,0}, s8[1048576]{0}) fusion(%a, %b), "
        "kind=kCustom with error: NOT_FOUND: All configs failed during profiling.",
        "Failures (2):",
        oom,
        "W0101 00:00:01.100000 1 bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory "
        "trying to allocate 8.00GiB (rounded to 8589934592)requested by op ",
        oom,
        "E0101 00:00:02.000000 1 gpu_hlo_schedule.cc:1068] The byte size of input/output "
        "arguments (100) exceeds the base limit (4294967296). This indicates an error in the "
        "calculation!",
    ])
    (r,) = read_oom_reports(text)
    (b,) = r.autotune.blocks
    assert b.instruction == "gemm_fusion_dot.1" and b.shape.is_tuple
    assert b.shape_text == "(bf16[65536,65536]{1,0}, s8[1048576]{0})"
    assert (b.configs_failed, b.out_of_memory) == (2, 2)
    assert r.rounded_bytes == 8 << 30 and r.memory_limit_bytes == 4 << 30
    # a failure of the program's run after it is a failure of its own
    run_oom = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB with "
               "allocator GPU_0_bfc on device 0. [executable_name='jit_f']")
    first, second = read_oom_reports(text + "\n" + run_oom)
    assert first.autotune is not None and second.autotune is None
    assert second.origin == "allocator" and second.executable_name == "jit_f"
    # configurations that failed for another reason than memory: no out-of-memory report
    assert read_oom_reports("Failed to get configs for: 1 out of 1 instructions. Example "
                            "failure: \nAll configs failed during profiling.\nFailures (1):\n"
                            "COMPILATION FAILED: INTERNAL: ptxas error") == []


def test_gpu_reports_of_one_log_are_listed_in_gpu_terms():
    from cli_util import ok
    # two failures of XLA:GPU in one log (the two real exceptions with their logs)
    text = "".join((GPU_OOM / f"{n}{ext}").read_text() + "\n"
                   for n in GPU_PROGRAMS for ext in (".log.txt", ".txt"))
    out = ok("memory", "-", input=text).stdout
    lines = out.splitlines()
    assert lines[0] == "<stdin>: 2 out-of-memory reports"
    assert "libtpu" not in out and "needs ?" not in out
    size = _GPU_EXC.search((GPU_OOM / f"{GPU_PROGRAMS[0]}.txt").read_text()).group(1)
    assert lines[1].startswith("earlier reports in the same log")
    assert lines[2] == f"  jit__lambda: {size} in GPU_0_bfc (the allocator), limit " \
                       f"{tiling.format_bytes(int(_GPU_BASE.search(text).group(1)))}"


def test_hlo_on_the_autotuner_error_says_what_it_is():
    from cli_util import one_error_line
    r = one_error_line("hlo", AUTOTUNE / "autotuner_oom.log.txt")
    assert "autotuner" in r.stderr and "256.02GiB" in r.stderr and "--dump" not in r.stderr


def test_gpu_autotuner_oom_on_the_page(tmp_path):
    import html
    from cli_util import ok
    path = AUTOTUNE / "autotuner_oom.log.txt"
    exp = _autotune_expected(path.read_text())
    page = tmp_path / "r.html"
    ok("memory", path, "--html", page)
    shown = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())).split())
    assert "libtpu" not in shown and "lists the allocations the compiler could not place" not in shown
    for (name, shape), n in zip(exp["names"], exp["logged_failures"]):
        assert f"{name} {shape} (256.00G): {n} configurations failed" in shown
    assert "--xla_gpu_autotune_level" in shown and "XLA_PYTHON_CLIENT_MEM_FRACTION" in shown
