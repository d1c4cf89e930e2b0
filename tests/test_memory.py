"""xlashape.memory, xlashape.xla_dump and xlashape.oom_report as a Python API.

Golden values come from the compiler's own artifacts: ``memory_analysis()``
recorded next to each real module (``tests/data/cpu_dump``, the XLA:TPU
corpus in ``tests/data/tpu_corpus`` when present), the buffer-assignment
files XLA wrote (read here with a separate, minimal parser written in this
file), and the figures printed in the out-of-memory reports; or arithmetic
written out in the test.
"""

import json
import re
from pathlib import Path

import pytest

from xlashape import UnreadableInputError, XlaShapeError
from xlashape.memory import (
    analyze,
    buffer_size,
    explain_padding,
    normalize_chip,
    tuple_table_size,
    unpadded_size,
)
from xlashape.oom_report import parse_size, read_oom_reports
from xlashape.xla_dump import find_dump_modules, iter_buffer_assignment, read_memory_usage_report

DATA = Path(__file__).parent / "data"
CPU_DUMP = DATA / "cpu_dump"
STATS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
         "host_argument_size_in_bytes", "host_output_size_in_bytes")


def ba_allocations(path):
    """Independent reading of a buffer-assignment file: [(number, size, color,
    flags, [(value label, size, offset, shape)])]."""
    out = []
    for line in Path(path).read_text().splitlines():
        m = re.match(r"allocation (\d+): size (\d+), (.*):$", line)
        if m:
            flags = m.group(3)
            c = re.search(r"color (\d+)", flags)
            out.append((int(m.group(1)), int(m.group(2)), int(c.group(1)) if c else 0, flags, []))
            continue
        m = re.match(r" value: <\d+ (\S+)(?: \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\): (.*)$", line)
        if m:
            out[-1][4].append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)))
    return out


# -- sizes ---------------------------------------------------------------------------


def test_tuple_tables():
    # memory_analysis() of XLA:TPU for tuple outputs of n elements: 512 bytes
    # for 2..128 elements, 1024 for 129..256, 1536 for 300 (v5e, jax 0.12)
    assert [tuple_table_size(n) for n in (2, 64, 65, 128, 129, 200, 300)] == [
        512, 512, 512, 512, 1024, 1024, 1536]
    # v6e / v5p: the same 4 bytes per element, in 32-byte granules
    assert tuple_table_size(12, chip="v6e") == 64
    assert tuple_table_size(3, chip="TPU v5") == 32
    assert tuple_table_size(150, chip="v6e:2x2") == 608
    assert tuple_table_size(3, "cpu") == 24 and tuple_table_size(0) == 0


def test_chip_names():
    assert [normalize_chip(c) for c in ("v4:2x2x1", "TPU v4", "TPU v5 lite", "v5p:2x2x1",
                                        "TPU v6 lite", None)] == ["v4", "v4", "v5e", "v5p", "v6e", None]


def test_buffer_sizes():
    # f32[33,17]{0,1:T(8,128)}: physical [17,33] -> 24 x 128 f32 = 12288 bytes
    assert buffer_size("f32[33,17]{0,1:T(8,128)}") == 24 * 128 * 4
    assert unpadded_size("f32[33,17]{0,1:T(8,128)}") == 33 * 17 * 4
    assert buffer_size("token[]") == 0
    assert buffer_size("f32[?,4]") is None
    assert buffer_size("b(f32[16]{0:T(256)})") == 1024
    e = explain_padding("f32[33,17]{0,1:T(8,128)}")
    assert any("dimension 0 has size 33" in s for s in e.sources)
    assert explain_padding("f32[128,256]{1,0:T(8,128)}") is None


# -- from HLO text -------------------------------------------------------------------

