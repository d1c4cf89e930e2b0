"""The parser's fast path against its full parser (differential tests).

``xlashape.hlo_text`` recognises the common plain array shape
(``type[dims]{m2m:T(..)L(n)E(n)S(n)}``) with one regex and builds the Shape
directly, filling the slots of Shape/Layout/Tile without their constructors;
anything else goes to the full lexer + recursive-descent parser (which
``test_xla_oracle.py`` checks against XLA itself). The fast path must never
change a result: for every input, the same Shape (every slot of every nested
object, and the same type of each), or the same error (type, message,
position, and the whole ``errors`` list). The reference answers come from
the same module with the fast path switched off (``_USE_FAST_PATH``).
"""

import contextlib
import copy

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xlashape import HloParseError, Layout, PrimitiveType, Shape, SplitConfig, Tile
from xlashape import hlo_text
from xlashape.hlo_text import parse_shape_prefix

from strategies import TEXT_ALPHABET, array_shapes, mutated, shapes, valid_array_shapes

INT64_MIN = -(2**63)


@contextlib.contextmanager
def fast_path(enabled: bool):
    saved = hlo_text._USE_FAST_PATH
    hlo_text._USE_FAST_PATH = enabled
    try:
        yield
    finally:
        hlo_text._USE_FAST_PATH = saved


# Slots that cache a value computed from the others: not compared, but a
# cached text must be exactly what printing computes from scratch.
CACHES = ("_hash", "_text")


def structure(value):
    """Every slot of a parsed value, recursively, with the exact classes."""
    if isinstance(value, (Shape, Layout, Tile, SplitConfig)):
        cls = type(value)
        slots = [s for klass in cls.__mro__ for s in getattr(klass, "__slots__", ())]
        text = getattr(value, "_text", None)
        if text is not None:
            assert text == str(copy.deepcopy(value)), (text, value)  # the copy has no cache
        return (cls.__name__, tuple((s, structure(getattr(value, s))) for s in slots
                                    if s not in CACHES))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(structure(v) for v in value))
    return (type(value).__name__, value)


def outcome(fn, *args):
    try:
        result = fn(*args)
    except HloParseError as e:
        return ("ERR", type(e).__name__, e.message, e.position, tuple(e.errors))
    if isinstance(result, tuple):  # parse_shape_prefix: (shape, end)
        return ("OK", structure(result[0]), result[1])
    return ("OK", structure(result))


def parse_uncached(text):
    return hlo_text._parse_shape_cached.__wrapped__(text)


def both(fn, *args):
    with fast_path(False):
        reference = outcome(fn, *args)
    with fast_path(True):
        fast = outcome(fn, *args)
    return reference, fast


def check_shape_text(text):
    reference, fast = both(parse_uncached, text)
    assert fast == reference, text
    # The same text inside an instruction line, through parse_shape_prefix
    # (uncached, so the in-parser fast path runs on tuple elements too).
    line = f"  %fusion.7 = {text} fusion(f32[2]{{0}} %p), kind=kLoop"
    hlo_text._parse_shape_cached.cache_clear()
    with fast_path(False):
        ref_prefix = outcome(parse_shape_prefix, line, 14)
    hlo_text._parse_shape_cached.cache_clear()
    with fast_path(True):
        fast_prefix = outcome(parse_shape_prefix, line, 14)
    hlo_text._parse_shape_cached.cache_clear()
    assert fast_prefix == ref_prefix, line
    return fast


# -- the fast path really runs, and builds what the constructors build -------------

def test_the_fast_path_handles_the_usual_shapes():
    # If the fast path silently stopped applying, these would be None.
    for text in ["bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}", "f32[2,3]",
                 "s32[]{:T(128)}", "s4[256,1024]{1,0:T(8,128)(8,1)E(4)}", "f32[<=4096,?]{1,0}",
                 "token[]", "opaque[]", "f32[2]{0:T(*,8)L(4)}"]:
        assert hlo_text._fast_shape(text) is not None, text


