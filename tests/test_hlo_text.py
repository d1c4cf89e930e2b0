"""HLO shape/layout text: printing (spec §4) and parsing (spec §3).

Golden strings come from XLA's docs and tests, from real TPU HLO dumps and
from XLA's own parser (see test_xla_oracle.py, which checks the same rows
against jaxlib when it is installed).
"""

import pickle

import pytest

from xlashape import (
    HloParseError,
    InvalidShapeError,
    Layout,
    PrimitiveType,
    Shape,
    ShapeTypeError,
    ShapeIndexError,
    SplitConfig,
    Tile,
    UNBOUNDED_SIZE,
    XlaShapeError,
    parse_layout,
    parse_shape,
)
from xlashape.hlo_text import MAX_NESTING_DEPTH, parse_shape_prefix

P = PrimitiveType
INT64_MIN = -(2**63)


# ===========================================================================
# Printing (spec §4)

@pytest.mark.parametrize("layout, text", [
    (Layout(), "{}"),
    (Layout((1, 2, 0)), "{1,2,0}"),
    (Layout((3, 2, 1, 0), tiles=[(42, 123), (4, 5)], tail_padding_alignment_in_elements=100,
            element_size_in_bits=42), "{3,2,1,0:T(42,123)(4,5)L(100)E(42)}"),
    (Layout((0, 1), split_configs=[SplitConfig(0, (3,)), SplitConfig(1, (0, 4))]),
     "{0,1:SC(0:3)(1:0,4)}"),
    (Layout((0, 1), physical_shape=Shape("s32", (10, 20), Layout((1, 0)))),
     "{0,1:P(s32[10,20]{1,0})}"),
    (Layout((0, 1), dynamic_shape_metadata_prefix_bytes=123), "{0,1:M(123)}"),
    (Layout((0,), index_primitive_type=P.U32), "{0:#(u32)}"),
    (Layout((0,), pointer_primitive_type=P.U16), "{0:*(u16)}"),
    (Layout((0,), index_primitive_type=P.F32), "{0:#(invalid)}"),
    (Layout((0,), pointer_primitive_type=P.PRED), "{0:*(invalid)}"),
    (Layout((0,), memory_space=1), "{0:S(1)}"),
    (Layout((0,), memory_space=-56), "{0:S(-56)}"),
    (Layout((1, 0), tiles=[("*", 128)]), "{1,0:T(*,128)}"),
    (Layout((0,), tiles=[()]), "{0:T()}"),
    # Every attribute at once, in XLA's fixed order T L # * E S SC P M.
    (Layout((0,), tiles=[(8,)], tail_padding_alignment_in_elements=2,
            index_primitive_type=P.U8, pointer_primitive_type=P.U64, element_size_in_bits=4,
            memory_space=5, split_configs=[SplitConfig(0, (1,))],
            physical_shape=Shape("u8", (4,), Layout((0,))),
            dynamic_shape_metadata_prefix_bytes=16),
     "{0:T(8)L(2)#(u8)*(u64)E(4)S(5)SC(0:1)P(u8[4]{0})M(16)}"),
    # Defaults are omitted; a negative M is not printed either.
    (Layout((0,), tail_padding_alignment_in_elements=1, element_size_in_bits=0,
            dynamic_shape_metadata_prefix_bytes=-5), "{0}"),
])
def test_layout_printing(layout, text):
    assert str(layout) == text


