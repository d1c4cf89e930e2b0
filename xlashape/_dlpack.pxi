# DLPack export for LayoutArray (`__dlpack__` / `__dlpack_device__`).
#
# The structs follow dlpack.h (DLPack 1.1: DLManagedTensorVersioned with
# flags, and the legacy DLManagedTensor for consumers that ask for no
# version). Only layouts that strides can express are exported zero-copy;
# the capsule's manager_ctx holds a counted export of the storage (a
# memoryview of `physical`), so release() refuses while a consumer holds the
# tensor and the memory outlives the LayoutArray object if need be.

from cpython.pycapsule cimport PyCapsule_New, PyCapsule_IsValid, PyCapsule_GetPointer
from cpython.ref cimport Py_INCREF, Py_XDECREF

cdef struct DLDevice:
    int32_t device_type
    int32_t device_id

cdef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes

cdef struct DLTensor:
    void* data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    int64_t* shape
    int64_t* strides
    uint64_t byte_offset

cdef struct DLManagedTensor:
    DLTensor dl_tensor
    void* manager_ctx
    void (*deleter)(DLManagedTensor*) noexcept

cdef struct DLPackVersion:
    uint32_t major
    uint32_t minor

cdef struct DLManagedTensorVersioned:
    DLPackVersion version
    void* manager_ctx
    void (*deleter)(DLManagedTensorVersioned*) noexcept
    uint64_t flags
    DLTensor dl_tensor

cdef enum:
    DL_CPU = 1
    DL_MAJOR = 1
    DL_MINOR = 1
    DL_FLAG_READ_ONLY = 1
    DL_FLAG_IS_COPIED = 2

# (type code, bits, first DLPack minor version that has the code)
_DL_TYPES = {
    "pred": (6, 8, 0), "s8": (0, 8, 0), "s16": (0, 16, 0), "s32": (0, 32, 0),
    "s64": (0, 64, 0), "u8": (1, 8, 0), "u16": (1, 16, 0), "u32": (1, 32, 0),
    "u64": (1, 64, 0), "f16": (2, 16, 0), "f32": (2, 32, 0), "f64": (2, 64, 0),
    "bf16": (4, 16, 0), "c64": (5, 64, 0), "c128": (5, 128, 0),
    "f8e3m4": (7, 8, 1), "f8e4m3": (8, 8, 1), "f8e4m3b11fnuz": (9, 8, 1),
    "f8e4m3fn": (10, 8, 1), "f8e4m3fnuz": (11, 8, 1), "f8e5m2": (12, 8, 1),
    "f8e5m2fnuz": (13, 8, 1), "f8e8m0fnu": (14, 8, 1),
}


cdef extern from "Python.h":
    int Py_IsInitialized() noexcept nogil


cdef void _dl_drop_ctx(void* ctx) noexcept with gil:
    Py_XDECREF(<PyObject*>ctx)


# The deleters may run in any thread, with or without the GIL, and after the
# interpreter has shut down (a consumer's C++ object destroyed at exit):
# then taking the GIL would abort the process, so the reference is left
# behind (the process is ending anyway), as numpy's own deleter does.
cdef void _dl_free_versioned(DLManagedTensorVersioned* m) noexcept nogil:
    if m != NULL:
        if Py_IsInitialized():
            _dl_drop_ctx(m.manager_ctx)
        free(m)


cdef void _dl_free_legacy(DLManagedTensor* m) noexcept nogil:
    if m != NULL:
        if Py_IsInitialized():
            _dl_drop_ctx(m.manager_ctx)
        free(m)


cdef void _dl_capsule_versioned(object capsule) noexcept:
    # an unconsumed capsule still owns its tensor (a consumer renames it)
    cdef DLManagedTensorVersioned* m
    if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        m = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        if m != NULL and m.deleter != NULL:
            m.deleter(m)


cdef void _dl_capsule_legacy(object capsule) noexcept:
    cdef DLManagedTensor* m
    if PyCapsule_IsValid(capsule, b"dltensor"):
        m = <DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
        if m != NULL and m.deleter != NULL:
            m.deleter(m)


cdef int _dl_fill(DLTensor* t, int64_t* shape_strides, LayoutArray la, int code,
                  int bits) except -1:
    cdef int d, n = la.prog.rank
    t.data = la.data if la.logical_size else NULL
    t.device.device_type = DL_CPU
    t.device.device_id = 0
    t.ndim = n
    t.dtype.code = code
    t.dtype.bits = bits
    t.dtype.lanes = 1
    t.shape = shape_strides
    t.strides = shape_strides + n
    t.byte_offset = 0
    for d in range(n):
        t.shape[d] = la.c_shape[d]
        t.strides[d] = la.c_strides[d] // la.di.itemsize
    return 0


