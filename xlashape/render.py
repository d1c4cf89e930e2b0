"""Pictures of where an array's elements live, for any layout: the drawings of
XLA's shapes documentation.

The XLA "Shapes and layout" page explains a layout with three small pictures of
a ``[2 x 3]`` array: the logical array with letters, the linear memory order,
and (with padding) the padded array::

    a b c        a d b e c f              a d 0 b e 0 c f 0 0 0 0 0 0 0
    d e f        ({0,1}: column-major)    (padded to [3,5])

:func:`show_text` draws the same pictures for any shape and layout (tiles,
padding, ``L(n)``, ``E(n)``), plus a grid of element offsets with the tile
boundaries; :func:`save_picture` draws the memory order with matplotlib.
Large shapes are shown by their top-left corner, with a note saying so.

Elements are labelled in logical row-major order: ``a``..``z``, then ``aa``,
``ab``, ... (like spreadsheet columns), so every element has a short, unique name.

>>> print(memory_order_line("f32[2,3]{0,1}"))
a d b e c f
"""

from __future__ import annotations

import itertools
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .tiling import LayoutPlan, plan as _plan

__all__ = [
    "element_label",
    "memory_order",
    "memory_order_line",
    "show_text",
    "save_picture",
    "PictureLimits",
]


def element_label(k: int) -> str:
    """The name of the ``k``-th element in row-major order: ``a``..``z``,
    ``aa``..``az``, ``ba``, ... (bijective base 26).

    >>> [element_label(k) for k in (0, 1, 25, 26, 27, 701, 702)]
    ['a', 'b', 'z', 'aa', 'ab', 'zz', 'aaa']
    """
    if k < 0:
        raise ValueError(f"element number must be >= 0, got {k}")
    out = []
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        out.append(chr(97 + r))
    return "".join(reversed(out))


