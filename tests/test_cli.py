"""The xlashape command, run as a user runs it: ``python -m xlashape ...`` in a
subprocess, checking stdout, stderr and the exit status.

Expected values come from the XLA docs (seeds 002/004, the tiled-layout doc's
figures) or from arithmetic written out in the test, never from the code.
"""

import gzip
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def run(*args, input=None, env=None):
    full_env = dict(os.environ)
    full_env.pop("PYTHONPATH", None)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "xlashape", *map(str, args)],
                          input=input, capture_output=True, text=True, env=full_env,
                          timeout=120)


def ok(*args, **kw):
    r = run(*args, **kw)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r


def fails(*args, **kw):
    """Exit status 2, one 'xlashape: error:' line first, no traceback."""
    r = run(*args, **kw)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines and lines[0].startswith("xlashape: error: "), r.stderr
    return r


# -- usage -----------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["describe", "explain", "show", "index", "hlo"])
def test_every_subcommand_has_help_with_an_example(cmd):
    r = ok(cmd, "--help")
    assert "example" in r.stdout
    assert f"xlashape {cmd} " in r.stdout


def test_top_level_help_lists_the_subcommands():
    r = ok("--help")
    for cmd in ("describe", "explain", "show", "index", "hlo"):
        assert cmd in r.stdout


def test_no_subcommand_is_a_usage_error():
    r = run()
    assert r.returncode == 2
    assert "usage" in r.stderr


def test_unknown_option_is_one_error_line():
    r = fails("show", "f32[2]", "--bogus")
    assert len(r.stderr.splitlines()) == 1
    assert "--bogus" in r.stderr


def test_unknown_subcommand_is_one_error_line():
    r = fails("frobnicate")
    assert len(r.stderr.splitlines()) == 1
    assert "invalid choice" in r.stderr


def test_bad_shape_reports_line_column_and_caret():
    r = fails("describe", "f32[2,3]{0,1")
    lines = r.stderr.splitlines()
    assert "line 1, column 13" in lines[0]
    assert lines[1] == "f32[2,3]{0,1"
    assert lines[2] == " " * 12 + "^"


def test_unknown_element_type_is_an_error():
    r = fails("explain", "f33[2]")
    assert "f33" in r.stderr


def test_non_array_shape_is_refused_by_show():
    r = fails("show", "(f32[2], s32[])")
    assert "not an array shape" in r.stderr


def test_pad_needs_one_width_per_dimension():
    r = fails("show", "f32[2,3]{0,1}", "--pad", "3")
    assert "one width per dimension" in r.stderr
    assert "2 dimensions" in r.stderr


def test_pad_smaller_than_the_dimension_is_an_error():
    r = fails("show", "f32[2,3]{0,1}", "--pad", "3,2")
    assert "smaller than its size 3" in r.stderr


def test_pad_must_be_integers():
    r = fails("describe", "f32[2,3]", "--pad", "3,x")
    assert "integers" in r.stderr


def test_padding_value_must_be_a_number():
    r = fails("show", "f32[2,3]", "--padding-value", "zero")
    assert "--padding-value must be a number" in r.stderr


# -- describe --------------------------------------------------------------------

SEED_SHAPE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"


def field(text, key):
    for line in text.splitlines():
        if line.startswith(key + " "):
            return line[len(key):].strip()
    raise AssertionError(f"no {key!r} line in:\n{text}")


def test_describe_the_seed_shape():
    out = ok("describe", SEED_SHAPE).stdout
    assert field(out, "shape") == SEED_SHAPE
    assert field(out, "element type").startswith("bf16: 16 bits, 2 bytes")
    assert field(out, "dimensions").startswith("[8,1,1280,16384]: rank 4")
    assert "167772160 elements" in out  # 8*1*1280*16384
    assert field(out, "minor_to_major").startswith("{3,2,0,1}")
    assert field(out, "major_to_minor").startswith("(1,0,2,3)")
    assert field(out, "tiles") == "T(8,128)(2,1)"
    assert field(out, "memory space").startswith("S(0): device memory")
    logical = 8 * 1 * 1280 * 16384 * 2
    assert field(out, "logical bytes").startswith(f"{logical} (320.00M)")
    # dim 1 (size 1) is major-most, so the (8,128) tile sees 1280 x 16384: no padding
    assert field(out, "physical bytes").startswith(f"{logical} ")
    # (1, 8, 1280, 16384) -> T(8,128): (1, 8, 160, 128, 8, 128) -> (2,1) on (8,128): (4,128,2,1)
    assert field(out, "physical dims").startswith("[1,8,160,128,4,128,2,1]")


def test_describe_memory_spaces_by_name():
    assert "VMEM" in field(ok("describe", "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}").stdout,
                           "memory space")
    assert "host" in field(ok("describe", "f32[4]{0:S(5)}").stdout, "memory space")
    assert field(ok("describe", "f32[4]{0:S(3)}").stdout, "memory space").startswith("S(3)")


def test_describe_dynamic_dimensions():
    out = ok("describe", "f32[<=4,?]").stdout
    dyn = field(out, "dynamic")
    assert "dimension 0 bounded dynamic, at most 4" in dyn
    assert "dimension 1 unbounded" in dyn
    assert "unknown" in field(out, "bytes")


