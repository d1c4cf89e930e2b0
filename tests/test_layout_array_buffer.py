"""LayoutArray's memory: buffer protocol, zero-copy views, frombuffer,
export counting, lifetimes (views outliving the array), numpy interop."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

import xlashape as xs
from xlashape import Layout, LayoutArray, PrimitiveType as P, Shape, Tile

# PEP 3118 request flags (Include/pybuffer.h)
PyBUF_SIMPLE = 0
PyBUF_WRITABLE = 0x0001
PyBUF_FORMAT = 0x0004
PyBUF_ND = 0x0008
PyBUF_STRIDES = 0x0010 | PyBUF_ND
PyBUF_C_CONTIGUOUS = 0x0020 | PyBUF_STRIDES
PyBUF_F_CONTIGUOUS = 0x0040 | PyBUF_STRIDES
PyBUF_ANY_CONTIGUOUS = 0x0080 | PyBUF_STRIDES
PyBUF_RECORDS_RO = PyBUF_STRIDES | PyBUF_FORMAT


class Py_buffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
                ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
                ("internal", ctypes.c_void_p)]


def get_buffer(obj, flags):
    """PyObject_GetBuffer with explicit flags; returns a dict and releases."""
    view = Py_buffer()
    ctypes.pythonapi.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(Py_buffer),
                                                    ctypes.c_int]
    ctypes.pythonapi.PyObject_GetBuffer(obj, ctypes.byref(view), flags)
    try:
        n = view.ndim
        return dict(
            len=view.len, itemsize=view.itemsize, readonly=view.readonly, ndim=n,
            format=view.format,
            shape=None if not view.shape else tuple(view.shape[i] for i in range(n)),
            strides=None if not view.strides else tuple(view.strides[i] for i in range(n)),
            buf=view.buf)
    finally:
        ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.POINTER(Py_buffer)]
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


def data_address(la):
    return np.frombuffer(la.physical, np.uint8).ctypes.data


# -- the logical export ---------------------------------------------------------

def test_memoryview_is_the_logical_array_zero_copy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    la = LayoutArray.from_numpy(x, "f32[3,4]{0,1}")
    m = memoryview(la)
    assert m.shape == (3, 4) and m.strides == (4, 12) and m.format == "f" and not m.readonly
    assert m.tolist() == x.tolist()
    m[2, 1] = 99.0
    assert la[2, 1] == 99.0
    a = np.asarray(la)
    assert a.ctypes.data == data_address(la) and np.shares_memory(a, np.frombuffer(la.physical, np.uint8))
    a[0, 3] = -1.0          # a write through numpy is seen by la[...]
    assert la[0, 3] == -1.0
    la[1, 1] = 5.0          # and the other way round
    assert a[1, 1] == 5.0 and m[1, 1] == 5.0


# numpy's own format for np.int64 ('l' where a C long is 64-bit): 'q' would
# be numpy's distinct `longlong` dtype, for which ml_dtypes registers no casts
NUMPY_INT64_FORMAT = memoryview(np.zeros(0, np.int64)).format.encode()


@pytest.mark.parametrize("text, fmt", [("pred[2,3]{1,0}", b"?"), ("s8[2,3]{1,0}", b"b"),
                                       ("u16[2,3]{0,1}", b"H"), ("s64[2,3]{1,0}", NUMPY_INT64_FORMAT),
                                       ("f16[2,3]{1,0}", b"e"), ("f64[2]{0}", b"d"),
                                       ("c64[2,3]{1,0}", b"Zf"), ("c128[3]{0}", b"Zd"),
                                       ("u32[]", b"I")])
def test_formats_and_flags(text, fmt):
    la = LayoutArray(text)
    full = get_buffer(la, PyBUF_RECORDS_RO)
    assert full["format"] == fmt and full["itemsize"] == la.itemsize
    assert full["shape"] == la.shape and full["len"] == la.nbytes
    assert full["buf"] == data_address(la)
    no_fmt = get_buffer(la, PyBUF_STRIDES)
    assert no_fmt["format"] is None              # format only when asked
    assert la.exports == 0                        # every export was released


def test_flags_for_non_c_contiguous_layouts():
    la = LayoutArray("f32[3,4]{0,1}")
    assert get_buffer(la, PyBUF_F_CONTIGUOUS)["strides"] == (4, 12)
    assert get_buffer(la, PyBUF_ANY_CONTIGUOUS)["shape"] == (3, 4)
    with pytest.raises(BufferError, match="not C-contiguous"):
        get_buffer(la, PyBUF_C_CONTIGUOUS)
    with pytest.raises(BufferError, match="must accept strides"):
        get_buffer(la, PyBUF_ND)
    with pytest.raises(BufferError, match="must accept strides"):
        get_buffer(la, PyBUF_SIMPLE)
    c = LayoutArray("f32[3,4]{1,0}")
    simple = get_buffer(c, PyBUF_SIMPLE)
    assert simple["shape"] is None and simple["strides"] is None and simple["len"] == 48
    assert get_buffer(c, PyBUF_ND)["strides"] is None
    with pytest.raises(BufferError, match="not Fortran-contiguous"):
        get_buffer(c, PyBUF_F_CONTIGUOUS)
    padded = LayoutArray(Shape("f32", (3, 4), Layout((1, 0), padded_dimensions=(4, 8))))
    assert memoryview(padded).strides == (32, 4)
    with pytest.raises(BufferError, match="is not contiguous"):
        get_buffer(padded, PyBUF_ANY_CONTIGUOUS)


@pytest.mark.parametrize("text", ["f32[16,256]{1,0:T(8,128)}", "s8[8,8]{1,0:T(8,128)(4,1)}",
                                  "s4[4,4]{1,0:E(4)}"])
def test_refused_for_tiled_or_packed_layouts(text):
    la = LayoutArray(text)
    with pytest.raises(xs.ShapeBufferError,
                       match=r"not expressible by strides.*la\.to_numpy\(\).*np\.asarray\(la\).*la\.physical"):
        memoryview(la)
    x = np.asarray(la)      # numpy falls back to __array__
    assert x.shape == la.shape and x.dtype == la.dtype and not x.any()
    assert la.exports == 0


@pytest.mark.parametrize("text", ["bf16[2,3]{1,0}", "f8e4m3fn[4]{0}", "s4[3,2]{0,1}",
                                  "f4e2m1fn[3]{0}"])
def test_refused_without_pep3118_code_but_asarray_is_zero_copy(text):
    la = LayoutArray(text)
    with pytest.raises(BufferError, match=r"no PEP 3118 buffer format.*np\.asarray\(la\)"):
        memoryview(la)
    a = np.asarray(la)
    assert a.dtype == la.dtype and a.ctypes.data == data_address(la)
    a[(0,) * la.ndim] = 1
    assert la[(0,) * la.ndim] == 1


def test_array_protocol_numpy2_semantics():
    la = LayoutArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3), "s32[2,3]{0,1}")
    v = la.__array__()
    assert v.ctypes.data == data_address(la)
    c = la.__array__(copy=True)
    assert c.ctypes.data != data_address(la) and c.flags.c_contiguous
    f = la.__array__(dtype=np.float64)
    assert f.dtype == np.float64 and f.tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="Unable to avoid copy.*dtype float64"):
        la.__array__(dtype=np.float64, copy=False)
    assert np.array(la, copy=False).ctypes.data == data_address(la)
    tiled = LayoutArray("s32[2,3]{1,0:T(2,2)}")
    with pytest.raises(ValueError, match="Unable to avoid copy.*tiled or packed"):
        np.array(tiled, copy=False)
    assert np.array(tiled, dtype=np.int8).dtype == np.int8


# -- physical -------------------------------------------------------------------

def test_physical_is_zero_copy_and_writable():
    la = LayoutArray("f32[3,5]{1,0:T(2,2)}")
    p = la.physical
    assert p.format == "B" and p.nbytes == 96 and not p.readonly and la.exports == 1
    np.frombuffer(p, np.float32)[17] = 2.0     # offset of (2,3): the doc's example
    assert la[2, 3] == 2.0
    p.release()
    assert la.exports == 0


# -- frombuffer -------------------------------------------------------------------

def test_frombuffer_zero_copy_writable():
    buf = bytearray(96)
    la = LayoutArray.frombuffer(buf, "f32[3,5]{1,0:T(2,2)}")
    assert not la.readonly
    la[2, 3] = 1.5
    assert np.frombuffer(buf, np.float32)[17] == 1.5
    np.frombuffer(buf, np.float32)[0] = 3.0
    assert la[0, 0] == 3.0
    with pytest.raises(BufferError):
        buf.extend(b"x")         # the bytearray is locked while wrapped
    del la
    gc.collect()
    buf.extend(b"x")


def test_frombuffer_read_only():
    data = np.arange(6, dtype=np.uint8).tobytes()
    la = LayoutArray.frombuffer(data, "u8[2,3]{0,1}")
    assert la.readonly and la[1, 0] == 1 and la[0, 2] == 4
    with pytest.raises(xs.ReadOnlyBufferError if hasattr(xs, "ReadOnlyBufferError") else ValueError,
                       match="read-only"):
        la[0, 0] = 1
    with pytest.raises(ValueError, match="read-only"):
        la[0:1] = 1
    with pytest.raises(ValueError, match="read-only"):
        la.fill(0)
    assert memoryview(la).readonly and la.physical.readonly
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(la, PyBUF_WRITABLE | PyBUF_STRIDES)
    a = np.asarray(la)
    assert not a.flags.writeable
    c = la.copy()
    c[0, 0] = 9
    assert not c.readonly and c[0, 0] == 9 and la[0, 0] == 0


def test_frombuffer_errors():
    with pytest.raises(xs.ShapeBufferError, match="buffer has 95 bytes but .* takes 96 bytes"):
        LayoutArray.frombuffer(bytearray(95), "f32[3,5]{1,0:T(2,2)}")
    with pytest.raises(xs.ShapeTypeError, match="buffer protocol, got int"):
        LayoutArray.frombuffer(5, "f32[2]")
    strided = memoryview(bytearray(16))[::2]
    with pytest.raises(xs.ShapeBufferError, match="C-contiguous"):
        LayoutArray.frombuffer(strided, "u8[8]")


def test_frombuffer_of_another_arrays_physical():
    a = LayoutArray.from_numpy(np.arange(20, dtype=np.int16).reshape(4, 5), "s16[4,5]{1,0:T(2,4)}")
    b = LayoutArray.frombuffer(a.physical, a.xla_shape)
    assert np.array_equal(b.to_numpy(), a.to_numpy())
    b[3, 4] = -7
    assert a[3, 4] == -7
    assert a.exports == 1
    del b
    gc.collect()
    assert a.exports == 0


# -- export counting and lifetimes --------------------------------------------------

def test_release_refused_while_exported():
    la = LayoutArray("f32[4]{0}")
    m = memoryview(la)
    a = np.asarray(la)
    p = la.physical
    assert la.exports == 3
    with pytest.raises(xs.ShapeBufferError, match="while 3 buffer export"):
        la.release()
    m.release()
    del a
    gc.collect()
    with pytest.raises(BufferError, match="while 1 buffer export"):
        la.release()
    p.release()
    la.release()
    for op in (lambda: la[0], lambda: la.to_numpy(), lambda: la.physical,
               lambda: memoryview(la), lambda: la.copy(), lambda: la.__setitem__(0, 1.0)):
        with pytest.raises(ValueError, match="released LayoutArray"):
            op()
    assert "released" in repr(la)
    la.release()     # twice is fine


def test_views_outlive_the_array():
    la = LayoutArray.from_numpy(np.arange(8, dtype=np.float64), "f64[8]{0}")
    ref = weakref.ref(la)
    m = memoryview(la)
    a = np.asarray(la)
    p = la.physical
    pa = la.physical_array()
    del la
    gc.collect()
    assert ref() is not None            # the views keep the storage alive
    assert m[3] == 3.0 and a[7] == 7.0 and pa[5] == 5.0
    a[0] = 42.0
    assert m[0] == 42.0 and np.frombuffer(p, np.float64)[0] == 42.0
    del m, a, p, pa
    gc.collect()
    assert ref() is None                # and nothing leaks once they are gone


def test_tiled_views_outlive_the_array():
    la = LayoutArray.from_numpy(np.ones((16, 256), P.BF16.dtype), "bf16[16,256]{1,0:T(8,128)(2,1)}")
    pa = la.physical_array()
    p = la.physical
    sub = la[3:5]            # a copy
    del la
    gc.collect()
    assert float(pa.astype(np.float32).sum()) == 4096.0 and len(bytes(p)) == 8192 and sub.shape == (2, 256)


def test_memory_is_64_byte_aligned():
    for text in ["u8[3]", "f32[1000,3]{0,1:T(8,128)}", "c128[]", "s4[0]{0:E(4)}"]:
        la = LayoutArray(text)
        assert data_address(la) % 64 == 0


def test_operations_leave_no_export_behind():
    la = LayoutArray.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4), "f32[3,4]{1,0:T(2,2)}")
    ops = [la.to_numpy, la.copy, lambda: la.relayout(Layout((0, 1))), lambda: la.fill(2.0),
           lambda: la.__setitem__((slice(None), 1), 3.0), lambda: la[1:], lambda: la.__setitem__(Ellipsis, 1.0),
           lambda: la.to_numpy(out=np.empty((3, 4), np.float32)), lambda: repr(la)]
    for op in ops:
        op()
        assert la.exports == 0


def test_release_during_a_kernel_in_another_thread_is_refused():
    import threading
    la = LayoutArray.from_numpy(np.ones((2048, 2048), np.float32), "f32[2048,2048]{1,0:T(8,128)}")
    outcomes = []

    def work():
        for _ in range(20):
            try:
                la.to_numpy()
            except xs.ReleasedArrayError as e:   # released between two calls: a clean error
                outcomes.append(str(e))
                return

    t = threading.Thread(target=work)
    t.start()
    while t.is_alive():
        try:
            la.release()
            break
        except xs.ShapeBufferError as e:   # a kernel was running: refused
            outcomes.append(str(e))
    t.join()
    # (the in-flight kernel is an operation in progress, not a buffer export)
    assert all("released LayoutArray" in o or "operation on it is in progress" in o
               for o in outcomes)


# -- every numpy view of the storage holds a counted export (regression) -------------
# numpy's np.ndarray(buffer=obj) releases the buffer at once, so views built that
# way were not counted and release() freed memory they still used (segfault).

def _make_owned(text):
    return LayoutArray(text)


def _make_wrapped(text):
    return LayoutArray.frombuffer(bytearray(LayoutArray(text).physical_nbytes), text)


_VIEW_MAKERS = {
    "physical_array": lambda la: la.physical_array(),
    "array_copy_false": lambda la: la.__array__(copy=False),
    "asarray": lambda la: np.asarray(la),
    "physical": lambda la: la.physical,
}


@pytest.mark.parametrize("make", [_make_owned, _make_wrapped], ids=["owned", "frombuffer"])
@pytest.mark.parametrize("text, view", [
    ("f32[64,256]{1,0:T(8,128)}", "physical_array"),
    ("f32[64,256]{1,0}", "physical_array"),
    ("f32[64,256]{0,1}", "array_copy_false"),
    ("bf16[64,256]{1,0}", "asarray"),            # no PEP 3118 code: goes through __array__
    ("bf16[64,256]{1,0}", "array_copy_false"),
    ("f32[64,256]{1,0}", "asarray"),
    ("f32[64,256]{1,0:T(8,128)}", "physical"),
])
def test_views_pin_the_storage_against_release(make, text, view):
    la = make(text)
    v = _VIEW_MAKERS[view](la)
    assert la.exports == 1
    with pytest.raises(xs.ShapeBufferError, match="while 1 buffer export"):
        la.release()
    # the storage is still there and still shared with the LayoutArray
    arr = np.frombuffer(v, np.uint8) if isinstance(v, memoryview) else v
    arr[...] = 1
    assert np.count_nonzero(arr == 1) == arr.size
    del arr, v
    gc.collect()
    assert la.exports == 0
    la.release()


@pytest.mark.parametrize("view", ["physical_array", "array_copy_false", "asarray"])
def test_views_keep_the_storage_after_del(view):
    text = "f32[64,256]{1,0}"
    la = LayoutArray.from_numpy(np.full((64, 256), 3.0, np.float32), text)
    ref = weakref.ref(la)
    v = _VIEW_MAKERS[view](la)
    del la
    gc.collect()
    assert ref() is not None
    v[...] = 2.0
    assert float(v.sum()) == 2.0 * 64 * 256
    del v
    gc.collect()
    assert ref() is None


def test_physical_array_of_frombuffer_pins_the_wrapped_buffer():
    ba = bytearray(4 * 8 * 128)
    la = LayoutArray.frombuffer(ba, "f32[8,128]{1,0:T(8,128)}")
    pa = la.physical_array()
    del la
    gc.collect()
    pa[0, 0, 0, 5] = 1.5      # writes through to the bytearray
    assert np.frombuffer(ba, np.float32)[5] == 1.5
    with pytest.raises(BufferError):
        ba.extend(b"x")        # still exported: the bytearray cannot move
    del pa
    gc.collect()
    ba.extend(b"x")
