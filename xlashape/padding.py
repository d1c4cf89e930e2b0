"""Where a buffer's padding comes from, and what a JAX user can do about it.

Built on the tiling model (:mod:`xlashape.tiling`, which stays the pure
model): :func:`padding_report` says how many bytes a shape takes, how many it
would take unpadded, which dimension and tile level pads it, and which other
layouts would really be smaller; :func:`advice` turns that into fixes a JAX
user can apply, knowing where the buffer comes from (a layout the program
asked for, XLA:TPU's default, or a compiler scratch buffer no user sets);
:func:`padding_summary` says whether the padding of a program is worth
fixing at all.

>>> r = padding_report("s32[8388608,8,4]{2,1,0:T(8,128)}")
>>> format_bytes(r.padded_bytes), format_bytes(r.unpadded_bytes), format_expansion(r.expansion)
('32.00G', '1.00G', '32.0x expansion')
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Optional

from .layout import COMBINE_DIMENSION, Tile
from .shape import Shape
from .tiling import LayoutPlan, format_bytes, format_expansion, plan, size_with_layout
from .errors import InvalidShapeError

__all__ = ["padding_report", "PaddingReport", "PaddingSource"]


# -- where the padding comes from ---------------------------------------------

@dataclass(frozen=True)
class PaddingSource:
    """One reason a buffer is larger than its logical elements.

    ``kind`` is ``'padded_dimensions'`` (the legacy padding field),
    ``'tile'`` (a tile level rounding a (combined) dimension up to its tile
    size), ``'tail_padding'`` (``L(n)``), or ``'element_size'`` (elements
    stored wider than their type: a sub-byte type or PRED without ``E(n)``
    takes a whole byte). XLA's ``ByteSizeOf`` counts whole bytes too, so an
    ``'element_size'`` source is *not* part of :attr:`PaddingReport.expansion`;
    the factors of all other sources multiply to exactly
    ``physical_elements / logical_elements``.
    """

    kind: str
    level: Optional[int]
    dimensions: tuple
    size: int
    padded_size: int
    factor: float
    description: str


@dataclass(frozen=True)
class PaddingReport:
    """How many bytes a shape takes, how many it would take unpadded, and why.

    ``unpadded_bytes`` has XLA's ``ShapeUtil::ByteSizeOf`` semantics
    (logical elements, ``E(n)`` packing); ``padded_bytes`` is
    :func:`physical_size_in_bytes`. ``sources`` lists each padding source
    with a factor above 1, largest first; ``suggestions`` are layouts that
    would really be smaller, each with the size it would take.
    """

    shape: Shape
    unpadded_bytes: int
    padded_bytes: int
    expansion: float
    physical_dimensions: tuple
    sources: tuple
    suggestions: tuple
    logical_elements: int = 0
    physical_elements: int = 0

    @property
    def padding_bytes(self) -> int:
        """Extra memory due to padding (XLA's report prints this)."""
        return self.padded_bytes - self.unpadded_bytes

    def summary(self) -> str:
        """XLA's three report lines: size, unpadded size, extra memory."""
        lines = [f"Size: {format_bytes(self.padded_bytes)}",
                 f"Unpadded size: {format_bytes(self.unpadded_bytes)}"]
        if self.padded_bytes > self.unpadded_bytes:
            lines.append(f"Extra memory due to padding: {format_bytes(self.padding_bytes)} "
                         f"({format_expansion(self.expansion)})")
        return "\n".join(lines)


def _ratio(padded: int, size: int) -> float:
    if size == 0:
        return math.inf if padded > 0 else 1.0
    return padded / size


def _fmt_factor(f: float) -> str:
    if math.isinf(f):
        return "inf"
    if abs(f - round(f)) < 1e-9:
        return f"{int(round(f))}x"
    return f"{f:.2f}x"


_ORDINALS = ("most-minor", "second-most-minor", "third-most-minor")


def _ordinal(pos_from_minor: int) -> str:
    if pos_from_minor < len(_ORDINALS):
        return _ORDINALS[pos_from_minor]
    return f"{pos_from_minor + 1}th-most-minor"


def _dims_text(dims) -> str:
    dims = sorted(dims)
    if len(dims) == 1:
        return f"dimension {dims[0]}"
    return "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}"


def _padding_sources(p: LayoutPlan) -> list:
    sources = []
    if p.element_count == 0 and math.prod(p.padded_dimensions) == 0:
        return sources
    dims, padded = p.dimensions, p.padded_dimensions
    for d, (s, ps) in enumerate(zip(dims, padded)):
        if ps > s:
            f = _ratio(ps, s)
            sources.append(PaddingSource(
                "padded_dimensions", None, (d,), s, ps, f,
                f"dimension {d} has size {s} but padded_dimensions pads it to {ps}: "
                f"{_fmt_factor(f)}"))
    for lv in p.tile_levels:
        level, tile, m = lv.index, lv.tile, len(lv.entries)
        for g, e in enumerate(lv.entries):
            gsize, t, ps, src = e.size, e.tile_size, e.padded_size, e.dimensions
            if ps <= gsize:
                continue
            f = _ratio(ps, gsize)
            pos = m - 1 - g  # 0 = most minor entry of this tile
            tail = f"tiled by {t}: padded to {ps} ({_fmt_factor(f)})"
            if not src:
                desc = (f"tile level {level} {tile} has more dimensions than the "
                        f"shape, and pads an added size-{gsize} dimension to {ps}: "
                        f"{_fmt_factor(f)}")
            elif level == 0:
                what = _dims_text(src)
                if len(src) > 1:
                    desc = (f"{what}, combined by '*' into size {gsize}, are the "
                            f"{_ordinal(pos)} dimension of tile {tile}, {tail}")
                elif gsize < t:
                    desc = (f"{what} has size {gsize} but is the {_ordinal(pos)} dimension, "
                            f"tiled by {t}: {_fmt_factor(f)}")
                else:
                    desc = (f"{what} has size {gsize}, not a multiple of its tile size {t}: "
                            f"padded to {ps} ({_fmt_factor(f)})")
            else:
                desc = (f"tile level {level} {tile} pads a dimension of size "
                        f"{gsize} (from {_dims_text(src)}) to {ps}: {_fmt_factor(f)}")
            sources.append(PaddingSource("tile", level, src, gsize, ps, f, desc))
    total = math.prod(p.physical_dimensions)
    if p.element_count > total:
        f = _ratio(p.element_count, total)
        align = p.layout.tail_padding_alignment_in_elements
        sources.append(PaddingSource(
            "tail_padding", None, (), total, p.element_count, f,
            f"L({align}) rounds {total} elements up to {p.element_count}: {_fmt_factor(f)}"))
    et = p.element_type
    natural = et.bit_width
    if natural and p.element_bits > natural:
        f = p.element_bits / natural
        hint = f" (no E({natural}))" if p.layout.element_size_in_bits == 0 else ""
        sources.append(PaddingSource(
            "element_size", None, (), natural, p.element_bits, f,
            f"{et.hlo_name} elements have {natural} bit{'s' if natural > 1 else ''} but are "
            f"stored in {p.element_bits}{hint}: {_fmt_factor(f)}; XLA's unpadded size "
            "counts these bytes too"))
    sources.sort(key=lambda s: -s.factor)
    return sources



def _suggestions(p: LayoutPlan) -> list:
    shape, layout = p.shape, p.layout
    current = p.size_in_bytes
    if current == 0:
        return []
    found = {}  # text -> size

    def offer(text, size):
        if size is not None and size <= current * 0.95:
            found[text] = size

    tail = lambda size: f" would take {format_bytes(size)} instead of {format_bytes(current)}"  # noqa: E731
    m2m = list(layout.minor_to_major)
    n = len(m2m)
    if layout.tiles and n > 1:
        k = len(layout.tiles[0])
        best_single = None
        for d in m2m[:min(k, n - 1)]:
            new = [x for x in m2m if x != d] + [d]
            size = size_with_layout(shape, layout.replace(minor_to_major=tuple(new)))
            if size is not None and (best_single is None or size < best_single):
                best_single = size
            new_l = layout.replace(minor_to_major=tuple(new))
            offer(f"make dimension {d} (size {p.dimensions[d]}) the major-most dimension, "
                  f"out of the {min(k, n)} minor-most that tile {layout.tiles[0]} covers: "
                  f"layout {new_l}" + tail(size), size)
        if n <= 6:
            best = None
            for perm in itertools.permutations(m2m):
                if list(perm) == m2m:
                    continue
                size = size_with_layout(shape, layout.replace(minor_to_major=perm))
                if size is not None and (best is None or size < best[0]):
                    best = (size, perm)
            if best is not None and (best_single is None or best[0] < best_single * 0.95):
                new_l = layout.replace(minor_to_major=best[1])
                offer(f"reorder the dimensions: layout {new_l}" + tail(best[0]), best[0])
    if layout.tiles:
        entries = p.tile_levels[0].entries
        first = layout.tiles[0].dimensions
        new_first = list(first)
        gi = 0
        # the most-minor entry is usually the hardware's lane width: keep it
        last = max(j for j, t in enumerate(first) if t != COMBINE_DIMENSION)
        for j, t in enumerate(first):
            if t == COMBINE_DIMENSION:
                continue
            gsize = entries[gi].size
            gi += 1
            if 0 < gsize < t and j != last:
                new_first[j] = 1 << (gsize - 1).bit_length()
        if new_first != list(first):
            smaller = Tile(new_first)
            size = size_with_layout(shape, layout.replace(tiles=(smaller,) + layout.tiles[1:]))
            offer(f"a smaller first tile {smaller} instead of {layout.tiles[0]} "
                  "(if the backend supports it)" + tail(size), size)
        if COMBINE_DIMENSION not in first and n > len(first):
            merged = Tile((COMBINE_DIMENSION,) + tuple(first))
            size = size_with_layout(shape, layout.replace(tiles=(merged,) + layout.tiles[1:]))
            a, b = m2m[len(first)], m2m[len(first) - 1]
            offer(f"merge dimension {a} into dimension {b} (a reshape, or tile "
                  f"{merged})" + tail(size), size)
        _offer_minor_merge(p, offer, tail)
    et = p.element_type
    if et.bit_width and et.bit_width < 8 and layout.element_size_in_bits == 0:
        size = size_with_layout(shape, layout.replace(element_size_in_bits=et.bit_width))
        offer(f"pack {8 // et.bit_width} {et.hlo_name} elements per byte with "
              f"E({et.bit_width})" + tail(size), size)
    return [t for t, _ in sorted(found.items(), key=lambda kv: kv[1])][:5]


def _offer_minor_merge(p: LayoutPlan, offer, tail) -> None:
    """Offer one dimension in place of the two minor-most in physical order
    (``bf16[8,64,64,32]{2,3,1,0:T(8,128)(2,1)}``: 32 x 64 as one dimension
    of 2048 fills the 128 lanes that 64 leaves half empty). Not a layout
    change: the program would reshape the array, after a transpose when the
    two are not neighbours in the logical order."""
    shape, layout = p.shape, p.layout
    m2m = list(layout.minor_to_major)
    if len(m2m) < 2 or layout.padded_dimensions or layout.dynamic_shape_metadata_prefix_bytes:
        return
    a, b = m2m[0], m2m[1]                 # minor-most, second-minor-most
    dims = list(shape.dimensions)
    if dims[a] <= 1 or dims[b] <= 1:
        return
    new_dims = dims[:]
    new_dims[b] = dims[a] * dims[b]
    del new_dims[a]
    new_m2m = tuple(d - (d > a) for d in m2m[1:])
    try:
        new_layout = layout.replace(minor_to_major=new_m2m)
        merged = Shape(shape.element_type, new_dims, new_layout)
    except InvalidShapeError:
        return
    size = size_with_layout(merged, new_layout)
    how = "a reshape" if b == a - 1 else "a transpose and a reshape"
    offer(f"merge dimensions {b} and {a} (sizes {dims[b]} and {dims[a]}, the two "
          f"minor-most in memory) into one of size {new_dims[b if b < a else b - 1]} "
          f"({how}): {merged}" + tail(size), size)


def padding_report(shape) -> PaddingReport:
    """Where the bytes of a shape go: unpadded vs. padded size, and why.

    The basis of ``xlashape explain``. Sizes match XLA's TPU out-of-memory
    report ("Unpadded size", "Size", "Extra memory due to padding").

    >>> r = padding_report("s32[8388608,8,4]{2,1,0:T(8,128)}")
    >>> format_bytes(r.padded_bytes), format_bytes(r.unpadded_bytes), format_expansion(r.expansion)
    ('32.00G', '1.00G', '32.0x expansion')
    """
    p = plan(shape)
    logical = math.prod(p.dimensions)
    unpadded = -(-logical * p.element_bits // 8)
    padded = p.size_in_bytes
    return PaddingReport(
        shape=p.shape,
        unpadded_bytes=unpadded,
        padded_bytes=padded,
        expansion=_ratio(padded, unpadded),
        physical_dimensions=p.physical_dimensions,
        sources=tuple(_padding_sources(p)),
        suggestions=tuple(_suggestions(p)),
        logical_elements=logical,
        physical_elements=p.element_count,
    )
