"""``xlashape show``: the pictures of XLA's shapes documentation, for any layout."""

import json
import struct

import pytest

from cli_util import SEED_SHAPE, fails, ok, section


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


def test_show_png_bad_path_prints_no_picture():
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    r = fails("show", "f32[2,3]", "--png", "/nonexistent/x.png")
    assert r.stdout == ""
    assert "No such file or directory" in r.stderr


# -- show --json -------------------------------------------------------------------


def show_json(*args):
    return json.loads(ok("show", *args, "--json").stdout)


def test_show_json_seed_column_major():
    obj = show_json("f32[2,3]{0,1}")
    # {0,1}: memory holds a d b e c f
    assert obj["memory_order"] == [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2]]
    assert obj["memory_order_complete"] is True
    assert obj["offsets"] == [{"slice": [], "rows": [[0, 2, 4], [1, 3, 5]]}]
    assert (obj["elements"], obj["slots"], obj["padding_slots"]) == (6, 6, 0)
    assert obj["padding_value"] == 0 and "padded_dimensions" not in obj
    assert obj["files"] == []


def test_show_json_seed_padding_example():
    # a d 0 b e 0 c f 0 0 0 0 0 0 0
    obj = show_json("f32[2,3]{0,1}", "--pad", "3,5", "--padding-value", "7")
    a, b, c, d, e, f = [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]
    assert obj["memory_order"] == [a, d, None, b, e, None, c, f] + [None] * 7
    assert (obj["elements"], obj["slots"], obj["padding_slots"]) == (6, 15, 9)
    assert obj["padded_dimensions"] == [3, 5] and obj["padding_value"] == 7


def test_show_json_tiled_layout_doc_figure_1():
    obj = show_json("f32[3,5]{1,0:T(2,2)}")
    rows = obj["offsets"][0]["rows"]
    assert rows[2][3] == 17
    assert rows == [[0, 1, 4, 5, 8], [2, 3, 6, 7, 10], [12, 13, 16, 17, 20]]
    holes = [i for i, ix in enumerate(obj["memory_order"]) if ix is None]
    assert holes == [9, 11, 14, 15, 18, 19, 21, 22, 23]


def test_show_json_honours_the_limits():
    obj = show_json(SEED_SHAPE, "--rows", "2", "--cols", "3", "--slices", "1", "--slots", "4")
    assert len(obj["memory_order"]) == 4 and obj["memory_order_complete"] is False
    (sl,) = obj["offsets"]
    assert sl["slice"] == [0, 0] and len(sl["rows"]) == 2 and len(sl["rows"][0]) == 3
    assert "offsets" not in show_json("f32[2,3]", "--no-offsets")


def test_show_json_scalar_and_3d():
    assert show_json("f32[]")["offsets"] == [{"slice": [], "rows": [[0]]}]
    obj = show_json("f32[2,2,3]{2,1,0}")
    assert [s["slice"] for s in obj["offsets"]] == [[0], [1]]
    assert obj["offsets"][1]["rows"] == [[6, 7, 8], [9, 10, 11]]


def test_show_json_with_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    path = tmp_path / "x.png"
    obj = show_json("f32[3,5]{1,0:T(2,2)}", "--png", path)
    assert obj["files"] == [str(path)]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
