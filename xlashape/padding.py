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
from typing import List, NamedTuple, Optional

from . import tpu
from .hlo_text import parse_shape
from .layout import COMBINE_DIMENSION, Layout, Tile
from .shape import Shape
from .tiling import LayoutPlan, format_bytes, format_bytes_apart, format_expansion, plan, size_with_layout
from .errors import InvalidShapeError, XlaShapeError

__all__ = ["padding_report", "PaddingReport", "PaddingSource", "advice", "Advice", "Fix",
           "origin_of", "ORIGINS", "default_entry_layouts", "format_text", "padding_summary", "summarize_padding", "PaddingSummary",
           "padding_matters",
           "MIN_PADDING_FRACTION", "MIN_PADDING_BYTES"]


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
    would really be smaller, each with the size it would take (the sentence;
    ``suggestion_sizes`` holds those sizes in bytes, in the same order).
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
    suggestion_sizes: tuple = ()

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
    """``(sentence, size in bytes)`` of the layouts and reshapes that would
    really make ``p`` smaller, smallest first (at most five)."""
    shape, layout = p.shape, p.layout
    current = p.size_in_bytes
    if current == 0:
        return []
    found = {}  # text -> size

    def offer(text, size):
        if size is not None and size <= current * 0.95:
            found[text] = size

    def tail(size):
        return " would take %s instead of %s" % format_bytes_apart(size, current)
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
    return sorted(found.items(), key=lambda kv: kv[1])[:5]


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
    suggested = _suggestions(p)
    return PaddingReport(
        shape=p.shape,
        unpadded_bytes=unpadded,
        padded_bytes=padded,
        expansion=_ratio(padded, unpadded),
        physical_dimensions=p.physical_dimensions,
        sources=tuple(_padding_sources(p)),
        suggestions=tuple(text for text, _ in suggested),
        suggestion_sizes=tuple(size for _, size in suggested),
        logical_elements=logical,
        physical_elements=p.element_count,
    )


# -- fixes a JAX user can apply ---------------------------------------------------------

#: Where a buffer's layout comes from, as :func:`advice` takes it:
#: ``"requested"`` (the program asked for it: an entry layout set with a jax
#: ``Format`` / ``Layout``, ``with_layout_constraint``), ``"default"`` (XLA
#: chose it: its default for a parameter, or an intermediate's), ``"scratch"``
#: (a compiler scratch buffer: VMEM/SMEM temporaries, ``S(1)`` and up on TPU,
#: whose layout no user sets), ``None`` (not known).
ORIGINS = ("requested", "default", "scratch", None)


class Fix(NamedTuple):
    """One way to make a buffer smaller: ``kind`` (``"default-layout"``:
    drop the requested layout; ``"drop-dimension"``: squeeze a size-1
    dimension; ``"reshape"``: merge dimensions; ``"layout"``: request another
    layout; ``"pack"``: pack sub-byte elements), ``text`` (the sentence, with
    how to apply it in JAX), ``size_in_bytes`` (what the buffer would take)."""

    kind: str
    text: str
    size_in_bytes: Optional[int]

    def __str__(self):
        return self.text

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "size_in_bytes": self.size_in_bytes}


class Advice(NamedTuple):
    """What :func:`advice` says about one buffer: its ``padded_bytes`` and
    ``unpadded_bytes``, ``origin`` (see :data:`ORIGINS`), ``sources`` (why
    it is padded, one sentence each), ``fixes`` (:class:`Fix`, smallest
    result first) and ``note`` (a sentence about the origin: the requested
    layout and XLA:TPU's default, or why a scratch buffer gets no layout
    fix; ``None`` when there is nothing to say)."""

    shape: Shape
    padded_bytes: int
    unpadded_bytes: int
    origin: Optional[str]
    sources: tuple
    fixes: tuple
    note: Optional[str]


