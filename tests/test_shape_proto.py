"""Shape / Layout / Tile / ProgramShape <-> XLA's ShapeProto, byte for byte.

The golden bytes come from XLA: ``data/xla_shape_protos.jsonl.gz`` holds,
for every shape string of the test data and 12,000 random ones, what
jaxlib's ``xla_client.Shape(text).to_serialized_proto()`` returned (made by
``oracle/gen_shape_protos.py``). Other expectations are built with the
message classes of ``xlashape.protos`` field by field, independently of the
conversion code.
"""

import gzip
import json
import os
import pickle

import pytest

from xlashape import Layout, Shape, SplitConfig, Tile, parse_shape, protos
from xlashape.errors import ProtoDecodeError, ShapeValueError, UnreadableInputError
from xlashape.layout import COMBINE_DIMENSION
from xlashape.shape_proto import ProgramShape, unmodeled_fields

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "xla_shape_protos.jsonl.gz")


def _fixture():
    with gzip.open(FIXTURE, "rt") as fh:
        header = json.loads(fh.readline())
        rows = [json.loads(line) for line in fh]
    return header, rows


HEADER, ROWS = _fixture()


def test_fixture_is_big_enough():
    assert len(ROWS) >= 10000 and HEADER["kept"] == len(ROWS)
    assert HEADER["corpus_strings"] > 0


def test_to_proto_is_xlas_bytes_for_every_fixture_shape():
    mismatches = []
    for text, xla_text, hexed in ROWS:
        shape = parse_shape(text)
        if shape.to_proto().hex() != hexed:
            mismatches.append((text, shape.to_proto().hex(), hexed))
    assert mismatches == []


def test_from_proto_of_xlas_bytes_is_the_parsed_shape():
    mismatches = []
    for text, xla_text, hexed in ROWS:
        data = bytes.fromhex(hexed)
        got = Shape.from_proto(data)
        if got != parse_shape(text) or str(got) != xla_text or got.to_proto() != data:
            mismatches.append((text, str(got)))
        if unmodeled_fields(got):
            mismatches.append((text, unmodeled_fields(got)))
    assert mismatches == []


def test_layout_to_proto_is_the_layout_field_of_xlas_shape_bytes():
    checked = 0
    for text, _, hexed in ROWS[::7]:
        msg = protos.parse_message(protos.ShapeProto, bytes.fromhex(hexed))
        shape = parse_shape(text)
        if shape.is_array and shape.layout is not None:
            assert shape.layout.to_proto() == msg.layout.SerializeToString(), text
            assert Layout.from_proto(msg.layout.SerializeToString()) == shape.layout
            for tile, tmsg in zip(shape.layout.tiles, msg.layout.tiles):
                assert tile.to_proto() == tmsg.SerializeToString()
                assert Tile.from_proto(tmsg) == tile
            checked += 1
    assert checked > 1000


def test_combined_dimension_and_unbounded_size_are_int64_min():
    shape = parse_shape("f32[?,3]{1,0:T(*,128)}")
    msg = shape.to_proto_message()
    assert msg.dimensions[0] == -(1 << 63) and list(msg.is_dynamic_dimension) == [True, False]
    assert msg.layout.tiles[0].dimensions[0] == -(1 << 63) == COMBINE_DIMENSION
    assert Shape.from_proto(shape.to_proto()) == shape


def test_split_config_round_trip():
    sc = SplitConfig(1, (4, 8))
    expect = protos.SplitConfigProto(dimension=1, split_indices=[4, 8]).SerializeToString()
    assert sc.to_proto() == expect and SplitConfig.from_proto(expect) == sc


def test_program_shape():
    params = [parse_shape("f32[2,3]{1,0}"), parse_shape("(s32[], token[])")]
    result = parse_shape("bf16[4]{0:T(128)}")
    ps = ProgramShape(params, result, ["a", "b"])
    expect = protos.ProgramShapeProto()
    for p in params:
        expect.parameters.add().ParseFromString(p.to_proto())
    expect.result.ParseFromString(result.to_proto())
    expect.parameter_names.extend(["a", "b"])
    assert ps.to_proto() == expect.SerializeToString()
    back = ProgramShape.from_proto(ps.to_proto())
    assert back == ps and str(back) == "(a: f32[2,3]{1,0}, b: (s32[], token[])) -> bf16[4]{0:T(128)}"


def test_element_types_xlashape_does_not_have_are_named():
    for text, hexed in HEADER["unsupported_by_xlashape"].items():
        with pytest.raises(ProtoDecodeError, match=r"F6E[23]M[23]FN") as exc:
            Shape.from_proto(bytes.fromhex(hexed))
        assert isinstance(exc.value, ShapeValueError)
        assert "element_type" in str(exc.value)


def test_unmodeled_and_unknown_fields_are_kept_and_reported():
    # an older XLA's sparse layout fields, and a field number no XLA has used
    base = parse_shape("(f32[4,5]{1,0}, s8[3]{0})")
    msg = base.to_proto_message()
    lay = msg.tuple_shapes[0].layout
    lay.dim_level_types.extend([0, 1])
    lay.dim_unique.extend([True, True])
    extra = protos.LayoutProto()
    extra.ParseFromString(b"\x98\x06\x07")  # field 99, varint 7: unknown
    lay.MergeFrom(extra)
    data = msg.SerializeToString()
    shape = Shape.from_proto(data)
    assert shape == base  # the modeled fields
    assert sorted(unmodeled_fields(shape)) == [
        "ShapeProto.tuple_shapes[0].layout field 99",
        "ShapeProto.tuple_shapes[0].layout.dim_level_types",
        "ShapeProto.tuple_shapes[0].layout.dim_unique",
    ]
    assert shape.to_proto() == data  # written back
    assert unmodeled_fields(shape.without_layout()) == []  # copies are plain
    assert unmodeled_fields(pickle.loads(pickle.dumps(shape))) == []
    assert unmodeled_fields(base) == []