# From a real XLA:TPU (v5e) compile of a donated step, as_text() trimmed to
# what matters; memory_analysis() of that compile gave argument 143360,
# output 134656, alias 131072.
DONATED = """HloModule jit_donate, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout={(f32[128,256]{1,0:T(8,128)}, f32[33,17]{0,1:T(8,128)})->(f32[128,256]{1,0:T(8,128)}, s8[33,17]{0,1:T(8,128)(4,1)})}

FileNames
1 "gen.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY %main.1 (a.1: f32[128,256], b.1: f32[33,17]) -> (f32[128,256], s8[33,17]) {
  %a.1 = f32[128,256]{1,0:T(8,128)} parameter(0)
  %b.1 = f32[33,17]{0,1:T(8,128)} parameter(1)
  %f = f32[128,256]{1,0:T(8,128)} add(%a.1, %a.1)
  %c = s8[33,17]{0,1:T(8,128)(4,1)} convert(%b.1)
  ROOT %tuple = (f32[128,256]{1,0:T(8,128)}, s8[33,17]{0,1:T(8,128)(4,1)}) tuple(%f, %c)
}
"""


def test_figures_from_text():
    (m,) = analyze(DONATED).modules
    a = 128 * 256 * 4                 # no padding
    b = 24 * 128 * 4                  # f32[33,17]{0,1:T(8,128)}
    c = 24 * 128 * 1                  # s8[33,17]{0,1:T(8,128)(4,1)}
    assert (a + b, a + c + 512, a) == (143360, 134656, 131072)   # memory_analysis()
    assert m.name == "jit_donate" and m.platform == "tpu"
    assert (m.argument_size_in_bytes, m.output_size_in_bytes, m.alias_size_in_bytes) == (
        a + b, a + c + 512, a)
    assert m.temp_size_in_bytes is None and m.memory_used_bytes is None
    assert m.host_argument_size_in_bytes == m.host_output_size_in_bytes == 0
    kinds = [(x.kind, x.size_in_bytes, x.unpadded_size_in_bytes, x.values) for x in m.allocations]
    assert kinds == [("parameter", a, a, ["a.1"]), ("parameter", b, 33 * 17 * 4, ["b.1"]),
                     ("output", 512, 512, ["tuple"]), ("output", c, 33 * 17, ["c"])]
    assert m.allocations[0].maybe_live_out          # the output reuses it
    assert m.warnings == []
    j = m.to_json()
    assert list(j)[:9] == ["name", "argument_size_in_bytes", "output_size_in_bytes",
                           "alias_size_in_bytes", "temp_size_in_bytes",
                           "host_argument_size_in_bytes", "host_output_size_in_bytes",
                           "memory_used_bytes", "memory_limit_bytes"]
    assert j["allocations"][1]["padding"]["sources"]


def test_host_memory_space_counts_apart():
    text = """HloModule m, entry_computation_layout={(f32[8,128]{1,0:T(8,128)S(5)}, f32[8,128]{1,0:T(8,128)})->f32[8,128]{1,0:T(8,128)S(5)}}
ENTRY %e (p: f32[8,128], q: f32[8,128]) -> f32[8,128] {
  %p = f32[8,128]{1,0:T(8,128)S(5)} parameter(0)
  %q = f32[8,128]{1,0:T(8,128)} parameter(1)
  ROOT %r = f32[8,128]{1,0:T(8,128)S(5)} copy(%q)
}"""
    (m,) = analyze(text).modules
    assert (m.argument_size_in_bytes, m.host_argument_size_in_bytes) == (4096, 4096)
    assert (m.output_size_in_bytes, m.host_output_size_in_bytes) == (0, 4096)
    assert sorted(m.memory_spaces) == [0, 5]


def test_without_a_header_the_entry_is_used():
    text = ("ENTRY %e {\n  %p = f32[3,5]{1,0:T(2,2)} parameter(0)\n"
            "  ROOT %n = f32[3,5]{1,0:T(2,2)} negate(%p)\n}\n")
    (m,) = analyze(text).modules
    # f32[3,5]{1,0:T(2,2)}: 4 x 6 slots of 4 bytes
    assert (m.argument_size_in_bytes, m.output_size_in_bytes) == (96, 96)


def test_tuple_parameters_have_a_table_and_element_buffers():
    text = """HloModule m, entry_computation_layout={((f32[8,128]{1,0:T(8,128)}, s32[]{:T(128)}))->s32[]{:T(128)}}
ENTRY %e (p: (f32[8,128], s32[])) -> s32[] {
  %p = (f32[8,128]{1,0:T(8,128)}, s32[]{:T(128)}) parameter(0)
  ROOT %g = s32[]{:T(128)} get-tuple-element(%p), index=1
}"""
    (m,) = analyze(text).modules
    assert m.argument_size_in_bytes == 512 + 4096 + 512
    assert [x.parameter_index for x in m.allocations if x.kind == "parameter"] == [(), (0,), (1,)]