def default_entry_layouts(shape, platform: Optional[str] = "tpu", chip: Optional[str] = None):
    """The layouts XLA gives an entry parameter or output of ``shape``'s
    dimensions and type when the program requests none (memory space 0):
    on TPU :func:`xlashape.tpu.default_layout` on ``chip`` (without a chip,
    on every generation: a list of them), on CPU and GPU the descending
    (row-major) layout jax asks for. ``None`` for a shape that is not an
    array or a platform xlashape does not know.

    >>> [str(x) for x in default_entry_layouts("f32[100,5]", "tpu", "v5e")]
    ['{0,1:T(8,128)}']
    >>> [str(x) for x in default_entry_layouts("f32[8,16,32]{0,1,2}", "cpu")]
    ['{2,1,0}']
    """
    shape = _as_array(shape)
    if shape is None:
        return None
    if platform in ("cpu", "gpu"):
        return [Layout(tuple(range(len(shape.dimensions) - 1, -1, -1)))]
    if platform != "tpu":
        return None
    try:
        return list(dict.fromkeys(tpu.default_layout(shape, c)
                                  for c in ((chip,) if chip else tpu.CHIPS)))
    except XlaShapeError:
        return None


def format_text(layout) -> str:
    """How a jax program requests ``layout`` (memory space left out): the
    ``Format`` of ``jax.experimental.layout`` (JAX's ``major_to_minor`` is
    XLA's ``minor_to_major`` reversed).

    >>> format_text(parse_shape("f32[8,128]{0,1:T(8,128)}").layout)
    'Format(Layout(major_to_minor=(1,0), tiling=((8,128),)))'
    """
    def tup(xs) -> str:       # no spaces: a sentence wraps around it, not inside it
        xs = list(xs)
        return "(" + ",".join(map(str, xs)) + ("," if len(xs) == 1 else "") + ")"

    args = f"major_to_minor={tup(reversed(tuple(layout.minor_to_major)))}"
    tiles = tuple(tuple(t.dimensions) for t in layout.tiles)
    if tiles and all(isinstance(d, int) and d > 0 for t in tiles for d in t):
        args += f", tiling={tup(tup(t) for t in tiles)}"
    if layout.element_size_in_bits:
        args += f", sub_byte_element_size_in_bits={layout.element_size_in_bits}"
    return f"Format(Layout({args}))"


def origin_of(shape, *, kind: Optional[str] = None, memory_space: Optional[int] = None,
              platform: Optional[str] = "tpu", chip: Optional[str] = None) -> Optional[str]:
    """Where the layout of a buffer comes from (see :data:`ORIGINS`), as far
    as the buffer itself tells: on TPU a buffer outside HBM and host memory
    (``S(1)`` VMEM and up) is compiler scratch; an entry parameter or output
    (``kind`` ``"parameter"`` / ``"output"``) whose layout is not the one
    XLA gives that shape by default (:func:`default_entry_layouts`: on TPU
    :func:`xlashape.tpu.default_layout` on ``chip``, without a chip on none
    of the generations; on CPU and GPU, ``platform="cpu"`` / ``"gpu"``, the
    row-major layout) was requested; otherwise ``"default"``. ``None`` when
    the shape has no layout, or without a platform for a layout that is not
    tiled (not known to be a TPU's).

    >>> origin_of("f32[8,1,1024]{1,2,0:T(8,128)}", kind="parameter")
    'requested'
    >>> origin_of("f32[8,1024]{1,0:T(8,128)}", kind="parameter")
    'default'
    >>> origin_of("f32[8,1,1024]{1,2,0:T(8,128)S(1)}", kind="temporary")
    'scratch'
    >>> origin_of("f32[64,128]{0,1}", kind="parameter", platform="cpu")
    'requested'
    """
    shape = _as_array(shape)
    if shape is None or shape.layout is None:
        return None
    if platform in ("cpu", "gpu"):
        if kind not in ("parameter", "output"):
            return "default"
        # the dimension order decides (an element size, E(4), is the type's)
        descending = tuple(range(len(shape.dimensions) - 1, -1, -1))
        return "default" if tuple(shape.layout.minor_to_major) == descending else "requested"
    if platform not in (None, "tpu"):
        return None
    if platform is None and not shape.layout.tiles:
        return None          # not a TPU layout
    space = shape.layout.memory_space if memory_space is None else memory_space
    if space not in (0, 5):
        return "scratch"
    if kind in ("parameter", "output"):
        mine = shape.layout.replace(memory_space=0)
        try:
            defaults = [tpu.default_layout(shape, c) for c in ((chip,) if chip else tpu.CHIPS)]
        except XlaShapeError:
            return None
        return "default" if mine in defaults else "requested"
    return "default"


