"""Property tests for the HLO shape text (hypothesis).

* printing then parsing gives back an equal shape, and printing is stable;
* whitespace and comments between tokens change nothing;
* arrays written without a layout come back with the default layout;
* any string at all either parses or raises HloParseError — nothing else;
* very long and very deep inputs finish with a result or an HloParseError.
"""

import re

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from xlashape import HloParseError, Layout, Shape, parse_layout, parse_shape
from xlashape.hlo_text import MAX_NESTING_DEPTH, parse_shape_prefix

from strategies import TEXT_ALPHABET, array_shapes, layouts, mutated, shapes

SEEDS = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "(s32[]{:T(128)}, token[], f32[<=8,?]{1,0})",
    "s4[3,5]{1,0:E(4)}",
    "b(f32[2]{0})",
    "f32[2,3]{0,1:SC(0:3)(1:0,4)M(123)}",
    "f32[3,2,1,0]{3,2,1,0:T(42,123)(4,5)L(100)#(u32)*(u8)E(42)}",
    "f32[2]{0:D(D,C+~)P(s32[10]{0})}",
]


@settings(max_examples=200)
@given(shapes())
def test_print_parse_round_trip(shape):
    text = str(shape)
    parsed = parse_shape(text)
    assert parsed == shape
    assert str(parsed) == text


@settings(max_examples=300)
@given(st.integers(0, 5).flatmap(lambda r: layouts(r)))
def test_layout_round_trip(layout):
    text = str(layout)
    parsed = parse_layout(text)
    assert parsed == layout
    assert str(parsed) == text


_BREAKS = re.compile(r"(?<=[,(\[{:])|(?=[)\]}])")


@settings(max_examples=200)
@given(shapes(), st.sampled_from([" ", "\n", "\t ", "/* c */", " // c\n", "\r\n"]))
def test_whitespace_and_comments_between_tokens_change_nothing(shape, filler):
    text = str(shape)
    spaced = filler + _BREAKS.sub(filler, text) + filler
    assert parse_shape(spaced) == shape


@settings(max_examples=200)
@given(array_shapes())
def test_missing_layout_becomes_the_default(shape):
    parsed = parse_shape(shape.to_string(print_layout=False))
    n = shape.rank
    # Computed independently: the default layout is {n-1, ..., 1, 0}.
    assert parsed.layout == Layout(list(reversed(range(n))))
    assert parsed.equal(shape, ignore_layout=True)


@settings(max_examples=200)
@given(shapes(), st.sampled_from([" fusion(%p0)", ", %x", ")", " }", "\n%y = f32[] add()", ""]),
       st.sampled_from(["", "%x = ", "  ROOT %t = ", "(a: "]))
def test_prefix_parsing_finds_the_end_of_the_shape(shape, suffix, prefix):
    text = str(shape)
    line = prefix + text + suffix
    parsed, end = parse_shape_prefix(line, len(prefix))
    assert parsed == shape
    assert end == len(prefix) + len(text)


def _only_parse_errors(fn, text):
    try:
        fn(text)
    except HloParseError as e:
        assert e.text == text
        assert 0 <= e.position <= len(text)
        assert e.line >= 1 and e.column >= 1
        assert e.message


@settings(max_examples=250)
@given(st.text(max_size=60))
@example("f32[2]{0:T(-1)}")
@example("\x00")
@example("(" * 5000)
def test_any_text_parses_or_raises_hlo_parse_error(text):
    _only_parse_errors(parse_shape, text)
    _only_parse_errors(parse_layout, text)


@settings(max_examples=250)
@given(st.lists(st.sampled_from(TEXT_ALPHABET), max_size=40).map("".join))
def test_token_soup_parses_or_raises_hlo_parse_error(text):
    _only_parse_errors(parse_shape, text)
    _only_parse_errors(parse_layout, text)
    _only_parse_errors(lambda t: parse_shape_prefix(t, 0), text)


@settings(max_examples=250)
@given(mutated(SEEDS))
def test_mutated_shapes_parse_or_raise_hlo_parse_error(text):
    _only_parse_errors(parse_shape, text)


@settings(max_examples=100)
@given(shapes(), st.data())
def test_truncated_shapes_raise_hlo_parse_error(shape, data):
    text = str(shape)
    assume(len(text) > 1)
    cut = data.draw(st.integers(1, len(text) - 1))
    # A prefix of a shape can itself be a complete shape ("f32[2]" of
    # "f32[2]{0}"); otherwise it must be rejected cleanly.
    _only_parse_errors(parse_shape, text[:cut])


# ---------------------------------------------------------------------------
# Long inputs: a result or an HloParseError, never RecursionError or a hang.

def test_hundred_thousand_element_tuple():
    text = "(" + ", ".join(["s32[]", "token[]", "f32[2]"] * 33_334) + ")"
    shape = parse_shape(text)
    assert len(shape.tuple_shapes) == 100_002
    assert shape.tuple_shapes[-1] == Shape("f32", (2,), Layout((0,)))
    assert shape.tuple_shapes[-2].is_token


def test_ten_thousand_deep_nesting_is_refused_cleanly():
    for opener in ("(", "b("):
        text = opener * 10_000 + "f32[]" + ")" * 10_000
        with pytest.raises(HloParseError, match="maximum recursion depth exceeded"):
            parse_shape(text)
    nested = "{0:P(" + "f32[1]{0:P(" * 5_000 + "f32[1]" + ")}" * 5_000 + ")}"
    with pytest.raises(HloParseError, match="maximum recursion depth exceeded"):
        parse_layout(nested)


def test_ten_thousand_deep_but_unclosed_is_refused_cleanly():
    with pytest.raises(HloParseError):
        parse_shape("(" * 10_000)


def test_long_flat_inputs():
    dims = ",".join(["1"] * 100_000)
    shape = parse_shape(f"u8[{dims}]")
    assert shape.rank == 100_000
    layout = parse_layout("{" + ",".join(map(str, range(50_000))) + ":T" + "(1)" * 50_000 + "}")
    assert len(layout.tiles) == 50_000 and layout.minor_to_major[-1] == 49_999
    with pytest.raises(HloParseError, match="expects integer"):
        parse_shape("f32[" + "9" * 100_000 + "]")
    with pytest.raises(HloParseError, match="expected primitive type"):
        parse_shape("?" * 100_000)
    with pytest.raises(HloParseError, match="expected primitive type"):
        parse_shape("/*" + "*" * 100_000)  # unterminated comment
    with pytest.raises(HloParseError, match="expects a list to end with kRsquare"):
        parse_shape("f32[" + "1," * 100_000 + "?" * 100_000)
    with pytest.raises(HloParseError, match="Extra content after shape"):
        parse_shape("f32[]" + " " * 100_000 + '"' + "a" * 100_000)
    big = "(" + ", ".join(["f32[2]{0}"] * 1000) + ") " + "//" + "x" * 100_000
    assert len(parse_shape(big).tuple_shapes) == 1000