@pytest.mark.parametrize("shape, text", [
    (Shape("f32", ()), "f32[]"),
    (Shape("f32", (), Layout()), "f32[]"),
    (Shape("f32", (), Layout(tiles=[(256,)])), "f32[]{:T(256)}"),
    (Shape("u32", (), Layout(tiles=[(128,)])), "u32[]{:T(128)}"),
    (Shape("f32", (), Layout(memory_space=1)), "f32[]{:S(1)}"),
    (Shape("f32", (2, 3)), "f32[2,3]"),
    (Shape("f32", (2, 3), Layout((1, 0))), "f32[2,3]{1,0}"),
    (Shape("pred", (0,), Layout((0,))), "pred[0]{0}"),
    (Shape("f32", (3, 4), dynamic_dimensions=(True, False)), "f32[<=3,4]"),
    (Shape("f32", (UNBOUNDED_SIZE, 2)), "f32[?,2]"),
    (Shape.token(), "token[]"),
    (Shape.opaque(), "opaque[]"),
    (Shape(P.PRIMITIVE_TYPE_INVALID), "primitive_type_invalid[]"),
    (Shape.tuple(), "()"),
    (Shape.tuple([Shape("f32", (), Layout())] * 6),
     "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])"),
    (Shape.tuple([Shape("s32", ())] * 11),
     "(s32[], s32[], s32[], s32[], s32[], /*index=5*/s32[], s32[], s32[], s32[], s32[], "
     "/*index=10*/s32[])"),
    (Shape.tuple([Shape("f32", (2,), Layout((0,))), Shape.token()]), "(f32[2]{0}, token[])"),
    (Shape.buffer(Shape("f32", (2,), Layout((0,)))), "b(f32[2]{0})"),
])
def test_shape_printing(shape, text):
    assert str(shape) == text


def test_human_string_drops_layouts_recursively():
    s = parse_shape("(f32[2,3]{0,1:T(2,2)}, b(s4[8]{0:E(4)}), token[])")
    assert s.human_string() == "(f32[2,3], b(s4[8]), token[])"


# ===========================================================================
# Golden strings from real HLO and XLA's documentation

GOLDEN = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}",
    "f32[1024,1024]{1,0:T(8,128)}",
    "s8[128,512]{1,0:T(8,128)(4,1)}",
    "s4[256,1024]{1,0:T(8,128)(8,1)E(4)}",
    "s4[3,5]{1,0:E(4)}",
    "pred[128]{0:T(1024)}",
    "s32[]{:T(128)}",
    "f32[]{:T(256)}",
    "u32[]{:T(128)S(1)}",
    "(s32[]{:T(128)}, bf16[16,512]{1,0:T(8,128)(2,1)}, token[])",
    "(f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)}, u8[0]{0}, s32[4]{0:T(128)}, token[], "
    "/*index=5*/f32[<=8,128]{1,0})",
    "f32[<=4096,128]{1,0:T(8,128)}",
    "s32[?,784]{1,0}",
    "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}",
    "f32[3,5]{1,0:T(2,2)}",
    "f32[4,8]{1,0:T(2,4)(2,1)}",
    "f32[128,256]{0,1:T(8,128)L(1024)}",
    "f8e4m3fn[64,128]{1,0:T(8,128)(4,1)}",
    "bf16[1,2048]{1,0:T(2,128)(2,1)S(5)}",
    "b(f32[1024]{0:T(1024)})",
]


@pytest.mark.parametrize("text", GOLDEN)
def test_golden_strings_round_trip_exactly(text):
    shape = parse_shape(text)
    assert str(shape) == text
    assert parse_shape(str(shape)) == shape


def test_tpu_fusion_operand_fields():
    s = parse_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")
    assert s.element_type is P.BF16
    assert s.dimensions == (32, 32, 4096)
    assert s.layout.minor_to_major == (2, 1, 0)
    assert s.layout.tiles == (Tile(8, 128), Tile(2, 1))
    assert s.layout.memory_space == 1


def test_doc_example_fields():
    s = parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}")
    assert s.layout.major_to_minor == (1, 0, 2, 3)
    assert s.layout.memory_space == 0


def test_tuple_with_tokens_and_scalars():
    s = parse_shape("(s32[]{:T(128)}, token[], (f32[2], opaque[]))")
    a, tok, inner = s.tuple_shapes
    assert a == Shape("s32", (), Layout(tiles=[(128,)]))
    assert tok.is_token and inner.tuple_shapes[1].is_opaque
    # Tuple elements get the default layout too (spec §3.3 rule 3).
    assert inner.tuple_shapes[0].layout == Layout((0,))


