# LayoutArray: a logical array whose elements live in a padded, tiled
# physical buffer laid out exactly as an XLA layout says (DESIGN.md 4-6).
#
# Storage is either our own 64-byte aligned malloc'd block, or a wrapped
# external buffer (frombuffer) held by a Py_buffer. Every export (the buffer
# protocol of the LayoutArray itself, and of `physical` and the numpy views
# made from it) is counted; release() refuses while any is alive, and every
# view holds a reference to its exporter, so no view can outlive the memory.

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE,
                             PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_SIMPLE,
                             PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS)
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_CheckExact
from libc.stdlib cimport free, malloc
from posix.stdlib cimport posix_memalign

import numbers as _numbers

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # numpy < 2
    from numpy import byte_bounds as _byte_bounds

from .errors import (InvalidShapeError, ReadOnlyBufferError, ShapeBufferError,
                     ShapeIndexError, ShapeTypeError)
from .layout import Layout as _Layout
from .shape import Shape as _Shape
from . import tiling as _tiling
from .primitive_types import primitive_type_from_dtype as _ptype_from_dtype

cdef extern from *:
    """
    #include <sys/mman.h>
    static void xs_hint_hugepages(void* p, size_t n) {
    #ifdef MADV_HUGEPAGE
        (void)madvise(p, n, MADV_HUGEPAGE);
    #endif
    }
    """
    void xs_hint_hugepages(void* p, size_t n) noexcept nogil

cdef enum:
    HUGE_ALIGN = 2097152       # 2 MiB: big buffers get transparent huge pages
    HUGE_THRESHOLD = 4194304

cdef char* _FORMAT_B = "B"

_RELEASED = "operation on a released LayoutArray (release() was called)"


def _is_index_item(x):
    return isinstance(x, (slice, type(None), type(Ellipsis))) or (
        isinstance(x, (_numbers.Integral, np.integer))
        and not isinstance(x, (bool, np.bool_)))


cdef _check_key_types(key):
    items = key if type(key) is tuple else (key,)
    for pos, x in enumerate(items):
        if isinstance(x, (bool, np.bool_)):
            raise ShapeTypeError(
                f"LayoutArray indices must be integers, slices, '...' or None; got a "
                f"boolean at position {pos} (boolean masks are not supported: use "
                f"la.to_numpy()[mask])")
        if not _is_index_item(x):
            raise ShapeTypeError(
                f"LayoutArray indices must be integers, slices, '...' or None; got "
                f"{type(x).__name__} at position {pos}")


def _basic_selection(key, shape):
    """numpy basic indexing, decomposed: (per-axis index lists, post key).

    The block of the per-axis selections, indexed by the post key (0 for an
    int axis, slice(None) for a sliced one, None where the key has None),
    is ``x[key]``.
    """
    items = list(key) if type(key) is tuple else [key]
    rank = len(shape)
    n_ell = sum(1 for x in items if x is Ellipsis)
    if n_ell > 1:
        raise ShapeIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for x in items if x is not None and x is not Ellipsis)
    if n_real > rank:
        raise ShapeIndexError(
            f"too many indices for array: array is {rank}-dimensional, but "
            f"{n_real} were indexed")
    if n_ell:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (rank - n_real)
    else:
        items += [slice(None)] * (rank - n_real)
    sels, post = [], []
    axis = 0
    for x in items:
        if x is None:
            post.append(None)
            continue
        size = shape[axis]
        if isinstance(x, slice):
            sels.append(np.arange(*x.indices(size), dtype=np.intp))
            post.append(slice(None))
        else:
            i = x.__index__()
            if not -size <= i < size:
                raise ShapeIndexError(
                    f"index {i} is out of bounds for axis {axis} with size {size}")
            sels.append(np.array([i + size if i < 0 else i], dtype=np.intp))
            post.append(0)
        axis += 1
    return sels, tuple(post)


def _layout_text_to_layout(obj):
    """Layout text ("{0,1:T(2,2)}") -> a Layout; anything else unchanged.

    Shared by from_numpy and relayout, which both accept a bare layout to
    apply to a known element type and dimensions.
    """
    if isinstance(obj, str) and obj.lstrip().startswith("{"):
        from .hlo_text import parse_layout
        return parse_layout(obj)
    return obj


def _as_plan(shape):
    """A LayoutPlan from a Shape or HLO text, checked for LayoutArray."""
    if isinstance(shape, str):
        from .hlo_text import parse_shape
        shape = parse_shape(shape)
    if not isinstance(shape, _Shape):
        raise ShapeTypeError(
            f"expected a Shape or HLO shape text, got {type(shape).__name__}")
    if not shape.is_array:
        raise InvalidShapeError(
            f"LayoutArray needs an array shape, got {shape}")
    if shape.dtype is None:
        raise InvalidShapeError(
            f"element type {shape.element_type.hlo_name} has no numpy dtype "
            f"(install a newer ml_dtypes for it)")
    return _tiling.plan(shape)