def advice(shape, *, origin: Optional[str] = None, chip: str = "v5e") -> Optional[Advice]:
    """The fixes a JAX user can apply to a padded TPU buffer, or ``None``
    when it carries no padding (or is not an array with a layout).

    - ``origin="scratch"``: no layout fix (no user sets a compiler scratch
      buffer's layout); the note says so.
    - ``origin="requested"``: the note says the padded layout was requested
      and what XLA:TPU's default layout would take; when that is smaller, the
      first fix is dropping the request.
    - a size-1 dimension whose removal removes the padding: "drop the size-1
      dimension" (``jnp.squeeze`` or a reshape), with the size the squeezed
      array takes in XLA:TPU's default layout;
    - the layouts and reshapes of :func:`padding_report` that are really
      smaller, saying how to request them.

    >>> a = advice("bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)}", origin="requested")
    >>> print(a.note)
    the layout {3,2,1,0:T(8,128)(2,1)} was requested (an entry layout from a jax Format, or with_layout_constraint): XLA:TPU's default layout for bf16[8,1280,1,16384], {3,1,2,0:T(8,128)(2,1)}, takes 320.00M instead of 2.50G
    >>> [f.kind for f in a.fixes][:2]
    ['default-layout', 'drop-dimension']
    """
    shape = _as_array(shape)
    if shape is None or shape.layout is None:
        return None
    try:
        rep = padding_report(shape)
    except XlaShapeError:
        return None
    if rep.padded_bytes <= rep.unpadded_bytes:
        return None
    current = rep.padded_bytes
    sources = tuple(s.description for s in rep.sources)
    space = shape.layout.memory_space
    if origin == "scratch":
        where = {1: "VMEM, S(1)"}.get(space, f"S({space})")
        note = (f"a compiler scratch buffer ({where}): XLA chooses its layout, and no layout a "
                "JAX program requests changes it; its padding only changes with the operation "
                "that needs it (its shapes, or a kernel's block sizes)")
        return Advice(shape, current, rep.unpadded_bytes, origin, sources, (), note)
    fixes: List[Fix] = []
    note = None
    if origin == "requested":
        try:
            default = tpu.default_layout(shape, chip)
            if space:
                default = default.replace(memory_space=space)
            dsize = size_with_layout(shape, default)
        except XlaShapeError:
            default = dsize = None
        if dsize is not None:
            note = (f"the layout {shape.layout} was requested (an entry layout from a jax Format, "
                    f"or with_layout_constraint): XLA:TPU's default layout for "
                    f"{_bare_text(shape)}, {default}, takes %s instead of %s"
                    % format_bytes_apart(dsize, current))
            if dsize <= current * 0.95:
                fixes.append(Fix("default-layout",
                                 f"drop the layout request (no Format / with_layout_constraint "
                                 f"for it): XLA:TPU's default {default} takes %s instead of %s"
                                 % format_bytes_apart(dsize, current), dsize))
            else:
                note += ": the request is not what pads it"
    dims = shape.dimensions
    if len(dims) > 1:
        for d, size in enumerate(dims):
            if size != 1:
                continue
            squeezed = [x for i, x in enumerate(dims) if i != d]
            try:
                s2 = tpu.with_default_layout(f"{shape.element_type.hlo_name}[{','.join(map(str, squeezed))}]",
                                             chip)
                ssize = size_with_layout(s2, s2.layout)
            except XlaShapeError:
                continue
            if ssize is not None and ssize <= current * 0.95:
                fixes.append(Fix("drop-dimension",
                                 f"drop the size-1 dimension {d} (jnp.squeeze(x, {d}), or reshape "
                                 f"to {_bare_text(s2)}): in XLA:TPU's default layout {s2} takes %s instead of %s"
                                 % format_bytes_apart(ssize, current), ssize))
    for text, size in zip(rep.suggestions, rep.suggestion_sizes):
        if text.startswith("merge dimension"):
            fixes.append(Fix("reshape", text, size))
        elif text.startswith("pack "):
            fixes.append(Fix("pack", text + " (request it with a jax Format, or "
                             "with_layout_constraint)", size))
        else:
            fixes.append(Fix("layout", text + " (request it with a jax Format for a parameter "
                             "or output, with_layout_constraint for an intermediate)", size))
    seen = set()
    unique = []
    for f in sorted(fixes, key=lambda f: (f.size_in_bytes is None, f.size_in_bytes or 0,
                                          f.kind != "default-layout")):
        if f.text not in seen:
            seen.add(f.text)
            unique.append(f)
    return Advice(shape, current, rep.unpadded_bytes, origin, sources, tuple(unique), note)