def test_trusted_constructors_fill_every_slot_like_the_public_ones():
    # The fast path builds objects with the trusted constructors beside the
    # classes; each must equal, slot for slot, what the public ones build.
    _trusted_tile = Tile._from_parsed
    _trusted_layout = Layout._from_parsed
    _trusted_shape = Shape._from_parsed

    tiles = (_trusted_tile((8, 128)), _trusted_tile((INT64_MIN, 2)))
    assert structure(tiles) == structure((Tile(8, 128), Tile("*", 2)))
    lay = _trusted_layout((1, 0), tiles, 4, 16, -56)
    ref = Layout((1, 0), tiles=[Tile(8, 128), Tile("*", 2)],
                 tail_padding_alignment_in_elements=4, element_size_in_bits=16, memory_space=-56)
    assert structure(lay) == structure(ref) and hash(lay) == hash(ref)
    arr = _trusted_shape(PrimitiveType.BF16, (8, INT64_MIN), (False, True), lay)
    ref_arr = Shape("bf16", (8, INT64_MIN), ref, (False, True))
    assert structure(arr) == structure(ref_arr) and hash(arr) == hash(ref_arr)
    tup = _trusted_shape(PrimitiveType.TUPLE, (), (), None, (arr, Shape.token()))
    assert structure(tup) == structure(Shape.tuple([ref_arr, Shape.token()]))


def test_fast_values_match_the_spec():
    # Goldens from the spec: S(n) is kept in an int8 (S(200) is -56), '?' is
    # UNBOUNDED_SIZE (INT64_MIN) and dynamic, '<=N' is a dynamic bound, '*' in
    # a tile is COMBINE_DIMENSION (INT64_MIN), no layout means {n-1,...,0}.
    s = hlo_text._fast_shape("bf16[8,<=5,?]{0,2,1:T(*,128)(2,1)L(4)E(16)S(200)}")
    assert s.element_type is PrimitiveType.BF16
    assert s.dimensions == (8, 5, INT64_MIN)
    assert s.dynamic_dimensions == (False, True, True)
    lay = s.layout
    assert lay.minor_to_major == (0, 2, 1)
    assert [t.dimensions for t in lay.tiles] == [(INT64_MIN, 128), (2, 1)]
    assert (lay.tail_padding_alignment_in_elements, lay.element_size_in_bits,
            lay.memory_space) == (4, 16, -56)
    assert hlo_text._fast_shape("f32[2,3,4]").layout.minor_to_major == (2, 1, 0)
    assert hlo_text._fast_shape("f32[0012]").dimensions == (12,)


@pytest.mark.parametrize("text", [
    "f32[2]{0:T(8)(2,1)E(4)S(1)}", "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}",
    "f32[2,3]", "s32[]{:T(128)}", "f32[]{:}", "f32[2]{0:}", "token[]", "opaque[]",
    "f32[?,<=3]", "pred[128]{0:T(1024)}", "u32[]{:T(128)S(1)}",
])
def test_fast_built_objects_equal_constructor_built_ones(text):
    fast = hlo_text._fast_shape(text)
    with fast_path(False):
        reference = parse_uncached(text)
    assert structure(fast) == structure(reference)
    assert fast == reference and hash(fast) == hash(reference) and str(fast) == str(reference)
    if fast.layout is not None:
        assert hash(fast.layout) == hash(reference.layout)
    # The fast-built objects are as immutable as any.
    with pytest.raises(AttributeError, match="immutable"):
        fast.__setattr__("_dimensions", (1,))


# -- near misses: each must leave the decision (and the error) to the full parser ---