def test_layout_legacy_padding_has_no_proto_field():
    with pytest.raises(ShapeValueError, match="padded_dimensions"):
        Layout((0,), padded_dimensions=(8,)).to_proto()


def test_absent_tail_padding_means_one_and_memory_space_wraps_to_int8():
    lay = Layout.from_proto(protos.LayoutProto(minor_to_major=[0], memory_space=200))
    assert lay.tail_padding_alignment_in_elements == 1 and lay.memory_space == -56
    assert str(lay) == str(parse_shape("f32[2]{0:S(200)}").layout)


def _shape_msg(**kw):
    return protos.ShapeProto(**kw)


BAD_MESSAGES = [
    (_shape_msg(element_type=11, dimensions=[2, 3], is_dynamic_dimension=[True]),
     "is_dynamic_dimension"),
    (_shape_msg(element_type=13, dimensions=[2]), "tuple shape"),
    (_shape_msg(element_type=11, tuple_shapes=[_shape_msg(element_type=11)]), "tuple_shapes"),
    (_shape_msg(element_type=17, dimensions=[1]), "token"),
    (_shape_msg(element_type=0), "PRIMITIVE_TYPE_INVALID"),
    (_shape_msg(element_type=99), "unknown element type 99"),
    (_shape_msg(element_type=11, dimensions=[-5]), r"dimensions\[0\]"),
    (_shape_msg(element_type=34, tuple_shapes=[_shape_msg(element_type=17)]), "buffer"),
    (_shape_msg(element_type=11, dimensions=[4], layout=protos.LayoutProto(
        minor_to_major=[0], tiles=[protos.TileProto(dimensions=[-2])])),
     r"layout\.tiles\[0\]\.dimensions"),
    (_shape_msg(element_type=13, tuple_shapes=[_shape_msg(
        element_type=11, dimensions=[4], layout=protos.LayoutProto(
            minor_to_major=[0], tail_padding_alignment_in_elements=-3))]),
     r"tuple_shapes\[0\]\.layout"),
    (_shape_msg(element_type=11, dimensions=[4], layout=protos.LayoutProto(
        minor_to_major=[0], index_primitive_type=77)), "index_primitive_type"),
]


@pytest.mark.parametrize("msg, where", BAD_MESSAGES)
def test_bad_messages_raise_naming_the_field(msg, where):
    with pytest.raises(ProtoDecodeError, match=where):
        Shape.from_proto(msg.SerializeToString())


@pytest.mark.parametrize("data", [b"\x10", b"\x1a\x05\x01", b"\x2a\x80", b"\xff",
                                  b"\x22\x02\x22\x00\x22", b"\x07"])
def test_malformed_bytes_raise(data):
    with pytest.raises(ProtoDecodeError) as exc:
        Shape.from_proto(data)
    assert isinstance(exc.value, UnreadableInputError) and isinstance(exc.value, ValueError)


def test_deep_nesting_is_refused_not_a_crash():
    data = b""
    for _ in range(5000):
        data = b"\x10\x0d\x22" + bytes(_varint(len(data))) + data
    with pytest.raises(ProtoDecodeError):
        Shape.from_proto(data)


def _varint(n):
    out = []
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return out


def test_messages_of_another_pool_are_accepted():
    # jaxlib/TensorFlow messages of the same name: read through their bytes
    msg = parse_shape("f32[2]{0}").to_proto_message()
    assert Shape.from_proto(msg) == parse_shape("f32[2]{0}")
    with pytest.raises(TypeError):
        Shape.from_proto("f32[2]")


def test_every_shape_in_the_corpora_protos_round_trips_byte_for_byte():
    # the ShapeProtos XLA wrote into every .hlo.pb(.gz) of the test data (XLA:CPU
    # and XLA:GPU dumps, XLA's serialization of the XLA:TPU modules)
    # (instructions and program shapes): from_proto then to_proto gives them back
    import glob

    data = os.path.join(os.path.dirname(__file__), "data")
    paths = (glob.glob(os.path.join(data, "**", "*.hlo.pb"), recursive=True)
             + glob.glob(os.path.join(data, "**", "*.hlo.pb.gz"), recursive=True))
    seen = set()
    for path in paths:
        module = protos.read_hlo_proto(path).hlo_module
        for comp in module.computations:
            shapes = [i.shape for i in comp.instructions]
            shapes += list(comp.program_shape.parameters) + [comp.program_shape.result]
            for msg in shapes:
                data = msg.SerializeToString()
                if data in seen:
                    continue
                seen.add(data)
                shape = Shape.from_proto(data)
                assert shape.to_proto() == data, (path, str(shape))
                assert parse_shape(str(shape)) == shape
    assert len(seen) > 100


def test_every_program_shape_in_the_corpora_protos_round_trips_byte_for_byte():
    # computations' program_shape and the module's host_program_shape, as XLA wrote them
    import glob

    data = os.path.join(os.path.dirname(__file__), "data")
    paths = (glob.glob(os.path.join(data, "**", "*.hlo.pb"), recursive=True)
             + glob.glob(os.path.join(data, "**", "*.hlo.pb.gz"), recursive=True))
    count = 0
    for path in paths:
        module = protos.read_hlo_proto(path).hlo_module
        messages = [c.program_shape for c in module.computations]
        if module.HasField("host_program_shape"):
            messages.append(module.host_program_shape)
        for msg in messages:
            raw = msg.SerializeToString()
            ps = ProgramShape.from_proto(raw)
            assert ps.to_proto() == raw, path
            assert len(ps.parameters) == len(msg.parameters)
            count += 1
    assert count > 100