def test_sub_byte_and_dynamic_fields():
    s = parse_shape("s4[256,1024]{1,0:T(8,128)(8,1)E(4)}")
    assert s.layout.element_size_in_bits == 4 and s.element_type is P.S4
    d = parse_shape("f32[<=4096,?,3]")
    assert d.dimensions == (4096, UNBOUNDED_SIZE, 3)
    assert d.dynamic_dimensions == (True, True, False)
    assert str(d) == "f32[<=4096,?,3]{2,1,0}"


# ===========================================================================
# Parsing: semantics (spec §3.3)

def test_default_layout_is_filled_in():
    assert parse_shape("f32[2,3]") == Shape("f32", (2, 3), Layout((1, 0)))
    assert str(parse_shape("f32[2,3,4]")) == "f32[2,3,4]{2,1,0}"
    assert parse_shape("f32[]").layout == Layout()
    assert parse_shape("token[]").layout is None
    assert parse_shape("opaque[]").layout is None
    assert str(parse_shape("(f32[2,3], s32[])")) == "(f32[2,3]{1,0}, s32[])"
    assert str(parse_shape("b(f32[2,3])")) == "b(f32[2,3]{1,0})"


def test_braces_after_a_shape_are_a_layout_only_before_int_or_colon():
    assert str(parse_shape("f32[]{:}")) == "f32[]"
    assert str(parse_shape("f32[2]{0:}")) == "f32[2]{0}"
    with pytest.raises(HloParseError, match="Extra content after shape"):
        parse_shape("f32[2]{}")
    with pytest.raises(HloParseError, match="Extra content after shape"):
        parse_shape("f32[]{}")
    assert parse_layout("{}") == Layout()


def test_no_validation_is_done():
    # Out-of-range / duplicate m2m, #(u32), zero tiles, E(32) on f32 all parse.
    assert parse_shape("f32[2]{5}").layout.minor_to_major == (5,)
    assert parse_shape("f32[2,2]{0,0}").layout.minor_to_major == (0, 0)
    assert parse_shape("f32[2]{0:#(u32)}").layout.index_primitive_type is P.U32
    assert parse_shape("f32[2]{0:T(0)}").layout.tiles == (Tile(0),)
    assert parse_shape("f32[2]{0:E(32)}").layout.element_size_in_bits == 32
    assert parse_shape("f32[2]{0:E(-1)}").layout.element_size_in_bits == -1
    assert str(parse_shape("f32[4611686018427387904]")) == "f32[4611686018427387904]{0}"


def test_tuple_elements_are_validated():
    with pytest.raises(HloParseError, match="tuple element 0 is not a valid shape: layout "
                       "minor_to_major field has out-of-bounds value: \\{5\\}"):
        parse_shape("(f32[2]{5})")


def test_attributes_are_parsed_in_xla_order_only():
    lay = parse_layout("{0:D(D,C+~)T(8)L(2)#(u8)*(u64)E(4)S(5)SC(0:1)M(16)}")
    assert lay == Layout((0,), tiles=[(8,)], tail_padding_alignment_in_elements=2,
                         index_primitive_type=P.U8, pointer_primitive_type=P.U64,
                         element_size_in_bits=4, memory_space=5,
                         split_configs=[SplitConfig(0, (1,))],
                         dynamic_shape_metadata_prefix_bytes=16)
    err = _error(parse_layout, "{1,0:S(1)T(8,128)}")
    assert err.message.startswith("expects layout to end with kRbrace")
    assert (err.line, err.column) == (1, 10)


def test_dim_level_types_are_parsed_and_dropped():
    assert parse_shape("f32[2,3]{1,0:D(D,C)}") == parse_shape("f32[2,3]{1,0}")
    assert str(parse_shape("f32[2]{0:D(H+~)T(8)}")) == "f32[2]{0:T(8)}"


def test_memory_space_wraps_like_int8():
    assert parse_shape("f32[2]{0:S(200)}").layout.memory_space == -56
    assert parse_shape("f32[2]{0:S(-129)}").layout.memory_space == 127
    assert parse_shape("f32[2]{0:S(256)}").layout.memory_space == 0
    assert parse_shape("f32[2]{0:S(127)}").layout.memory_space == 127