NEAR_MISSES = [
    # integer edges: 18 digits fit, 19+ go to the full lexer (bit-casting, errors)
    "f32[999999999999999999]", "f32[9999999999999999999]", "f32[18446744073709551615]",
    "f32[18446744073709551616]", "f32[0000000000000000000000012]", "f32[2]{0:S(999999999999999999)}",
    "f32[2]{0:T(9223372036854775807)}", "f32[2]{0:T(9223372036854775808)}",
    "f32[2]{0:E(9223372036854775807)}", "f32[2]{0:L(9223372036854775808)}",
    # memory space wrap and refusals
    "f32[2]{0:S(127)}", "f32[2]{0:S(128)}", "f32[2]{0:S(255)}", "f32[2]{0:S(256)}",
    "f32[2]{0:L(0)}", "f32[2]{0:L(1)}", "f32[2]{0:T(-1)}", "f32[2]{0:T()}", "f32[2]{0:T(0)}",
    # minor_to_major of the wrong length, negative, empty layouts
    "f32[2]{}", "f32[2]{:}", "f32[2,3]{0}", "f32[2]{0,1}", "f32[]{0}", "f32[2]{-1}", "f32[2]{:T(2)}",
    "f32[2]{0,}", "f32[2]{,0}", "f32[2]{0:T(2)", "f32[2]{0", "f32[2]{0}}", "f32[2]{0} ",
    # attributes out of order, repeated, unknown, with spaces
    "f32[2]{0:S(1)T(8)}", "f32[2]{0:T(2)T(3)}", "f32[2]{0:E(4)L(2)}", "f32[2]{0:SC(0:1)}",
    "f32[2]{0:M(1)}", "f32[2]{0:#(u32)}", "f32[2]{0:T(2)P(f32[2])}", "f32[2]{0:T (2)}",
    "f32[2]{0:T(2,)}", "f32[2]{0:T(,2)}", "f32[2]{0:T(2)x}", "f32[2]{0:S(1)E(4)}",
    # dims
    "f32[]", "f32[,]", "f32[2,]", "f32[,2]", "f32[<=]", "f32[<=?]", "f32[?2]", "f32[2?]",
    "f32[<2]", "f32[=2]", "f32[-1]", "f32[ 2]", "f32[2 ]", "f32[2x3]", "f32[1_2]", "f32[1.5]",
    # what the fast regex's broad character classes let through, for int() to refuse
    "f32[2]{0:T((2))}", "f32[2]{0:T(2)()}", "f32[2]{0:T(2))}", "f32[2]{0:T(**)}",
    "f32[2]{0:T(2*)}", "f32[2]{0:T(*2)}", "f32[2]{0:T(2)(3)(}", "f32[2]{0:T(2,,3)}",
    "f32[<=<=1]", "f32[1<=2]", "f32[??]", "f32[1?]", "f32[?,<=]", "f32[=<1]", "f32[2<]",
    "f32[2]{,}", "f32[2,3]{0,,1}", "f32[2]{0,}", "f32[0000000000000000012]",
    "f32[2]{0:T(0000000000000000008)}", "(f32[0000000000000000012], f32[2])",
    "(f32[2]{0:T((2))}, token[])", "(f32[<=<=1])",
    # numbers too long for int() (past sys.get_int_max_str_digits(), 4300 by default)
    "f32[" + "9" * 5000 + "]", "f32[2]{" + "1" * 5000 + "}", "f32[2]{0:T(" + "8" * 5000 + ")}",
    "f32[2]{0:L(" + "9" * 5000 + ")}", "f32[2]{0:E(" + "9" * 5000 + ")}",
    "f32[2]{0:S(" + "9" * 5000 + ")}", "(f32[2]{0:S(" + "9" * 5000 + ")})",
    # types and what surrounds the shape
    "F32[2]", "f32x[2]", "bogus[2]", "tuple[]", "buffer[2]", "token[2]", "token[]{0}",
    "token[]{:T(2)}", "opaque[]{:S(1)}", "token[]{}", " f32[2]", "f32[2] ", "f32[2]\n",
    "f32[2]/*c*/", "f32[2]//c", "f32[2]{0}x", "f32[2]x", "f32[2]{0}{0}", "f32[2]/*c*/{0}",
    "f32[2] {0}", "f32[2]\x00", "f32[2]é", "b(f32[2])", "b(f32[2]{0:T(2)})",
    # tuples: elements take the in-parser fast path
    "(f32[2]{0:T(2)}, token[], s32[]{:T(128)})", "(f32[2]{5})", "(f32[2]{0:T(0)})",
    "(f32[2,2]{0,0})", "(f32[9223372036854775807,2])", "(f32[2]{0:L(0)})",
    "(f32[2] {0}, f32[3])", "(f32[2]/*c*/{0})", "(f32[2]{0}/*index=1*/, f32[2])",
    "(f32[2],)", "(f32[2] f32[3])", "(token[]{0})", "(f32[2]{0:S(1)T(2)})",
    "(f32[4294967296,4294967296,0])", "(f32[2305843009213693952])", "(s4[2305843009213693951])",
    "(c128[576460752303423488])", "(f32[2,2]{2,0})", "(f32[2]{1})", "(f32[2,3]{1,0:T(2,0)})",
    "(f32[2])x", "(f32[2]) ", "(f32[2]))", "(f32[2],)", "(f32[2],\x0bf32[3])", "(f32[2],\tf32[3])",
    "(f32[2],  f32[3])", "(f32[2], /*index=1*/ f32[3])", "(f32[2], /*i*/f32[3])", "()",
    "(" * 30 + "f32[2]{0}" + ")" * 30, "((f32[2]{0}), (token[], (f32[]{:T(128)})))",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_agree_with_the_full_parser(text):
    check_shape_text(text)


@pytest.mark.parametrize("depth", [hlo_text.MAX_NESTING_DEPTH, hlo_text.MAX_NESTING_DEPTH + 1])
def test_nesting_limit_is_unchanged(depth):
    text = "(" * (depth - 1) + "f32[2]{0:T(2)}" + ")" * (depth - 1)
    results = []
    for enabled in (False, True):
        with fast_path(enabled):
            try:
                results.append(("OK", str(parse_uncached(text))))
            except HloParseError as e:
                results.append(("ERR", e.message, e.position))
    assert results[0] == results[1]
    assert results[0][0] == ("OK" if depth <= hlo_text.MAX_NESTING_DEPTH else "ERR")


def test_an_error_from_a_fast_path_lookalike_is_the_full_parsers():
    # XLA compares the ranks after the layout and reports the mismatch at the
    # token that follows it (here the end of input).
    with pytest.raises(HloParseError, match="Dimensions size is 2, but minor to major size is 1.") as e:
        parse_uncached("f32[2,3]{0}")
    assert e.value.position == len("f32[2,3]{0}")


# -- generated shapes and mutated strings --------------------------------------------

@settings(max_examples=300)
@given(shapes())
def test_random_shapes_agree(shape):
    check_shape_text(str(shape))


@settings(max_examples=200)
@given(array_shapes())
def test_random_arrays_with_and_without_layout_agree(shape):
    check_shape_text(str(shape))
    check_shape_text(shape.to_string(print_layout=False))


def _fast_grammar_piece():
    num = st.one_of(st.integers(0, 300).map(str), st.sampled_from(
        ["0", "00", "007", "999999999999999999", "9999999999999999999", "18446744073709551615",
         "128", "255", "256", "-1", ""]))
    dim = st.one_of(num, num.map(lambda n: "<=" + n),
                    st.sampled_from(["?", "??", "<=?", "<=<=1", "1?", "<1", "=1"]))
    entry = st.one_of(num, st.sampled_from(["*", "**", "(", ")", "()", "2*"]))
    tile = st.lists(entry, max_size=3).map(lambda es: "(" + ",".join(es) + ")")
    return dim, num, tile


@st.composite
def fast_grammar_texts(draw):
    """Texts in (and just around) the fast path's grammar."""
    dim, num, tile = _fast_grammar_piece()
    et = draw(st.sampled_from(["f32", "bf16", "s4", "pred", "u32", "token", "opaque", "F32", "f32x"]))
    dims = draw(st.lists(dim, max_size=4))
    text = f"{et}[{','.join(dims)}]"
    if draw(st.booleans()):
        m2m = draw(st.one_of(st.permutations(list(range(len(dims)))).map(lambda p: [str(d) for d in p]),
                             st.lists(num, max_size=4)))
        attrs = ""
        if draw(st.booleans()):
            attrs += "T" + "".join(draw(st.lists(tile, min_size=1, max_size=3)))
        for letter in draw(st.lists(st.sampled_from("LESM"), max_size=3)):
            attrs += f"{letter}({draw(num)})"
        colon = ":" if attrs or draw(st.booleans()) else ""
        text += "{" + ",".join(m2m) + colon + attrs + "}"
    return text


@settings(max_examples=500)
@given(fast_grammar_texts())
@example("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}")
def test_fast_grammar_texts_agree(text):
    check_shape_text(text)


@settings(max_examples=300)
@given(fast_grammar_texts().flatmap(lambda t: mutated([t])))
def test_mutated_fast_grammar_texts_agree(text):
    check_shape_text(text)


SEEDS = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}", "f32[<=4096,128]{1,0:T(8,128)}",
    "s4[256,1024]{1,0:T(8,128)(8,1)E(4)}", "s32[]{:T(128)}", "f32[?,784]",
    "(s32[]{:T(128)}, bf16[16,512]{1,0:T(8,128)(2,1)}, token[])",
    "(f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)}, /*index=2*/f32[<=8,128]{1,0})",
    "f32[2]{0:T(*,8)L(4)E(16)S(200)}",
]


