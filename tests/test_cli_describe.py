"""``xlashape describe``."""

import json

from cli_util import SEED_SHAPE, field, ok


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


def test_describe_warns_about_a_layout_xla_rejects():
    # {0,0} is not a permutation of the dimensions (spec: minor_to_major)
    r = ok("describe", "f32[2,3]{0,0}")
    assert r.stderr.startswith("xlashape: warning: XLA would reject this shape: ")
    assert "minor_to_major" in r.stderr
    assert field(r.stdout, "physical bytes").startswith("unknown")


# -- describe --json ---------------------------------------------------------------


def describe_json(*args):
    r = ok("describe", *args, "--json")
    return json.loads(r.stdout, parse_constant=_strict)


def _strict(name):
    raise AssertionError(f"non-standard JSON constant {name}")


def test_describe_json_the_seed_shape():
    obj = describe_json(SEED_SHAPE)
    assert obj["shape"] == SEED_SHAPE and obj["kind"] == "array"
    assert (obj["element_type"], obj["bit_width"], obj["byte_width"]) == ("bf16", 16, 2)
    assert obj["dimensions"] == [8, 1, 1280, 16384]
    assert obj["dynamic_dimensions"] == [False] * 4
    assert obj["elements"] == 8 * 1 * 1280 * 16384
    assert obj["layout"] == "{3,2,0,1:T(8,128)(2,1)}"
    assert obj["minor_to_major"] == [3, 2, 0, 1] and obj["major_to_minor"] == [1, 0, 2, 3]
    assert obj["tiles"] == [[8, 128], [2, 1]]
    assert obj["memory_space"] == 0 and obj["element_size_in_bits"] == 0
    assert obj["unpadded_bytes"] == obj["padded_bytes"] == 8 * 1280 * 16384 * 2
    assert obj["physical_dimensions"] == [1, 8, 160, 128, 4, 128, 2, 1]
    assert obj["slots"] == 1 * 8 * 160 * 128 * 4 * 128 * 2 * 1
    assert obj["bits_per_element"] == 16
    # physical order major->minor: dims 1, 0, 2, 3; (8,128) covers dims 2 and 3
    one, two = obj["tile_levels"]
    assert one == {"tile": [8, 128], "dimensions": [[2], [3]], "group_sizes": [1280, 16384],
                   "group_tiles": [8, 128], "tile_counts": [1280 // 8, 16384 // 128]}
    # (2,1) tiles the (8,128) tile itself
    assert two == {"tile": [2, 1], "dimensions": None, "group_sizes": [8, 128],
                   "group_tiles": [2, 1], "tile_counts": [4, 128]}


def test_describe_json_combined_dimensions_doc_example():
    # tiled_layout.md: f32[2,7,8,11,10] with tile (*,*,2,*,3): dims 0,1,2 combine
    # to 112 and dims 3,4 to 110, then (2,3) tiles give [56,37,2,3]
    obj = describe_json("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")
    assert obj["tiles"] == [["*", "*", 2, "*", 3]]
    (lv,) = obj["tile_levels"]
    assert lv["dimensions"] == [[0, 1, 2], [3, 4]]
    assert lv["group_sizes"] == [2 * 7 * 8, 11 * 10] and lv["group_tiles"] == [2, 3]
    assert lv["tile_counts"] == [56, 37]
    assert obj["physical_dimensions"] == [56, 37, 2, 3]
    assert obj["padded_bytes"] == 56 * 37 * 2 * 3 * 4


def test_describe_json_a_tile_of_higher_rank_adds_size_1_dimensions():
    # f32[3] tiled (2,2): a size-1 dimension is prepended, padded to 2
    (lv,) = describe_json("f32[3]{0:T(2,2)}")["tile_levels"]
    assert lv["dimensions"] == [[None], [0]]
    assert lv["group_sizes"] == [1, 3] and lv["tile_counts"] == [1, 2]


def test_describe_json_agrees_with_the_text():
    text = ok("describe", SEED_SHAPE).stdout
    obj = describe_json(SEED_SHAPE)
    assert field(text, "logical bytes").startswith(f"{obj['unpadded_bytes']} ")
    assert field(text, "physical bytes").startswith(f"{obj['padded_bytes']} ")
    assert field(text, "physical dims").startswith(
        "[" + ",".join(map(str, obj["physical_dimensions"])) + "]")


def test_describe_json_uses_explains_keys_for_the_same_facts():
    for args in ((PADDED_SHAPE,), ("f32[2,3]{0,1}", "--pad", "3,5")):
        d = describe_json(*args)
        e = json.loads(ok("explain", *args, "--json").stdout)
        for key in ("shape", "unpadded_bytes", "padded_bytes", "physical_dimensions"):
            assert d[key] == e[key], key
        assert d.get("padded_dimensions") == e.get("padded_dimensions")
    assert describe_json("f32[2,3]{0,1}", "--pad", "3,5")["padded_dimensions"] == [3, 5]


PADDED_SHAPE = "f32[8,1,1024]{1,2,0:T(8,128)}"


def test_describe_json_tuple_token_buffer_opaque():
    obj = describe_json("(f32[3,5]{1,0:T(2,2)}, s32[]{:S(1)}, token[], (b(f32[16]{0:T(256)})))")
    assert obj["kind"] == "tuple"
    kinds = [e["kind"] for e in obj["elements"]]
    assert kinds == ["array", "array", "token", "tuple"]
    # f32[3,5] tiled (2,2): 4 x 6 slots (doc figure 1); the buffer's T(256) pads 16 to 256
    assert obj["elements"][0]["padded_bytes"] == 24 * 4
    buf = obj["elements"][3]["elements"][0]
    assert buf["kind"] == "buffer" and buf["buffer_shape"]["shape"] == "f32[16]{0:T(256)}"
    assert (buf["unpadded_bytes"], buf["padded_bytes"]) == (16 * 4, 256 * 4)
    assert obj["unpadded_bytes"] == 15 * 4 + 4 + 16 * 4
    assert obj["padded_bytes"] == 24 * 4 + 4 + 256 * 4
    spaces = {s["memory_space"]: s for s in obj["memory_spaces"]}
    assert spaces[1] == {"memory_space": 1, "unpadded_bytes": 4, "padded_bytes": 4}
    assert describe_json("token[]") == {"shape": "token[]", "kind": "token",
                                        "unpadded_bytes": 0, "padded_bytes": 0}
    assert describe_json("opaque[]")["kind"] == "opaque"


def test_describe_json_unknown_sizes_are_null():
    obj = describe_json("f32[?,<=4]{1,0}")
    assert obj["dimensions"] == [None, 4]
    assert obj["dynamic_dimensions"] == [True, True]
    assert obj["elements"] is None and obj["unpadded_bytes"] is None
    assert obj["padded_bytes"] is None and obj["physical_dimensions"] is None
    tup = describe_json("(f32[?,2], s32[3])")
    assert tup["unpadded_bytes"] is None and tup["padded_bytes"] is None


def test_describe_json_a_layout_that_cannot_be_planned_says_why():
    r = ok("describe", "f32[2,3]{0,0}", "--json")
    assert "XLA would reject this shape" in r.stderr       # the warning stays on stderr
    obj = json.loads(r.stdout)
    assert obj["padded_bytes"] is None and obj["physical_dimensions"] is None
    assert "minor_to_major" in obj["error"] or "permutation" in obj["error"]
    assert obj["unpadded_bytes"] == 2 * 3 * 4


def test_describe_json_without_a_layout_gets_the_default_one():
    # XLA's parser gives an array written without a layout the descending one
    obj = describe_json("f32[2,3]")
    assert obj["layout"] == "{1,0}" and obj["minor_to_major"] == [1, 0]


def test_describe_json_non_finite_padding_value_stays_strict_json():
    obj = describe_json("f32[2]", "--pad", "3", "--padding-value", "nan")
    assert obj["padding_value"] == "NaN"
    assert float(obj["padding_value"]) != float(obj["padding_value"])


def test_describe_proto_prints_xlas_bytes_and_the_text_format():
    # XLA's bytes for this shape (jaxlib 0.10.2 Shape(text).to_serialized_proto(),
    # as recorded in data/xla_shape_protos.jsonl.gz)
    import gzip
    import os

    fixture = os.path.join(os.path.dirname(__file__), "data", "xla_shape_protos.jsonl.gz")
    with gzip.open(fixture, "rt") as fh:
        fh.readline()
        text, xla_text, hexed = next(json.loads(line) for line in fh
                                     if "T(" in line and line.startswith('["('))
    out = ok("describe", "--proto", text).stdout.splitlines()
    assert out[0].split()[:3] == ["ShapeProto", str(len(hexed) // 2), "bytes"]
    assert out[1] == hexed
    assert "element_type: TUPLE" in out and "tuple_shapes {" in out
    obj = json.loads(ok("describe", "--proto", "--json", text).stdout)
    assert obj["proto_hex"] == hexed and obj["shape"] == xla_text
    assert obj["proto_text"].startswith("element_type: TUPLE\n")


def test_shape_argument_may_be_a_shapeproto_file(tmp_path):
    # XLA's own bytes for a tiled shape, from the fixture
    import gzip
    import os

    fixture = os.path.join(os.path.dirname(__file__), "data", "xla_shape_protos.jsonl.gz")
    with gzip.open(fixture, "rt") as fh:
        fh.readline()
        text, xla_text, hexed = next(json.loads(line) for line in fh
                                     if ":T(" in line and line.startswith('["bf16'))
    path = tmp_path / "shape.pb"
    path.write_bytes(bytes.fromhex(hexed))
    out = ok("describe", str(path)).stdout
    assert field(out, "shape") == xla_text
    assert field(ok("describe", text).stdout, "physical bytes") == field(out, "physical bytes")
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x10\x0b\x1a\x05\x01")
    from cli_util import one_error_line

    assert "ShapeProto" in one_error_line("describe", str(bad)).stderr