def test_split_configs_and_metadata_prefix():
    lay = parse_layout("{0,1:SC(0:3)(1:0,4)M(123)}")
    assert lay.split_configs == (SplitConfig(0, (3,)), SplitConfig(1, (0, 4)))
    assert lay.dynamic_shape_metadata_prefix_bytes == 123
    assert str(lay) == "{0,1:SC(0:3)(1:0,4)M(123)}"
    assert parse_layout("{0:SC(0:)}").split_configs == (SplitConfig(0, ()),)


def test_index_and_pointer_types():
    lay = parse_layout("{0:#(u32)*(u16)}")
    assert (lay.index_primitive_type, lay.pointer_primitive_type) == (P.U32, P.U16)
    # XLA stores a signed or non-integral type anyway (its check is not fatal).
    assert parse_layout("{0:#(s32)}").index_primitive_type is P.S32
    assert str(parse_layout("{0:#(pred)}")) == "{0:#(invalid)}"


def test_physical_shape_in_a_standalone_layout():
    lay = parse_layout("{0,1:P(s32[10,20]{1,0})}")
    assert lay.physical_shape == Shape("s32", (10, 20), Layout((1, 0)))
    assert str(lay) == "{0,1:P(s32[10,20]{1,0})}"


def test_malformed_attributes_are_recovered_from_like_xla():
    # XLA ignores the attribute parsers' failures; only the final '}' counts.
    assert str(parse_shape("f32[2]{0:E(}")) == "f32[2]{0}"
    assert str(parse_shape("f32[2]{0:E(4}")) == "f32[2]{0:E(4)}"
    assert str(parse_shape("f32[2]{0:#u32)}")) == "f32[2]{0:#(u32)}"
    assert str(parse_shape("f32[2]{0:#()}")) == "f32[2]{0}"
    assert str(parse_shape("f32[2]{0:T}")) == "f32[2]{0:T()}"
    assert str(parse_shape("f32[2]{0:T(8,128}")) == "f32[2]{0:T(8,128)}"
    assert str(parse_shape("f32[2]{0:SC(0:1}")) == "f32[2]{0:SC(0:1)}"
    assert str(parse_shape("f32[2]{0:SC}")) == "f32[2]{0}"


# ===========================================================================
# Parsing: lexical rules (spec §3.1)

def test_whitespace_and_comments_anywhere():
    assert str(parse_shape("f32[ 2 , 3 ] { 0 , 1 : T ( 2 , 2 ) }")) == "f32[2,3]{0,1:T(2,2)}"
    assert str(parse_shape("\n\t/* lead */ f32[2] /* mid */ {0} // trail")) == "f32[2]{0}"
    assert str(parse_shape("f32[2]//c\n{0}")) == "f32[2]{0}"
    assert str(parse_shape("f32[2]//c\r{0}")) == "f32[2]{0}"
    assert str(parse_shape("(f32[], /*index=1*/ s32[])")) == "(f32[], s32[])"
    assert str(parse_shape("b /**/ (f32[])")) == "b(f32[])"
    assert str(parse_shape("f32[<= 3]")) == "f32[<=3]{0}"


def test_integers_follow_xla_lexer():
    # Non-negative literals up to UINT64_MAX are bit-cast to int64.
    assert parse_shape("f32[2]{18446744073709551615}").layout.minor_to_major == (-1,)
    assert parse_shape("f32[2]{0:T(9223372036854775808)}").layout.tiles == (Tile("*"),)
    assert parse_shape("f32[2]{-9223372036854775808}").layout.minor_to_major == (INT64_MIN,)
    assert parse_shape("f32[9223372036854775807]").dimensions == (2**63 - 1,)
    assert parse_shape("f32[007]").dimensions == (7,)