@settings(max_examples=500)
@given(mutated(SEEDS))
def test_mutated_strings_agree(text):
    check_shape_text(text)


@settings(max_examples=200)
@given(st.lists(st.sampled_from(TEXT_ALPHABET), max_size=12).map("".join))
def test_random_token_soup_agrees(text):
    check_shape_text(text)


@settings(max_examples=100)
@given(st.lists(valid_array_shapes(), min_size=1, max_size=6))
def test_tuples_of_valid_arrays_agree(elements):
    text = "(" + ", ".join(str(e) for e in elements) + ")"
    assert check_shape_text(text)[0] == "OK"



# -- the printed text, computed once ---------------------------------------------------

CANONICAL = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}", "f32[2,3]{1,0}", "s32[]{:T(128)}",
    "f32[]", "token[]", "opaque[]", "s4[256,1024]{1,0:T(8,128)(8,1)E(4)}", "f32[<=4,?]{1,0}",
    "f32[2]{0:L(4)}", "f32[2]{0:S(-1)}",
    "(s32[]{:T(128)}, bf16[16,512]{1,0:T(8,128)(2,1)}, token[])",
    "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[])", "()",
]
# Parsed, then printed differently: the printed text is what the classes print.
NOT_CANONICAL = {
    "f32[2,3]": "f32[2,3]{1,0}", "f32[0012]{0}": "f32[12]{0}", "f32[2]{0:S(200)}": "f32[2]{0:S(-56)}",
    "f32[]{:}": "f32[]", "f32[2]{0:}": "f32[2]{0}", "f32[2]{0:L(1)E(0)S(0)}": "f32[2]{0}",
    "f32[2]{00}": "f32[2]{0}", "(f32[2], s32[])": "(f32[2]{0}, s32[])",
    "(f32[],s32[])": "(f32[], s32[])",
    "(f32[], f32[], f32[], f32[], f32[], f32[])":
        "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])",
    "(f32[], /*index=1*/f32[])": "(f32[], f32[])",
    " f32[2]{0}": "f32[2]{0}", "f32[2]{0:T(02)}": "f32[2]{0:T(2)}",
}