def test_a_file_path_and_a_gzip(tmp_path):
    import gzip

    p = tmp_path / "m.txt"
    p.write_text(DONATED)
    g = tmp_path / "m.txt.gz"
    g.write_bytes(gzip.compress(DONATED.encode()))
    for src in (p, str(p), g):
        (m,) = analyze(src).modules
        assert m.output_size_in_bytes == 134656


# -- a CPU dump (another backend) ------------------------------------------------------


def test_cpu_dump_agrees_with_memory_analysis():
    ref = json.loads((CPU_DUMP / "memory_analysis.json").read_text())["memory_analysis"]
    result = analyze(CPU_DUMP)
    assert result.kind == "dump"
    (m,) = result.modules
    assert m.name == "jit_step" and m.platform == "cpu"
    for k in STATS + ("temp_size_in_bytes",):
        assert getattr(m, k) == ref[k], k          # temp too: CPU counts the preallocated temps
    assert m.warnings == []


def test_cpu_dump_allocations_equal_the_buffer_assignment():
    (dm,) = find_dump_modules(CPU_DUMP)
    expected = ba_allocations(dm.buffer_assignment_path)
    (m,) = analyze(CPU_DUMP).modules
    got = m.allocations
    assert [(a.index, a.size_in_bytes, a.memory_space) for a in got] == [
        (n, size, color) for n, size, color, _, _ in expected]
    for a, (_, _, _, flags, values) in zip(got, expected):
        assert [(v.label, v.size_in_bytes, v.offset, v.shape) for v in a.value_details] == values
        assert a.values == list(dict.fromkeys(v[0].split("{")[0] for v in values))
        assert (a.kind == "temporary") == ("preallocated-temp" in flags)
        assert (a.kind == "parameter") == ("parameter " in flags)
        assert a.maybe_live_out == ("maybe-live-out" in flags)
    # no tiling on CPU: an array value holds no padding, so an allocation's
    # unpadded size is its size (the tuple table is not padded either)
    assert all(a.unpadded_size_in_bytes == a.size_in_bytes for a in got)


def test_cpu_dump_memory_report_totals():
    (dm,) = find_dump_modules(CPU_DUMP)
    spaces = read_memory_usage_report(dm.memory_report_path)
    total = sum(size for _, size, _, _, _ in ba_allocations(dm.buffer_assignment_path))
    assert [(s.color, s.total_bytes) for s in spaces] == [(0, total)]
    (m,) = analyze(CPU_DUMP).modules
    assert m.memory_spaces[0].reported_total == m.memory_spaces[0].total == total


def test_a_buffer_assignment_file_alone_finds_its_module():
    (dm,) = find_dump_modules(CPU_DUMP)
    (m,) = analyze(dm.buffer_assignment_path).modules
    assert m.name == "jit_step" and m.temp_size_in_bytes == 143360


def test_the_module_text_of_a_dump_alone():
    ref = json.loads((CPU_DUMP / "memory_analysis.json").read_text())["memory_analysis"]
    (dm,) = find_dump_modules(CPU_DUMP)
    (m,) = analyze(dm.hlo_path).modules
    for k in STATS:
        assert getattr(m, k) == ref[k], k      # 8-byte pointers in the CPU tuple table


# -- buffer assignments -----------------------------------------------------------------

HAND_BA = """BufferAssignment:
allocation 0: size 512, page 0, thread-local:
 value: <2 reduce_sum.2 @0> (size=512,offset=0): bf16[]{:T(256)}
allocation 1: size 20480, page 0, parameter 0, shape |bf16[8,1,1280]| at ShapeIndex {}, maybe-live-out:
 value: <26 fusion.20 @0> (size=20480,offset=0): bf16[8,1,1280]{2,0,1:T(8,128)(2,1)}
 value: <47 wide.arg_tuple.2{1} (phi) @0> (size=20480,offset=0): bf16[8,1,1280]{2,0,1:T(8,128)(2,1)}
allocation 2: size 512, page 0, output shape is |(bf16[8,1,1280], bf16[3])|, maybe-live-out:
 value: <43 tuple.21{} @0> (size=512,offset=0): (bf16[8,1,1280]{2,0,1:T(8,128)(2,1)}, bf16[3]{0:T(256)(128)(2,1)})
allocation 3: size 4, color 2, page 0, preallocated-temp:
 value: <42 copy-start{2} @2> (size=4,offset=0): u32[]{:S(2)}
allocation 4: size 1024, page 0, preallocated-temp:
 value: <4 lt.3 @0> (size=512,offset=0): pred[]{:T(512)}
 value: <5 add.5 @0> (size=512,offset=0): s32[]{:T(128)}
 value: <6 big @0> (size=512,offset=512): f32[3]{0:T(128)}
"""