@pytest.mark.parametrize("text", ["f32[2x3]", "f32[1.5]", "f32[1e3]", "f32[2_3]", "f32[0x2]",
                                  "f32[18446744073709551616]", "f32[-9223372036854775809]",
                                  "f32[2.]"])
def test_things_that_are_not_integers(text):
    err = _error(parse_shape, text)
    assert err.message.startswith("expects integer")
    assert (err.line, err.column) == (1, 5)


def test_type_keywords_are_lowercase_names_except_tuple_and_buffer():
    for t in PrimitiveType:
        if t.is_array_type:
            assert parse_shape(f"{t.hlo_name}[]").element_type is t
    for word in ("tuple", "buffer", "opaque_type", "primitive_type_invalid", "F32", "Pred"):
        err = _error(parse_shape, f"{word}[]")
        assert err.message.startswith("expected primitive type, saw kIdent")


def test_layout_letters_are_exact_identifiers():
    # 'SC' is never taken for 'S'; an unknown letter ends the attributes.
    assert parse_layout("{0:SC(0:1)}").memory_space == 0
    assert _error(parse_layout, "{0:X(1)}").message.startswith("expects layout to end with kRbrace")


# ===========================================================================
# Errors: type, message fragment, line and column

def _error(fn, text):
    with pytest.raises(HloParseError) as info:
        fn(text)
    return info.value