#: Padding below this share of a program's bytes, or below
#: :data:`MIN_PADDING_BYTES`, is not worth a fix.
MIN_PADDING_FRACTION = 0.01
MIN_PADDING_BYTES = 1 << 20


class PaddingSummary(NamedTuple):
    """How much of a program's memory is padding and whether that matters:
    ``padding_bytes`` of ``total_bytes`` (``fraction``), ``worth_fixing``,
    ``listed`` (the allocations whose own padding matters, most first) and
    ``text`` ("padding 137.0K = 0.04% of 312.50M: nothing to fix")."""

    padding_bytes: int
    total_bytes: int
    fraction: float
    worth_fixing: bool
    listed: list
    text: str


def padding_matters(padding_bytes: int, total_bytes: int, *,
                    min_fraction: float = MIN_PADDING_FRACTION,
                    min_bytes: int = MIN_PADDING_BYTES) -> bool:
    """Whether ``padding_bytes`` of a program of ``total_bytes`` is worth a
    fix: at least ``min_bytes`` and at least ``min_fraction`` of the total.

    >>> padding_matters(137 << 10, 300 << 20), padding_matters(2 << 30, 18 << 30)
    (False, True)
    """
    return padding_bytes >= min_bytes and padding_bytes >= min_fraction * max(total_bytes, 1)


def padding_summary(allocations, *, total_bytes: Optional[int] = None, top: int = 10,
                    min_fraction: float = MIN_PADDING_FRACTION,
                    min_bytes: int = MIN_PADDING_BYTES) -> PaddingSummary:
    """What "most padding" should list for a program's ``allocations``
    (objects with ``size_in_bytes`` and ``padding_in_bytes``, such as
    :class:`xlashape.memory.Allocation`): only the allocations whose padding
    matters (:func:`padding_matters` against ``total_bytes``, by default the
    allocations' sum), at most ``top``; and one line for the program.

    >>> class A:
    ...     def __init__(self, size, pad): self.size_in_bytes, self.padding_in_bytes = size, pad
    >>> s = padding_summary([A(300 << 20, 0), A(1 << 20, 137 << 10)])
    >>> s.text, s.listed
    ('padding 137.0K = 0.04% of 301.00M: nothing to fix', [])
    """
    allocations = list(allocations)
    total = total_bytes if total_bytes is not None else sum(
        a.size_in_bytes or 0 for a in allocations)
    padding = sum(max(0, a.padding_in_bytes or 0) for a in allocations)
    return summarize_padding(padding, total, allocations, top=top, min_fraction=min_fraction,
                             min_bytes=min_bytes)


def summarize_padding(padding: int, total: int, candidates, *, top: int = 10,
                      min_fraction: float = MIN_PADDING_FRACTION,
                      min_bytes: int = MIN_PADDING_BYTES) -> PaddingSummary:
    """:func:`padding_summary` from the totals (``padding`` bytes of
    ``total``) and the allocations that may be listed (``candidates``: the
    most padded ones, when a reader keeps only those)."""
    fraction = padding / total if total else 0.0
    worth = padding_matters(padding, total, min_fraction=min_fraction, min_bytes=min_bytes)
    listed = sorted((a for a in candidates
                     if padding_matters(a.padding_in_bytes or 0, total, min_fraction=min_fraction,
                                        min_bytes=min_bytes)),
                    key=lambda a: -(a.padding_in_bytes or 0))[:top]
    head = f"padding {format_bytes(padding)} = {_percent(fraction)} of {format_bytes(total)}"
    if not worth:
        text = head + ": nothing to fix"
    else:
        share = sum(a.padding_in_bytes for a in listed)
        text = (head + f": worth fixing; {len(listed)} allocation{'s' if len(listed) != 1 else ''} "
                f"carry {_percent(share / padding if padding else 0)} of it")
    return PaddingSummary(padding, total, fraction, worth, listed, text)


def _percent(x: float) -> str:
    p = 100 * x
    return f"{p:.2f}%" if p < 1 else f"{p:.1f}%"


def _as_array(shape) -> Optional[Shape]:
    if isinstance(shape, str):
        try:
            shape = parse_shape(shape)
        except XlaShapeError:
            return None
    if not isinstance(shape, Shape):
        return None
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array or shape.is_unbounded_dynamic:
        return None
    return shape


def _bare_text(shape: Shape) -> str:
    return f"{shape.element_type.hlo_name}[{','.join(map(str, shape.dimensions))}]"
