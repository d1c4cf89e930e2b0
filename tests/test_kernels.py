"""The bulk kernels on every path they take.

Pack (``from_numpy``, ``la[...] = x``), unpack (``to_numpy``, ``to_numpy(out=)``),
relayout and LayoutArray-to-LayoutArray assignment choose between the run
copy (tile order, sub-tile zip/unzip, line-aligned streaming into numpy
rows), the blocked transposing copy (one or two threads), the general
per-program paths for tiles that combine dimensions with ``*``, and the
element-by-element copy of packed sub-byte types. Thresholds decide which:
``_kernel_settings`` lowers them so small arrays take the big-array paths,
and the block edges shrink to odd sizes so every block boundary and
remainder is crossed.

Expected physical bytes come from the tiling model (``check_physical``:
``tiling.linear_index`` per element, decoded bit by bit) or from
``tiling.linear_indices`` for the big arrays, never from the kernels; the
logical values are compared with numpy's.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlashape._core as core
from xlashape import Layout, LayoutArray, PrimitiveType as P, ReadOnlyBufferError, Shape, Tile
from xlashape import tiling

from strategies import tiled_layout_parts
from test_layout_array import _pad_value, check_physical, random_array

KERNEL_SETTINGS = {
    "default": {},
    # streaming stores at every size, blocks of 3 x 5 (every edge case of the
    # transposing copy on small arrays)
    "stream-3x5": dict(stream_threshold=0, block=(3, 5)),
    # two threads at every size, 16 x 8 blocks
    "stream-2threads": dict(stream_threshold=0, block=(16, 8), threads=2, thread_threshold=0),
    # one element per block
    "stream-1x1": dict(stream_threshold=0, block=(1, 1)),
    # bands of 16 rows (a line or more of 4-byte and wider elements per
    # destination row), so that destination rows that are not line aligned
    # carry their partial last line from one band to the next
    "stream-16x5": dict(stream_threshold=0, block=(16, 5)),
    # the same blocks writing those lines in two parts (no carry)
    "stream-16x5-nocarry": dict(stream_threshold=0, block=(16, 5), carry=False),
}


@pytest.fixture(params=list(KERNEL_SETTINGS))
def kernel_settings(request):
    old = core._kernel_settings(**KERNEL_SETTINGS[request.param])
    yield request.param
    core._kernel_settings(**old)


# One type per storage width, sub-byte ones both one per byte and packed.
WIDTH_TYPES = [P.PRED, P.S8, P.F8E4M3FN, P.BF16, P.S16, P.F32, P.U32, P.S64, P.C64, P.C128,
               P.S4, P.U2]


def _layouts_2d(t, r, c):
    pv = _pad_value(t)
    out = [
        ("rowmajor", Layout((1, 0))),
        ("colmajor", Layout((0, 1))),
        ("T8x128", Layout((1, 0), tiles=[Tile(8, 128)], padding_value=pv)),
        ("T8x128_colmajor", Layout((0, 1), tiles=[Tile(8, 128)], padding_value=pv)),
        ("T8x128_2x1", Layout((1, 0), tiles=[Tile(8, 128), Tile(2, 1)])),
        ("T8x128_4x1", Layout((1, 0), tiles=[Tile(8, 128), Tile(4, 1)], padding_value=pv)),
        ("T8x128_4x1_colmajor", Layout((0, 1), tiles=[Tile(8, 128), Tile(4, 1)])),
        ("T2x3", Layout((1, 0), tiles=[Tile(2, 3)], padding_value=pv)),
        ("T4x128_tail", Layout((0, 1), tiles=[Tile(4, 128)],
                               tail_padding_alignment_in_elements=1024, padding_value=pv)),
        ("legacy_padding", Layout((1, 0), padded_dimensions=(r + 3, c + 5), padding_value=pv)),
    ]
    if t.bit_width < 8:
        e = t.bit_width
        out += [
            ("E_rowmajor", Layout((1, 0), element_size_in_bits=e)),
            ("E_T8x128_colmajor", Layout((0, 1), tiles=[Tile(8, 128), Tile(8 // e, 1)],
                                          element_size_in_bits=e, padding_value=pv)),
        ]
    return out


SHAPES_2D = [(13, 259), (130, 9), (1, 300), (9, 1)]


def _misaligned_out(dtype, shape, offset, order="C"):
    """An empty array of `shape` starting `offset` bytes into an aligned buffer."""
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    flat = raw[start:start + n].view(dtype)
    return flat.reshape(shape, order=order)


def _same_bytes(a, b):
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


@pytest.mark.parametrize("dims", SHAPES_2D, ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("t", WIDTH_TYPES, ids=lambda t: t.hlo_name)
def test_every_path_against_the_tiling_model(kernel_settings, t, dims):
    x = random_array(t, dims, seed=sum(dims))
    r, c = dims
    las = {}
    for name, lay in _layouts_2d(t, r, c):
        shape = Shape(t, dims, lay)
        la = LayoutArray.from_numpy(x, shape)
        check_physical(la, x, t)                       # pack, against the model
        las[name] = la
        # the same bytes from sources with other strides
        assert bytes(LayoutArray.from_numpy(np.asfortranarray(x), shape).physical) == \
            bytes(la.physical)
        flipped = np.flip(np.flip(x, 0).copy(), 0)   # negative strides, same values
        assert bytes(LayoutArray.from_numpy(flipped, shape).physical) == bytes(la.physical)
        # unpack into new, misaligned, Fortran-order and negatively strided outputs
        assert _same_bytes(la.to_numpy(), x)
        for off in sorted({0, t.dtype.itemsize, 16, 36 - 36 % t.dtype.itemsize}):
            out = _misaligned_out(t.dtype, dims, off)
            assert la.to_numpy(out=out) is out and _same_bytes(out, x)
        out = _misaligned_out(t.dtype, dims, 16, order="F")
        la.to_numpy(out=out)
        assert _same_bytes(out, x)
        base = np.empty(dims, t.dtype)
        la.to_numpy(out=base[::-1, ::-1])
        assert _same_bytes(base[::-1, ::-1], x)
        # la[...] = x into an existing buffer
        la2 = LayoutArray(shape)
        la2[...] = x
        assert bytes(la2.physical) == bytes(la.physical)
    # relayout and LayoutArray-to-LayoutArray assignment between every pair:
    # the result's physical bytes are those of a direct pack (checked above)
    for a, la in las.items():
        for b, lb in las.items():
            out = la.relayout(lb.xla_shape)
            assert bytes(out.physical) == bytes(lb.physical), (a, b)
            dst = LayoutArray(lb.xla_shape)
            dst[...] = la
            assert bytes(dst.physical) == bytes(lb.physical), (a, b)


@pytest.mark.parametrize("t", [P.S8, P.BF16, P.F32, P.C128, P.S4], ids=lambda t: t.hlo_name)
def test_tiles_that_combine_dimensions(kernel_settings, t):
    """'*' makes the offset program non-separable: the general paths."""
    dims = (3, 5, 67)
    x = random_array(t, dims, seed=3)
    pv = _pad_value(t)
    shapes = [
        Shape(t, dims, Layout((2, 1, 0), tiles=[Tile(2, "*", 8)], padding_value=pv)),
        Shape(t, dims, Layout((1, 2, 0), tiles=[Tile("*", 4, 8)])),
        Shape(t, dims, Layout((0, 2, 1), tiles=[Tile(8, 128)], padding_value=pv)),
        Shape(t, dims, Layout((2, 0, 1))),
    ]
    if t.dtype.itemsize in (1, 2):
        # a sub-tile that interleaves rows (2,1) / (4,1) under a '*' tile: the
        # general run copy zips rows into the buffer and unzips them out
        sub = Tile(4, 1) if t.dtype.itemsize == 1 else Tile(2, 1)
        shapes.append(Shape(t, dims, Layout((2, 1, 0), tiles=[Tile("*", 4, 8), sub])))
    las = []
    for s in shapes:
        la = LayoutArray.from_numpy(x, s)
        check_physical(la, x, t)
        assert _same_bytes(la.to_numpy(out=_misaligned_out(t.dtype, dims, 16)), x)
        las.append(la)
    for la in las:
        for lb in las:
            assert bytes(la.relayout(lb.xla_shape).physical) == bytes(lb.physical)
            dst = LayoutArray(lb.xla_shape)
            dst[...] = la
            assert bytes(dst.physical) == bytes(lb.physical)


def _expected_physical(x, shape):
    """The physical array of a byte-addressable shape, from tiling.linear_indices."""
    plan = tiling.plan(shape)
    idx = np.indices(x.shape).reshape(x.ndim, -1).T
    lin = tiling.linear_indices(shape, idx)
    pv = np.array(shape.layout.padding_value, dtype=x.dtype)
    out = np.full(plan.element_count, pv, dtype=x.dtype)
    out[lin] = x.reshape(-1)
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("t, dims, a, b", [
    (P.F32, (1031, 2053), "{1,0}", "{0,1}"),
    (P.F32, (1031, 2053), "{1,0:T(8,128)}", "{0,1:T(8,128)}"),
    (P.BF16, (2056, 2051), "{1,0:T(8,128)(2,1)}", "{0,1}"),
    (P.S8, (2905, 2903), "{1,0:T(8,128)(4,1)}", "{0,1:T(8,128)(4,1)}"),
    (P.F64, (1027, 1031), "{0,1}", "{1,0:T(8,128)}"),
], ids=["f32", "f32-tiled", "bf16", "s8", "f64"])
def test_big_arrays_past_the_default_thresholds(threads, t, dims, a, b):
    """Arrays over 8 MiB take the streaming paths (and, with two threads,
    the threaded transposing copy) at the default settings."""
    old = core._kernel_settings(threads=threads, thread_threshold=8 << 20)
    try:
        rng = np.random.default_rng(7)
        x = rng.integers(0, 256, size=dims + (t.dtype.itemsize,), dtype=np.uint8)
        x = x.view(t.dtype).reshape(dims)
        sa = Shape(t, dims, _layout(a))
        sb = Shape(t, dims, _layout(b))
        la = LayoutArray.from_numpy(x, sa)
        assert np.array_equal(la.physical_array().reshape(-1).view(np.uint8),
                              _expected_physical(x, sa).view(np.uint8))
        lb = la.relayout(sb)
        assert np.array_equal(lb.physical_array().reshape(-1).view(np.uint8),
                              _expected_physical(x, sb).view(np.uint8))
        back = LayoutArray(sa)
        back[...] = lb
        assert bytes(back.physical) == bytes(la.physical)
        for off in (0, 16):
            out = _misaligned_out(t.dtype, dims, off)
            lb.to_numpy(out=out)
            assert _same_bytes(out, x)
        assert _same_bytes(LayoutArray.from_numpy(x, sb).to_numpy(), x)
    finally:
        core._kernel_settings(**old)


def _layout(text):
    from xlashape import parse_layout
    return parse_layout(text)


def test_wrapped_read_only_buffers_are_read_by_every_kernel(kernel_settings):
    t = P.BF16
    dims = (13, 259)
    x = random_array(t, dims, seed=11)
    src = LayoutArray.from_numpy(x, Shape(t, dims, _layout("{1,0:T(8,128)(2,1)}")))
    ro = LayoutArray.frombuffer(bytes(src.physical), src.xla_shape)
    assert ro.readonly
    assert _same_bytes(ro.to_numpy(), x)
    assert _same_bytes(ro.to_numpy(out=_misaligned_out(t.dtype, dims, 16)), x)
    for text in ("{0,1}", "{0,1:T(8,128)}", "{1,0:T(2,3)}"):
        s = Shape(t, dims, _layout(text))
        assert bytes(ro.relayout(s).physical) == bytes(LayoutArray.from_numpy(x, s).physical)
        dst = LayoutArray(s)
        dst[...] = ro                      # a read-only source is fine
        assert _same_bytes(dst.to_numpy(), x)
    with pytest.raises(ReadOnlyBufferError):
        ro[...] = x
    with pytest.raises(ReadOnlyBufferError):
        ro[...] = src


def test_assignment_between_layoutarrays_checks_shape_and_overlap():
    x = np.arange(6 * 7, dtype=np.float32).reshape(6, 7)
    a = LayoutArray.from_numpy(x, "f32[6,7]{1,0:T(2,4)}")
    b = LayoutArray("f32[6,7]{0,1}")
    b[...] = a
    assert np.array_equal(b.to_numpy(), x)
    a[...] = a                                   # the same storage: a no-op copy
    assert np.array_equal(a.to_numpy(), x)
    # a LayoutArray wrapping the very same bytes as another one (overlapping
    # storage) goes through a temporary
    phys = bytearray(bytes(a.physical))
    w1 = LayoutArray.frombuffer(phys, a.xla_shape)
    w2 = LayoutArray.frombuffer(phys, a.xla_shape)
    w1[...] = w2
    assert np.array_equal(w1.to_numpy(), x)
    # other shapes or dtypes broadcast or convert like numpy
    row = LayoutArray.from_numpy(np.arange(7, dtype=np.float32), "f32[7]{0}")
    b[...] = row
    assert np.array_equal(b.to_numpy(), np.broadcast_to(np.arange(7, dtype=np.float32), (6, 7)))
    ints = LayoutArray.from_numpy(np.ones((6, 7), np.int32), "s32[6,7]{1,0}")
    b[...] = ints
    assert np.array_equal(b.to_numpy(), np.ones((6, 7), np.float32))


def test_kernel_settings_are_checked_and_restorable():
    old = core._kernel_settings()
    try:
        with pytest.raises(ValueError):
            core._kernel_settings(block=(0, 3))
        with pytest.raises(ValueError):
            core._kernel_settings(block=(129, 3))
        with pytest.raises(ValueError):
            core._kernel_settings(threads=3)
        with pytest.raises(ValueError):
            core._kernel_settings(stream_threshold=-1)
        with pytest.raises(TypeError):
            core._kernel_settings(thread=2)      # a misspelt setting is not ignored
        core._kernel_settings(stream_threshold=0, block=(2, 2), threads=2, prefetch_runs=False,
                              carry=False)
        assert core._kernel_settings() == {"stream_threshold": 0, "block": (2, 2),
                                           "threads": 2,
                                           "thread_threshold": old["thread_threshold"],
                                           "prefetch_runs": False, "carry": False}
    finally:
        core._kernel_settings(**old)
    assert core._kernel_settings() == old


@st.composite
def kernel_cases(draw):
    t = draw(st.sampled_from(WIDTH_TYPES))
    rank = draw(st.integers(1, 3))
    dims = tuple(draw(st.lists(st.integers(1, 40), min_size=rank, max_size=rank)))
    shapes = []
    for _ in range(2):
        m2m, tiles, padded, align = draw(tiled_layout_parts(dims))
        bits = t.bit_width if t.bit_width < 8 and draw(st.booleans()) else 0
        shapes.append(Shape(t, dims, Layout(m2m, tiles=tiles, padded_dimensions=padded,
                                            tail_padding_alignment_in_elements=align,
                                            element_size_in_bits=bits,
                                            padding_value=_pad_value(t))))
    cfg = dict(stream_threshold=draw(st.sampled_from([0, 1 << 62])),
               block=draw(st.sampled_from([(0, 0), (1, 1), (2, 3), (5, 2), (16, 16), (16, 5)])),
               threads=draw(st.sampled_from([1, 2])), thread_threshold=0,
               carry=draw(st.booleans()))
    offset = draw(st.sampled_from([0, 4, 16, 20]))
    return t, dims, shapes, cfg, offset


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(kernel_cases())
def test_random_layouts_and_kernel_settings(case):
    t, dims, (sa, sb), cfg, offset = case
    if tiling.plan(sa).element_count > 20000 or tiling.plan(sb).element_count > 20000:
        return
    old = core._kernel_settings(**cfg)
    try:
        x = random_array(t, dims, seed=len(dims))
        la = LayoutArray.from_numpy(x, sa)
        check_physical(la, x, t)
        lb = la.relayout(sb)
        check_physical(lb, x, t)
        dst = LayoutArray(sb)
        dst[...] = la
        assert bytes(dst.physical) == bytes(lb.physical)
        out = _misaligned_out(t.dtype, dims, offset - offset % t.dtype.itemsize)
        lb.to_numpy(out=out)
        assert _same_bytes(out, x)
    finally:
        core._kernel_settings(**old)


@pytest.mark.parametrize("env,affinity,want", [
    ("", None, None),          # as many as the process may use, at most 2
    ("1", None, 1),
    ("2", None, 2),
    ("", {0}, 1),              # one CPU allowed: one thread
])
def test_default_thread_count(env, affinity, want):
    import os
    if affinity is not None and not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity here")
    code = (
        "import os, sys\n"
        f"aff = {affinity!r}\n"
        "if aff is not None: os.sched_setaffinity(0, aff)\n"
        "import xlashape._core as core\n"
        "print(core._kernel_settings()['threads'])\n"
        "print(len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count())\n"
    )
    environ = dict(os.environ, XLASHAPE_THREADS=env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=120)
    assert proc.returncode == 0, proc.stderr
    threads, cpus = map(int, proc.stdout.split())
    if want is None:
        want = 2 if cpus >= 2 else 1
    assert threads == want


def test_the_hand_written_c_compiles_without_warnings(tmp_path):
    """xlashape/_kernels.c on its own, as setup.py builds it (-Wall -Wextra),
    with every warning an error; skipped without a checkout or a C compiler."""
    import pathlib
    import shutil
    import sysconfig

    src = pathlib.Path(__file__).resolve().parent.parent / "xlashape" / "_kernels.c"
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    if not src.exists() or shutil.which(cc[0]) is None:
        pytest.skip("no checkout or no C compiler")
    r = subprocess.run([*cc, "-O2", "-Wall", "-Wextra", "-Werror", "-c", str(src),
                        "-o", str(tmp_path / "kernels.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