ERRORS = [
    # text, message start, line, column
    ("", "expected primitive type, saw kEof", 1, 1),
    ("bogus[2]", "expected primitive type, saw kIdent", 1, 1),
    ("F32[2]", "expected primitive type, saw kIdent (got 'F32'; element type names are "
               "lowercase: 'f32')", 1, 1),
    ("x: f32[]", "expected primitive type, saw kName", 1, 1),
    ("x=f32[]", "expected primitive type, saw kAttributeName", 1, 1),
    ("%x", "expected primitive type, saw kName", 1, 1),
    ("-> f32[]", "expected primitive type, saw kArrow", 1, 1),
    ("2x3", "expected primitive type, saw kDxD", 1, 1),
    ("1_2", "expected primitive type, saw kPad", 1, 1),
    ("bf_io->bf", "expected primitive type, saw kDimLabels", 1, 1),
    ("-inf", "expected primitive type, saw kNegInf", 1, 1),
    ("...", "expected primitive type, saw kDots", 1, 1),
    ("<= 3", "expected primitive type, saw kLeq", 1, 1),
    ("true", "expected primitive type, saw kw_true", 1, 1),
    ("1.5", "expected primitive type, saw kDecimal", 1, 1),
    ('"f32"', "expected primitive type, saw kString", 1, 1),
    ("!", "expected primitive type, saw kError", 1, 1),
    ("f32", "expects a list starting with kLsquare", 1, 4),
    ("f32[2", "expects a list to end with kRsquare", 1, 6),
    ("f32[2;", "expects a list to end with kRsquare", 1, 6),
    ("f32[?5]", "expects a list to end with kRsquare", 1, 6),
    ("f32[<=?]", "expects integer", 1, 7),
    ("f32[-1]", "Invalid dimension size -1, is_dynamic=false", 1, 5),
    ("f32[3,<=-2]", "Invalid dimension size -2, is_dynamic=true", 1, 7),
    ("f32[2]{1,0}", "Dimensions size is 1, but minor to major size is 2.", 1, 12),
    ("f32[2]{:}", "Dimensions size is 1, but minor to major size is 0.", 1, 10),
    ("f32[2]{0,}", "expects integer", 1, 10),
    ("f32[2]{0", "expects layout to end with kRbrace", 1, 9),
    ("f32[2]{0:T(8,x)}", "expects integer", 1, 14),
    ("f32[2]{0:D(X)}", "expected a DimLevelType abbreviation (D, C, or S)", 1, 12),
    ("f32[2]{0:SC(0)}", "expects a list starting with kColon", 1, 14),
    ("f32[2]{0:SC(0:1:2)}", "expects a list to end with kRparen", 1, 16),
    ("f32[2]{0:L()}", "expects integer", 1, 12),
    ("f32[2]{0:P(s32[10])}", "Layout has physical shape, but is not for a sparse array: "
                             "{0:P(s32[10]{0})}", 1, 21),
    ("f32[2]{0:P(garbage)}", "expected primitive type, saw kIdent", 1, 12),
    ("f32[2]{0:#(invalid)}", "expected primitive type, saw kIdent", 1, 12),
    ("f32[2]{0:#(u32 x}", "expects index primitive type to be followed by kRparen", 1, 16),
    ("f32[2]{0:# u32)x}", "expects kOctothorp to be followed by kLparen", 1, 12),
    ("f32[2]{0:#(s32)x}", "expecting an unsigned integer type", 1, 15),
    ("f32[2]{0:*(u8 x}", "expects pointer primitive type to be followed by kRparen", 1, 15),
    ("f32[2]{0:* u8)x}", "expects kAsterisk to be followed by kLparen", 1, 12),
    ("f32[2]{0:P x}", "expects physical shape to start with kLparen", 1, 12),
    ("f32[2]{0:E x}", "expects element size in bits to start with kLparen", 1, 12),
    ("f32[2]{0:E(4 x}", "expects element size in bits to end with kRparen", 1, 14),
    ("f32[2]{0:SC x}", "expects split configs to start with kLparen", 1, 13),
    ("f32[2]{0:L x}", "expects multiple padded to in elements to start with kLparen", 1, 12),
    ("f32[2]{0:M(1 x}", "expects dynamic shape metadata prefix bytes to end with kRparen", 1, 14),
    ("f32[2]{0:S(x)}", "expects integer", 1, 12),
    ("f32[2] extra", "Extra content after shape", 1, 8),
    ("f32[2]{0}}", "Extra content after shape", 1, 10),
    ("f32[2]/*", "Extra content after shape", 1, 7),
    ("(f32[] f32[])", "expects ')' at the end of tuple.", 1, 8),
    ("(f32[]", "expects ')' at the end of tuple.", 1, 7),
    ("(f32[],)", "expected primitive type, saw kRparen", 1, 8),
    ("b()", "expected primitive type, saw kRparen", 1, 3),
    ("b(s32[], f32[])", "expects ')' at the end of buffer shape.", 1, 8),
    ("b((f32[]))", "a buffer shape b(...) must wrap an array shape, got (f32[])", 1, 3),
    ("b(token[])", "a buffer shape b(...) must wrap an array shape, got token[]", 1, 3),
    ("(f32[2]{0:T(0)})", "tuple element 0 is not a valid shape: layout has invalid tiles", 1, 2),
    ("(token[], f32[2,2]{0,0})", "tuple element 1 is not a valid shape: layout minor_to_major "
                                 "field has duplicate values: {0, 0}", 1, 11),
    ("(f32[2]{0:#(u32)})", "tuple element 0 is not a valid shape: layout has a "
                           "index_primitive_type, but is not a sparse array", 1, 2),
    ("(f32[2]{0:*(u8)})", "tuple element 0 is not a valid shape: layout has a "
                          "pointer_primitive_type", 1, 2),
    ("(f32[2]{0:E(-1)})", "tuple element 0 is not a valid shape: layout element_size_in_bits "
                          "field is negative: -1", 1, 2),
    ("(f32[2305843009213693952])", "tuple element 0 is not a valid shape: Shape "
                                   "f32[2305843009213693952] size may overflow int64_t.", 1, 2),
    ("(f32[9223372036854775807,2])", "tuple element 0 is not a valid shape: Shape Error: "
                                     "Dimensions overflow. Shape(f32): "
                                     "f32[9223372036854775807,2]", 1, 2),
    ("(f32[4]{0:SC(1:1)})", "tuple element 0 is not a valid shape: split config dimension 1 is "
                            "out of range", 1, 2),
    ("(f32[4,4]{1,0:SC(0:1)(0:2)})", "tuple element 0 is not a valid shape: more than one "
                                     "split config for dimension 0", 1, 2),
    ("(f32[4]{0:SC(0:3,1)})", "tuple element 0 is not a valid shape: split indices [3, 1] must "
                              "increase strictly within (0, 4)", 1, 2),
    # XLA aborts on these; xlashape refuses them.
    ("f32[2]{0:T(-1)}", "tile dimension -1 is negative", 1, 12),
    ("f32[2]{0:T(8,18446744073709551615)}", "tile dimension -1 is negative", 1, 14),
    ("f32[2]{0:L(0)}", "tail padding alignment L(n) must be >= 1, got 0", 1, 12),
    ("f32[2]{0:L(-3)}", "tail padding alignment L(n) must be >= 1, got -3", 1, 12),
    ("token[2]", "a token shape has no dimensions; write token[]", 1, 7),
    ("opaque[?]", "an opaque shape has no dimensions", 1, 8),
    ("opaque[]{:S(1)}", "an opaque shape cannot have a layout", 1, 9),
    ("token[]{0}", "a token shape cannot have a layout", 1, 8),
    # Multi-line input: line and column of the offending token.
    ("(f32[2],\n  s32[3]{0},\n  bogus)", "expected primitive type, saw kIdent", 3, 3),
    ("f32[2]\n{1,0}\n", "Dimensions size is 1, but minor to major size is 2.", 3, 1),
]


