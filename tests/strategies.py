"""Hypothesis strategies for random XLA shapes and layouts, shared by the tests.

``layouts(rank)`` and ``array_shapes()`` draw anything XLA's printer can
write and its parser read back: unusual but legal values included (negative
or out-of-range minor_to_major entries, empty tiles, ``*`` entries, negative
``E(n)``, signed index types). ``valid_array_shapes()`` draws only shapes
that also pass ``ShapeUtil::ValidateShapeWithOptionalLayout``; XLA's parser
insists on that for tuple elements, so ``shapes()`` uses it inside tuples.

Other test modules import these directly: ``from strategies import ...``
(``tests/`` is on ``sys.path`` under pytest's default rootdir-based import mode).
"""

from __future__ import annotations

from hypothesis import strategies as st

from xlashape import Layout, PrimitiveType, Shape, SplitConfig, Tile, UNBOUNDED_SIZE
from xlashape.primitive_types import all_array_types

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

ARRAY_TYPES = all_array_types()
INTEGRAL_TYPES = tuple(t for t in ARRAY_TYPES if t.is_integral)

element_types = st.sampled_from(ARRAY_TYPES)

# Sizes that matter in practice, plus the int64 edges.
int64s = st.one_of(
    st.integers(0, 300),
    st.integers(-5, 5),
    st.sampled_from([INT64_MIN, INT64_MAX, 2**31, 2**32 - 1]),
    st.integers(INT64_MIN, INT64_MAX),
)
small_nonneg = st.integers(0, 300)


@st.composite
def dimensions(draw, max_rank: int = 5, allow_dynamic: bool = True, max_size: int = 2**40):
    """(dims, dynamic_flags): static, bounded dynamic (``<=N``) and unbounded (``?``)."""
    rank = draw(st.integers(0, max_rank))
    dims, dyn = [], []
    for _ in range(rank):
        kind = draw(st.sampled_from(["static"] * 6 + (["bounded", "unbounded"] if allow_dynamic else [])))
        if kind == "unbounded":
            dims.append(UNBOUNDED_SIZE)
            dyn.append(True)
        else:
            dims.append(draw(st.one_of(st.integers(0, 9), st.integers(0, max_size))))
            dyn.append(kind == "bounded")
    return dims, dyn


tile_entries = st.one_of(st.integers(0, 1024), st.just("*"), st.integers(0, INT64_MAX))


@st.composite
def tiles(draw, max_tiles: int = 3, valid: bool = False):
    n = draw(st.integers(0, max_tiles))
    out = []
    for _ in range(n):
        if valid:
            entries = draw(st.lists(st.one_of(st.integers(1, 256), st.just("*")), min_size=1, max_size=4))
        else:
            entries = draw(st.lists(tile_entries, max_size=4))
        out.append(Tile(*entries))
    return out


@st.composite
def layouts(draw, rank: int, valid: bool = False):
    """A Layout for an array of ``rank`` dims that prints and parses back.

    With ``valid=True`` it also passes XLA's layout validation (m2m a
    permutation, tiles non-empty without zeros, no index/pointer types,
    E >= 0, no split configs).
    """
    if valid:
        m2m = draw(st.permutations(list(range(rank))))
    else:
        m2m = draw(st.one_of(
            st.permutations(list(range(rank))),
            st.lists(int64s, min_size=rank, max_size=rank),
        ))
    kw = {}
    if draw(st.booleans()):
        kw["tiles"] = draw(tiles(valid=valid))
    if draw(st.integers(0, 3)) == 0:
        kw["tail_padding_alignment_in_elements"] = draw(st.one_of(st.integers(1, 1024),
                                                                  st.integers(1, INT64_MAX)))
    if not valid and draw(st.integers(0, 5)) == 0:
        kw["index_primitive_type"] = draw(st.sampled_from(INTEGRAL_TYPES))
    if not valid and draw(st.integers(0, 5)) == 0:
        kw["pointer_primitive_type"] = draw(st.sampled_from(INTEGRAL_TYPES))
    if draw(st.integers(0, 3)) == 0:
        kw["element_size_in_bits"] = draw(st.integers(0, 64) if valid else int64s)
    if draw(st.integers(0, 3)) == 0:
        kw["memory_space"] = draw(st.integers(-128, 127))
    if not valid and draw(st.integers(0, 4)) == 0:
        kw["split_configs"] = draw(st.lists(
            st.builds(SplitConfig, st.integers(-2, 6), st.lists(int64s, max_size=3)),
            max_size=2))
    if draw(st.integers(0, 4)) == 0:
        kw["dynamic_shape_metadata_prefix_bytes"] = draw(st.integers(0, 2**40))
    return Layout(m2m, **kw)


