"""xlashape.xla_dump: dump directories, buffer assignments and memory-usage
reports, against the files XLA itself wrote (``tests/data/cpu_dump``, the
``dump/`` directories of the XLA:TPU corpus in ``tests/data/tpu_corpus``).

Golden values: the files' own numbers read with the minimal parser in this
file, and an invariant of XLA's output (each memory space's "Total bytes" in
the memory-usage report is the sum of the sizes of that colour's
allocations in the buffer assignment). The hardening tests build broken
dump directories (dangling and looping links, FIFOs, devices) around copies
of the real files.
"""

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xlashape import UnreadableInputError, XlaShapeError
from xlashape.hlo_module import MAX_KEPT_WARNINGS
from xlashape.memory import analyze
from xlashape.xla_dump import (
    ALLOCATION_KINDS,
    DumpWarning,
    find_dump_modules,
    iter_buffer_assignment,
    read_buffer_assignment,
    read_memory_usage_report,
)

DATA = Path(__file__).parent / "data"
CPU_DUMP = DATA / "cpu_dump"
CORPUS = DATA / "tpu_corpus"
DUMPS = sorted([CPU_DUMP] + [p for p in CORPUS.glob("*/dump") if p.is_dir()]
               + [p for p in CORPUS.glob("*/example_dump") if p.is_dir()]
               + [p for p in CORPUS.glob("*/oom/dump") if p.is_dir()])
BUFFER_ASSIGNMENTS = sorted(p for d in DUMPS for p in d.rglob("*-buffer-assignment.txt"))
ROOT = Path(__file__).resolve().parents[1]


def allocations_of(path):
    """Independent reading: [(number, size, colour, value count)]."""
    out = []
    for line in Path(path).read_text().splitlines():
        m = re.match(r"allocation (\d+): size (\d+), (.*):$", line)
        if m:
            c = re.search(r"\bcolor (\d+)", m.group(3))
            out.append([int(m.group(1)), int(m.group(2)), int(c.group(1)) if c else 0, 0])
        elif line.startswith(" value: <"):
            out[-1][3] += 1
    return [tuple(a) for a in out]


def report_totals(path):
    """Independent reading of a memory-usage report: {colour: total bytes}."""
    text = Path(path).read_text()
    return {int(m.group(2)): int(m.group(3)) for m in re.finditer(
        r"Memory Space: (\S+) \(color=(\d+)\)\nTotal bytes: (\d+)", text)}


def test_the_fixtures_are_there():
    assert len(DUMPS) >= 2 and len(BUFFER_ASSIGNMENTS) >= 2


# -- dump directories ---------------------------------------------------------------------


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: str(p.relative_to(DATA)))
def test_every_module_of_a_real_dump_is_found_with_its_files(dump):
    names = sorted(p.name for p in dump.rglob("*") if p.is_file())
    texts = [n for n in names if n.endswith("after_optimizations.txt")]
    seen = []
    modules = find_dump_modules(dump, on_warning=seen.append)
    assert seen == []
    assert sorted(os.path.basename(m.hlo_path) for m in modules) == texts
    for m in modules:
        assert m.optimized and m.hlo_path.endswith(m.key + "after_optimizations.txt")
        assert m.number == int(re.match(r"module_(\d+)\.", m.key).group(1))
        for attr, suffix in (("buffer_assignment_path", "-buffer-assignment.txt"),
                             ("memory_report_path", "-memory-usage-report.txt")):
            expected = m.key + "after_optimizations" + suffix
            got = getattr(m, attr)
            assert (got is not None) == (expected in names), attr
            if got is not None:
                assert os.path.basename(got) == expected
    assert [m.number for m in modules] == sorted(m.number for m in modules)


def test_two_modules_of_two_platforms_in_one_dump():
    # host_offload: the TPU module and the XLA:CPU module of its host
    # computation; XLA names the CPU one "cpu_after_optimizations"
    modules = find_dump_modules(CORPUS / "host_offload" / "dump")
    assert [(m.number, m.key.split(".")[1]) for m in modules] == [
        (0, "jit_offload"), (4, "called_computation")]
    assert modules[1].key.endswith(".cpu_")
    assert all(m.buffer_assignment_path and m.memory_report_path for m in modules)