@pytest.mark.parametrize("text, message, line, column", ERRORS, ids=[e[0] for e in ERRORS])
def test_parse_errors(text, message, line, column):
    err = _error(parse_shape, text)
    assert isinstance(err, ValueError) and isinstance(err, XlaShapeError)
    assert err.message.startswith(message), err.message
    assert (err.line, err.column) == (line, column)
    assert err.text == text


def test_error_message_has_caret_line():
    err = _error(parse_shape, "f32[2]{0:S(1)T(8,128)}")
    lines = str(err).split("\n")
    assert lines[0].startswith("expects layout to end with kRbrace (got 'T') (line 1, column 14)")
    assert lines[1] == "f32[2]{0:S(1)T(8,128)}"
    assert lines[2] == " " * 13 + "^"


def test_error_keeps_xla_error_list():
    err = _error(parse_shape, "f32[2]{0:T(8,x)}")
    assert [m.split(" (got")[0] for m, _ in err.errors] == [
        "expects integer", "expects layout to end with kRbrace"]
    assert [pos for _, pos in err.errors] == [13, 13]


def test_errors_pickle():
    err = _error(parse_shape, "f32[2")
    again = pickle.loads(pickle.dumps(err))
    assert (again.message, again.line, again.column) == (err.message, 1, 6)


def test_parse_layout_errors():
    err = _error(parse_layout, "{1,0} x")
    assert err.message == "Extra content after layout" and err.column == 7
    err = _error(parse_layout, "1,0")
    assert err.message.startswith("expects layout to start with kLbrace")
    err = _error(parse_layout, "{0:T(-5)}")
    assert err.message.startswith("tile dimension -5 is negative")


def test_non_str_input_is_a_type_error():
    for fn in (parse_shape, parse_layout):
        for bad in (b"f32[2]", None, 3, ["f32[2]"]):
            with pytest.raises(ShapeTypeError, match="expects the HLO text as a str"):
                fn(bad)
    with pytest.raises(ShapeTypeError, match="pos must be an int"):
        parse_shape_prefix("f32[2]", "0")
    with pytest.raises(ShapeIndexError, match="start position 9 is out of bounds for a text of "
                       "length 6"):
        parse_shape_prefix("f32[2]", 9)
    with pytest.raises(ShapeIndexError, match="start position -1 is out of bounds"):
        parse_shape_prefix("f32[2]", -1)


def test_unterminated_or_odd_characters_are_errors_not_crashes():
    for text in ["f32[2]\x00", "f32\x00[2]", "f32[2]é", "é", "f32[2]{0:/*", "\ud800",
                 "f32[2]{0:'a", '"a\\qb"', "%", "<", "..", "nan(0xz)", "-", "-x", "?"]:
        with pytest.raises(HloParseError):
            parse_shape(text)