def test_hand_made_buffer_assignment():
    allocs = list(iter_buffer_assignment(HAND_BA))
    assert [(a.index, a.kind, a.size, a.color) for a in allocs] == [
        (0, "thread-local", 512, 0), (1, "parameter", 20480, 0), (2, "output", 512, 0),
        (3, "temporary", 4, 2), (4, "temporary", 1024, 0)]
    v = allocs[1].values[1]
    assert (v.name, v.index, v.is_phi, v.label) == ("wide.arg_tuple.2", (1,), True, "wide.arg_tuple.2{1}")
    assert allocs[1].maybe_live_out and allocs[1].parameter_shape == "bf16[8,1,1280]"
    (m,) = analyze(HAND_BA).modules
    assert (m.argument_size_in_bytes, m.alias_size_in_bytes) == (20480, 20480)
    assert m.output_size_in_bytes == 20480 + 512
    # tiled layouts: a TPU buffer assignment, whose temp_size_in_bytes libtpu
    # decides later; the device-memory (color 0) temporaries under their own name
    assert m.platform == "tpu" and m.temp_size_in_bytes is None
    assert "libtpu" in m.reasons["temp_size_in_bytes"]
    assert m.hbm_temp_allocation_bytes == 1024
    temp = m.allocations[4]
    # slot (0, 512): the s32 needs 4 bytes, the pred 1: unpadded 4; slot
    # (512, 512): f32[3] needs 12
    assert temp.unpadded_size_in_bytes == 1024 - (512 - 4) - (512 - 12)
    assert m.allocations[3].memory_space == 2
    assert m.warnings == []


def test_buffer_assignment_bad_lines_are_reported_with_line_numbers():
    text = HAND_BA.replace(" value: <6 big @0>", " value: <6 big @0 broken") + "garbage here\n"
    seen = []
    allocs = list(iter_buffer_assignment(text, on_warning=seen.append))
    assert len(allocs) == 5 and len(allocs[4].values) == 2
    # line 14 is the broken value, 15 the garbage (line 1 is "BufferAssignment:")
    assert [w.line for w in seen] == [14, 15]


def test_value_sizes_that_differ_are_named():
    text = HAND_BA.replace("(size=512,offset=512): f32[3]{0:T(128)}",
                           "(size=1024,offset=512): f32[3]{0:T(128)}")
    (m,) = analyze(text).modules
    (w,) = m.warnings
    assert "value big" in w and "f32[3]{0:T(128)}" in w and "1024" in w and "512" in w


def test_tuple_table_granule_is_read_from_the_buffer_assignment():
    text = ("BufferAssignment:\nallocation 0: size 64, page 0, output shape is |(f32[2], f32[2], f32[2], "
            "f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], f32[2])|, maybe-live-out:\n"
            " value: <1 t{} @0> (size=64,offset=0): (" + ", ".join(["f32[2]{0:T(256)}"] * 12) + ")\n")
    (m,) = analyze(text).modules
    assert m.warnings == [] and any("32-byte" in n for n in m.notes)


# -- out-of-memory reports -------------------------------------------------------------


