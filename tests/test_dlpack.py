"""DLPack export of LayoutArray: zero-copy for strided layouts, refusals for
tiled and packed ones, the capsule's fields read back with ctypes (the
struct layout of dlpack.h, written out independently here), and round trips
through numpy (and torch / jax when installed)."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import xlashape as xs
from xlashape import LayoutArray, PrimitiveType as P


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def read_capsule(cap):
    name = _api.PyCapsule_GetName(cap)
    ptr = _api.PyCapsule_GetPointer(cap, name)
    if name == b"dltensor_versioned":
        m = DLManagedTensorVersioned.from_address(ptr)
        t = m.dl_tensor
        extra = {"version": (m.version.major, m.version.minor), "flags": m.flags}
    else:
        t = DLManagedTensor.from_address(ptr).dl_tensor
        extra = {}
    n = t.ndim
    return dict(name=name, data=t.data, device=(t.device.device_type, t.device.device_id),
                code=t.dtype.code, bits=t.dtype.bits, lanes=t.dtype.lanes,
                shape=tuple(t.shape[i] for i in range(n)),
                strides=tuple(t.strides[i] for i in range(n)), byte_offset=t.byte_offset,
                **extra)


def data_address(la):
    return np.frombuffer(la.physical, np.uint8).ctypes.data


STRIDED = ["f32[3,5]{1,0}", "f32[3,5]{0,1}", "s16[2,3,4]{0,2,1}", "u8[4,3]{1,0:T(1,3)}",
           "c64[2,2]{0,1}", "f64[]"]


@pytest.mark.parametrize("text", STRIDED)
def test_numpy_from_dlpack_is_zero_copy_both_ways(text):
    shape = xs.parse_shape(text)
    x = (np.arange(int(np.prod(shape.dimensions))) + 1).astype(shape.dtype).reshape(shape.dimensions)
    la = LayoutArray.from_numpy(x, shape)
    a = np.from_dlpack(la)
    assert a.dtype == x.dtype and np.array_equal(a, x)
    assert np.shares_memory(a, np.frombuffer(la.physical, np.uint8))
    assert la.exports >= 1
    idx = tuple(d - 1 for d in x.shape)
    a[idx] = 42
    assert la[idx] == 42
    la[idx] = 7
    assert a[idx] == 7
    with pytest.raises(xs.ShapeBufferError, match="export"):
        la.release()
    del la
    gc.collect()
    assert a[idx] == 7          # the capsule keeps the storage alive


def test_capsule_fields():
    la = LayoutArray.from_numpy(np.arange(24, dtype=np.int16).reshape(2, 3, 4),
                                "s16[2,3,4]{0,2,1}")
    info = read_capsule(la.__dlpack__(max_version=(1, 1)))
    assert info["name"] == b"dltensor_versioned" and info["version"] == (1, 1)
    assert info["flags"] == 0 and info["device"] == (1, 0) and info["byte_offset"] == 0
    assert (info["code"], info["bits"], info["lanes"]) == (0, 16, 1)
    assert info["shape"] == (2, 3, 4)
    # {0,2,1}: dim 0 fastest, then dim 2, then dim 1 (element strides)
    assert info["strides"] == (1, 8, 2)
    assert info["data"] == data_address(la)
    assert read_capsule(la.__dlpack__(max_version=(1, 0)))["version"] == (1, 0)
    assert read_capsule(la.__dlpack__(max_version=(2, 5)))["version"] == (1, 1)
    legacy = read_capsule(la.__dlpack__())
    assert legacy["name"] == b"dltensor" and legacy["strides"] == (1, 8, 2)
    assert read_capsule(la.__dlpack__(max_version=(0, 8)))["name"] == b"dltensor"
    gc.collect()
    assert la.exports == 0        # unconsumed capsules gave their export back
    assert la.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("hlo, code, bits, minor", [
    ("pred", 6, 8, 0), ("s8", 0, 8, 0), ("s64", 0, 64, 0), ("u32", 1, 32, 0),
    ("f16", 2, 16, 0), ("bf16", 4, 16, 0), ("f64", 2, 64, 0), ("c128", 5, 128, 0),
    ("f8e4m3fn", 10, 8, 1), ("f8e5m2", 12, 8, 1), ("f8e4m3fnuz", 11, 8, 1),
    ("f8e8m0fnu", 14, 8, 1),
])
def test_type_codes(hlo, code, bits, minor):
    la = LayoutArray(f"{hlo}[2]{{0}}")
    info = read_capsule(la.__dlpack__(max_version=(1, 1)))
    assert (info["code"], info["bits"], info["lanes"]) == (code, bits, 1)
    if minor:
        # the f8 codes came with DLPack 1.1
        with pytest.raises(BufferError, match="DLPack 1.1"):
            la.__dlpack__(max_version=(1, 0))
        with pytest.raises(BufferError, match="DLPack 1.1"):
            la.__dlpack__()


@pytest.mark.parametrize("text", ["s4[4]{0}", "s4[4]{0:E(4)}", "u2[3]{0}", "f4e2m1fn[2]{0}"])
def test_sub_byte_types_have_no_code(text):
    with pytest.raises(xs.ShapeBufferError, match="no type code.*to_numpy.*physical"):
        LayoutArray(text).__dlpack__(max_version=(1, 1))


@pytest.mark.parametrize("text", ["f32[3,5]{1,0:T(2,2)}", "bf16[16,256]{1,0:T(8,128)(2,1)}",
                                  "pred[9]{0:E(1)}"])
def test_tiled_and_packed_layouts_refuse_unless_copied(text):
    la = LayoutArray(text)
    la.fill(1)
    with pytest.raises(BufferError, match=r"tiled or packed.*to_numpy\(\).*physical") as e:
        np.from_dlpack(la)
    assert isinstance(e.value, xs.XlaShapeError)
    with pytest.raises(xs.ShapeBufferError):
        la.__dlpack__(max_version=(1, 1), copy=False)
    if la.dtype.kind != "V":
        got = np.from_dlpack(la, copy=True)
        assert np.array_equal(got, la.to_numpy())
    info = read_capsule(la.__dlpack__(max_version=(1, 1), copy=True))
    assert info["flags"] & 2                     # IS_COPIED
    assert info["data"] != data_address(la)


def test_read_only_flag_and_legacy_refusal():
    ro = LayoutArray.frombuffer(np.arange(6, dtype=np.float32).tobytes(), "f32[2,3]{1,0}")
    info = read_capsule(ro.__dlpack__(max_version=(1, 0)))
    assert info["flags"] & 1                     # READ_ONLY
    a = np.from_dlpack(ro)
    assert not a.flags.writeable and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(xs.ShapeBufferError, match="read-only.*max_version"):
        ro.__dlpack__()
    rw = LayoutArray("f32[2]{0}")
    info = read_capsule(rw.__dlpack__(max_version=(1, 0), copy=True))
    assert info["flags"] == 2


def test_stream_and_device_arguments():
    la = LayoutArray("f32[2]{0}")
    with pytest.raises(xs.ShapeBufferError, match="stream=None"):
        la.__dlpack__(stream=1)
    with pytest.raises(xs.ShapeBufferError, match="CPU"):
        la.__dlpack__(dl_device=(2, 0))
    assert read_capsule(la.__dlpack__(dl_device=(1, 0)))["device"] == (1, 0)
    la.release()
    with pytest.raises(ValueError, match="released"):
        la.__dlpack__()


def test_views_export_their_own_strides():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    la = LayoutArray.from_numpy(x)
    t = np.from_dlpack(la.T)
    assert np.array_equal(t, x.T) and np.shares_memory(t, np.frombuffer(la.physical, np.uint8))


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    la = LayoutArray.from_numpy(x, "f32[3,5]{0,1}")
    t = torch.from_dlpack(la)
    assert t.shape == (3, 5) and t.stride() == (1, 3)
    assert np.array_equal(t.numpy(), x)
    t[2, 4] = -1
    assert la[2, 4] == -1.0
    b = LayoutArray.from_numpy(x.astype(P.BF16.dtype), "bf16[3,5]{1,0}")
    tb = torch.from_dlpack(b)
    assert tb.dtype == torch.bfloat16
    assert tb.float().numpy().tolist() == x.tolist()
    tb[0, 0] = 3
    assert b[0, 0] == 3.0


def test_jax_round_trip():
    jnp = pytest.importorskip("jax.numpy")
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    la = LayoutArray.from_numpy(x, "f32[3,5]{0,1}")
    assert np.array_equal(np.asarray(jnp.from_dlpack(la)), x)
    b = LayoutArray.from_numpy(x.astype(P.BF16.dtype), "bf16[3,5]{1,0}")
    jb = jnp.from_dlpack(b)
    assert jb.dtype == jnp.bfloat16 and np.asarray(jb, np.float32).tolist() == x.tolist()