def test_describe_sub_byte_element_size():
    out = ok("describe", "s4[3,5]{1,0:E(4)}").stdout
    assert field(out, "element size").startswith("E(4): 4 bits")
    assert field(out, "logical bytes").startswith("8 ")  # ceil(15*4/8), spec §8.3


def test_describe_a_tuple_lists_its_elements_and_totals():
    out = ok("describe", "(f32[3,5]{1,0:T(2,2)}, s32[]{:S(1)}, token[])").stdout
    assert "3 elements" in out
    assert "{0} f32[3,5]{1,0:T(2,2)}" in out
    assert field(out, "logical bytes").startswith(str(15 * 4 + 4))
    # f32[3,5] tiled (2,2) -> 4 x 6 = 24 slots (doc figure 1), plus the scalar
    assert field(out, "physical bytes").startswith(str(24 * 4 + 4))


def test_describe_token():
    assert "no data" in ok("describe", "token[]").stdout


def test_describe_with_pad_shows_padded_dimensions():
    out = ok("describe", "f32[2,3]{0,1}", "--pad", "3,5").stdout
    assert "[3, 5]" in field(out, "padded dims")
    assert field(out, "physical bytes").startswith(str(3 * 5 * 4))


# -- explain ---------------------------------------------------------------------

PADDED = "f32[8,1,1024]{1,2,0:T(8,128)}"
# physical order (major->minor) is dim0, dim2, dim1 = (8, 1024, 1); T(8,128) on
# (1024, 1) gives (128, 1, 8, 128): 8*128*1*8*128 slots of 4 bytes
PADDED_UNPADDED = 8 * 1 * 1024 * 4
PADDED_PADDED = 8 * 128 * 1 * 8 * 128 * 4


def test_explain_prints_sizes_as_the_tpu_oom_report_does():
    out = ok("explain", PADDED).stdout
    assert out.splitlines()[0] == PADDED
    assert "32.0K" in out and f"{PADDED_UNPADDED} bytes" in out
    assert "4.00M" in out and f"{PADDED_PADDED} bytes" in out
    assert f"{PADDED_PADDED / PADDED_UNPADDED:.1f}x expansion" in out  # 128.0x
    assert "dimension 1 has size 1" in out
    assert "suggestions:" in out


def test_explain_json():
    obj = json.loads(ok("explain", PADDED, "--json").stdout)
    assert obj["shape"] == PADDED
    assert obj["unpadded_bytes"] == PADDED_UNPADDED
    assert obj["padded_bytes"] == PADDED_PADDED
    assert obj["expansion"] == pytest.approx(128.0)
    assert obj["physical_dimensions"] == [8, 128, 1, 8, 128]
    assert any(1 in s["dimensions"] for s in obj["sources"])


def test_explain_a_shape_without_padding():
    out = ok("explain", "f32[8,128]{1,0:T(8,128)}").stdout
    assert "1.0x expansion" in out
    assert "no padding" in out


def test_explain_the_seeds_padded_example():
    obj = json.loads(ok("explain", "f32[2,3]{0,1}", "--pad", "3,5", "--json").stdout)
    assert obj["unpadded_bytes"] == 2 * 3 * 4
    assert obj["padded_bytes"] == 3 * 5 * 4
    assert obj["expansion"] == pytest.approx(15 / 6)
    assert obj["padded_dimensions"] == [3, 5]


def test_explain_invalid_layout_is_an_error():
    r = fails("explain", "f32[2,3]{0,0}")
    assert "permutation" in r.stderr or "duplicate" in r.stderr


# -- show ------------------------------------------------------------------------