def test_detailed_report_entries_equal_the_report():
    text = (DATA / "oom_report.txt").read_text()
    (r,) = read_oom_reports(text)
    assert (r.used_text, r.limit_text, r.excess_text) == ("18.94G", "15.75G", "3.19G")
    assert [(a.rank, a.size_text, a.unpadded_text, a.padding_text, a.allocation_type)
            for a in r.allocations] == [
        (1, "2.00G", "2.00G", None, "HLO temp"), (2, "2.50G", "320.00M", "2.19G", "HLO temp"),
        (3, "196.50M", "196.32M", "188.0K", "HLO temp")]
    (m,) = analyze(DATA / "oom_report.txt").modules
    assert m.memory_used_bytes == parse_size("18.94G") and m.memory_limit_bytes == parse_size("15.75G")
    assert m.temp_size_in_bytes is None
    a = m.allocations[1]
    # the shape's exact sizes agree with the report's rounded ones
    assert (a.size_in_bytes, a.unpadded_size_in_bytes) == (8 * 1280 * 8 * 16384 * 2,
                                                           8 * 1280 * 16384 * 2)
    assert a.values == ["broadcast.3115"] and a.kind == "temporary"
    assert a.explanation().fixes
    # the report gives the HLO temporaries padded (18.41G) and unpadded
    # (16.34G): 18.94G - 2.07G = 16.87G > 15.75G
    assert m.oom.padding_basis == "the HLO temporaries" and m.oom.fits_without_padding is False
    assert m.oom.padding_bytes == parse_size("18.41G") - parse_size("16.34G")


def test_two_line_message():
    msg = ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of "
           "memory on HBM, the total memory required for HLO temporaries (16.00G) exceeds "
           "available HBM (15.75G). HLO module: jit_f.\n"
           "See https://openxla.org/xla/errors/error_1000 for more details.\n")
    (m,) = analyze(msg).modules
    assert m.name == "jit_f" and m.oom.form == "short"
    assert (m.memory_used_bytes, m.memory_limit_bytes) == (16 * 2**30, int(15.75 * 2**30))
    assert m.allocations == [] and m.oom.fits_without_padding is None
    assert any("LIBTPU_INIT_ARGS=--xla_tpu_no_crash_on_oom=true" in w for w in m.warnings)


def test_reports_in_a_log_with_glog_prefixes():
    log = ("W1123 04:51:39.585622   13098 program_memory_allocator.cc:1340] Suppressing OOM due to "
           "xla_tpu_no_crash_on_oom: XLA:TPU compile permanent error. Ran out of memory in memory "
           "space hbm. Used 16.00G of 15.75G hbm. Exceeded hbm capacity by 262.51M.\n\n"
           "Total hbm usage >= 8.26G:\n    reserved        258.00M \n    program           4.51M \n"
           "    arguments         8.00G \n\nOutput size 8.00G; shares 0B with arguments.\n\n"
           "Program hbm requirement 4.51M:\n    overlays          4.51M\n\n"
           "  Largest program allocations in hbm:\n\n  1. Size: 4.51M\n     XLA label: overlays\n"
           "     Allocation type: overlays\n     ==========================\n\n\n"
           "  Largest program arguments and outputs in hbm:\n\n  1. Size: 8.00G\n"
           "     Shape: f32[67108864,8,4]{0,2,1:T(4,128)}\n     XLA label: Argument 0 index {}\n"
           "     ==========================\n\n"
           "W1123 04:51:39.616728   13098 other.cc:1] something else\n  1. Size: 9.00G\n")
    (r,) = read_oom_reports(log)
    assert r.usage == {"reserved": "258.00M", "program": "4.51M", "arguments": "8.00G"}
    assert (r.output_text, r.output_shares_text, r.program) == ("8.00G", "0B", {"overlays": "4.51M"})
    assert [(a.section, a.size_text, a.label) for a in r.allocations] == [
        ("program", "4.51M", "overlays"), ("arguments and outputs", "8.00G", "Argument 0 index {}")]
    (m,) = analyze(log).modules
    assert [(a.kind, a.size_in_bytes) for a in m.allocations] == [
        ("overlays", parse_size("4.51M")), ("parameter", 67108864 * 8 * 4 * 4)]
    assert m.argument_size_in_bytes == 8 * 2**30 and m.alias_size_in_bytes == 0


def test_a_tuple_allocation_is_its_table():
    text = ("Ran out of memory in memory space hbm. Used 16.00G of 15.75G hbm. Exceeded hbm capacity by 258.00M.\n"
            "  Largest program allocations in hbm:\n  1. Size: 512B\n"
            "     Shape: (f32[]{:T(128)}, f32[67108864,8,4]{0,2,1:T(4,128)})\n"
            "     Unpadded size: 512B\n     Allocation type: HLO temp\n     ==========================\n")
    (m,) = analyze(text).modules
    (a,) = m.allocations
    assert (a.size_in_bytes, a.unpadded_size_in_bytes) == (512, 512)
    assert m.warnings == []