@pytest.mark.parametrize("text", CANONICAL)
def test_a_parsed_shape_prints_its_own_text(text):
    shape = parse_uncached(text)
    assert str(shape) == text
    assert str(copy.deepcopy(shape)) == text  # computed from scratch
    if hlo_text._fast_shape(text) is not None:
        assert shape._text is text  # handed over by the fast path, not recomputed


@pytest.mark.parametrize("text, printed", sorted(NOT_CANONICAL.items()))
def test_non_canonical_text_prints_canonically(text, printed):
    for fast in (True, False):
        with fast_path(fast):
            shape = parse_uncached(text)
        assert str(shape) == printed
        assert str(copy.deepcopy(shape)) == printed


def test_text_is_computed_once():
    shape = Shape("f32", (2, 3), Layout((0, 1), tiles=[(2, 2)]))
    assert shape._text is None and shape.layout._text is None
    text = str(shape)
    assert text == "f32[2,3]{0,1:T(2,2)}" and str(shape) is text
    assert shape.layout._text == "{0,1:T(2,2)}"
    tup = Shape.tuple([shape, Shape.token()])
    assert str(tup) == "(f32[2,3]{0,1:T(2,2)}, token[])" and str(tup) is str(tup)
    assert tup.human_string() == "(f32[2,3], token[])"


def test_many_dimensions_take_the_full_parser():
    text = "f32[" + ",".join(["1"] * 100) + "]"
    assert hlo_text._fast_shape(text) is None
    shape = parse_uncached(text)
    assert shape.layout.minor_to_major == tuple(range(99, -1, -1))