def section(text, title_start):
    """The indented lines under the line starting with title_start."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(title_start):
            out = []
            for x in lines[i + 1:]:
                if not x.startswith("  "):
                    break
                out.append(x[2:])
            return out
    raise AssertionError(f"no section {title_start!r} in:\n{text}")


def test_show_seed_column_major():
    out = ok("show", "f32[2,3]{0,1}").stdout
    assert section(out, "logical array") == ["a b c", "d e f"]
    assert section(out, "memory order") == ["a d b e c f"]          # seed 004
    assert section(out, "element offset") == ["0 2 4", "1 3 5"]


def test_show_seed_row_major():
    out = ok("show", "f32[2,3]{1,0}").stdout
    assert section(out, "logical array") == ["a b c", "d e f"]
    assert section(out, "memory order") == ["a b c d e f"]          # seed 004


def test_show_default_layout_is_row_major():
    out = ok("show", "f32[2,3]").stdout
    assert section(out, "memory order") == ["a b c d e f"]


def test_show_seed_padding_example():
    out = ok("show", "f32[2,3]{0,1}", "--pad", "3,5").stdout
    # seed 004: "a d 0 b e 0 c f 0 0 0 0 0 0 0", and the padded array picture
    assert section(out, "memory order") == ["a d 0 b e 0 c f 0 0 0 0 0 0 0"]
    assert section(out, "logical array") == ["a b c 0 0", "d e f 0 0", "0 0 0 0 0"]
    assert "6 elements in 15 slots (9 padding)" in out


def test_show_padding_value():
    out = ok("show", "f32[2,3]{0,1}", "--pad", "3,5", "--padding-value", "7").stdout
    assert section(out, "memory order") == ["a d 7 b e 7 c f 7 7 7 7 7 7 7"]


def grid_numbers(lines):
    """Rows of numbers of an offset grid, tile separators dropped."""
    rows = []
    for line in lines:
        if set(line.replace(" ", "")) <= set("-+"):
            continue
        rows.append([int(x.strip("()")) for x in line.replace("|", " ").split()])
    return rows


def test_show_tiled_layout_doc_figure_1():
    # tiled_layout.md figure 1: f32[3,5]{1,0:T(2,2)}, element (2,3) at 17, 24 slots
    out = ok("show", "f32[3,5]{1,0:T(2,2)}").stdout
    rows = grid_numbers(section(out, "element offset"))
    assert rows[2][3] == 17
    assert len(rows) == 4 and all(len(r) == 6 for r in rows)   # padded to 4 x 6
    assert sorted(x for r in rows for x in r) == list(range(24))
    assert "15 elements in 24 slots (9 padding)" in out
    assert any("|" in line for line in section(out, "element offset"))


def test_show_tiled_layout_doc_figure_2():
    # tiled_layout.md figure 2: [4,8]{1,0:T(2,4)(2,1)}
    out = ok("show", "f32[4,8]{1,0:T(2,4)(2,1)}").stdout
    rows = grid_numbers(section(out, "element offset"))
    assert rows == [list(range(0, 16, 2)), list(range(1, 16, 2)),
                    list(range(16, 32, 2)), list(range(17, 32, 2))]


def test_show_labels_beyond_z():
    out = ok("show", "f32[4,8]").stdout
    assert section(out, "logical array")[3].split() == ["y", "z", "aa", "ab", "ac", "ad", "ae", "af"]


def test_show_3d_as_slices():
    out = ok("show", "f32[2,2,3]{2,1,0}").stdout
    assert "[0,:,:]" in out and "[1,:,:]" in out
    assert section(out, "memory order") == ["a b c d e f g h i j k l"]


def test_show_crops_big_shapes_and_says_so():
    r = ok("show", SEED_SHAPE)
    assert len(r.stdout.splitlines()) < 100
    assert "showing rows 0-11 of 1280, columns 0-15 of 16384, 2 of 8 slices" in r.stdout
    assert "first 128 of 167772160 slots" in r.stdout
    r = ok("show", SEED_SHAPE, "--rows", "2", "--cols", "3", "--slices", "1", "--slots", "4")
    assert "showing rows 0-1 of 1280, columns 0-2 of 16384, 1 of 8 slices" in r.stdout
    assert section(r.stdout, "logical array")[1].split() == ["a", "b", "c"]


def test_show_bad_limits():
    r = fails("show", "f32[2]", "--rows", "0")
    assert "rows must be a positive int" in r.stderr


def _png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_show_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    path = tmp_path / "layout.png"
    r = ok("show", "f32[3,5]{1,0:T(2,2)}", "--png", path)
    assert f"wrote {path}" in r.stdout
    data = path.read_bytes()
    w, h = _png_size(data)
    assert 300 <= w <= 4000 and 200 <= h <= 3000
    assert len(data) > 5000


def test_show_svg(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    path = tmp_path / "layout.svg"
    ok("show", "bf16[16,256]{1,0:T(8,128)(2,1)}", "--svg", path)
    text = path.read_text()
    assert "<svg" in text and "</svg>" in text


def test_show_png_without_matplotlib_is_a_clear_error(tmp_path):
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    r = fails("show", "f32[2,3]", "--png", tmp_path / "x.png", env={"PYTHONPATH": str(fake)})
    assert "needs matplotlib" in r.stderr
    assert "pip install" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_show_png_unwritable_path_is_an_error(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    r = fails("show", "f32[2,3]", "--png", tmp_path / "no" / "such" / "dir" / "x.png")
    assert "No such file or directory" in r.stderr


# -- index -----------------------------------------------------------------------


def test_index_doc_example_and_back():
    r = ok("index", "f32[3,5]{1,0:T(2,2)}", "2,3", "--offset", "17", "--offset", "9")
    lines = r.stdout.splitlines()
    assert lines[0] == "f32[3,5]{1,0:T(2,2)}"
    assert lines[1] == f"(2,3) -> element offset 17, byte offset {17 * 4}"
    assert lines[2].endswith("-> (2,3)")
    assert lines[3].endswith("-> padding")   # offset 9: the padding column of tile (0,2)


def test_index_seed_column_major():
    # {0,1}: a d b e c f -> element (0,2) ("c") is at offset 4
    r = ok("index", "f32[2,3]{0,1}", "0,2", "(1,0)")
    assert "(0,2) -> element offset 4," in r.stdout
    assert "(1,0) -> element offset 1," in r.stdout


def test_index_sub_byte_reports_bits():
    # s4 with E(4): two elements per byte, low bits first; (0,1) is element 1
    r = ok("index", "s4[3,5]{1,0:E(4)}", "0,1", "1,1")
    assert "(0,1) -> element offset 1, byte offset 0, bits 4-7" in r.stdout
    assert "(1,1) -> element offset 6, byte offset 3, bits 0-3" in r.stdout


def test_index_with_pad():
    r = ok("index", "f32[2,3]{0,1}", "--pad", "3,5", "1,2", "--offset", "2")
    assert "(1,2) -> element offset 7," in r.stdout   # a d 0 b e 0 c f ...: f at 7
    assert "-> padding" in r.stdout


def test_index_out_of_bounds():
    r = fails("index", "f32[3,5]", "3,0")
    assert "index 3 is out of bounds for axis 0 with size 3" in r.stderr


def test_index_negative_is_rejected():
    r = fails("index", "f32[3,5]", "0,-1")
    assert "out of bounds" in r.stderr


def test_index_wrong_rank():
    r = fails("index", "f32[3,5]", "1")
    assert "1 entries" in r.stderr and "2 dimensions" in r.stderr


def test_offset_past_the_end():
    r = fails("index", "f32[3,5]{1,0:T(2,2)}", "--offset", "24")
    assert "24" in r.stderr and "out of bounds" in r.stderr


def test_index_needs_something_to_do():
    r = fails("index", "f32[3,5]")
    assert "--offset" in r.stderr


def test_index_garbage():
    r = fails("index", "f32[3,5]", "a,b")
    assert "integers" in r.stderr


# -- hlo -------------------------------------------------------------------------


def _instruction_lines(path):
    """Independent count: lines of the form '[ROOT] %name = ...' in the file."""
    with open(path) as f:
        return [m.group(2) for m in
                (re.match(r"\s*(ROOT\s+)?%([\w.\-]+) = ", line) for line in f)
                if m]


def test_hlo_json_on_a_tpu_dump():
    path = DATA / "tpu_module.hlo"
    r = ok("hlo", path, "--json")
    assert r.stderr == ""     # nothing skipped, stack-frame tables included
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == _instruction_lines(path)
    by = {x["name"]: x for x in rows}
    for x in rows:
        assert {"computation", "name", "opcode", "shape", "bytes", "padded_bytes",
                "memory_space"} <= set(x)
    a = by["Arg_0.1"]
    assert a["computation"] == "main.42" and a["opcode"] == "parameter"
    assert a["shape"] == "f32[8,1,1024]{1,2,0:T(8,128)}"
    assert (a["bytes"], a["padded_bytes"]) == (PADDED_UNPADDED, PADDED_PADDED)
    c = by["copy.5"]
    assert c["memory_space"] == 1
    assert c["bytes"] == c["padded_bytes"] == 256 * 512 * 2
    s = by["Arg_2.3"]                       # s32[]{:T(128)}: one tile of 128 words
    assert (s["bytes"], s["padded_bytes"]) == (4, 128 * 4)
    t = by["many.1"]                        # six f32[]{:T(128)} in a tuple
    assert t["shape"].count("f32[]") == 6 and "/*index=5*/" in t["shape"]
    assert (t["bytes"], t["padded_bytes"]) == (6 * 4, 6 * 128 * 4)
    assert by["token.0"]["bytes"] == 0 and by["token.0"]["memory_space"] is None
    assert by["tuple.43"]["is_root"] is True
    assert by["fusion.7"]["kind"] == "kLoop"
    assert by["fusion.7"]["called_computations"] == ["fused_computation.7"]
    assert by["while.1"]["called_computations"] == ["while_cond.2", "while_body.2"]
    assert by["reduce.2"]["computation"] == "fused_computation.8"


def test_hlo_text_table_and_totals():
    r = ok("hlo", DATA / "tpu_module.hlo")
    out = r.stdout
    assert "ENTRY computation main.42" in out
    assert re.search(r"Arg_0\.1\s+parameter\s+32\.0K\s+4\.00M", out)
    assert "module jit_train_step: 38 instructions in 6 computations" in out
    assert "3 fusion bodies / reducer computations left out" in out
    assert "S(1) fast on-chip memory (VMEM on TPU)" in out
    top = out.split("by padding waste:")[1].splitlines()
    assert top[1].strip().startswith("1. Arg_0.1 = parameter (main.42, line 46)")


def test_hlo_totals_leave_out_fusion_bodies():
    # results with S(0) arrays outside fused_computation.7/.8 and region_add.1,
    # counted by hand (tokens hold no array; copy.5 is in S(1))
    while_body = ["loop_state.1", "gte.0", "one.1", "next.1", "gte.1", "tuple.4"]
    while_cond = ["loop_state.2", "gte.3", "limit.1", "lt.1"]
    entry = ["Arg_0.1", "Arg_1.2", "Arg_2.3", "fusion.8", "scale.1", "fusion.7", "init.1",
             "while.1", "many.1", "gte.9", "gte.10", "tuple.43"]
    r = ok("hlo", DATA / "tpu_module.hlo", "--summary", "--top", "0")
    line = [x for x in r.stdout.splitlines() if x.strip().startswith("S(0)")][0]
    assert line.split()[-4] == str(len(while_body + while_cond + entry))
    vmem = [x for x in r.stdout.splitlines() if x.strip().startswith("S(1)")][0]
    assert vmem.split()[-4:] == ["1", "256.0K", "256.0K", "0B"]   # copy.5: 256*512*2 bytes
    assert "top" not in r.stdout.split("totals")[1]
    assert "ENTRY computation" not in r.stdout   # --summary: no table


def test_hlo_top_n():
    r = ok("hlo", DATA / "tpu_module.hlo", "--summary", "--top", "1")
    assert "top 1 by padding waste:" in r.stdout
    assert "1. Arg_0.1" in r.stdout and " 2. " not in r.stdout


def test_hlo_csv():
    r = ok("hlo", DATA / "tpu_module.hlo", "--csv")
    import csv

    rows = list(csv.reader(r.stdout.splitlines()))
    assert rows[0][:8] == ["computation", "name", "opcode", "shape", "bytes", "padded_bytes",
                           "waste", "memory_space"]
    assert len(rows) == 1 + len(_instruction_lines(DATA / "tpu_module.hlo"))
    arg = [x for x in rows if x[1] == "Arg_0.1"][0]
    assert arg[4:7] == [str(PADDED_UNPADDED), str(PADDED_PADDED),
                        str(PADDED_PADDED - PADDED_UNPADDED)]


def test_hlo_json_and_csv_together_is_a_usage_error():
    r = run("hlo", DATA / "tpu_module.hlo", "--json", "--csv")
    assert r.returncode == 2 and r.stderr.startswith("xlashape: error:")


def test_hlo_from_stdin():
    text = (DATA / "tpu_module.hlo").read_text()
    rows = json.loads(ok("hlo", "-", "--json", input=text).stdout)
    assert len(rows) == len(_instruction_lines(DATA / "tpu_module.hlo"))


def test_hlo_gzip(tmp_path):
    gz = tmp_path / "module.txt.gz"
    gz.write_bytes(gzip.compress((DATA / "tpu_module.hlo").read_bytes()))
    rows = json.loads(ok("hlo", gz, "--json").stdout)
    assert len(rows) == len(_instruction_lines(DATA / "tpu_module.hlo"))


def test_hlo_seed_examples_written_across_lines():
    rows = json.loads(ok("hlo", DATA / "seed_examples.hlo", "--json").stdout)
    assert [(x["name"], x["opcode"]) for x in rows] == [("add.936", "add"), ("fusion.3", "fusion")]
    assert rows[0]["bytes"] == 8 * 1 * 1280 * 16384 * 2
    assert rows[1]["memory_space"] == 1
    assert rows[1]["bytes"] == rows[1]["padded_bytes"] == 32 * 32 * 4096 * 2
    assert rows[1]["kind"] == "kCustom"


def test_hlo_malformed_lines_are_reported_and_skipped():
    r = run("hlo", DATA / "malformed.hlo", "--json")
    assert r.returncode == 0
    assert "Traceback" not in r.stderr
    warn = r.stderr.splitlines()
    assert [w.split(":")[2].strip() for w in warn] == ["line 5", "line 6", "line 7", "line 8"]
    assert all(w.startswith("xlashape: warning: line ") for w in warn)
    assert "f33" in warn[1]
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == ["p", "ok.1", "ok.2"]


def test_hlo_max_warnings():
    r = ok("hlo", DATA / "malformed.hlo", "--max-warnings", "1", "--summary")
    lines = r.stderr.splitlines()
    assert len(lines) == 2
    assert "3 more skipped lines not shown" in lines[1]
    assert "4 lines skipped" in r.stdout


def test_hlo_missing_file():
    r = fails("hlo", "/no/such/module.txt")
    assert "No such file or directory: /no/such/module.txt" in r.stderr


def test_hlo_no_instructions_is_an_error(tmp_path):
    p = tmp_path / "prose.txt"
    p.write_text("hello\nthis is not a module\n")
    r = run("hlo", p)
    assert r.returncode == 2
    assert "no HLO instructions" in r.stderr.splitlines()[-1]
    assert "line 1:" in r.stderr


def test_hlo_empty_input_is_an_error():
    r = fails("hlo", "-", input="")
    assert "no HLO instructions" in r.stderr


# -- out-of-memory report -------------------------------------------------------------


def test_hlo_reads_a_tpu_out_of_memory_report():
    r = ok("hlo", DATA / "oom_report.txt", "--json")
    assert r.stderr == ""          # prose around the allocations is not "malformed"
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == ["fusion.1265", "broadcast.3115", "copy.77"]
    assert [x["opcode"] for x in rows] == ["fusion", "broadcast", "copy"]
    f, b, c = rows
    assert f["bytes"] == f["padded_bytes"] == 32 * 4096 * 4096 * 4
    # bf16[8,1280,1,16384]{3,2,1,0:...}: the size-1 dim is second-most-minor, tiled by 8
    assert b["bytes"] == 8 * 1280 * 1 * 16384 * 2
    assert b["padded_bytes"] == 8 * 1280 * 8 * 16384 * 2
    # f32[1024,50257]{1,0:T(8,128)}: 50257 rounds up to 50304
    assert c["padded_bytes"] == 1024 * 50304 * 4
    assert b["report"] == {"size": "2.50G", "unpadded_size": "320.00M",
                           "allocation_type": "HLO temp",
                           "op_name": "jit(train_step)/jit(main)/mlp/up_proj/broadcast_in_dim",
                           "label": "broadcast.3115 = broadcast(param.7), dimensions={0,1,3}"}


def test_hlo_oom_text_output_matches_the_reports_own_figures():
    out = ok("hlo", DATA / "oom_report.txt").stdout
    assert "3 allocations from an out-of-memory report" in out
    row = [x for x in out.splitlines() if x.strip().startswith("broadcast.3115")][0]
    assert row.split()[2:5] == ["320.00M", "2.50G", "2.19G"]   # as the report says
    assert "report: size 2.50G, unpadded size 320.00M" in out


def test_hlo_oom_single_line_message():
    msg = ("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. 1. Size: 2.50G "
           "Shape: bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)} Unpadded size: 320.00M\n")
    rows = json.loads(ok("hlo", "-", "--json", input=msg).stdout)
    assert len(rows) == 1
    assert rows[0]["padded_bytes"] == 8 * 1280 * 8 * 16384 * 2
    assert rows[0]["report"]["size"] == "2.50G"


def test_hlo_small_dump_used_in_the_readme():
    out = ok("hlo", DATA / "small_dump.hlo", "--top", "3").stdout
    # bf16[8,1,1280]{2,1,0:T(8,128)(2,1)}: physical (8, 1, 1280); the (8,128) tile
    # pads the size-1 dim to 8: 8*8*1280*2 bytes instead of 8*1*1280*2
    logical, padded = 8 * 1 * 1280 * 2, 8 * 8 * 1280 * 2
    assert (logical, padded) == (20 * 1024, 160 * 1024)
    row = [x for x in out.splitlines() if x.strip().startswith("x.vmem")][0]
    assert row.split()[2:6] == ["20.0K", "160.0K", "140.0K", "1"]
    assert "module jit_layer_norm: 11 instructions in 3 computations" in out
    assert "(2 fusion bodies / reducer computations left out" in out
    rows = json.loads(ok("hlo", DATA / "small_dump.hlo", "--json").stdout)
    x = [r for r in rows if r["name"] == "x"][0]
    assert (x["bytes"], x["padded_bytes"], x["waste"]) == (logical, padded, padded - logical)


def test_show_scalar_with_a_tile():
    # a scalar tiled by (128) takes one whole tile (spec §8.4: RoundUpTo(1, 128))
    out = ok("show", "f32[]{:T(128)}", "--slots", "4").stdout
    assert "1 element in 128 slots (127 padding)" in out
    assert section(out, "memory order")[0] == "a 0 0 0"


def test_show_empty_array():
    out = ok("show", "f32[0,3]").stdout
    assert "0 elements in 0 slots" in out
    assert "(no slots: the array is empty)" in out


def test_show_combined_dimensions_doc_example():
    # tiled_layout.md: f32[2,7,8,11,10] with tile (*,*,2,*,3) -> [112,110] tiled
    # by (2,3) -> physical (56,37,2,3)
    out = ok("show", "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}", "--slots", "8").stdout
    n = 2 * 7 * 8 * 11 * 10
    assert f"{n} elements in {56 * 37 * 2 * 3} slots ({56 * 37 * 2 * 3 - n} padding)" in out


def test_show_sub_byte_packing_keeps_element_order():
    out = ok("show", "s4[3,5]{1,0:T(2,4)E(4)}", "--no-offsets").stdout
    # tiles of 2x4: rows a-d / f-i, then e and j with padding
    assert section(out, "memory order")[0].split()[:12] == list("abcdfghie000")


def test_hlo_negative_top_is_a_usage_error():
    r = fails("hlo", DATA / "small_dump.hlo", "--top", "-1")
    assert "--top must be >= 0" in r.stderr


def test_progress_is_drawn_on_a_terminal_and_erased(monkeypatch, capsys):
    # in-process: the display logic of `hlo` progress (shown only when stderr is
    # a terminal and the input is large, which a subprocess test cannot fake)
    from xlashape.cli import hlo as cli

    clock = iter(range(0, 10_000))
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    lines = ["x = f32[] constant(0)\n"] * (3 * 16384)
    total = sum(map(len, lines))
    p = cli._Progress(iter(lines), total, enabled=True)
    assert sum(1 for _ in p) == len(lines)
    p.done()
    err = capsys.readouterr().err
    assert "xlashape: reading" in err and "(67%)" in err
    assert err.endswith("\r")          # the line is cleared at the end


def test_progress_is_silent_when_disabled(capsys):
    from xlashape.cli import hlo as cli

    p = cli._Progress(iter(["a\n"] * 40000), 80000, enabled=False)
    assert sum(1 for _ in p) == 40000
    p.done()
    assert capsys.readouterr().err == ""


def test_hlo_windows_line_endings_and_tabs():
    text = "ENTRY %e {\r\n\t%p = f32[4]{0} parameter(0)\r\n\tROOT %n = f32[4]{0} negate(f32[4]{0} %p)\r\n}\r\n"
    rows = json.loads(ok("hlo", "-", "--json", input=text).stdout)
    assert [(x["name"], x["bytes"]) for x in rows] == [("p", 16), ("n", 16)]


def test_hlo_details_show_operands_and_attributes():
    out = ok("hlo", DATA / "seed_examples.hlo", "--details").stdout
    assert "      operands: %exponential.183, %broadcast.3115" in out
    assert "      operands: bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} %fusion.32" in out
    assert "      attributes: kind=kCustom, calls=%all-reduce-scatter.3" in out
    rows = json.loads(ok("hlo", DATA / "tpu_module.hlo", "--details", "--json").stdout)
    by = {x["name"]: x for x in rows}
    assert by["sum.1"]["operands"] == [
        {"name": "lhs.1", "shape": "f32[]{:T(128)}"}, {"name": "rhs.1", "shape": "f32[]{:T(128)}"}]
    assert by["Arg_2.3"]["argument"] == "2" and by["Arg_2.3"]["operands"] == []
    assert by["reduce.2"]["attributes"]["dimensions"] == "{1}"
    assert by["Arg_0.1"]["attributes"]["sharding"] == "{replicated}"


def test_hlo_details_bad_operand_shape_is_a_warning():
    r = ok("hlo", "-", "--details", input="%x = f32[2]{0} negate(f33[2]{0} %p)\n")
    assert "operands: f33[2]{0} %p" in r.stdout
    assert r.stderr.startswith("xlashape: warning: line 1: operand of x: ")
    assert "1 instruction, 1 line, 1 other warning" in r.stdout


# -- regressions from user reports ---------------------------------------------


def _hlo_rows(text):
    r = ok("hlo", "-", "--json", input=text)
    return r, json.loads(r.stdout)


@pytest.mark.parametrize("attr", [
    r'metadata={op_name="jit(f)/5\" screen"}',   # one escaped quote inside braces
    r'backend_config="a\"b"',                    # one escaped quote, no braces
    r'backend_config="\"\\"',                    # escaped quote then escaped backslash
])
def test_hlo_strings_with_escaped_quotes_do_not_swallow_lines(attr):
    text = ("ENTRY %main {\n"
            "  %p = u8[3]{0} parameter(0)\n"
            f"  %a = u8[3]{{0}} custom-call(%p), {attr}\n"
            "  ROOT %b = u8[3]{0} negate(%a)\n"
            "}\n")
    r, rows = _hlo_rows(text)
    assert r.stderr == ""
    assert [(x["name"], x["line"]) for x in rows] == [("p", 2), ("a", 3), ("b", 4)]
    details = ok("hlo", "-", "--details", input=text).stdout
    assert f"attributes: {attr}" in details


def test_hlo_even_backslashes_before_a_quote_end_the_string():
    # "a\\" is the string a\ : the quote after the two backslashes closes it,
    # so the brace after it closes the block and the instruction is complete
    text = ('ENTRY %main {\n'
            '  %a = u8[3]{0} custom-call(), backend_config={x="a\\\\"}\n'
            '  ROOT %b = u8[3]{0} negate(%a)\n'
            '}\n')
    assert '"a\\\\"}' in text  # two backslash characters in the input
    r, rows = _hlo_rows(text)
    assert r.stderr == ""
    assert [x["name"] for x in rows] == ["a", "b"]


def test_hlo_buffer_shaped_result():
    text = ("ENTRY %main {\n"
            '  %buf = b(f32[16]{0:T(256)}) custom-call(), custom_call_target="alloc"\n'
            "  ROOT %r = u8[3]{0} custom-call()\n"
            "}\n")
    r, rows = _hlo_rows(text)
    assert r.stderr == ""
    buf = rows[0]
    assert (buf["name"], buf["opcode"], buf["shape"]) == ("buf", "custom-call", "b(f32[16]{0:T(256)})")
    # 16 f32 = 64 bytes; the T(256) tile pads the 16 elements to 256: 1024 bytes
    assert (buf["bytes"], buf["padded_bytes"]) == (16 * 4, 256 * 4)


def test_hlo_details_give_the_parameter_number_not_an_operand():
    text = "ENTRY %m {\n  %p = f32[4]{0} parameter(7)\n  ROOT %n = f32[4]{0} negate(%p)\n}\n"
    out = ok("hlo", "-", "--details", input=text).stdout
    assert "parameter number: 7" in out
    assert "operands: 7" not in out
    assert "operands: %p" in out


def test_hlo_one_left_out_computation_is_singular():
    text = ("%add (x: f32[], y: f32[]) -> f32[] {\n"
            "  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(%x, %y)\n}\n\n"
            "ENTRY %m {\n  %p = f32[4]{0} parameter(0)\n  %z = f32[] constant(0)\n"
            "  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add\n}\n")
    out = ok("hlo", "-", input=text).stdout
    assert "(1 fusion body / reducer computation left out" in out


def test_describe_unbounded_dimension_prints_question_mark():
    out = ok("describe", "f32[?,128]{1,0:T(8,128)}").stdout
    assert field(out, "memory order") == "major to minor: dim 0 (?), dim 1 (128)"
    assert "-9223372036854775808" not in out


def test_describe_bounded_dimension_prints_its_bound():
    out = ok("describe", "f32[<=5,3]{1,0}").stdout
    assert field(out, "memory order") == "major to minor: dim 0 (<=5), dim 1 (3)"
    assert "dimension 0: <=5, 1: 3" in field(out, "dimensions")


def test_describe_tuple_with_unbounded_element_says_bytes_are_unknown():
    out = ok("describe", "(f32[?,2], s32[3])").stdout
    assert field(out, "logical bytes").startswith("unknown")
    assert field(out, "physical bytes").startswith("unknown")
    assert "None" not in out


def test_describe_singular_words():
    out = ok("describe", "pred[]").stdout
    assert field(out, "element type").startswith("pred: ")
    assert "1 bits" not in out and "1 elements" not in out and "1 slots" not in out
    assert "rank 0 (a scalar), 1 element" in field(out, "dimensions")


def test_index_one_bit_elements_name_one_bit():
    # u1 elements packed 8 per byte: element 11 is bit 11 - 8 = 3 of byte 1
    out = ok("index", "u1[16]{0:E(1)}", "11").stdout
    assert "byte offset 1, bit 3" in out
    assert "bits 3-3" not in out


# 2**62 * 4 elements overflow int64 (ShapeUtil::ValidateShape: "Dimensions overflow")
HUGE = f"f32[{2 ** 62},4]{{1,0}}"


@pytest.mark.parametrize("args", [("describe", HUGE), ("explain", HUGE),
                                  ("show", HUGE), ("index", HUGE, "0,0")])
def test_shape_xla_rejects_gets_a_warning(args):
    r = ok(*args)
    warn = [x for x in r.stderr.splitlines() if "XLA would reject this shape" in x]
    assert len(warn) == 1, r.stderr
    assert warn[0].startswith("xlashape: warning: XLA would reject this shape: ")
    assert "overflow" in warn[0]


def test_valid_shape_gets_no_warning():
    assert ok("describe", "f32[2,3]{1,0}").stderr == ""


@pytest.mark.parametrize("shape,value,fragment", [
    ("u8[2,3]{1,0}", "999", "999"),      # u8 holds 0..255
    ("u8[2,3]{1,0}", "-1", "-1"),
    ("s4[2,3]{1,0}", "8", "8"),          # s4 holds -8..7
    ("pred[2,3]{1,0}", "2", "2"),        # pred holds 0 and 1
    ("f16[2,3]{1,0}", "1e10", "1e10"),   # f16's largest finite value is 65504
])
def test_padding_value_the_element_type_cannot_hold(shape, value, fragment):
    r = fails("show", shape, "--pad", "4,4", "--padding-value", value)
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1
    assert f"--padding-value {fragment} cannot be held by {shape.split('[')[0]}" in r.stderr


def test_padding_value_at_the_type_limit_is_accepted():
    out = ok("show", "u8[2,3]{1,0}", "--pad", "4,4", "--padding-value", "255").stdout
    assert "padding shown as 255" in out


def test_show_png_bad_path_prints_no_picture():
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    r = fails("show", "f32[2,3]", "--png", "/nonexistent/x.png")
    assert r.stdout == ""
    assert "No such file or directory" in r.stderr


def test_describe_warns_about_a_layout_xla_rejects():
    # {0,0} is not a permutation of the dimensions (spec: minor_to_major)
    r = ok("describe", "f32[2,3]{0,0}")
    assert r.stderr.startswith("xlashape: warning: XLA would reject this shape: ")
    assert "minor_to_major" in r.stderr
    assert field(r.stdout, "physical bytes").startswith("unknown")


# -- the package structure ---------------------------------------------------------


def test_every_command_module_has_the_documented_interface():
    import argparse

    from xlashape import cli

    names = [c.NAME for c in cli.COMMANDS]
    assert names == ["describe", "explain", "show", "index", "hlo"]
    for c in cli.COMMANDS:
        assert c.__name__ == f"xlashape.cli.{c.NAME}"
        assert callable(c.add_parser) and callable(c.run)
    sub = cli.build_parser()._subparsers._group_actions[0]
    assert isinstance(sub, argparse._SubParsersAction)
    assert list(sub.choices) == names


def test_pyproject_packages_every_package_directory():
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").exists():
        pytest.skip("not run from a checkout")
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = sorted(".".join(p.parent.relative_to(root).parts)
                   for p in (root / "xlashape").rglob("__init__.py"))
    assert "xlashape.cli" in found
    assert sorted(packages) == found


def test_the_cli_imports_no_private_name_of_another_module():
    # `from ..hlo_module import _open_text` and the like: the CLI uses public API
    pkg = Path(__file__).resolve().parent.parent / "xlashape" / "cli"
    if not pkg.exists():
        pytest.skip("not run from a checkout")
    bad = []
    for path in pkg.glob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*from \.\.([\w.]*) import (.*)", line)
            if not m:
                continue
            names = [x.strip().split(" ")[0] for x in m.group(2).strip("()").split(",")]
            private = [x for x in names + m.group(1).split(".")
                       if x.startswith("_") and not x.endswith("__")]
            if private:
                bad.append(f"{path.name}:{n}: {line.strip()}")
    assert bad == []