def test_parse_size():
    assert [parse_size(t) for t in ("0B", "96B", "512.0K", "1.00G", "2.19G", "x", None)] == [
        0, 96, 512 * 1024, 2**30, round(2.19 * 2**30), None, None]


# -- bad input ----------------------------------------------------------------------------


def test_bad_inputs_are_one_clear_error(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    prose = tmp_path / "notes.txt"
    prose.write_text("Dear diary,\nthe model ran out of patience.\n")
    empty_dir = tmp_path / "emptydir"
    empty_dir.mkdir()
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    (other_dir / "README").write_text("nothing here")
    cases = [(empty, "is empty"), (binary, "binary"), (prose, "not an HLO module"),
             (empty_dir, "empty directory"), (other_dir, "no XLA modules")]
    for path, words in cases:
        with pytest.raises(UnreadableInputError, match=words):
            analyze(path)
    with pytest.raises(UnreadableInputError, match="binary"):
        analyze(b"\0\1\2")
    with pytest.raises(UnreadableInputError, match="empty"):
        analyze("   \n")
    with pytest.raises(TypeError):
        analyze(42)
    assert issubclass(UnreadableInputError, (XlaShapeError, ValueError))


def test_a_truncated_module_reports_what_it_read(tmp_path):
    cut = DONATED[: DONATED.index("  %c = s8")] + "  %c = s8[33,17]{0,1:T(8,128)(4,1)} conv"
    seen = []
    (m,) = analyze(cut, on_warning=seen.append).modules
    # the header still gives every figure; the cut line is reported
    assert (m.argument_size_in_bytes, m.output_size_in_bytes) == (143360, 134656)
    assert [w.line for w in seen] == [cut.count("\n") + 1]


def test_a_truncated_buffer_assignment(tmp_path):
    (dm,) = find_dump_modules(CPU_DUMP)
    d = tmp_path / "dump"
    d.mkdir()
    for p in CPU_DUMP.iterdir():
        if p.name != "memory_analysis.json":
            (d / p.name).write_text(p.read_text())
    ba = d / Path(dm.buffer_assignment_path).name
    text = ba.read_text()
    ba.write_text(text[: len(text) // 2])
    (m,) = analyze(d).modules
    # what was read is reported; the totals no longer agree with the memory
    # report, and that is said
    assert m.allocation_count >= 1
    assert any("memory-usage report says" in w for w in m.warnings)


def test_a_dump_directory_without_buffer_assignment(tmp_path):
    (dm,) = find_dump_modules(CPU_DUMP)
    d = tmp_path / "dump"
    d.mkdir()
    (d / Path(dm.hlo_path).name).write_text(Path(dm.hlo_path).read_text())
    (m,) = analyze(d).modules
    assert m.temp_size_in_bytes is None and m.argument_size_in_bytes == 69632
    assert any("no buffer assignment" in w for w in m.warnings)


# -- the XLA:TPU corpus ---------------------------------------------------------------------

CORPUS = DATA / "tpu_corpus"
_PROGRAMS = sorted(p.name for p in CORPUS.iterdir() if (p / "module.hlo").exists()) \
    if CORPUS.is_dir() else []
_DUMPS = sorted(p.name for p in CORPUS.iterdir() if (p / "dump").is_dir()) if CORPUS.is_dir() else []
_OOMS = sorted(p.name for p in CORPUS.iterdir() if (p / "oom").is_dir()) if CORPUS.is_dir() else []


def _meta(program):
    return json.loads((CORPUS / program / "memory_analysis.json").read_text())


@pytest.mark.skipif(not _PROGRAMS, reason="no XLA:TPU corpus in tests/data/tpu_corpus")
@pytest.mark.parametrize("program", _PROGRAMS)
def test_corpus_text_figures_equal_memory_analysis(program):
    meta = _meta(program)
    (m,) = analyze(CORPUS / program / "module.hlo", chip=meta["chip"]).modules
    for k in STATS:
        assert getattr(m, k) == meta["memory_analysis"][k], k


@pytest.mark.skipif(not _DUMPS, reason="no XLA:TPU corpus dumps")
@pytest.mark.parametrize("program", _DUMPS)
def test_corpus_dump_allocations_equal_the_buffer_assignment(program):
    meta = _meta(program) if (CORPUS / program / "memory_analysis.json").exists() else None
    modules = find_dump_modules(CORPUS / program / "dump")
    result = analyze(CORPUS / program / "dump")
    assert len(result.modules) == len(modules)
    for dm, m in zip(modules, result.modules):
        if dm.buffer_assignment_path is None:
            continue
        expected = ba_allocations(dm.buffer_assignment_path)
        got = m.allocations
        assert [(a.index, a.size_in_bytes, a.memory_space) for a in got] == [
            (n, size, color) for n, size, color, _, _ in expected]
        for a, (_, _, _, flags, values) in zip(got, expected):
            assert [(v.label, v.size_in_bytes, v.offset, v.shape) for v in a.value_details] == values
        # the figures XLA's formula gives from these allocations
        host = [x for x in expected if x[2] == 5]
        dev = [x for x in expected if x[2] != 5]
        assert m.argument_size_in_bytes == sum(x[1] for x in dev if "parameter " in x[3])
        assert m.output_size_in_bytes == sum(x[1] for x in dev if "maybe-live-out" in x[3])
        if m.platform == "tpu":
            # XLA:TPU's temp comes from libtpu's allocator: null; the HBM temporaries
            assert m.temp_size_in_bytes is None
            assert m.hbm_temp_allocation_bytes == sum(
                x[1] for x in expected if x[2] == 0 and "preallocated-temp" in x[3])
        else:  # the host computation of an offloading program, compiled by XLA:CPU
            assert m.temp_size_in_bytes == sum(x[1] for x in dev if "preallocated-temp" in x[3])
        assert m.host_argument_size_in_bytes == sum(x[1] for x in host if "parameter " in x[3])
        if meta is not None and m.name == (
                CORPUS / program / "module.hlo").read_text().split()[1].rstrip(","):
            for k in STATS:
                assert getattr(m, k) == meta["memory_analysis"][k], k
        # every value's size is xlashape's size of its shape (shapes without
        # a layout, which XLA:TPU sizes by a layout it does not print, are a note)
        assert m.warnings == []
        for n in m.notes:
            assert "granules" in n or "without a layout" in n, n


def _report_entries(path):
    """Independent reading of the allocation entries of every report in a
    libtpu log: [(used, limit, [{field: text}])]."""
    reports = []
    entry = None
    for line in Path(path).read_text().splitlines():
        m = re.search(r"Ran out of memory in memory space hbm\. Used (\S+) of (\S+) hbm", line)
        if m:
            reports.append((m.group(1), m.group(2), []))
            entry = None
            continue
        m = re.match(r"\s+\d+\. Size: (\S+)$", line)
        if m and reports:
            entry = {"Size": m.group(1)}
            reports[-1][2].append(entry)
            continue
        m = re.match(r"\s+(Shape|Unpadded size|Extra memory due to padding|XLA label|"
                     r"Allocation type|Operator): (.*)$", line)
        if m and entry is not None:
            entry[m.group(1)] = m.group(2).strip()
    return reports


@pytest.mark.skipif(not _OOMS, reason="no XLA:TPU corpus out-of-memory reports")
@pytest.mark.parametrize("program", _OOMS)
def test_corpus_oom_entries_equal_the_report(program):
    from xlashape.tiling import format_bytes

    log = CORPUS / program / "oom" / "tpu_driver.WARNING.txt"
    chip = json.loads((CORPUS / program / "oom" / "oom.json").read_text())["chip"]
    expected = _report_entries(log)
    got = read_oom_reports(log.read_text())
    assert [(r.used_text, r.limit_text) for r in got] == [(u, l) for u, l, _ in expected]
    checked = 0
    for r, (_, _, entries) in zip(got, expected):
        assert [a.size_text for a in r.allocations] == [e["Size"] for e in entries]
        for a, e in zip(r.allocations, entries):
            assert a.shape_text == e.get("Shape")
            assert a.unpadded_text == e.get("Unpadded size")
            assert a.label == e.get("XLA label")
            if a.shape is None:
                continue
            # xlashape's sizes of the shape, printed as the report prints them
            assert format_bytes(buffer_size(a.shape, chip=chip)) == e["Size"], e
            if "Unpadded size" in e:
                assert format_bytes(unpadded_size(a.shape, chip=chip)) == e["Unpadded size"], e
            if "Extra memory due to padding" in e:
                extra = buffer_size(a.shape, chip=chip) - unpadded_size(a.shape, chip=chip)
                assert e["Extra memory due to padding"].startswith(format_bytes(extra) + " ("), e
            checked += 1
    assert checked > 0
    analysis = analyze(log)       # the tuple tables in the report show the chip's rounding
    assert all(m.oom is not None and m.memory_limit_bytes for m in analysis.modules)
    for m in analysis.modules:
        assert not [w for w in m.warnings if "xlashape's size" in w], m.warnings


@pytest.mark.skipif(not _OOMS, reason="no XLA:TPU corpus out-of-memory reports")
@pytest.mark.parametrize("program", _OOMS)
def test_corpus_oom_exception_text(program):
    text = (CORPUS / program / "oom" / "exception.txt").read_text()
    m = re.search(r"\((\S+)\) exceeds available HBM \((\S+)\)", text)
    (mm,) = analyze(text).modules
    assert mm.oom.form == "short" and mm.allocations == []
    assert (mm.memory_used_bytes, mm.memory_limit_bytes) == (parse_size(m.group(1)),
                                                             parse_size(m.group(2)))
    assert any("per-buffer breakdown is not in this message" in w for w in mm.warnings)


def _same_from_file_and_text(path):
    a = analyze(path).to_json()
    b = analyze(Path(path).read_text()).to_json()
    for m in a["modules"]:
        m.pop("path", None)
    for m in b["modules"]:
        m.pop("path", None)
    assert a == b


@pytest.mark.parametrize("name", ["tpu_module.hlo", "small_dump.hlo"])
def test_a_file_is_read_as_its_text_is(name):
    # a file skips the computations other than the entry by blocks
    # (hlo_module.EntryBlocks), text line by line: the same figures
    _same_from_file_and_text(DATA / name)


def test_a_generated_module_is_read_from_a_file_as_from_text(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import bench_hlo

    p = tmp_path / "m.txt"
    bench_hlo.generate(str(p), 2, seed=5)
    _same_from_file_and_text(p)


@pytest.mark.skipif(not _PROGRAMS, reason="no XLA:TPU corpus")
def test_corpus_files_are_read_as_their_text_is():
    for program in _PROGRAMS:
        _same_from_file_and_text(CORPUS / program / "module.hlo")


# -- a JAX compiled object ---------------------------------------------------------------


class _Stats:
    """What compiled.memory_analysis() returns (the fields it has)."""

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class _Compiled:
    def __init__(self, text, stats):
        self._text, self._stats = text, stats

    def as_text(self):
        return self._text

    def memory_analysis(self):
        return self._stats


def test_a_compiled_object_is_analysed_beside_its_own_figures():
    stats = _Stats(argument_size_in_bytes=143360, output_size_in_bytes=134656,
                   alias_size_in_bytes=131072, temp_size_in_bytes=0,
                   host_argument_size_in_bytes=0, host_output_size_in_bytes=0)
    result = analyze(_Compiled(DONATED, stats))
    (m,) = result.modules
    assert result.kind == "jax" and m.source == "jax"
    assert m.memory_analysis["output_size_in_bytes"] == 134656
    assert m.warnings == []          # every figure the text determines agrees
    wrong = _Stats(**{**stats.__dict__, "output_size_in_bytes": 1})
    (m,) = analyze(_Compiled(DONATED, wrong)).modules
    assert any("output_size_in_bytes: memory_analysis() says 1" in w for w in m.warnings)


def test_jax_stays_unimported():
    import subprocess
    import sys

    code = ("import sys, xlashape.memory as m; m.analyze(m.EXAMPLE_DUMP); "
            "print('jax' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "False", r.stderr


def test_a_live_jax_compiled_object():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    compiled = jax.jit(lambda x, w: (x @ w).sum(0)).lower(
        jnp.zeros((8, 128), jnp.float32), jnp.zeros((128, 256), jnp.float32)).compile()
    (m,) = analyze(compiled).modules
    ours = {k: getattr(m, k) for k in STATS}
    theirs = {k: m.memory_analysis[k] for k in STATS}
    assert ours == theirs