# ===========================================================================
# Nesting, cache, prefix parsing

def test_nesting_limit_is_a_parse_error():
    # The leaf counts as one level, as in XLA's recursion counter.
    n = MAX_NESTING_DEPTH - 1
    assert parse_shape("(" * n + "f32[]" + ")" * n).is_tuple
    assert parse_shape("(" * (n - 1) + "b(f32[])" + ")" * (n - 1)).is_tuple
    err = _error(parse_shape, "(" * (n + 1) + "f32[]" + ")" * (n + 1))
    assert err.message.startswith("maximum recursion depth exceeded")
    assert err.column == MAX_NESTING_DEPTH + 1  # the leaf, the 201st shape


def test_cache_returns_the_same_immutable_object():
    assert parse_shape("f32[7,7]{0,1}") is parse_shape("f32[7,7]{0,1}")
    assert parse_layout("{0,1:T(2,2)}") is parse_layout("{0,1:T(2,2)}")


def test_parse_shape_prefix_in_an_instruction_line():
    line = ("  %fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[32,32,4096]"
            "{2,1,0:T(8,128)(2,1)S(1)} %p0), kind=kLoop")
    start = line.index("bf16")
    shape, end = parse_shape_prefix(line, start)
    assert str(shape) == "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}"
    assert line[end:].startswith(" fusion(")
    shape2, end2 = parse_shape_prefix(line, line.index("bf16", end))
    assert shape2 == shape and line[end2:] == " %p0), kind=kLoop"


def test_parse_shape_prefix_stops_before_a_computation_brace():
    # XLA's own example: the '{' after the result shape opens a computation.
    text = "ENTRY %foo (x: f32[42]) -> f32[123] {\n  ROOT %x = f32[42] parameter(0)\n}"
    pos = text.index("f32[123]")
    shape, end = parse_shape_prefix(text, pos)
    assert str(shape) == "f32[123]{0}" and text[end:] == text[pos + 8:]


def test_parse_shape_prefix_end_excludes_trailing_comment_and_space():
    text = "(f32[], s32[]) /* c */ next"
    shape, end = parse_shape_prefix(text)
    assert text[:end] == "(f32[], s32[])"


def test_parse_shape_prefix_errors_point_into_the_whole_text():
    text = "%x = f32[2]{1,0} add(...)"
    err = _error(lambda t: parse_shape_prefix(t, 5), text)
    assert err.message.startswith("Dimensions size is 1") and err.column == 18


def test_parse_shape_prefix_tuple_and_tokens():
    text = "%t = (s32[]{:T(128)}, token[]) tuple(%a, %b)"
    shape, end = parse_shape_prefix(text, 5)
    assert str(shape) == "(s32[]{:T(128)}, token[])" and text[end:] == " tuple(%a, %b)"


def test_invalid_shape_error_is_distinct_from_parse_error():
    # Parsing never validates: InvalidShapeError only comes from constructors.
    assert not issubclass(HloParseError, InvalidShapeError)


@pytest.mark.parametrize("text, shape_text, rest", [
    # Parentheses inside comments must not fool the cached fast path.
    ("(f32[] /* ) */, s32[]) rest", "(f32[], s32[])", " rest"),
    ("(f32[], /* ( */ s32[]) rest", "(f32[], s32[])", " rest"),
    ("b(f32[2]) x", "b(f32[2]{0})", " x"),
    ("f32[2] {0} x", "f32[2]{0}", " x"),
    ("f32[2] /* c */ {0} x", "f32[2]{0}", " x"),
    ("f32[2] {} x", "f32[2]{0}", " {} x"),
    ("f32[2]\n{1,0:T(2)}", None, None),
])
def test_parse_shape_prefix_agrees_with_the_full_parser(text, shape_text, rest):
    if shape_text is None:
        with pytest.raises(HloParseError, match="Dimensions size is 1"):
            parse_shape_prefix(text)
        return
    shape, end = parse_shape_prefix(text)
    assert str(shape) == shape_text and text[end:] == rest