cdef class LayoutArray:
    """A logical array stored in an XLA layout: padded, tiled, packed.

    ``LayoutArray(shape)`` allocates the physical buffer of ``shape`` (a
    :class:`~xlashape.Shape` or HLO text; no layout means XLA's default),
    64-byte aligned, with every logical element zero and every padding slot
    holding the layout's ``padding_value``. Indexing, ``len``, iteration,
    ``np.asarray(la)`` and :meth:`to_numpy` see the *logical* array;
    :attr:`physical` is the raw buffer.

    >>> from xlashape import Shape, Layout, Tile
    >>> la = LayoutArray(Shape("f32", (3, 5), Layout((1, 0), tiles=[Tile(2, 2)])))
    >>> la[2, 3] = 7.5
    >>> la[2, 3], la.physical_nbytes, float(la.physical_array()[1, 1, 0, 1])
    (7.5, 96, 7.5)
    """

    cdef Program prog
    cdef DInfo di
    cdef int64_t* tab_block         # offset tables (malloc'd), see _build_tables
    cdef int64_t* tabs[MAX_RANK]
    cdef int64_t** tabs_or_null
    cdef char* data
    cdef void* alloc
    cdef Py_buffer view
    cdef bint has_view
    cdef bint released
    cdef readonly bint readonly
    cdef Py_ssize_t n_exports
    cdef Py_ssize_t nbytes_phys
    cdef bint strided
    cdef Py_ssize_t c_shape[MAX_RANK]
    cdef Py_ssize_t c_strides[MAX_RANK]
    cdef Py_ssize_t logical_size
    cdef bint c_contig
    cdef bint f_contig
    cdef bytes fmt
    cdef object _plan
    cdef object _shape
    cdef object _dtype
    cdef object _pyshape
    cdef object _tmp
    cdef object _tabnp
    cdef object __weakref__

    # -- construction ------------------------------------------------------
    def __init__(self, shape):
        self._setup(_as_plan(shape))
        self._allocate()
        self._fill_padding(True)

    cdef int _setup(self, plan) except -1:
        cdef int d
        cdef Py_ssize_t acc
        program_from_plan(&self.prog, plan)
        self._plan = plan
        self._build_offset_tables(plan)
        shape = plan.shape
        if shape.layout is None:
            shape = shape.with_layout(plan.layout)
        self._shape = shape
        self._dtype = plan.element_type.dtype
        dinfo_for(&self.di, plan.element_type, self._dtype, plan.element_bits)
        self._pyshape = tuple(plan.dimensions)
        self.logical_size = 1
        for d in range(self.prog.rank):
            self.c_shape[d] = plan.dimensions[d]
            self.logical_size *= plan.dimensions[d]
        strides = plan.strides
        self.strided = strides is not None and not self.di.packed_bits
        self.c_contig = self.f_contig = False
        if self.strided:
            for d in range(self.prog.rank):
                self.c_strides[d] = strides[d]
            self.c_contig = self._is_contig(True)
            self.f_contig = self._is_contig(False)
        self.fmt = _PEP3118.get(plan.element_type.hlo_name)
        return 0

    cdef int _build_offset_tables(self, plan) except -1:
        """Per-dimension offset tables when the offset map is separable.

        Without '*' (combined dimensions) every div/mod of the program reads
        one logical dimension, so offset(i, j, ...) = T0[i] + T1[j] + ...:
        each table holds that dimension's share. Scalar access then costs
        `rank` loads instead of running the program (integer divisions), and
        so does every run of the bulk kernels. Built only while the tables
        stay small next to the buffer.
        """
        cdef int d, rank = self.prog.rank
        cdef int64_t i, total = 0
        cdef int64_t idx[MAX_RANK]
        cdef int64_t* p
        self.tabs_or_null = NULL
        if rank == 0:
            return 0
        deps = {r: {r} for r in range(rank)}
        for op, dst, a, b, c in plan.ops:
            da = deps.get(a, set())
            if op != 0 and len(da) > 1:
                return 0          # a div/mod mixes dimensions: not separable
            deps[dst] = da | deps.get(b, set()) if op == 0 else da
        for d in range(rank):
            total += self.prog.dims[d]
        if total > max(1 << 16, plan.element_count // 8):
            return 0
        self.tab_block = <int64_t*>malloc(max(total, 1) * sizeof(int64_t))
        if self.tab_block == NULL:
            raise MemoryError(
                f"cannot allocate the offset tables ({total} entries) for {plan.shape}")
        p = self.tab_block
        for d in range(rank):
            idx[d] = 0
        for d in range(rank):
            self.tabs[d] = p
            for i in range(self.prog.dims[d]):
                idx[d] = i
                p[i] = program_offset(&self.prog, idx)
            idx[d] = 0
            p += self.prog.dims[d]
        self.tabs_or_null = self.tabs
        return 0

    cdef inline int64_t _offset(self, const int64_t* idx) noexcept nogil:
        cdef int64_t off = 0
        cdef int d
        if self.tabs_or_null == NULL:
            return program_offset(&self.prog, idx)
        for d in range(self.prog.rank):
            off += self.tabs[d][idx[d]]
        return off

    cdef bint _is_contig(self, bint c_order):
        cdef Py_ssize_t acc = self.di.itemsize
        cdef int k, d
        for k in range(self.prog.rank):
            d = self.prog.rank - 1 - k if c_order else k
            if self.c_shape[d] > 1 and self.c_strides[d] != acc:
                return False
            acc *= self.c_shape[d]
        return True

    cdef int _allocate(self) except -1:
        cdef size_t n = self._plan.size_in_bytes
        cdef size_t align = 64
        cdef void* p = NULL
        if n > <size_t>(2 ** 62):
            raise MemoryError(f"{self._shape} needs {n} bytes")
        self.nbytes_phys = n
        if n == 0:
            n = 64
        if n >= HUGE_THRESHOLD:
            align = HUGE_ALIGN
        n = (n + 63) & ~(<size_t>63)
        if posix_memalign(&p, align, n) != 0 or p == NULL:
            raise MemoryError(f"cannot allocate {n} bytes for {self._shape}")
        if align == HUGE_ALIGN:
            xs_hint_hugepages(p, n)  # only a hint: failure is harmless
        self.alloc = p
        self.data = <char*>p
        self.readonly = False
        return 0

    cdef bytes _encode(self, value, what):
        """value -> the bytes of one element (numpy's conversion rules)."""
        try:
            tmp = np.array(value, dtype=self._dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise InvalidShapeError(
                f"{what} {value!r} cannot be stored as {self._shape.element_type.hlo_name} "
                f"({self._dtype}): {e}") from None
        if tmp.ndim != 0:
            raise InvalidShapeError(f"{what} must be a scalar, got shape {tmp.shape}")
        return tmp.tobytes()

    cdef int _fill_bytes_with(self, bytes elem) except -1:
        """Every slot of the physical buffer (padding included) := elem."""
        cdef uint64_t code
        cdef uint8_t byte
        cdef int k
        cdef const char* pat = elem
        cdef int64_t n = self.nbytes_phys
        if self.di.packed_bits:
            code = (<const uint8_t*>pat)[0] & self.di.mask
            byte = 0
            for k in range(0, 8, self.di.packed_bits):
                byte |= <uint8_t>(code << k)
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    memset(self.data, byte, n)
            finally:
                self.n_exports -= 1
        else:
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    fill_pattern(self.data, n, pat, self.di.itemsize)
            finally:
                self.n_exports -= 1
        return 0

    cdef int _fill_padding(self, bint zero_logical) except -1:
        """Padding slots := padding_value; logical elements := 0 if asked."""
        pv = self._plan.layout.padding_value
        has_padding = self._plan.element_count > self.logical_size or \
            self.nbytes_phys * 8 > self._plan.element_count * self._plan.element_bits
        if not has_padding:
            if zero_logical:
                memset(self.data, 0, self.nbytes_phys)
            return 0
        pad = self._encode(pv, "padding_value")
        self._fill_bytes_with(pad)
        if zero_logical and pad.count(0) != len(pad):
            self._fill_logical(bytes(len(pad)))
        return 0

    cdef int _fill_logical(self, bytes elem) except -1:
        """Every logical element := elem (one element's bytes)."""
        cdef Side dst, src
        cdef int d
        self._side(&dst)
        src.base = <char*>(<const char*>elem)
        src.prog = NULL
        src.tabs = NULL
        src.itemsize = self.di.itemsize
        src.packed_bits = 0
        src.minor_dim = -1
        for d in range(self.prog.rank):
            src.bstride[d] = 0
        self.n_exports += 1    # pinned: release() refuses while a kernel runs
        try:
            with nogil:
                copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
        finally:
            self.n_exports -= 1
        return 0

    cdef void _side(self, Side* s):
        s.base = self.data
        s.prog = &self.prog
        s.tabs = self.tabs_or_null
        s.itemsize = self.di.itemsize
        s.packed_bits = self.di.packed_bits
        s.minor_dim = self.prog.minor_dim

    cdef inline int _check_alive(self) except -1:
        if self.released:
            raise ValueError(_RELEASED)
        return 0

    cdef inline int _check_writable(self) except -1:
        if self.released:
            raise ValueError(_RELEASED)
        if self.readonly:
            raise ReadOnlyBufferError(
                "assignment destination is read-only (this LayoutArray wraps a "
                "read-only buffer; use la.copy() for a writable one)")
        return 0

    @staticmethod
    def from_numpy(array, shape_or_layout=None, *, dtype_cast=False):
        """Pack a numpy array into a layout (compiled; no intermediate copy).

        ``shape_or_layout`` is a :class:`~xlashape.Shape` or HLO text (its
        dimensions must equal ``array.shape``), a :class:`~xlashape.Layout`
        or layout text such as ``"{0,1:T(2,2)}"`` (the element type and
        dimensions come from the array), or None for the
        default layout. Any strides are accepted (negative, non-contiguous,
        0-d). The dtype must be the shape's element type; with
        ``dtype_cast=True`` the array is first converted (numpy's
        ``astype``, which is the only copy made).

        >>> import numpy as np
        >>> la = LayoutArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3),
        ...                             "f32[2,3]{0,1}")
        >>> bytes(la.physical) == np.arange(6, dtype=np.float32).reshape(2, 3).T.tobytes()
        True
        """
        cdef LayoutArray la
        cdef cnp.ndarray arr
        cdef Side dst, src
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        shape_or_layout = _layout_text_to_layout(shape_or_layout)
        if shape_or_layout is None or isinstance(shape_or_layout, _Layout):
            try:
                et = _ptype_from_dtype(array.dtype)
            except InvalidShapeError:
                raise ShapeTypeError(
                    f"numpy dtype {array.dtype} has no XLA element type; pass a shape "
                    f"and dtype_cast=True to convert") from None
            shape = _Shape(et, array.shape, shape_or_layout)
        else:
            shape = shape_or_layout
        plan = _as_plan(shape)
        if tuple(plan.dimensions) != tuple(array.shape):
            raise InvalidShapeError(
                f"array of shape {tuple(array.shape)} does not match the dimensions "
                f"{tuple(plan.dimensions)} of {plan.shape}")
        target = plan.element_type.dtype
        if array.dtype != target:
            if not dtype_cast:
                raise ShapeTypeError(
                    f"array dtype {array.dtype} does not match the element type "
                    f"{plan.element_type.hlo_name} ({target}) of {plan.shape}; "
                    f"pass dtype_cast=True to convert")
            array = array.astype(target)
        la = LayoutArray.__new__(LayoutArray)
        la._setup(plan)
        la._allocate()
        la._fill_padding(False)
        arr = array
        la._side(&dst)
        side_from_ndarray(&src, arr)
        if la._same_dense(arr):
            with nogil:
                memcpy(la.data, src.base, la.logical_size * la.di.itemsize)
        else:
            with nogil:
                copy_sides(&dst, &src, la.prog.dims, la.prog.rank, la.di.mask)
        return la

    cdef bint _same_dense(self, cnp.ndarray arr):
        """True when arr's memory is byte for byte our physical buffer."""
        cdef int d
        if not self.strided or self._plan.element_count != self.logical_size:
            return False
        if not (self.c_contig or self.f_contig):
            return False
        for d in range(self.prog.rank):
            if self.c_shape[d] > 1 and cnp.PyArray_STRIDES(arr)[d] != self.c_strides[d]:
                return False
        return True

    @staticmethod
    def frombuffer(buffer, shape):
        """Wrap memory that already holds an array in ``shape``'s layout (zero-copy).

        ``buffer`` is anything with the buffer protocol (bytes, bytearray,
        memoryview, mmap, numpy array, ...), C-contiguous, exactly
        ``physical_nbytes`` long. The LayoutArray is read-only if the buffer
        is; it keeps the buffer alive and locked while it lives.

        >>> la = LayoutArray.frombuffer(bytes(range(6)), "u8[2,3]{0,1}")
        >>> la[1, 0], la.readonly
        (1, True)
        """
        cdef LayoutArray la
        plan = _as_plan(shape)
        la = LayoutArray.__new__(LayoutArray)
        la._setup(plan)
        try:
            PyObject_GetBuffer(buffer, &la.view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
            la.readonly = False
        except TypeError:
            raise ShapeTypeError(
                f"frombuffer needs an object with the buffer protocol, got "
                f"{type(buffer).__name__}") from None
        except (BufferError, ValueError):
            try:
                PyObject_GetBuffer(buffer, &la.view, PyBUF_C_CONTIGUOUS)
            except TypeError:
                raise ShapeTypeError(
                    f"frombuffer needs an object with the buffer protocol, got "
                    f"{type(buffer).__name__}") from None
            except (BufferError, ValueError) as e2:
                raise ShapeBufferError(
                    f"cannot wrap the buffer (it must be C-contiguous): {e2}") from None
            la.readonly = True
        la.has_view = True
        if la.view.len != plan.size_in_bytes:
            n = la.view.len
            PyBuffer_Release(&la.view)
            la.has_view = False
            la.released = True
            raise ShapeBufferError(
                f"buffer has {n} bytes but {plan.shape} takes {plan.size_in_bytes} "
                f"bytes (padding and tiling included)")
        la.nbytes_phys = la.view.len
        la.data = <char*>la.view.buf
        return la

    def __dealloc__(self):
        if self.has_view:
            PyBuffer_Release(&self.view)
            self.has_view = False
        if self.alloc != NULL:
            free(self.alloc)
            self.alloc = NULL
        if self.tab_block != NULL:
            free(self.tab_block)
            self.tab_block = NULL

    def release(self):
        """Free the storage now (or let go of a wrapped buffer).

        Raises ``ShapeBufferError`` while any export (memoryview, numpy view,
        ``physical``) is alive: the memory would vanish under it. After
        release every other operation raises ``ValueError``.
        """
        if self.released:
            return
        if self.n_exports > 0:
            raise ShapeBufferError(
                f"cannot release a LayoutArray while {self.n_exports} buffer export(s) "
                f"(memoryviews or numpy views of it) are alive")
        self.released = True
        self.data = NULL
        if self.has_view:
            PyBuffer_Release(&self.view)
            self.has_view = False
        if self.alloc != NULL:
            free(self.alloc)
            self.alloc = NULL

    # -- attributes --------------------------------------------------------
    @property
    def shape(self):
        """Logical dimensions, as numpy's ``shape``."""
        return self._pyshape

    @property
    def dtype(self):
        """numpy dtype of the elements (ml_dtypes types for bf16, f8, int4, ...)."""
        return self._dtype

    @property
    def ndim(self):
        return self.prog.rank

    @property
    def size(self):
        """Number of logical elements."""
        return self.logical_size

    @property
    def itemsize(self):
        """numpy's itemsize of the dtype (1 for int4, even when packed)."""
        return self.di.itemsize

    @property
    def nbytes(self):
        """numpy meaning: ``size * itemsize`` (the logical array, no padding)."""
        return self.logical_size * self.di.itemsize

    @property
    def xla_shape(self):
        """The XLA :class:`~xlashape.Shape`, with its (possibly default) layout."""
        return self._shape

    @property
    def layout(self):
        return self._shape.layout

    @property
    def plan(self):
        """The :class:`~xlashape.tiling.LayoutPlan` the buffer follows."""
        return self._plan

    @property
    def physical_nbytes(self):
        """Bytes of the physical buffer: padding, tiling, packing included."""
        return self.nbytes_phys

    @property
    def physical(self):
        """A memoryview (format 'B') of the whole physical buffer, zero-copy.

        Writable unless the LayoutArray is read-only; it keeps the storage
        alive and counts as an export.
        """
        return memoryview(_PhysicalExporter(self))

    def physical_array(self):
        """A zero-copy numpy view of the physical (tiled) dimensions.

        Shape ``plan.physical_dimensions``, the element dtype. Not available
        for E(n)-packed sub-byte elements (several per byte): use
        :attr:`physical` for those.

        >>> la = LayoutArray("bf16[16,256]{1,0:T(8,128)(2,1)}")
        >>> la.physical_array().shape
        (2, 2, 4, 128, 2, 1)
        """
        self._check_alive()
        if self.di.packed_bits:
            raise ShapeBufferError(
                f"{self._shape} packs {8 // self.di.packed_bits} elements per byte; no "
                f"numpy dtype can view that: use la.physical (bytes) instead")
        dims = tuple(self._plan.physical_dimensions)
        return np.ndarray(dims, dtype=self._dtype, buffer=self._counted_bytes())

    def __len__(self):
        if self.prog.rank == 0:
            raise TypeError("len() of unsized object")
        return self.c_shape[0]

    # -- conversion to Python scalars (numpy 2's rules) ----------------------
    # Without these, int(la)/float(la) would fall back to the buffer protocol
    # and parse the raw bytes as text.
    cdef object _one_element(self):
        """The single logical element as a 0-d numpy array (a copy)."""
        self._check_alive()
        if self.logical_size != 1:
            raise TypeError(
                f"only 0-d or size-1 LayoutArrays can be converted to Python scalars; "
                f"this one has shape {self._pyshape} ({self.logical_size} elements)")
        return self.to_numpy().reshape(())

    def __int__(self):
        return int(self._one_element())

    def __float__(self):
        return float(self._one_element())

    def __complex__(self):
        return complex(self._one_element())

    def __index__(self):
        self._check_alive()
        if self.prog.rank != 0 or not self._plan.element_type.is_integral:
            raise TypeError(
                f"only integer scalar arrays can be converted to a scalar index; "
                f"this LayoutArray is {self._shape.to_string(False)}")
        return int(self._one_element())

    def __bool__(self):
        self._check_alive()
        if self.logical_size == 0:
            raise ValueError(
                f"The truth value of an empty array is ambiguous (shape "
                f"{self._pyshape}). Use `la.size > 0` to check that it is not empty")
        if self.logical_size > 1:
            raise ValueError(
                f"The truth value of an array with more than one element is ambiguous "
                f"(shape {self._pyshape}). Use np.asarray(la).any() or .all()")
        return bool(self._one_element())

    def __iter__(self):
        cdef Py_ssize_t i
        if self.prog.rank == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.c_shape[0]):
            yield self[i]

    # -- numpy interop -----------------------------------------------------
    def to_numpy(self, out=None):
        """The logical array as a new C-contiguous numpy array (always a copy).

        With ``out`` (a writable numpy array of the same shape and dtype, any
        strides) the values are unpacked into it instead, and it is returned.

        >>> LayoutArray("s4[2,2]{1,0:E(4)}").to_numpy().dtype
        dtype(int4)
        """
        cdef Side dst, src
        self._check_alive()
        if out is None:
            out = np.empty(self._pyshape, dtype=self._dtype)
        else:
            if not isinstance(out, np.ndarray):
                raise ShapeTypeError(f"out must be a numpy array, got {type(out).__name__}")
            if out.shape != self._pyshape or out.dtype != self._dtype:
                raise InvalidShapeError(
                    f"out has shape {out.shape} and dtype {out.dtype}; expected "
                    f"{self._pyshape} and {self._dtype}")
            if not out.flags.writeable:
                raise ValueError("out is read-only")
        return self._unpack_into(out)

    cdef object _unpack_into(self, cnp.ndarray out):
        cdef Side dst, src
        self._side(&src)
        side_from_ndarray(&dst, out)
        if self._same_dense(out):
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    memcpy(dst.base, self.data, self.logical_size * self.di.itemsize)
            finally:
                self.n_exports -= 1
        else:
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
            finally:
                self.n_exports -= 1
        return out

    cdef object _view(self):
        """Zero-copy numpy view of the logical array (strided layouts only)."""
        return np.ndarray(self._pyshape, dtype=self._dtype,
                          buffer=self._counted_bytes(),
                          strides=self._plan.strides)

    cdef object _counted_bytes(self):
        """The physical buffer as a uint8 ndarray that holds a counted export.

        numpy's ``np.ndarray(buffer=obj)`` releases the buffer at once (and
        unwraps a memoryview to its exporter), so a view built on
        `_PhysicalExporter` directly would not count in `exports` and
        release() would free memory under it. ``np.frombuffer`` keeps the
        memoryview as the base, which holds the export while any view built
        on this array lives.
        """
        return np.frombuffer(memoryview(_PhysicalExporter(self)), dtype=np.uint8)

    def __array__(self, dtype=None, copy=None):
        """numpy 2 semantics: a view when the layout allows one and copy is
        not True; copy=False raises ValueError when a copy is unavoidable."""
        self._check_alive()
        same = dtype is None or np.dtype(dtype) == self._dtype
        if copy is False:
            if not self.strided:
                raise ValueError(
                    f"Unable to avoid copy while creating an array as requested: "
                    f"{self._shape} is tiled or packed; its logical array is not "
                    f"expressible by strides")
            if not same:
                raise ValueError("Unable to avoid copy while creating an array as "
                                 f"requested: dtype {np.dtype(dtype)} differs from "
                                 f"{self._dtype}")
            return self._view()
        if copy is None and self.strided:
            out = self._view()
        else:
            out = self.to_numpy()
        if not same:
            out = out.astype(dtype)
        return out

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self._check_alive()
        if not self.strided:
            raise ShapeBufferError(
                f"{self._shape} is tiled or packed: its logical array is not "
                f"expressible by strides, so it has no buffer export. Use "
                f"la.to_numpy() or np.asarray(la) (a copy), or la.physical "
                f"(the raw bytes)")
        if self.fmt is None:
            raise ShapeBufferError(
                f"{self._dtype} ({self._shape.element_type.hlo_name}) has no PEP 3118 "
                f"buffer format. Use np.asarray(la) (a zero-copy view), "
                f"la.to_numpy() (a copy), or la.physical (the raw bytes)")
        if (flags & PyBUF_WRITABLE) and self.readonly:
            raise ReadOnlyBufferError("the LayoutArray is read-only (it wraps a "
                                      "read-only buffer)")
        if (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS and not self.c_contig:
            raise ShapeBufferError(f"{self._shape} is not C-contiguous")
        if (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS and not self.f_contig:
            raise ShapeBufferError(f"{self._shape} is not Fortran-contiguous")
        if (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS and not (
                self.c_contig or self.f_contig):
            raise ShapeBufferError(f"{self._shape} is not contiguous")
        if (flags & PyBUF_STRIDES) != PyBUF_STRIDES and not self.c_contig:
            raise ShapeBufferError(
                f"{self._shape} is not C-contiguous: the consumer must accept strides")
        buf.buf = self.data
        buf.obj = self
        buf.len = self.logical_size * self.di.itemsize
        buf.readonly = self.readonly
        buf.itemsize = self.di.itemsize
        buf.format = NULL
        if flags & PyBUF_FORMAT:
            buf.format = <char*>self.fmt
        buf.ndim = self.prog.rank
        buf.shape = self.c_shape if (flags & PyBUF_ND) == PyBUF_ND else NULL
        buf.strides = self.c_strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL
        self.n_exports += 1

    def __releasebuffer__(self, Py_buffer* buf):
        self.n_exports -= 1

    @property
    def exports(self):
        """Number of live buffer exports (memoryviews, numpy views, physical)."""
        return self.n_exports

    # -- element access ----------------------------------------------------
    cdef int _parse_index(self, object key, int64_t* idx) except -1:
        """key (a tuple of rank ints, or an int for rank 1) -> idx, checked.

        Returns 1 when every entry is an int, 0 when some entry is a slice,
        None or '...' (the caller takes numpy's path), raises otherwise.
        """
        cdef int i, overflow, n = self.prog.rank
        cdef PyObject* item
        cdef long long v
        cdef int64_t size
        for i in range(n):
            if n == 1 and not PyTuple_CheckExact(key):
                item = <PyObject*>key
            else:
                item = PyTuple_GET_ITEM_PTR(key, i)
            if PyLong_CheckExact_ptr(item):
                overflow = 0
                v = PyLong_AsLongLongAndOverflow_ptr(item, &overflow)
                if overflow:
                    raise ShapeIndexError(
                        f"index {<object>item} is out of bounds for axis {i} with size "
                        f"{self.prog.dims[i]}")
            else:
                obj = <object>item
                if isinstance(obj, (bool, np.bool_)) or not _is_index_item(obj):
                    _check_key_types(key)
                if not isinstance(obj, (_numbers.Integral, np.integer)):
                    return 0
                try:
                    v = obj.__index__()
                except OverflowError:
                    raise ShapeIndexError(
                        f"index {obj} is out of bounds for axis {i} with size "
                        f"{self.prog.dims[i]}") from None
            size = self.prog.dims[i]
            if v < 0:
                if v + size < 0:
                    raise ShapeIndexError(
                        f"index {v} is out of bounds for axis {i} with size {size}")
                v += size
            elif v >= size:
                raise ShapeIndexError(
                    f"index {v} is out of bounds for axis {i} with size {size}")
            idx[i] = v
        return 1

    cdef inline bint _full_int_key(self, object key) noexcept:
        if PyTuple_CheckExact(key):
            return PyTuple_GET_SIZE(key) == self.prog.rank
        return self.prog.rank == 1

    def __getitem__(self, key):
        """``la[i, j, ...]`` with one int per axis: a Python scalar (int, float,
        bool or complex; bf16/f8 as float), computed in C.

        With slices, ``...`` or ``None`` (numpy's basic indexing), or fewer
        ints than axes: a new numpy array holding the selection (always a
        copy; write with ``la[key] = value``). Out-of-range ints raise
        ``IndexError`` naming the axis and its size.
        """
        cdef int64_t idx[MAX_RANK]
        cdef int64_t off
        if self.released:
            raise ValueError(_RELEASED)
        if self._full_int_key(key) and self._parse_index(key, idx):
            off = self._offset(idx)
            return load_scalar(&self.di, self.data, off)
        _check_key_types(key)
        if self.strided:
            out = self._view()[key]
            return out.copy() if isinstance(out, np.ndarray) else out
        if self.tabs_or_null == NULL:
            return self.to_numpy()[key]
        sels, post = _basic_selection(key, self._pyshape)
        return self._gather(sels, None)[post]

    def __setitem__(self, key, value):
        """``la[i, j] = v`` stores with numpy's conversion rules (rounding,
        OverflowError for out-of-range Python ints); slices, ``...`` and
        ``None`` assign like numpy's basic indexing, writing through to the
        physical buffer (padding is never touched)."""
        cdef int64_t idx[MAX_RANK]
        cdef int64_t off
        cdef Side dst, src
        cdef cnp.ndarray arr
        self._check_writable()
        if self._full_int_key(key) and self._parse_index(key, idx):
            off = self._offset(idx)
            if store_fast(&self.di, self.data, off, value, self._dtype):
                return
            self._store_slow(off, value)
            return
        _check_key_types(key)
        if key is Ellipsis or (type(key) is tuple and len(key) == self.prog.rank and all(
                type(k) is slice and k == slice(None) for k in key)):
            self._assign_all(value)
            return
        if self.strided:
            self._view()[key] = value
            return
        if self.tabs_or_null == NULL:
            arr = self.to_numpy()
            arr[key] = value
            self._side(&dst)
            side_from_ndarray(&src, arr)
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
            finally:
                self.n_exports -= 1
            return
        # read the selected block, assign like numpy, write the block back
        sels, post = _basic_selection(key, self._pyshape)
        block = self._gather(sels, None)
        block[post] = value
        self._gather(sels, block)

    cdef int _assign_all(self, value) except -1:
        """``la[...] = value``: pack straight from the source, no unpacking."""
        cdef Side dst, src
        cdef cnp.ndarray arr
        if not isinstance(value, np.ndarray) or value.dtype != self._dtype:
            if np.ndim(value) == 0:
                if self._tmp is None:
                    self._tmp = np.zeros((), dtype=self._dtype)
                self._tmp[()] = value
                self._fill_logical(self._tmp.tobytes())
                return 0
            tmp = np.empty(self._pyshape, dtype=self._dtype)
            tmp[...] = value
            value = tmp
        arr = np.broadcast_to(value, self._pyshape)
        lo, hi = _byte_bounds(arr)
        if lo < <size_t>self.data + self.nbytes_phys and <size_t>self.data < hi:
            arr = arr.copy()     # the source is a view of this very buffer
        self._side(&dst)
        side_from_ndarray(&src, arr)
        self.n_exports += 1    # pinned: release() refuses while a kernel runs
        try:
            with nogil:
                copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
        finally:
            self.n_exports -= 1
        return 0

    cdef object _gather(self, list sels, object block):
        """The block sels[0] x sels[1] x ... (index arrays per axis): read into
        a new array (block None) or written from `block`. Offsets come from
        the per-dimension tables, restricted to the selected indices."""
        cdef Side phys, arr_side
        cdef cnp.ndarray sub, tab
        cdef int64_t* tptrs[MAX_RANK]
        cdef int64_t dims[MAX_RANK]
        cdef int d, rank = self.prog.rank
        cdef int64_t unit = 1 if self.di.packed_bits else self.di.itemsize
        if self._tabnp is None:
            self._tabnp = [np.asarray(<int64_t[:self.prog.dims[d]]>self.tabs[d])
                           if self.prog.dims[d] else np.zeros(0, np.int64)
                           for d in range(rank)]
        keep = []
        for d in range(rank):
            tab = np.ascontiguousarray(self._tabnp[d][sels[d]] * unit, dtype=np.int64)
            keep.append(tab)
            tptrs[d] = <int64_t*>cnp.PyArray_DATA(tab)
            dims[d] = len(sels[d])
        phys.base = self.data
        phys.prog = NULL
        phys.tabs = tptrs
        phys.itemsize = self.di.itemsize
        phys.packed_bits = self.di.packed_bits
        phys.minor_dim = -1
        if block is None:
            sub = np.empty(tuple(dims[d] for d in range(rank)), dtype=self._dtype)
        else:
            sub = block
        side_from_ndarray(&arr_side, sub)
        if block is None:
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    copy_sides(&arr_side, &phys, dims, rank, self.di.mask)
            finally:
                self.n_exports -= 1
        else:
            self.n_exports += 1    # pinned: release() refuses while a kernel runs
            try:
                with nogil:
                    copy_sides(&phys, &arr_side, dims, rank, self.di.mask)
            finally:
                self.n_exports -= 1
        return sub

    cdef int _store_slow(self, int64_t off, object value) except -1:
        """Store through a one-element numpy array: exactly numpy's rules."""
        cdef cnp.ndarray tmp
        cdef const char* p
        if self._tmp is None:
            self._tmp = np.zeros((), dtype=self._dtype)
        tmp = self._tmp
        tmp[()] = value
        p = <const char*>cnp.PyArray_DATA(tmp)
        if self.di.value_bits < 8 or self.di.packed_bits:
            store_code(&self.di, self.data, off, (<const uint8_t*>p)[0])
        else:
            memcpy(self.data + off * self.di.itemsize, p, self.di.itemsize)
        return 0

    # -- whole-array operations --------------------------------------------
    def fill(self, value):
        """Set every logical element to ``value`` (numpy's conversion);
        padding slots keep ``padding_value``."""
        self._check_writable()
        self._fill_logical(self._encode(value, "fill value"))

    def copy(self):
        """A new, writable LayoutArray with the same shape and bytes (padding too)."""
        cdef LayoutArray la
        self._check_alive()
        la = LayoutArray.__new__(LayoutArray)
        la._setup(self._plan)
        la._allocate()
        self.n_exports += 1    # pinned: release() refuses while a kernel runs
        try:
            with nogil:
                memcpy(la.data, self.data, self.nbytes_phys)
        finally:
            self.n_exports -= 1
        return la

    def relayout(self, layout):
        """The same logical values in another layout (a new LayoutArray).

        ``layout`` is a :class:`~xlashape.Layout` or layout text (``"{0,1}"``),
        or a Shape / HLO text with the same element type and dimensions. Copies directly between the two
        physical buffers (compiled, in blocks when the minor dimension moves).

        >>> from xlashape import Layout
        >>> la = LayoutArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
        >>> t = la.relayout(Layout((0, 1)))
        >>> np.frombuffer(t.physical, np.int32).tolist()
        [0, 3, 1, 4, 2, 5]
        """
        cdef LayoutArray la
        cdef Side dst, src
        self._check_alive()
        layout = _layout_text_to_layout(layout)
        if isinstance(layout, _Layout):
            shape = self._shape.with_layout(layout)
        elif isinstance(layout, (str, _Shape)):
            shape = layout
        else:
            raise ShapeTypeError(
                f"relayout expects a Layout, a Shape or shape text, got "
                f"{type(layout).__name__}")
        plan = _as_plan(shape)
        if plan.element_type != self._plan.element_type or \
                tuple(plan.dimensions) != self._pyshape:
            raise InvalidShapeError(
                f"relayout keeps the element type and dimensions: "
                f"{self._shape.to_string(False)} cannot become {plan.shape}")
        la = LayoutArray.__new__(LayoutArray)
        la._setup(plan)
        la._allocate()
        la._fill_padding(False)
        la._side(&dst)
        self._side(&src)
        self.n_exports += 1    # pinned: release() refuses while a kernel runs
        try:
            with nogil:
                copy_sides(&dst, &src, la.prog.dims, la.prog.rank, la.di.mask)
        finally:
            self.n_exports -= 1
        return la

    def __reduce__(self):
        self._check_alive()
        return (_rebuild, (bytes(self.physical), self._shape))

    def __repr__(self):
        if self.released:
            return f"<released LayoutArray {self._shape}>"
        body = np.array2string(np.asarray(self), separator=", ", prefix="  ")
        return f"LayoutArray({self._shape},\n  {body})"


cdef class _PhysicalExporter:
    """Exports a LayoutArray's whole physical buffer as bytes (format 'B').

    Internal: `LayoutArray.physical` is `memoryview(_PhysicalExporter(la))`.
    Holding the LayoutArray keeps its storage alive for as long as any
    memoryview or numpy array made from this object lives.
    """
    cdef LayoutArray owner
    cdef Py_ssize_t shape0
    cdef Py_ssize_t stride0

    def __cinit__(self, LayoutArray owner):
        owner._check_alive()
        self.owner = owner
        self.shape0 = owner.nbytes_phys
        self.stride0 = 1

    def __getbuffer__(self, Py_buffer* buf, int flags):
        cdef LayoutArray o = self.owner
        o._check_alive()
        if (flags & PyBUF_WRITABLE) and o.readonly:
            raise ReadOnlyBufferError("the physical buffer is read-only (the LayoutArray "
                                      "wraps a read-only buffer)")
        buf.buf = o.data
        buf.obj = self
        buf.len = self.shape0
        buf.readonly = o.readonly
        buf.itemsize = 1
        buf.format = NULL
        if flags & PyBUF_FORMAT:
            buf.format = _FORMAT_B
        buf.ndim = 1
        buf.shape = &self.shape0 if (flags & PyBUF_ND) == PyBUF_ND else NULL
        buf.strides = &self.stride0 if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL
        o.n_exports += 1

    def __releasebuffer__(self, Py_buffer* buf):
        self.owner.n_exports -= 1



def _rebuild(data, shape):
    """Unpickle: a writable LayoutArray from its physical bytes."""
    return LayoutArray.frombuffer(bytearray(data), shape)