@st.composite
def array_shapes(draw, valid: bool = False, max_rank: int = 5):
    """An array shape with a layout (the parser always fills one in)."""
    et = draw(element_types)
    # Valid shapes stay far from int64 overflow: 5 dims of 2**10 and 16-byte elements.
    dims, dyn = draw(dimensions(max_rank=max_rank, max_size=2**10 if valid else 2**40))
    layout = draw(layouts(len(dims), valid=valid))
    return Shape(et, dims, layout, dyn)


def valid_array_shapes(max_rank: int = 5):
    return array_shapes(valid=True, max_rank=max_rank)


leaf_shapes = st.one_of(
    array_shapes(),
    st.just(Shape.token()),
    st.just(Shape.opaque()),
    array_shapes().map(Shape.buffer),
)

_valid_leaves = st.one_of(
    valid_array_shapes(),
    st.just(Shape.token()),
    st.just(Shape.opaque()),
    valid_array_shapes().map(Shape.buffer),
)


def shapes(max_leaves: int = 12):
    """Any shape XLA's parser reads back: leaves at top level, tuples of valid shapes."""
    tuples = st.recursive(
        _valid_leaves,
        lambda children: st.lists(children, max_size=7).map(Shape.tuple),
        max_leaves=max_leaves,
    )
    return st.one_of(leaf_shapes, tuples)


# Fragments that HLO shape text is made of, for building and mutating strings.
TEXT_ALPHABET = list("[](){},:<=?*#/ \n0123456789-xTLESCPMDbfsu") + [
    "f32", "bf16", "s4", "u32", "pred", "token", "opaque", "b(", "T(", "S(", "SC(", "P(",
    "E(", "L(", "M(", "#(", "*(", "D(", "/*c*/", "//c\n", "18446744073709551615",
    "9223372036854775808", "<=", "?", "{:", ":T(8,128)", "(2,1)", "x",
]


def mutated(texts):
    """Strings derived from ``texts`` by deleting, inserting and replacing pieces."""

    @st.composite
    def _mutate(draw):
        s = draw(st.sampled_from(texts))
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from(["delete", "insert", "replace", "truncate"]))
            i = draw(st.integers(0, len(s)))
            if op == "delete" and s:
                j = draw(st.integers(i, min(len(s), i + 4)))
                s = s[:i] + s[j:]
            elif op == "insert":
                s = s[:i] + draw(st.sampled_from(TEXT_ALPHABET)) + s[i:]
            elif op == "replace" and i < len(s):
                s = s[:i] + draw(st.sampled_from(TEXT_ALPHABET)) + s[i + 1:]
            else:
                s = s[:i]
        return s

    return _mutate()


def edited_lines(lines, pieces, max_edits: int = 6):
    """The text of ``lines`` (an HLO module, say) after up to ``max_edits``
    edits, each inside one line: one of ``pieces`` inserted at a column, or
    the character there deleted. The line structure survives unless a piece
    holds a newline."""
    edit = st.tuples(st.integers(0, max(0, len(lines) - 1)), st.integers(0, 200),
                     st.sampled_from(pieces), st.booleans())

    def apply(edits):
        out = list(lines)
        for line_no, col, piece, delete in edits:
            line = out[line_no]
            col = min(col, len(line))
            out[line_no] = line[:col] + line[col + 1:] if delete else line[:col] + piece + line[col:]
        return "\n".join(out) + "\n"

    return st.lists(edit, max_size=max_edits).map(apply)



@st.composite
def tiled_layout_parts(draw, dims):
    """(minor_to_major, tiles, padded_dimensions, tail_padding) for arrays of
    ``dims`` that the tiling model accepts: repeated tiles, tiles with more
    dimensions than the shape, ``*`` entries (never last), legacy padding."""
    rank = len(dims)
    m2m = tuple(draw(st.permutations(range(rank))))
    tiles = []
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(1, rank + 2))
        entries = draw(st.lists(st.sampled_from([1, 2, 3, 4, 8, "*"]), min_size=k, max_size=k))
        if entries[-1] == "*":
            entries[-1] = draw(st.sampled_from([1, 2, 3, 4]))
        tiles.append(tuple(entries))
    padded = ()
    if rank and draw(st.booleans()):
        padded = tuple(d + draw(st.integers(0, 3)) for d in dims)
    align = draw(st.sampled_from([1, 1, 2, 3, 8]))
    return m2m, tiles, padded, align