class PictureLimits:
    """How much of a big array to draw: ``rows``/``cols`` of each 2-D grid,
    ``slices`` of a 3-D (or higher) array, ``slots`` of the memory order."""

    def __init__(self, rows: int = 12, cols: int = 16, slices: int = 2, slots: int = 128):
        for name, v in (("rows", rows), ("cols", cols), ("slices", slices), ("slots", slots)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.rows, self.cols, self.slices, self.slots = rows, cols, slices, slots


def _as_plan(shape) -> LayoutPlan:
    return shape if isinstance(shape, LayoutPlan) else _plan(shape)


def _row_major_number(index: Sequence[int], dims: Sequence[int]) -> int:
    k = 0
    for i, d in zip(index, dims):
        k = k * d + i
    return k


def _padding_text(p: LayoutPlan) -> str:
    v = p.layout.padding_value
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def memory_order(shape, limit: Optional[int] = None) -> List[Optional[Tuple[int, ...]]]:
    """The logical index stored in each slot of the buffer, in memory order
    (``None`` for a padding slot); the first ``limit`` slots if given."""
    p = _as_plan(shape)
    n = p.element_count if limit is None else min(limit, p.element_count)
    return [p.multidimensional_index(off) for off in range(n)]


def memory_order_line(shape, limit: Optional[int] = None) -> str:
    """The one-line picture of memory of XLA's shapes documentation: element
    labels in offset order, padding as ``0`` (or the layout's ``padding_value``).

    >>> print(memory_order_line("f32[2,3]{1,0}"))
    a b c d e f
    """
    p = _as_plan(shape)
    pad = _padding_text(p)
    dims = p.dimensions
    return " ".join(pad if ix is None else element_label(_row_major_number(ix, dims))
                    for ix in memory_order(p, limit))


# -- grids ---------------------------------------------------------------------


def _first_level_tiles(p: LayoutPlan) -> dict:
    """Logical dim -> tile size of the first tile level, for dims the level
    tiles on their own (not combined with ``*``)."""
    out = {}
    if p.tile_levels:
        for entry in p.tile_levels[0].entries:
            if len(entry.inputs) == 1 and entry.inputs[0] and entry.tile_size > 1:
                out[entry.inputs[0][0]] = entry.tile_size
    return out


def _extent(p: LayoutPlan) -> Tuple[int, ...]:
    """The box drawn: padded dims, rounded up to the first tile on each dim."""
    tiles = _first_level_tiles(p)
    ext = []
    for d, s in enumerate(p.padded_dimensions):
        t = tiles.get(d)
        ext.append(-(-s // t) * t if t else s)
    return tuple(ext)


def _offset_of(p: LayoutPlan, index: Sequence[int]) -> Optional[int]:
    """Offset of a position in the drawn box; for a position outside the
    logical array, the padding slot it falls on (None if the model does not
    place it on a padding slot, which would be a bug worth showing)."""
    inside = all(i < d for i, d in zip(index, p.dimensions))
    if inside:
        return p.linear_index(index)
    coords = p.physical_coordinates(index)
    if any(c >= s for c, s in zip(coords, p.physical_dimensions)):
        return None
    off = sum(c * s for c, s in zip(coords, p.physical_strides))
    if off >= p.element_count or p.multidimensional_index(off) is not None:
        return None
    return off


def _row_unit(p: LayoutPlan, at_least: int, at_most: int) -> int:
    """Slots per printed row of memory: the minor-most physical dimensions
    multiplied together until there are ``at_least`` (so a row is a tile row
    or a whole tile where possible), capped at ``at_most``."""
    unit = 1
    for s in reversed(p.physical_dimensions):
        unit *= s
        if unit >= at_least:
            break
    return max(1, min(unit, at_most))


def _grid_lines(cells: List[List[str]], row_tile: int, col_tile: int) -> List[str]:
    """Lay out a grid of strings, right-aligned, with ``|`` and ``-`` at tile
    boundaries (every ``row_tile`` rows / ``col_tile`` columns; 0 = none)."""
    if not cells or not cells[0]:
        return []
    w = max(len(c) for row in cells for c in row)
    ncols = len(cells[0])
    lines = []
    sep = None
    if row_tile:
        parts = []
        for j in range(ncols):
            if col_tile and j and j % col_tile == 0:
                parts.append("+")
            parts.append("-" * w)
        sep = "-".join(parts)
    for i, row in enumerate(cells):
        if row_tile and i and i % row_tile == 0 and sep:
            lines.append(sep)
        parts = []
        for j, c in enumerate(row):
            if col_tile and j and j % col_tile == 0:
                parts.append("|")
            parts.append(c.rjust(w))
        lines.append(" ".join(parts))
    return lines


def _slices(ext: Sequence[int], max_slices: int):
    lead = ext[:-2]
    total = 1
    for e in lead:
        total *= e
    it = itertools.product(*(range(e) for e in lead))
    return list(itertools.islice(it, max_slices)), total


def show_text(shape, limits: Optional[PictureLimits] = None, *, offsets: bool = True) -> str:
    """The pictures of XLA's shapes documentation for ``shape``, as text: the
    logical array with letters, the memory order, and the offset of every
    element (with tile boundaries).

    >>> print(show_text("f32[2,3]{0,1}", offsets=False))  # doctest: +NORMALIZE_WHITESPACE
    f32[2,3]{0,1}: 6 elements in 6 slots (no padding)
    logical array [2 x 3], elements named in row-major order:
      a b c
      d e f
    memory order (offset 0 first):
      a d b e c f
    """
    limits = limits or PictureLimits()
    p = _as_plan(shape)
    out: List[str] = []
    n_logical = 1
    for d in p.dimensions:
        n_logical *= d
    n_pad = p.element_count - n_logical
    head = (f"{p.shape}: {n_logical} element{'' if n_logical == 1 else 's'} in "
            f"{p.element_count} slot{'' if p.element_count == 1 else 's'}")
    head += " (no padding)" if n_pad == 0 else f" ({n_pad} padding)"
    out.append(head)
    if p.layout.padded_dimensions:
        out.append(f"padded_dimensions {list(p.layout.padded_dimensions)}, "
                   f"padding_value {_padding_text(p)}")
    dims = p.dimensions
    rank = len(dims)
    ext = _extent(p)
    tiles = _first_level_tiles(p)
    pad = _padding_text(p)

    def label(ix):
        if all(i < d for i, d in zip(ix, dims)):
            return element_label(_row_major_number(ix, dims))
        return pad

    def offset(ix):
        off = _offset_of(p, ix)
        if off is None:
            return "?"
        inside = all(i < d for i, d in zip(ix, dims))
        return str(off) if inside else f"({off})"

    box = " x ".join(str(e) for e in ext) if ext else "scalar"
    logical = " x ".join(str(d) for d in dims) if dims else "scalar"
    title = f"logical array [{logical}]"
    if tuple(ext) != tuple(dims):
        title += f" drawn as [{box}] with padding shown as {pad}"
    title += ", elements named in row-major order:"
    notes = []

    def draw(fn, what):
        lines = [what]
        if rank == 0:
            lines.append("  " + fn(()))
            return lines
        if rank == 1:
            rows_e, cols_e = 1, ext[0]
        else:
            rows_e, cols_e = ext[-2], ext[-1]
        nr, nc = min(rows_e, limits.rows), min(cols_e, limits.cols)
        if rank == 1:
            row_tile, col_tile = 0, tiles.get(0, 0)
            slices = [()]
            total_slices = 1
        else:
            row_tile, col_tile = tiles.get(rank - 2, 0), tiles.get(rank - 1, 0)
            slices, total_slices = _slices(ext, limits.slices)
        for lead in slices:
            if rank > 2:
                lines.append("  [" + ",".join(str(i) for i in lead) + ",:,:]")
            cells = []
            for r in range(nr):
                row = []
                for c in range(nc):
                    ix = lead + ((c,) if rank == 1 else (r, c))
                    row.append(fn(ix))
                cells.append(row)
            lines.extend("  " + ln for ln in _grid_lines(cells, row_tile, col_tile))
            if nr == 0 or nc == 0:
                lines.append("  (empty)")
        crop = []
        if rank >= 2 and nr < rows_e:
            crop.append(f"rows 0-{nr - 1} of {rows_e}")
        if nc < cols_e:
            crop.append(f"columns 0-{nc - 1} of {cols_e}")
        if len(slices) < total_slices:
            crop.append(f"{len(slices)} of {total_slices} slices")
        if crop:
            lines.append("  (showing " + ", ".join(crop) + "; see --rows/--cols/--slices)")
        return lines

    out.extend(draw(label, title))

    # memory order
    shown = min(p.element_count, limits.slots)
    labels = []
    for off in range(shown):
        ix = p.multidimensional_index(off)
        labels.append(pad if ix is None else element_label(_row_major_number(ix, dims)))
    out.append("memory order (offset 0 first):")
    if shown == 0:
        out.append("  (no slots: the array is empty)")
    elif shown <= 32:
        out.append("  " + " ".join(labels))
    else:
        unit = _row_unit(p, 8, 32)
        w = max(len(x) for x in labels)
        ow = len(str(shown - 1))
        for start in range(0, shown, unit):
            chunk = labels[start:start + unit]
            out.append(f"  {start:>{ow}}: " + " ".join(x.rjust(w) for x in chunk))
    if shown < p.element_count:
        out.append(f"  (showing the first {shown} of {p.element_count} slots; see --slots)")
        notes.append("cropped")

    if offsets:
        what = "element offset of each position"
        if tuple(ext) != tuple(dims):
            what += " ((n) = padding slot)"
        if tiles:
            what += ", | and - at tile boundaries"
        out.extend(draw(offset, what + ":"))
    return "\n".join(out)


# -- matplotlib ----------------------------------------------------------------


class MissingMatplotlib(ImportError):
    """matplotlib is not installed (the optional ``plot`` extra)."""


def save_picture(shape, path: str, fmt: Optional[str] = None,
                 limits: Optional[PictureLimits] = None) -> None:
    """Draw the layout of ``shape`` to ``path`` (PNG or SVG, by ``fmt`` or the
    file extension): the logical array coloured by element offset with tile
    borders and padding cells hatched, next to the buffer in memory order.

    Needs matplotlib (``pip install 'xlashape[plot]'``); raises
    :class:`MissingMatplotlib` (an ``ImportError``) without it.
    """
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise MissingMatplotlib(
            "drawing pictures needs matplotlib: pip install 'xlashape[plot]' "
            f"(or pip install matplotlib); import failed: {e}") from None
    limits = limits or PictureLimits(rows=32, cols=32, slices=1, slots=512)
    p = _as_plan(shape)
    dims = p.dimensions
    rank = len(dims)
    ext = _extent(p)
    tiles = _first_level_tiles(p)
    if rank == 0:
        rows_e, cols_e, lead = 1, 1, ()
    elif rank == 1:
        rows_e, cols_e, lead = 1, ext[0], ()
    else:
        rows_e, cols_e, lead = ext[-2], ext[-1], (0,) * (rank - 2)
    nr, nc = min(rows_e, limits.rows), min(cols_e, limits.cols)

    def ix_of(r, c):
        if rank == 0:
            return ()
        if rank == 1:
            return (c,)
        return lead + (r, c)

    grid = np.full((nr, nc), np.nan)
    is_pad = np.zeros((nr, nc), dtype=bool)
    for r in range(nr):
        for c in range(nc):
            ix = ix_of(r, c)
            off = _offset_of(p, ix)
            if off is not None:
                grid[r, c] = off
            is_pad[r, c] = not all(i < d for i, d in zip(ix, dims))

    shown = min(p.element_count, limits.slots)
    unit = _row_unit(p, 4, 64)
    mrows = -(-shown // unit)
    mem = np.full((mrows, unit), np.nan)
    mem_lab = {}
    for off in range(shown):
        ix = p.multidimensional_index(off)
        r, c = divmod(off, unit)
        if ix is not None:
            k = _row_major_number(ix, dims)
            mem[r, c] = k
            mem_lab[(r, c)] = element_label(k)

    n_logical = int(np.prod(dims)) if dims else 1
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.5),
                                   gridspec_kw={"width_ratios": [max(nc, 4), max(unit, 4)]})
    fig.suptitle(f"{p.shape}\n{p.element_count} slots, "
                 f"{p.element_count - n_logical} padding",
                 fontsize=11)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
    ax1.imshow(np.ma.masked_invalid(np.where(is_pad, np.nan, grid)), cmap=cmap,
               interpolation="nearest", aspect="auto")
    for r in range(nr):
        for c in range(nc):
            if is_pad[r, c]:
                ax1.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///",
                                        edgecolor="#999999", linewidth=0))
    small = nr <= 16 and nc <= 16   # room for a label in every cell
    vmax = np.nanmax(np.where(is_pad, np.nan, grid)) if (~is_pad).any() else 1.0
    vmin = np.nanmin(np.where(is_pad, np.nan, grid)) if (~is_pad).any() else 0.0
    span = (vmax - vmin) or 1.0
    if small:
        for r in range(nr):
            for c in range(nc):
                v = grid[r, c]
                txt = "?" if np.isnan(v) else str(int(v))
                dark = False
                if not is_pad[r, c]:
                    txt = element_label(_row_major_number(ix_of(r, c), dims)) + "\n" + txt
                    dark = (v - vmin) / span < 0.6   # viridis is dark below ~60%
                ax1.text(c, r, txt, ha="center", va="center", fontsize=7,
                         color="white" if dark else "black")
    rt = tiles.get(rank - 2, 0) if rank >= 2 else 0
    ct = tiles.get(rank - 1, 0) if rank >= 1 else 0
    if ct:
        for c in range(ct, nc, ct):
            ax1.axvline(c - 0.5, color="red", linewidth=1.5)
    if rt:
        for r in range(rt, nr, rt):
            ax1.axhline(r - 0.5, color="red", linewidth=1.5)
    crop = f" (top-left {nr} x {nc} of {rows_e} x {cols_e})" if (nr, nc) != (rows_e, cols_e) else ""
    ax1.set_title("logical array" + crop + "\ncolour: element offset"
                  + ("; red: tile borders" if tiles else "")
                  + ("; hatched: padding" if is_pad.any() else ""), fontsize=9)
    _int_ticks(ax1, nr, nc)
    ax1.set_xlabel(f"dimension {rank - 1}" if rank else "")
    ax1.set_ylabel(f"dimension {rank - 2}" if rank >= 2 else "")
    if rank > 2:
        ax1.set_xlabel(f"dimension {rank - 1} (slice [{','.join('0' * (rank - 2))},:,:])")

    ax2.imshow(np.ma.masked_invalid(mem), cmap=plt.get_cmap("plasma").copy(),
               interpolation="nearest", aspect="auto")
    for r in range(mrows):
        for c in range(unit):
            off = r * unit + c
            if off >= shown:
                continue
            if np.isnan(mem[r, c]):
                ax2.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor="#eeeeee",
                                        hatch="///", edgecolor="#999999", linewidth=0))
            elif unit <= 16 and mrows <= 32:
                frac = mem[r, c] / max(1, n_logical - 1)
                ax2.text(c, r, mem_lab[(r, c)], ha="center", va="center", fontsize=7,
                         color="white" if frac < 0.7 else "black")   # plasma is light above ~70%
    ax2.set_title(f"memory order, {unit} slots per row"
                  + ("" if shown == p.element_count else f" (first {shown} of {p.element_count})")
                  + "\ncolour: element number in logical row-major order; hatched: padding",
                  fontsize=9)
    _int_ticks(ax2, mrows, unit)
    ax2.set_xlabel(f"offset mod {unit}")
    ax2.set_ylabel(f"offset // {unit}")
    fig.tight_layout()
    try:
        fig.savefig(path, format=fmt)
    finally:
        plt.close(fig)


def _int_ticks(ax, nrows: int, ncols: int) -> None:
    """Integer tick marks (at most ~16 per axis) on a cell grid."""
    ax.set_xticks(range(0, ncols, max(1, -(-ncols // 16))))
    ax.set_yticks(range(0, nrows, max(1, -(-nrows // 16))))