def test_before_optimizations_alone_is_found_and_flagged(tmp_path):
    src = CORPUS / "conv" / "dump"
    (before,) = src.glob("*before_optimizations.txt")
    shutil.copy(before, tmp_path / before.name)
    (m,) = find_dump_modules(tmp_path)
    assert not m.optimized and m.buffer_assignment_path is None
    assert m.hlo_path == str(tmp_path / before.name)


def test_not_a_directory():
    with pytest.raises(NotADirectoryError):
        find_dump_modules(DATA / "tpu_module.hlo")
    with pytest.raises(FileNotFoundError):
        find_dump_modules(DATA / "no such dir")



# -- pairing "before" and "after" files: the same answer in O(n log n) ------------------


def _reference_find_dump_modules(directory):
    """find_dump_modules as it was until issue 29 (quadratic in the number of
    modules: every optimized key against every unoptimized one, every
    left-over "before" file against every optimized key), kept as the
    reference for the indexed pairing. Unreadable files are left out, as
    there."""
    from xlashape.xla_dump import _MODULE_FILE, _number, _unreadable

    directory = os.fspath(directory)
    opt_s, unopt_s = "after_optimizations.txt", "before_optimizations.txt"
    ba_s = "after_optimizations-buffer-assignment.txt"
    rep_s = "after_optimizations-memory-usage-report.txt"
    optimized, unoptimized, others = {}, {}, set()
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith((opt_s, unopt_s, ba_s, rep_s)) or _unreadable(path):
                continue
            if name.endswith(opt_s):
                optimized[(root, name[: -len(opt_s)])] = path
            elif name.endswith(unopt_s):
                unoptimized[(root, name[: -len(unopt_s)])] = path
            else:
                others.add(path)
    modules, taken, paired = [], set(), set()
    before_of = {}      # (root, optimized key) -> its before file (the longest prefix key)
    for (root, key), path in optimized.items():
        for (r2, k2) in unoptimized:
            if r2 == root and key.startswith(k2):
                taken.add((r2, k2))
                paired.add((root, key))
                if len(k2) > len(before_of.get((root, key), ("", ""))[1]):
                    before_of[(root, key)] = (unoptimized[(r2, k2)], k2)
    for (root, key) in sorted(unoptimized, key=lambda rk: (rk[0], _number(rk[1]) or 0)):
        if (root, key) in taken:
            continue
        name = _MODULE_FILE.sub("", key, count=1)
        number = _number(key)
        candidates = sorted(
            (_number(k2) if _number(k2) is not None else 1 << 62, k2)
            for (r2, k2) in optimized
            if r2 == root and (r2, k2) not in paired and k2 != key
            and _MODULE_FILE.sub("", k2, count=1).startswith(name)
            and (number is None or _number(k2) is None or _number(k2) >= number))
        if candidates:
            paired.add((root, candidates[0][1]))
            taken.add((root, key))
            before_of[(root, candidates[0][1])] = (unoptimized[(root, key)], key)
    for (root, key), path in optimized.items():
        ba = os.path.join(root, key + ba_s)
        rep = os.path.join(root, key + rep_s)
        modules.append((key, _number(key), path, True, ba if ba in others else None,
                        rep if rep in others else None, before_of.get((root, key), (None,))[0]))
    for (root, key), path in unoptimized.items():
        if (root, key) not in taken:
            modules.append((key, _number(key), path, False, None, None, None))
    modules.sort(key=lambda m: (m[1] if m[1] is not None else 1 << 62, m[2]))
    return modules