cdef tuple _dl_int_pair(object value, str name, str what):
    """`value` as a tuple of two Python ints, as the array API's __dlpack__
    types them (max_version: tuple[int, int]; dl_device: tuple[Enum, int],
    an IntEnum): anything else raises ShapeTypeError (numpy's TypeError)."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise ShapeTypeError(
            f"{name} must be None or a tuple of two integers {what}, got "
            f"{_short_repr(value)}")
    try:
        pair = (_operator_index(value[0]), _operator_index(value[1]))
    except TypeError:
        raise ShapeTypeError(
            f"{name} must be None or a tuple of two integers {what}, got "
            f"{_short_repr(value)}") from None
    # numpy parses max_version's major as a C long and both dl_device
    # entries as C ints: beyond those ranges, its OverflowError
    for v in (pair[:1] if name == "max_version" else pair):
        if not -2 ** 63 <= v < 2 ** 63:
            raise ShapeOverflowError("Python int too large to convert to C long")
        if name != "max_version" and v >= 2 ** 31:
            raise ShapeOverflowError("signed integer is greater than maximum")
        if name != "max_version" and v < -2 ** 31:
            raise ShapeOverflowError("signed integer is less than minimum")
    return pair


cdef object dlpack_export(LayoutArray la, object stream, object max_version,
                          object dl_device, object copy):
    """The body of LayoutArray.__dlpack__ (see its docstring)."""
    cdef LayoutArray src = la
    cdef DLManagedTensorVersioned* mv = NULL
    cdef DLManagedTensor* ml = NULL
    cdef int n, code, bits, minor
    cdef bint versioned, copied = False
    la._check_alive()
    if stream is not None:
        raise ShapeBufferError(
            f"LayoutArray lives in CPU memory: __dlpack__ takes stream=None, got "
            f"stream={stream!r}")
    if dl_device is not None:
        device = _dl_int_pair(dl_device, "dl_device", "(device type, device id)")
        if device != (DL_CPU, 0):
            raise ShapeBufferError(
                f"LayoutArray can only be exported to the CPU, device (1, 0) (kDLCPU); "
                f"got dl_device={device!r}")
    if copy is not None:
        # numpy's rule for `copy`: None, or any truth value but a string
        if isinstance(copy, (str, bytes)):
            raise ShapeValueError(
                "strings are not allowed for 'copy' keyword. Use True/False/None instead.")
        copy = bool(copy)
    versioned = False
    minor = 0
    if max_version is not None:
        version = _dl_int_pair(max_version, "max_version", "(major, minor)")
        versioned = version[0] >= DL_MAJOR
        if versioned:
            minor = DL_MINOR if version[0] > DL_MAJOR else \
                max(0, min(DL_MINOR, version[1]))
    name = la._shape.element_type.hlo_name
    info = _DL_TYPES.get(name)
    if info is None or (info[2] and (not versioned or minor < info[2])):
        need = "" if info is None else \
            " (its type code needs DLPack 1.1: ask with max_version=(1, 1))"
        raise ShapeBufferError(
            f"DLPack has no type code for {name} ({la._dtype}){need}. Use "
            f"la.to_numpy() (a copy) or la.physical (the raw bytes)")
    code, bits = info[0], info[1]
    if not la.comp.numpy_sized:
        raise ShapeBufferError(
            f"{la._shape} has dimensions whose product is beyond int64: no DLPack "
            f"export (consumers compute sizes from the dimensions)")
    if not la.strided:
        if copy is True:
            src = LayoutArray.from_numpy(la.to_numpy())
            copied = True
        else:
            raise ShapeBufferError(
                f"{la._shape} is tiled or packed: its logical array is not "
                f"expressible by strides, so DLPack cannot share it. Use "
                f"la.__dlpack__(copy=True) or la.to_numpy() for a copy, or "
                f"la.physical for the raw tiled bytes")
    elif copy is True:
        src = la.copy()
        copied = True
    if src.readonly and not versioned:
        raise ShapeBufferError(
            "the LayoutArray is read-only and an unversioned DLPack capsule cannot "
            "say so: ask with max_version=(1, 0) or later (np.from_dlpack does)")
    keep = src.physical        # a counted export: pins the storage
    n = src.prog.rank
    if versioned:
        mv = <DLManagedTensorVersioned*>malloc(
            sizeof(DLManagedTensorVersioned) + 2 * max(n, 1) * sizeof(int64_t))
        if mv == NULL:
            raise MemoryError("cannot allocate a DLPack tensor")
        _dl_fill(&mv.dl_tensor, <int64_t*>(mv + 1), src, code, bits)
        mv.version.major = DL_MAJOR
        mv.version.minor = minor
        mv.flags = (DL_FLAG_READ_ONLY if src.readonly else 0) | \
            (DL_FLAG_IS_COPIED if copied else 0)
        mv.manager_ctx = <void*>keep
        mv.deleter = _dl_free_versioned
        Py_INCREF(keep)
        try:
            return PyCapsule_New(mv, b"dltensor_versioned", _dl_capsule_versioned)
        except BaseException:
            _dl_free_versioned(mv)
            raise
    ml = <DLManagedTensor*>malloc(sizeof(DLManagedTensor) + 2 * max(n, 1) * sizeof(int64_t))
    if ml == NULL:
        raise MemoryError("cannot allocate a DLPack tensor")
    _dl_fill(&ml.dl_tensor, <int64_t*>(ml + 1), src, code, bits)
    ml.manager_ctx = <void*>keep
    ml.deleter = _dl_free_legacy
    Py_INCREF(keep)
    try:
        return PyCapsule_New(ml, b"dltensor", _dl_capsule_legacy)
    except BaseException:
        _dl_free_legacy(ml)
        raise
