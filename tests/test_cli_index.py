"""``xlashape index``: logical index <-> element offset."""

import json

from cli_util import fails, ok


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


def test_index_one_bit_elements_name_one_bit():
    # u1 elements packed 8 per byte: element 11 is bit 11 - 8 = 3 of byte 1
    out = ok("index", "u1[16]{0:E(1)}", "11").stdout
    assert "byte offset 1, bit 3" in out
    assert "bits 3-3" not in out


# -- index --json ------------------------------------------------------------------


def test_index_json_doc_example_and_back():
    # tiled_layout.md figure 1: f32[3,5]{1,0:T(2,2)}, (2,3) at 17; 24 slots;
    # offset 9 is the padding column of tile (0,2)
    obj = json.loads(ok("index", "f32[3,5]{1,0:T(2,2)}", "2,3", "(0,0)", "--offset", "17",
                        "--offset", "9", "--json").stdout)
    assert obj["shape"] == "f32[3,5]{1,0:T(2,2)}"
    assert obj["bits_per_element"] == 32 and obj["slots"] == 24
    assert obj["indices"] == [
        {"index": [2, 3], "element_offset": 17, "byte_offset": 17 * 4, "bit_offset": 0},
        {"index": [0, 0], "element_offset": 0, "byte_offset": 0, "bit_offset": 0}]
    assert obj["offsets"] == [
        {"element_offset": 17, "byte_offset": 68, "bit_offset": 0, "index": [2, 3],
         "padding": False},
        {"element_offset": 9, "byte_offset": 36, "bit_offset": 0, "index": None,
         "padding": True}]


def test_index_json_sub_byte_elements_give_the_bit():
    # s4 with E(4): two elements per byte, low bits first; (1,1) is element 6
    obj = json.loads(ok("index", "s4[3,5]{1,0:E(4)}", "0,1", "1,1", "--json").stdout)
    assert obj["bits_per_element"] == 4
    assert [(x["element_offset"], x["byte_offset"], x["bit_offset"]) for x in obj["indices"]] \
        == [(1, 0, 4), (6, 3, 0)]
    # u1 packed 8 per byte: element 11 is bit 3 of byte 1
    obj = json.loads(ok("index", "u1[16]{0:E(1)}", "--json", "11").stdout)
    assert obj["indices"][0]["byte_offset"] == 1 and obj["indices"][0]["bit_offset"] == 3


def test_index_json_only_offsets():
    obj = json.loads(ok("index", "f32[2,3]{0,1}", "--pad", "3,5", "--offset", "7",
                        "--json").stdout)
    assert obj["indices"] == []
    assert obj["offsets"][0]["index"] == [1, 2]     # a d 0 b e 0 c f: f at 7


def test_index_json_bad_index_is_still_an_error():
    r = fails("index", "f32[3,5]", "3,0", "--json")
    assert r.stdout == ""
    assert "out of bounds" in r.stderr