_DIRS = ("", "a", os.path.join("a", "b"))
# names that share prefixes, one with a dot, an empty one, one holding another
# "module_NNNN." (the renumbering pass strips the first one anywhere)
_NAMES = ("jit_f", "jit_f_2", "jit_f.g", "jit_g", "", "m.module_0007.x")
_AFTER_TAILS = (".cl_123.", ".cpu_", ".sm_9.0a_gpu_", ".")
_BEFORE_TAILS = (".", ".cl_123.")
_NUMBERS = st.one_of(st.none(), st.integers(0, 12))
# (directory, name, before number, after number, before tail, after tail,
#  write the before file, write the after file, its buffer assignment)
_MODULE = st.tuples(st.sampled_from(_DIRS), st.sampled_from(_NAMES), _NUMBERS, _NUMBERS,
                    st.sampled_from(_BEFORE_TAILS), st.sampled_from(_AFTER_TAILS),
                    st.booleans(), st.booleans(), st.booleans())


def _write_dump(d, modules):
    for dir_, name, nb, na, tb, ta, before, after, ba in modules:
        where = os.path.join(d, dir_)
        os.makedirs(where, exist_ok=True)
        pb = "" if nb is None else f"module_{nb:04d}."
        pa = "" if na is None else f"module_{na:04d}."
        files = []
        if before:
            files.append(pb + name + tb + "before_optimizations.txt")
        if after:
            files.append(pa + name + ta + "after_optimizations.txt")
            if ba:
                files.append(pa + name + ta + "after_optimizations-buffer-assignment.txt")
        for f in files:
            open(os.path.join(where, f), "w").close()


# renumbered modules competing for the same optimized file; a before-only one
_COMPETING = [("", "jit_f", 3, 5, ".", ".cl_123.", True, True, False),
              ("", "jit_f", 4, 6, ".", ".cl_123.", True, True, True),
              ("", "jit_f", 7, None, ".", ".cl_123.", True, False, False),
              ("a", "jit_f", 2, 1, ".", ".cpu_", True, True, False),
              ("a", "jit_f_2", 0, 9, ".", ".cpu_", True, True, False),
              ("a", "", None, 4, ".", ".", True, True, False)]


@settings(max_examples=150)
@example(_COMPETING)
@example([m[:2] + (None,) + m[3:] for m in _COMPETING])
# two "before" files prefixing one optimized key: both are that module's
@example([("", "jit_f", None, None, ".", ".cl_123.", True, False, False),
          ("", "jit_f", None, None, ".cl_123.", ".cl_123.", True, True, False)])
@given(st.lists(_MODULE, max_size=14))
def test_pairing_equals_the_quadratic_reference(modules):
    with tempfile.TemporaryDirectory() as d:
        _write_dump(d, modules)
        got = [tuple(m) for m in find_dump_modules(d)]
        assert got == _reference_find_dump_modules(d)


def test_pairing_equals_the_reference_on_every_real_dump():
    for dump in DUMPS + [CORPUS]:
        assert [tuple(m) for m in find_dump_modules(dump)] == _reference_find_dump_modules(dump)


def _renumbered_dump(d, n):
    """n modules named like a long run's (200 function names), every tenth
    renumbered: its optimized files carry the next free number."""
    number = 0
    for i in range(n):
        name = f"jit_step_{i % 200}"
        after = number + 1 if i % 10 == 9 else number
        for f in (f"module_{number:04d}.{name}.before_optimizations.txt",
                  f"module_{after:04d}.{name}.cl_123.after_optimizations.txt"):
            open(os.path.join(d, f), "w").close()
        number = after + 1


def _traced_lines(directory):
    """How many lines of xla_dump.py find_dump_modules(directory) runs (a
    measure of its work that no timing enters), and its modules."""
    import xlashape.xla_dump as xd

    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == xd.__file__ else None

    sys.settrace(tracer)
    try:
        modules = find_dump_modules(directory)
    finally:
        sys.settrace(None)
    return count, modules


def test_finding_modules_takes_n_log_n_work_not_quadratic(tmp_path):
    # issue 29: 1,000 modules took 0.2 s, 8,000 19.8 s (a 50,000-module dump
    # ~13 minutes): every optimized key was compared with every unoptimized one
    work = {}
    for n in (300, 2400):
        d = tmp_path / str(n)
        d.mkdir()
        _renumbered_dump(d, n)
        work[n], modules = _traced_lines(d)
        # every before file paired, the renumbered ones too
        assert len(modules) == n and all(m.optimized for m in modules)
    # 8 times the modules: n log n is ~11 times the work, quadratic 64 times
    # (measured: 27,869 -> 261,468 lines, 9.4 times; the old code 231,087 ->
    # 14,007,377, 61 times)
    assert work[2400] < 16 * work[300], work


# -- buffer assignments and memory-usage reports -------------------------------------------


@pytest.mark.parametrize("path", BUFFER_ASSIGNMENTS, ids=lambda p: str(p.relative_to(DATA)))
def test_real_buffer_assignments_read_whole(path):
    seen = []
    got = list(iter_buffer_assignment(path.read_text(), on_warning=seen.append))
    assert seen == []
    assert [(a.index, a.size, a.color, len(a.values)) for a in got] == allocations_of(path)
    assert all(a.kind in ALLOCATION_KINDS for a in got)
    assert all(v.shape is not None and v.size >= 0 for a in got for v in a.values)
    # the file, the path and the lines give the same
    assert [a.size for a in read_buffer_assignment(path)] == [a.size for a in got]
    with open(path) as f:
        assert [a.index for a in iter_buffer_assignment(f)] == [a.index for a in got]


@pytest.mark.parametrize("path", BUFFER_ASSIGNMENTS, ids=lambda p: str(p.relative_to(DATA)))
def test_memory_report_totals_are_the_buffer_assignment_per_colour(path):
    report = Path(str(path).replace("-buffer-assignment.txt", "-memory-usage-report.txt"))
    sums = collections.Counter()
    for a in iter_buffer_assignment(path.read_text()):
        sums[a.color] += a.size
    spaces = read_memory_usage_report(report)
    # XLA's report totals: the independent reading, and the buffer assignment
    assert {s.color: s.total_bytes for s in spaces} == report_totals(report) == dict(sums)
    assert spaces[0].name == "default" and spaces[0].color == 0
    # a str path, the text and the lines read the same
    text = report.read_text()
    assert read_memory_usage_report(str(report)) == spaces
    assert read_memory_usage_report(text) == read_memory_usage_report(text.splitlines()) == spaces


def test_one_line_report_text_is_text_not_a_path():
    assert read_memory_usage_report("Memory Space: default (color=0)") == []
    (s,) = read_memory_usage_report(b"Memory Space: vmem (color=1)\nTotal bytes: 64 (64B)\n")
    assert (s.name, s.color, s.total_bytes) == ("vmem", 1, 64)
    with pytest.raises(FileNotFoundError):
        read_memory_usage_report("no-such-report.txt")


def test_garbage_lines_in_a_buffer_assignment_are_counted_not_all_kept(tmp_path):
    (ba,) = CPU_DUMP.glob("*-buffer-assignment.txt")
    n = 3 * MAX_KEPT_WARNINGS
    bad = tmp_path / ba.name
    bad.write_text(ba.read_text() + "garbage!\n" * n)
    calls = []
    result = analyze(bad, on_warning=calls.append)
    assert len(calls) == n == result.warnings.total
    assert len(result.warnings) == MAX_KEPT_WARNINGS
    first = result.warnings[0]
    assert first.line == len(ba.read_text().splitlines()) + 1 and "garbage!" in first.message


# -- broken dump directories ----------------------------------------------------------------


def _copy_cpu_dump(tmp_path):
    d = tmp_path / "dump"
    shutil.copytree(CPU_DUMP, d)
    return d


def test_dangling_and_looping_links_are_skipped_with_a_warning(tmp_path):
    d = _copy_cpu_dump(tmp_path)
    dangling = d / "module_0009.jit_gone.cpu_after_optimizations.txt"
    dangling.symlink_to(d / "nowhere.txt")
    looping = d / "module_0010.jit_loop.cpu_after_optimizations.txt"
    (d / "loop_a").symlink_to(d / "loop_b")
    (d / "loop_b").symlink_to(d / "loop_a")
    looping.symlink_to(d / "loop_a")
    (d / "sub").mkdir()
    bad_ba = d / "sub" / "module_0011.jit_x.cpu_after_optimizations-buffer-assignment.txt"
    bad_ba.symlink_to(d / "missing")
    seen = []
    modules = find_dump_modules(d, on_warning=seen.append)
    assert [m.key for m in modules] == ["module_0008.jit_step.cpu_"]
    by_path = {w.path: w.message for w in seen}
    assert set(by_path) == {str(dangling), str(looping), str(bad_ba)}
    assert "dangling" in by_path[str(dangling)] and "loops" in by_path[str(looping)]
    assert all(isinstance(w, DumpWarning) and str(w).startswith(w.path) for w in seen)
    # the analysis goes on with the good module and passes the warnings on
    warned = []
    result = analyze(d, on_warning=warned.append)
    (m,) = result.modules
    assert m.name == "jit_step" and m.temp_size_in_bytes == 143360
    assert {w.path for w in warned} == set(by_path)


def test_a_link_to_a_regular_file_is_followed(tmp_path):
    d = tmp_path / "dump"
    d.mkdir()
    for f in CPU_DUMP.iterdir():
        (d / f.name).symlink_to(f)
    seen = []
    (m,) = find_dump_modules(d, on_warning=seen.append)
    assert seen == [] and m.buffer_assignment_path and m.memory_report_path
    assert analyze(d).modules[0].temp_size_in_bytes == 143360


# A special file must be refused before it is opened: opening a FIFO blocks,
# /dev/urandom never ends. These run in a child with a time limit, so that a
# regression fails the test instead of hanging the suite.
_SPECIAL_CHILD = r"""
import os, sys
from xlashape.memory import analyze
from xlashape.xla_dump import find_dump_modules, read_buffer_assignment, read_memory_usage_report
from xlashape import UnreadableInputError
d = sys.argv[1]
ba = os.path.join(d, "module_0008.jit_step.cpu_after_optimizations-buffer-assignment.txt")
rep = os.path.join(d, "module_0008.jit_step.cpu_after_optimizations-memory-usage-report.txt")
seen = []
modules = find_dump_modules(d, on_warning=seen.append)
print("modules", [m.key for m in modules], [m.buffer_assignment_path for m in modules],
      [m.memory_report_path for m in modules])
print("warnings", sorted((os.path.basename(w.path), w.message) for w in seen))
for reader in (read_buffer_assignment, read_memory_usage_report, analyze):
    for path in (ba, rep):
        try:
            reader(path)
        except UnreadableInputError as e:
            print("refused", reader.__name__, os.path.basename(path), str(e).startswith(path))
(m,) = analyze(d).modules
print("module", m.name, m.temp_size_in_bytes is None)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/urandom"),
                    reason="needs FIFOs and /dev/urandom")
def test_fifo_and_device_files_are_refused_not_read(tmp_path):
    d = _copy_cpu_dump(tmp_path)
    ba = d / "module_0008.jit_step.cpu_after_optimizations-buffer-assignment.txt"
    rep = d / "module_0008.jit_step.cpu_after_optimizations-memory-usage-report.txt"
    ba.unlink()
    ba.symlink_to("/dev/urandom")            # endless
    rep.unlink()
    os.mkfifo(rep)                           # opening it would block
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", _SPECIAL_CHILD, str(d)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "modules ['module_0008.jit_step.cpu_'] [None] [None]"
    assert out[1] == ("warnings [('" + ba.name + "', 'skipped, a character device, not a regular "
                      "file'), ('" + rep.name + "', 'skipped, a FIFO (named pipe), not a regular "
                      "file')]")
    refused = [line for line in out if line.startswith("refused")]
    assert len(refused) == 6 and all(line.endswith(" True") for line in refused)
    # the module is read from its text alone: no temporaries without the buffer assignment
    assert out[-1] == "module jit_step True"


def test_a_directory_where_a_file_is_expected(tmp_path):
    d = tmp_path / "x-buffer-assignment.txt"
    d.mkdir()
    with pytest.raises(UnreadableInputError, match=re.escape(str(d)) + " is a directory"):
        read_buffer_assignment(d)
    with pytest.raises(UnreadableInputError, match="directory"):
        read_memory_usage_report(d)
    assert issubclass(UnreadableInputError, XlaShapeError)
