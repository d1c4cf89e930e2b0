# LayoutArray: a logical array whose elements live in a padded, tiled
# physical buffer laid out exactly as an XLA layout says.
#
# Storage is either our own 64-byte aligned malloc'd block, or a wrapped
# external buffer (frombuffer) held by a Py_buffer. Every export (the buffer
# protocol of the LayoutArray itself, and of `physical` and the numpy views
# made from it) is counted; release() refuses while any is alive, and every
# view holds a reference to its exporter, so no view can outlive the memory.
#
# Pinning discipline (no crash from any input or callback, any thread)
# ---------------------------------------------------------------------
# release() frees the storage whenever no export and no pin is held, and it
# can run in the middle of any operation: from a Python callback that the
# operation makes (a slice bound's __index__, a value's __float__, an
# array-like's __array__, a finalizer run by the garbage collector) or from
# another thread while the GIL is free (any Python code, and every kernel,
# which runs without the GIL; a kernel that splits its work between two
# threads joins its helper thread before it returns, so the helper too runs
# only while the caller's pin is held). So `self.data` is only read under
# one of:
#
#   pin      `_pin()` re-checks `released` and counts the operation in
#            `n_pins` (release() refuses while it is nonzero); `_unpin()` in a
#            `finally`. Every helper that hands `self.data` to a kernel pins
#            itself, right before building its Sides, and no Python code runs
#            between the pin and the kernel's last access.
#   check    the scalar paths convert every Python input first (the index's
#            __index__, the value through numpy), then check `released` and
#            touch memory with C code only: nothing can run in between.
#   export   a numpy view of the storage (`_view()`, physical_array) holds a
#            counted buffer export for as long as it lives.
#
# Storage-touching entry points and how each holds the memory:
#   la[i, j] (get)             check after the index's __index__ calls
#   la[i, j] = v               check after the index, and after converting v
#                              (exact int/float/bool: in C; else numpy)
#   la[key] (slices, ..., None)  key normalized first (bounds' __index__);
#                              strided: export (view) then copy; tiled: pin
#                              in _gather / _unpack_into
#   la[key] = v                key normalized first; strided: export (view)
#                              while numpy assigns v; tiled: pinned gather,
#                              v assigned into the block (no pin: a callback
#                              may release, then the pinned scatter raises)
#   la[...] = v / la[:] = v    v converted to an array first, pin in the copy;
#                              v another LayoutArray of the same dimensions
#                              and dtype, storage apart from ours: physical
#                              to physical in _copy_from, which pins BOTH
#   fill(v)                    v converted first, pin in _fill_logical
#   to_numpy(out=)             out checked (C-level shape/dtype) first, pin
#   relayout                   target planned/allocated first, then
#                              _copy_from (pins both)
#   copy                       target allocated first, pin on self
#   __array__, __repr__        export (view) for strided layouts, else to_numpy
#   __int__/__float__/__complex__/__index__/__bool__   to_numpy (pin)
#   __iter__                   la[i] per row (each pinned); checked at start
#   __reduce__                 bytes(la.physical): export while copying
#   physical, physical_array() export (counted memoryview)
#   memoryview(la) (buffer protocol)  export, checked in __getbuffer__
#   frombuffer                 holds the wrapped object's buffer (a Py_buffer)
#                              until release() or deallocation
#   from_numpy, LayoutArray()  a new array nobody else can reach; its buffer
#                              allocated first (a size that cannot be had is
#                              refused before anything else grows with the
#                              shape), the source converted before the copy
#   numpy's protocols (_numpy_api.py: ufuncs, functions, advanced indexing,
#   astype) and views (T, transpose, reshape)
#                              export: physical_array() / physical views
#                              while numpy works on them; a view is
#                              frombuffer() of `physical`, a counted export
#   __dlpack__                 export: the capsule holds a memoryview of
#                              `physical` until the consumer's deleter runs
# After release() every one of these raises ReleasedArrayError (a
# ValueError); metadata (shape, dtype, ndim, size, itemsize, nbytes,
# xla_shape, layout, plan, physical_nbytes, readonly, exports, len()) stays
# readable and repr() says "released". An instance whose __init__ never ran
# (LayoutArray.__new__, a subclass without super().__init__) is, from
# __cinit__, a rank-0 placeholder that is `released` and `uninit`: every entry
# point above and the metadata raise one ShapeValueError saying so.

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE,
                             PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_SIMPLE,
                             PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS)
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_CheckExact
cimport cython
from libc.stdlib cimport calloc, free, malloc

import numbers as _numbers
from operator import index as _operator_index

from .errors import (InvalidShapeError, ReadOnlyBufferError, ReleasedArrayError,
                     ShapeBufferError, ShapeIndexError, ShapeMemoryError,
                     ShapeOverflowError, ShapeTypeError, ShapeValueError, XlaShapeError)
from .errors import as_family as _as_family
from .layout import Layout as _Layout
from .shape import Shape as _Shape
from . import tiling as _tiling
from . import _numpy_api as _npapi
from .primitive_types import primitive_type_from_dtype as _ptype_from_dtype

cdef extern from *:
    """
    #include <sys/mman.h>
    #include <stdint.h>
    /* Ask for transparent huge pages on the whole pages inside [p, p+n). */
    static void xs_hint_hugepages(void* p, size_t n) {
    #ifdef MADV_HUGEPAGE
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
        if (e > a)
            (void)madvise((void*)a, e - a, MADV_HUGEPAGE);
    #endif
    }
    """
    void xs_hint_hugepages(void* p, size_t n) noexcept nogil

cdef enum:
    HUGE_THRESHOLD = 4194304   # buffers from 4 MiB get transparent huge pages (numpy's rule)

cdef char* _FORMAT_B = "B"

_RELEASED = "operation on a released LayoutArray (release() was called)"
_UNINIT_MSG = ("this LayoutArray was never set up: LayoutArray.__init__(shape) did not run "
               "(a subclass's __init__ must call super().__init__(shape); "
               "LayoutArray.__new__ alone makes no array)")


def _is_index_item(x):
    """A basic-indexing entry: a slice, None, '...' or an integer (an int, a
    numpy integer, any object with __index__ that is not an array, a list
    or a bool, as numpy reads it)."""
    return isinstance(x, (slice, type(None), type(Ellipsis))) or _npapi.is_integer_item(x)


cdef bint _check_key_types(key) except -1:
    """True when the key uses numpy's advanced indexing (integer arrays,
    boolean masks, lists); raises for entries numpy would not accept."""
    if type(key) is not tuple:
        return not _is_index_item(key) and _check_key_item(key, 0)
    adv = False
    for pos, x in enumerate(key):
        if not _is_index_item(x):
            adv = _check_key_item(x, pos) or adv
    return adv


cdef bint _check_key_item(x, int pos) except -1:
    if _npapi.is_advanced_item(x):
        return True
    raise ShapeTypeError(
        f"LayoutArray indices must be integers, slices, '...', None, or integer or "
        f"boolean arrays; got {type(x).__name__} at position {pos}")


_CONVERSION_ERRORS = (ValueError, TypeError, OverflowError)


cdef int _reraise_family(object e, object prefix=None) except -1:
    """Raise the xlashape twin of a builtin ValueError / TypeError /
    OverflowError that numpy (or a value's own __float__, __index__, ...)
    raised while converting a value: same builtin, same message (numpy's),
    optionally prefixed. An xlashape error is re-raised as it is."""
    if isinstance(e, XlaShapeError):
        raise e
    new = _as_family(e)
    if prefix is not None and new is not e:
        new = type(new)(f"{prefix}: {e}")
    raise new from None


def _np_new(make, *args, **kwargs):
    """``make(*args, **kwargs)`` (np.empty, np.ndarray) with numpy's refusal
    as an xlashape error: a zero-size shape whose other dimensions are huge
    is "too big" for numpy (ShapeValueError, numpy's message), a buffer too
    big to allocate is a ShapeMemoryError."""
    try:
        return make(*args, **kwargs)
    except (ValueError, TypeError, MemoryError) as e:
        raise _as_family(e) from None


def _normalize_key(key, shape):
    """numpy basic indexing ``x[key]`` over ``shape``, with every Python
    conversion done: ``(nkey, axes, post, full)``.

    Ints go through ``__index__`` and are bounds-checked, slice bounds
    through ``slice.indices`` (their ``__index__``), so nothing here runs
    once storage is touched. ``nkey`` holds only in-range non-negative ints,
    slices of plain ints, None and at most one Ellipsis: numpy indexing with
    it runs no Python code and cannot fail. ``axes`` lists, per logical
    axis, the int or the ``(start, stop, step)`` range selected; ``post``
    indexes the block of those selections into ``x[key]`` (0 for an int
    axis, ``slice(None)`` for a range, None where the key has None);
    ``full`` is True when the key selects every element with no None
    (``la[...]``, ``la[:, :]``). Every error is numpy's, as an xlashape one.
    """
    items = key if type(key) is tuple else (key,)
    rank = len(shape)
    n_real = 0
    n_ell = 0
    for pos, x in enumerate(items):
        if x is None:
            continue
        if x is Ellipsis:
            n_ell += 1
            continue
        if isinstance(x, slice):
            n_real += 1
            continue
        if isinstance(x, (bool, np.bool_)):
            raise ShapeTypeError(
                f"LayoutArray indices must be integers, slices, '...' or None; got a "
                f"boolean at position {pos} (boolean masks are not supported: use "
                f"la.to_numpy()[mask])")
        if not _npapi.is_integer_item(x):
            raise ShapeTypeError(
                f"LayoutArray indices must be integers, slices, '...' or None; got "
                f"{type(x).__name__} at position {pos}")
        n_real += 1
    if n_ell > 1:
        raise ShapeIndexError("an index can only have a single ellipsis ('...')")
    if n_real > rank:
        raise ShapeIndexError(
            f"too many indices for array: array is {rank}-dimensional, but "
            f"{n_real} were indexed")
    nkey, axes, post = [], [], []
    full = True
    axis = 0
    for x in items:
        if x is None:
            nkey.append(None)
            post.append(None)
            full = False
            continue
        if x is Ellipsis:
            nkey.append(Ellipsis)
            for _ in range(rank - n_real):
                axes.append((0, shape[axis], 1))
                post.append(slice(None))
                axis += 1
            continue
        size = shape[axis]
        if isinstance(x, slice):
            try:
                start, stop, step = x.indices(size)
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
            if not len(range(start, stop, step)):
                start, stop, step = 0, 0, 1
            axes.append((start, stop, step))
            if start != 0 or stop != size or step != 1:
                full = False
            # Stepping down, indices() gives stop -1 for "before the first
            # element"; as a slice bound -1 would mean the last one.
            nkey.append(slice(start, None if stop < 0 else stop, step))
            post.append(slice(None))
        else:
            i = _npapi.index_value(x)
            if not -size <= i < size:
                raise ShapeIndexError(
                    f"index {i} is out of bounds for axis {axis} with size {size}")
            if i < 0:
                i += size
            nkey.append(i)
            axes.append(i)
            post.append(0)
            full = False
        axis += 1
    while axis < rank:
        axes.append((0, shape[axis], 1))
        post.append(slice(None))
        axis += 1
    if n_ell:
        post.append(Ellipsis)     # x[0, ...] is a 0-d array, not a scalar
    return tuple(nkey), axes, tuple(post), full


def _short_repr(value):
    """repr(value) cut to a readable length, for messages."""
    r = repr(value)
    return r if len(r) <= 80 else r[:77] + "..."


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


cdef inline bint _array_overlaps(cnp.ndarray arr, const char* base, Py_ssize_t n) noexcept:
    """True when arr's elements may share a byte with [base, base + n)
    (numpy's byte_bounds, computed in C: no Python call between the caller's
    pin and its use of the storage)."""
    cdef const char* lo = <const char*>cnp.PyArray_DATA(arr)
    cdef const char* hi = lo + cnp.PyArray_ITEMSIZE(arr)
    cdef Py_ssize_t st, ext
    cdef int d
    for d in range(cnp.PyArray_NDIM(arr)):
        if cnp.PyArray_DIMS(arr)[d] == 0:
            return False
        st = cnp.PyArray_STRIDES(arr)[d]
        ext = (cnp.PyArray_DIMS(arr)[d] - 1) * st
        if ext < 0:
            lo += ext
        else:
            hi += ext
    return lo < base + n and base < hi


cdef bytes _encode_element(value, dtype, int kind, hlo_name, what, error):
    """value -> the bytes of one element of dtype (numpy's conversion rules;
    PRED as 0 or 1). A value numpy cannot convert raises `error` if given,
    else the xlashape twin of numpy's error."""
    try:
        tmp = np.array(value, dtype=dtype)
    except _CONVERSION_ERRORS as e:
        if isinstance(e, XlaShapeError):
            raise
        prefix = (f"{what} {_short_repr(value)} cannot be stored as "
                  f"{hlo_name} ({dtype})")
        if error is not None:
            raise error(f"{prefix}: {e}") from None
        _reraise_family(e, prefix)
    if tmp.ndim != 0:
        raise (error or ShapeValueError)(
            f"{what} must be a scalar, got an array of shape {tmp.shape}")
    elem = tmp.tobytes()
    if kind == K_BOOL:
        elem = b"\x00" if elem == b"\x00" else b"\x01"
    return elem


cdef class _Compiled:
    """Everything a LayoutArray derives from its LayoutPlan (the compiled
    offset program, the per-dimension offset tables, the element type's
    storage, the numpy-side shape and strides, the padding element),
    computed once per plan and shared, read-only, by every array of that
    shape: creating an array is then an allocation and a copy, not a
    recompilation (it was ~20 us of fixed cost per array).

    ``build`` costs the same for any size (no loop over a dimension); the
    offset tables, whose size grows with the dimensions, are built by
    ``ensure_tables`` only once an array of this plan holds its storage, so
    a buffer that cannot be had is refused before any of them exists."""
    cdef Program prog
    cdef DInfo di
    cdef int64_t* tab_block            # malloc'd offset tables, or NULL
    cdef int64_t* tabs[MAX_RANK]
    cdef int64_t** tabs_or_null        # tabs once built, else NULL (see ensure_tables)
    cdef bint tables_tried             # ensure_tables ran to a decision
    cdef Py_ssize_t c_shape[MAX_RANK]
    cdef Py_ssize_t c_strides[MAX_RANK]
    cdef Py_ssize_t logical_size
    cdef bint strided
    cdef bint c_contig
    cdef bint f_contig
    cdef bint numpy_sized               # numpy can make an array of this shape and dtype
    cdef bint separable                # offset = a sum of per-dimension shares (tables possible)
    cdef bint has_padding
    cdef bint pad_zero                 # the padding element is all zero bytes
    cdef bytes pad                     # one padding element's bytes (has_padding)
    cdef bytes fmt
    cdef object plan
    cdef object shape                  # with its (possibly default) layout
    cdef object dtype
    cdef object pyshape

    def __dealloc__(self):
        if self.tab_block != NULL:
            free(self.tab_block)
            self.tab_block = NULL

    cdef int build(self, plan) except -1:
        cdef int d
        program_from_plan(&self.prog, plan)
        self.plan = plan
        self.tabs_or_null = NULL        # ensure_tables, once a buffer exists
        self.separable = self._separable(plan)
        shape = plan.shape
        if shape.layout is None:
            shape = shape.with_layout(plan.layout)
        self.shape = shape
        self.dtype = plan.element_type.dtype
        dinfo_for(&self.di, plan.element_type, self.dtype, plan.element_bits)
        self.pyshape = tuple(plan.dimensions)
        # in Python ints: a zero-size shape may have dimensions whose product
        # (before the 0) is beyond int64; a nonzero product is at most the
        # plan's element_count, which program_from_plan checked
        count = 1
        for d in range(self.prog.rank):
            self.c_shape[d] = plan.dimensions[d]
            count *= plan.dimensions[d]
        self.logical_size = count
        strides = plan.strides
        # strides beyond int64 (only a zero-size shape can have them): no
        # strided export, nothing to export anyway
        self.strided = strides is not None and not self.di.packed_bits and \
            all(-_INT64_MAX <= st <= _INT64_MAX for st in strides)
        # numpy refuses a shape whose nonzero dimensions times the itemsize
        # exceed int64 ("array is too big"), even a zero-size one
        count = self.di.itemsize
        for dim in plan.dimensions:
            count *= dim or 1
        self.numpy_sized = count <= _INT64_MAX
        self.c_contig = self.f_contig = False
        if self.strided:
            for d in range(self.prog.rank):
                self.c_strides[d] = strides[d]
            self.c_contig = self._is_contig(True)
            self.f_contig = self._is_contig(False)
        self.fmt = _PEP3118.get(plan.element_type.hlo_name)
        self.has_padding = plan.element_count > self.logical_size or \
            plan.size_in_bytes * 8 > plan.element_count * plan.element_bits
        self.pad = None
        self.pad_zero = True
        if self.has_padding:
            self.pad = _encode_element(plan.layout.padding_value, self.dtype, self.di.kind,
                                       plan.element_type.hlo_name, "padding_value",
                                       InvalidShapeError)
            self.pad_zero = self.pad.count(0) == len(self.pad)
        return 0

    cdef int64_t** ensure_tables(self) noexcept:
        """The per-dimension offset tables when the offset map is separable
        and they stay small next to the buffer (else NULL), built on the
        first call. Call it only with a buffer of the plan's size in hand
        (allocated or wrapped): the tables are then at most an eighth of
        memory already had.

        Without '*' (combined dimensions) every div/mod of the program reads
        one logical dimension, so offset(i, j, ...) = T0[i] + T1[j] + ...:
        each table holds that dimension's share. Scalar access then costs
        `rank` loads instead of running the program (integer divisions), and
        so does every run of the bulk kernels. Tables are an optimization:
        when they cannot be allocated the program is used instead.
        """
        cdef int d, rank = self.prog.rank
        cdef int64_t i, limit, total = 0
        cdef int64_t idx[MAX_RANK]
        cdef int64_t* p
        if self.tables_tried:
            return self.tabs_or_null
        if rank == 0 or not self.separable:
            self.tables_tried = True
            return NULL
        # entries of 8 bytes: at most an eighth of the buffer's bytes
        limit = max(1 << 16, self.prog.size_in_bytes // 64)
        for d in range(rank):
            # checked before adding: a sum of dimensions (a zero-size shape
            # may have huge ones) must not overflow int64
            if self.prog.dims[d] > limit - total:
                self.tables_tried = True
                return NULL
            total += self.prog.dims[d]
        p = <int64_t*>malloc(max(total, 1) * sizeof(int64_t))
        if p == NULL:
            return NULL                  # not now; the program serves
        self.tab_block = p
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
        self.tables_tried = True
        return self.tabs_or_null

    cdef bint _separable(self, plan) except -1:
        """True when no div/mod of the offset program mixes dimensions."""
        deps = {r: {r} for r in range(self.prog.rank)}
        for op, dst, a, b, c in plan.ops:
            da = deps.get(a, set())
            if op != 0 and len(da) > 1:
                return False
            deps[dst] = da | deps.get(b, set()) if op == 0 else da
        return True

    cdef bint _is_contig(self, bint c_order):
        cdef Py_ssize_t acc = self.di.itemsize
        cdef int k, d
        for k in range(self.prog.rank):
            d = self.prog.rank - 1 - k if c_order else k
            if self.c_shape[d] > 1 and self.c_strides[d] != acc:
                return False
            acc *= self.c_shape[d]
        return True


# The C state of a LayoutArray that has no shape yet (see LayoutArray.__cinit__):
# all zero, a rank-0 program with no ops and no tables.
cdef _Compiled _PLACEHOLDER = _Compiled.__new__(_Compiled)


cdef enum:
    COMPILED_CACHE = 512    # plans (and shape objects / texts) remembered


cdef dict _compiled_by_plan = {}
cdef dict _compiled_by_key = {}     # id(Shape) or shape text -> (the key object, _Compiled)


cdef _Compiled _compiled_for(plan):
    """The _Compiled of a LayoutPlan (built on first use)."""
    cdef _Compiled c = _compiled_by_plan.get(plan)
    if c is None:
        c = _Compiled.__new__(_Compiled)
        c.build(plan)
        if len(_compiled_by_plan) >= COMPILED_CACHE:
            _compiled_by_plan.clear()
        _compiled_by_plan[plan] = c
    return c


cdef _Compiled _compiled_for_shape(shape):
    """The _Compiled of a Shape or HLO shape text, checked as _as_plan does.

    Remembers the Shape object itself (by identity, holding a reference so
    the id stays its own) or the text, so a repeated call costs one dict
    lookup."""
    cdef tuple entry
    if type(shape) is str:
        key = shape                 # equal texts: one entry
        entry = _compiled_by_key.get(key)
        if entry is not None:
            return <_Compiled>entry[1]
    else:
        key = id(shape)
        entry = _compiled_by_key.get(key)
        if entry is not None and entry[0] is shape:
            return <_Compiled>entry[1]
    c = _compiled_for(_as_plan(shape))
    if type(shape) is str or type(shape) is _Shape:
        if len(_compiled_by_key) >= COMPILED_CACHE:
            _compiled_by_key.clear()
        _compiled_by_key[key] = (shape, c)
    return c


@cython.no_gc_clear     # clearing fields is not needed to break cycles (see `view`)
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

    cdef _Compiled comp             # the plan's compiled form, shared (see _Compiled)
    cdef const Program* prog        # &comp.prog
    cdef DInfo di
    cdef int64_t** tabs             # comp.tabs: per-dimension offset tables
    cdef int64_t** tabs_or_null     # tabs once the storage is held (_attach_tables), else NULL
    cdef char* data
    cdef void* alloc
    # The wrapped buffer of frombuffer, behind a pointer on purpose: Cython
    # would make the garbage collector traverse and clear a Py_buffer
    # member's `obj` (dropping the reference without releasing the buffer:
    # the exporter, e.g. a memoryview, then sees an export that is never
    # released). Hidden from the collector, the exporter stays reachable
    # while we hold it, and only release()/dealloc give it back.
    cdef Py_buffer* view
    cdef bint has_view
    cdef bint released
    cdef readonly bint readonly
    cdef Py_ssize_t n_exports       # live buffer exports (views of the storage)
    cdef Py_ssize_t n_pins          # operations using the storage right now
    cdef Py_ssize_t nbytes_phys
    cdef bint strided
    cdef Py_ssize_t* c_shape        # comp.c_shape
    cdef Py_ssize_t* c_strides      # comp.c_strides
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
    cdef bint uninit                # no shape yet (__init__ never ran): see __cinit__

    # -- construction ------------------------------------------------------
    def __cinit__(self, *args, **kwargs):
        # Every instance starts in a valid empty state: C pointers at a
        # rank-0 placeholder, no storage (`released`) and `uninit`, so an
        # instance whose __init__ never runs (LayoutArray.__new__, a
        # subclass that forgets super().__init__) raises one clear error
        # from every method instead of reading NULL pointers. Every
        # constructor path ends in _setup_compiled and _allocate/frombuffer,
        # which clear both flags.
        self.comp = _PLACEHOLDER
        self.prog = &_PLACEHOLDER.prog
        self.c_shape = _PLACEHOLDER.c_shape
        self.c_strides = _PLACEHOLDER.c_strides
        self.tabs = _PLACEHOLDER.tabs
        self.tabs_or_null = NULL
        self.released = True
        self.uninit = True

    def __init__(self, shape):
        if not self.uninit:
            raise ShapeValueError("LayoutArray.__init__ called on an array that is "
                                  "already set up")
        self._setup_compiled(_compiled_for_shape(shape))
        cdef _Compiled c = self.comp
        if not c.has_padding or c.pad_zero:
            # every byte 0: calloc's pages come zeroed (lazily, for a big
            # buffer), as numpy's np.zeros gets them
            self._allocate(True)
        else:
            self._allocate()
            self._fill_padding(True)

    cdef int _setup(self, plan) except -1:
        return self._setup_compiled(_compiled_for(plan))

    cdef int _setup_compiled(self, _Compiled c) except -1:
        self.comp = c
        self.prog = &c.prog
        self.di = c.di
        self.tabs = c.tabs
        self.tabs_or_null = NULL        # _attach_tables, once the storage exists
        self.c_shape = c.c_shape
        self.c_strides = c.c_strides
        self.logical_size = c.logical_size
        self.strided = c.strided
        self.c_contig = c.c_contig
        self.f_contig = c.f_contig
        self.fmt = c.fmt
        self._plan = c.plan
        self._shape = c.shape
        self._dtype = c.dtype
        self._pyshape = c.pyshape
        self.uninit = False
        return 0

    cdef inline int64_t _offset(self, const int64_t* idx) noexcept nogil:
        cdef int64_t off = 0
        cdef int d
        if self.tabs_or_null == NULL:
            return program_offset(self.prog, idx)
        for d in range(self.prog.rank):
            off += self.tabs[d][idx[d]]
        return off

    cdef int _allocate(self, bint zeroed=False) except -1:
        """The physical buffer, 64-byte aligned, allocated the way numpy
        allocates (malloc, transparent huge pages asked for from 4 MiB), so
        both get the same reuse of freed memory from the C library: a
        buffer that numpy would get back warm and without page faults, we
        do too. With ``zeroed``, every byte 0 from calloc, as np.zeros.

        Every constructor comes here (or to frombuffer) before anything
        whose size grows with the shape is made: a buffer that cannot be
        had is a ShapeMemoryError at once. The offset tables follow."""
        cdef size_t n = self.comp.plan.size_in_bytes
        cdef void* p = NULL
        if n > <size_t>(2 ** 62):
            raise ShapeMemoryError(
                f"{self._shape} needs {n} bytes, more than any buffer can hold")
        self.nbytes_phys = n
        n = (n + 63) & ~(<size_t>63)
        p = calloc(n + 64, 1) if zeroed else malloc(n + 64)
        if p == NULL:
            raise ShapeMemoryError(
                f"cannot allocate {self.nbytes_phys} bytes for {self._shape}")
        if n >= HUGE_THRESHOLD:
            xs_hint_hugepages(p, n + 64)  # only a hint: failure is harmless
        self.alloc = p
        self.data = _line_align(<char*>p)
        self.readonly = False
        self.released = False
        self._attach_tables()
        return 0

    cdef inline void _attach_tables(self) noexcept:
        """The shared offset tables (built now if this is the plan's first
        array with storage), or none: call once the storage is held."""
        self.tabs_or_null = self.comp.ensure_tables()

    cdef bytes _encode(self, value, what, error=None):
        """value -> the bytes of one element (numpy's conversion rules; PRED
        as 0 or 1). A value numpy cannot convert raises `error` if given,
        else the xlashape twin of numpy's error."""
        return _encode_element(value, self._dtype, self.di.kind,
                               self._shape.element_type.hlo_name, what, error)

    cdef int _fill_bytes_with(self, bytes elem) except -1:
        """Every slot of the physical buffer (padding included) := elem."""
        cdef uint64_t code
        cdef uint8_t byte
        cdef int k
        cdef const char* pat = elem
        cdef int64_t n = self.nbytes_phys
        cdef char* data
        byte = 0
        if self.di.packed_bits:
            code = (<const uint8_t*>pat)[0] & self.di.mask
            for k in range(0, 8, self.di.packed_bits):
                byte |= <uint8_t>(code << k)
        self._pin()
        try:
            data = self.data
            if self.di.packed_bits:
                with nogil:
                    memset(data, byte, n)
            else:
                with nogil:
                    fill_pattern(data, n, pat, self.di.itemsize)
        finally:
            self._unpin()
        return 0

    cdef int _fill_padding(self, bint zero_logical) except -1:
        """Padding slots := padding_value; logical elements := 0 if asked."""
        cdef _Compiled c = self.comp
        if not c.has_padding:
            if zero_logical:
                self._pin()
                try:
                    memset(self.data, 0, self.nbytes_phys)
                finally:
                    self._unpin()
            return 0
        self._fill_bytes_with(c.pad)
        if zero_logical and not c.pad_zero:
            self._fill_logical(bytes(len(c.pad)))
        return 0

    cdef int _fill_logical(self, bytes elem) except -1:
        """Every logical element := elem (one element's bytes, already
        converted: PRED 0 or 1)."""
        cdef Side dst, src
        cdef int d
        src.base = <char*>(<const char*>elem)
        src.prog = NULL
        src.tabs = NULL
        src.itemsize = self.di.itemsize
        src.packed_bits = 0
        src.minor_dim = -1
        for d in range(self.prog.rank):
            src.bstride[d] = 0
        self._pin()
        try:
            self._side(&dst)
            with nogil:
                copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
        finally:
            self._unpin()
        return 0

    cdef void _side(self, Side* s):
        s.base = self.data
        s.prog = self.prog
        s.tabs = self.tabs_or_null
        s.itemsize = self.di.itemsize
        s.packed_bits = self.di.packed_bits
        s.minor_dim = self.prog.minor_dim

    cdef inline int _check_alive(self) except -1:
        if self.released:
            self._dead()
        return 0

    cdef int _dead(self) except -1:
        """Raise why the storage cannot be used: released, or never set up
        (``LayoutArray.__new__`` alone, or a subclass whose ``__init__`` does
        not call ``super().__init__``)."""
        if self.uninit:
            raise ShapeValueError(_UNINIT_MSG)
        raise ReleasedArrayError(_RELEASED)

    cdef inline int _check_init(self) except -1:
        """The metadata's guard: an instance that was never set up has none."""
        if self.uninit:
            raise ShapeValueError(_UNINIT_MSG)
        return 0

    cdef inline int _pin(self) except -1:
        """Hold the storage (release() refuses) until _unpin(); raises
        ReleasedArrayError if it is already gone. Read `self.data` only
        after this, and call _unpin() in a `finally`."""
        if self.released:
            self._dead()
        self.n_pins += 1
        return 0

    cdef inline void _unpin(self) noexcept:
        self.n_pins -= 1

    cdef inline int _check_writable(self) except -1:
        # two loads inline; the raising stays out of line (scalar stores)
        if self.released or self.readonly:
            return self._not_writable()
        return 0

    cdef int _not_writable(self) except -1:
        if self.released:
            self._dead()
        raise ReadOnlyBufferError(
            "assignment destination is read-only (this LayoutArray wraps a "
            "read-only buffer; use la.copy() for a writable one)")

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
        cdef _Compiled comp
        cdef cnp.ndarray arr
        cdef Side dst, src
        if type(array) is not np.ndarray:
            # also turns a subclass into a plain view, whose shape and dtype
            # are those of its memory (a subclass could redefine them)
            try:
                array = np.asarray(array)
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
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
        comp = _compiled_for_shape(shape)
        if comp.pyshape != array.shape:
            raise InvalidShapeError(
                f"array of shape {tuple(array.shape)} does not match the dimensions "
                f"{comp.pyshape} of {comp.plan.shape}")
        target = comp.dtype
        if array.dtype != target and not dtype_cast:
            raise ShapeTypeError(
                f"array dtype {array.dtype} does not match the element type "
                f"{comp.plan.element_type.hlo_name} ({target}) of {comp.plan.shape}; "
                f"pass dtype_cast=True to convert")
        # the buffer first: a size that cannot be had is refused before the
        # cast below copies the (possibly broadcast, any-sized) source
        la = LayoutArray.__new__(LayoutArray)
        la._setup_compiled(comp)
        la._allocate()
        if array.dtype != target:
            try:
                array = array.astype(target)
            except (ValueError, TypeError, OverflowError, MemoryError) as e:
                _reraise_family(e)
        if comp.di.kind == K_BOOL:
            try:
                array = bool_array_clean(array)   # PRED: every nonzero byte as 1
            except MemoryError as e:
                _reraise_family(e)
        la._fill_padding(False)
        la._copy_in(array)
        return la

    cdef int _copy_in(self, cnp.ndarray arr) except -1:
        """Every logical element := arr's (a plain ndarray of our dtype and
        shape, any strides; PRED bytes already 0/1). Pins."""
        cdef Side dst, src
        cdef int d
        if cnp.PyArray_NDIM(arr) != self.prog.rank or \
                cnp.PyArray_ITEMSIZE(arr) != self.di.itemsize:
            raise ShapeValueError(f"internal: array of shape {(<object>arr).shape} and "
                                  f"dtype {arr.dtype} cannot be copied into {self._shape}")
        for d in range(self.prog.rank):
            if cnp.PyArray_DIMS(arr)[d] != self.prog.dims[d]:
                raise ShapeValueError(f"internal: array of shape {(<object>arr).shape} cannot be "
                                      f"copied into {self._shape}")
        self._pin()
        try:
            self._side(&dst)
            side_from_ndarray(&src, arr)
            if self._same_dense(arr):
                with nogil:
                    memcpy(dst.base, src.base, self.logical_size * self.di.itemsize)
            else:
                with nogil:
                    copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
        finally:
            self._unpin()
        return 0

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
        is; it keeps the buffer alive and locked while it lives (or until
        :meth:`release`).

        PRED: XLA stores 0 or 1 per element; a wrapped buffer may hold other
        bytes. Every read that makes values (``la[i]``, slices,
        :meth:`to_numpy`, iteration, :meth:`relayout`, :meth:`copy`) treats
        a nonzero byte as True and produces 0/1; the zero-copy views
        (``memoryview(la)``, ``np.asarray(la)``, :attr:`physical`) show the
        bytes as they are.

        >>> la = LayoutArray.frombuffer(bytes(range(6)), "u8[2,3]{0,1}")
        >>> la[1, 0], la.readonly
        (1, True)
        """
        cdef LayoutArray la
        plan = _as_plan(shape)
        la = LayoutArray.__new__(LayoutArray)
        la._setup(plan)
        la.view = <Py_buffer*>malloc(sizeof(Py_buffer))
        if la.view == NULL:
            raise ShapeMemoryError("cannot allocate a Py_buffer")
        try:
            PyObject_GetBuffer(buffer, la.view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
            la.readonly = False
        except TypeError:
            raise ShapeTypeError(
                f"frombuffer needs an object with the buffer protocol, got "
                f"{type(buffer).__name__}") from None
        except (BufferError, ValueError):
            try:
                PyObject_GetBuffer(buffer, la.view, PyBUF_C_CONTIGUOUS)
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
            la._drop_view()
            la.released = True
            raise ShapeBufferError(
                f"buffer has {n} bytes but {plan.shape} takes {plan.size_in_bytes} "
                f"bytes (padding and tiling included)")
        la.nbytes_phys = la.view.len
        la.data = <char*>la.view.buf
        la.released = False
        la._attach_tables()
        return la

    cdef void _drop_view(self) noexcept:
        if self.has_view:
            PyBuffer_Release(self.view)
            self.has_view = False
        free(self.view)
        self.view = NULL

    def __dealloc__(self):
        self._drop_view()
        if self.alloc != NULL:
            free(self.alloc)
            self.alloc = NULL

    def release(self):
        """Free the storage now (or let go of a wrapped buffer).

        Raises ``ShapeBufferError`` while any export (memoryview, numpy view,
        ``physical``) is alive, or while an operation is using the storage
        (in another thread, or in a Python callback that operation made): the
        memory would vanish under it. After release every operation on the
        elements raises :class:`~xlashape.ReleasedArrayError` (a
        ``ValueError``); the metadata (``shape``, ``dtype``, ``xla_shape``,
        ...) stays readable. Releasing twice is allowed.
        """
        if self.released:
            return
        if self.n_exports > 0:
            raise ShapeBufferError(
                f"cannot release a LayoutArray while {self.n_exports} buffer export(s) "
                f"(memoryviews or numpy views of it) are alive")
        if self.n_pins > 0:
            raise ShapeBufferError(
                "cannot release a LayoutArray while an operation on it is in progress "
                "(in another thread, or in a Python callback such as __index__ or "
                "__float__ that the operation called)")
        self.released = True
        self.data = NULL
        self._drop_view()
        if self.alloc != NULL:
            free(self.alloc)
            self.alloc = NULL

    # -- attributes --------------------------------------------------------
    @property
    def shape(self):
        """Logical dimensions, as numpy's ``shape``."""
        self._check_init()
        return self._pyshape

    @property
    def dtype(self):
        """numpy dtype of the elements (ml_dtypes types for bf16, f8, int4, ...)."""
        self._check_init()
        return self._dtype

    @property
    def ndim(self):
        self._check_init()
        return self.prog.rank

    @property
    def size(self):
        """Number of logical elements."""
        self._check_init()
        return self.logical_size

    @property
    def itemsize(self):
        """numpy's itemsize of the dtype (1 for int4, even when packed)."""
        self._check_init()
        return self.di.itemsize

    @property
    def nbytes(self):
        """numpy meaning: ``size * itemsize`` (the logical array, no padding)."""
        self._check_init()
        return self.logical_size * self.di.itemsize

    @property
    def xla_shape(self):
        """The XLA :class:`~xlashape.Shape`, with its (possibly default) layout."""
        self._check_init()
        return self._shape

    @property
    def layout(self):
        self._check_init()
        return self._shape.layout

    @property
    def plan(self):
        """The :class:`~xlashape.tiling.LayoutPlan` the buffer follows."""
        self._check_init()
        return self._plan

    @property
    def physical_nbytes(self):
        """Bytes of the physical buffer: padding, tiling, packing included."""
        self._check_init()
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
        return _np_new(np.ndarray, dims, dtype=self._dtype, buffer=self._counted_bytes())

    def __len__(self):
        self._check_init()
        if self.prog.rank == 0:
            raise ShapeTypeError("len() of unsized object")
        return self.c_shape[0]

    # -- conversion to Python scalars (numpy 2's rules) ----------------------
    # Without these, int(la)/float(la) would fall back to the buffer protocol
    # and parse the raw bytes as text.
    cdef object _one_element(self):
        """The element of a 0-d array as a 0-d numpy array (a copy); numpy
        2's TypeError (as ShapeTypeError) for any other rank, size 1 too."""
        self._check_alive()
        if self.prog.rank != 0:
            raise ShapeTypeError("only 0-dimensional arrays can be converted to Python scalars")
        return self.to_numpy().reshape(())

    def __int__(self):
        x = self._one_element()
        try:
            return int(x)         # NaN and inf: numpy's ValueError / OverflowError
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)

    def __float__(self):
        x = self._one_element()
        try:
            return float(x)       # complex: numpy's TypeError
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)

    def __complex__(self):
        x = self._one_element()
        try:
            return complex(x)
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)

    def __index__(self):
        self._check_alive()
        if self.prog.rank != 0 or not self._plan.element_type.is_integral:
            raise ShapeTypeError(
                f"only integer scalar arrays can be converted to a scalar index; "
                f"this LayoutArray is {self._shape.to_string(False)}")
        return int(self._one_element())

    def __bool__(self):
        self._check_alive()
        if self.logical_size == 0:
            raise ShapeValueError(
                f"The truth value of an empty array is ambiguous (shape "
                f"{self._pyshape}). Use `la.size > 0` to check that it is not empty")
        if self.logical_size > 1:
            raise ShapeValueError(
                f"The truth value of an array with more than one element is ambiguous "
                f"(shape {self._pyshape}). Use np.asarray(la).any() or .all()")
        return bool(self.to_numpy().reshape(()))    # size 1, any rank (numpy's rule)

    def __iter__(self):
        """Rows (``la[0]``, ``la[1]``, ...), each read when it is reached:
        a release() between two rows makes the next one raise."""
        self._check_alive()
        if self.prog.rank == 0:
            raise ShapeTypeError("iteration over a 0-d array")
        return _rows(self, self.c_shape[0])

    # -- numpy interop -----------------------------------------------------
    def to_numpy(self, out=None):
        """The logical array as a new C-contiguous numpy array (always a copy).

        With ``out`` (a writable numpy array of the same shape and dtype, any
        strides) the values are unpacked into it instead, and it is returned.
        PRED elements come out as 0 or 1 whatever byte the storage holds.

        >>> LayoutArray("s4[2,2]{1,0:E(4)}").to_numpy().dtype
        dtype(int4)
        """
        cdef cnp.ndarray arr
        self._check_alive()
        if out is None:
            arr = _np_new(np.empty, self._pyshape, dtype=self._dtype)
            return self._unpack_into(arr)
        if not isinstance(out, np.ndarray):
            raise ShapeTypeError(f"out must be a numpy array, got {type(out).__name__}")
        # A plain view of the same memory: its shape, dtype and flags are the
        # memory's own (a subclass could report others in Python).
        arr = out if type(out) is np.ndarray else np.asarray(out)
        oshape = (<object>arr).shape
        if oshape != self._pyshape:
            raise ShapeValueError(
                f"out has shape {oshape} and dtype {arr.dtype}; expected "
                f"{self._pyshape} and {self._dtype}")
        if arr.dtype != self._dtype:
            raise ShapeTypeError(
                f"out has shape {oshape} and dtype {arr.dtype}; expected "
                f"{self._pyshape} and {self._dtype}")
        if not arr.flags.writeable:
            raise ReadOnlyBufferError(
                "output array is read-only: to_numpy(out=...) needs a writable array")
        self._pin()
        try:
            if _array_overlaps(arr, self.data, self.nbytes_phys):
                # out is a view of this very storage: unpack, then copy over
                np.copyto(arr, self._unpack_into(np.empty(self._pyshape, dtype=self._dtype)))
            else:
                self._unpack_into(arr)
        finally:
            self._unpin()
        return out

    cdef object _unpack_into(self, cnp.ndarray out):
        """Every logical element -> out (a plain ndarray of our shape and
        dtype, any strides); PRED bytes as 0/1. Pins."""
        cdef Side dst, src
        cdef bint dirty = False
        self._pin()
        try:
            self._side(&src)
            side_from_ndarray(&dst, out)
            if self._same_dense(out):
                with nogil:
                    memcpy(dst.base, src.base, self.logical_size * self.di.itemsize)
            else:
                with nogil:
                    copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
            if self.di.kind == K_BOOL and not self.di.packed_bits:
                with nogil:
                    dirty = bytes_above_one(src.base, self.nbytes_phys)
        finally:
            self._unpin()
        if dirty:
            bool_array_fix(out)
        return out

    cdef object _view(self):
        """Zero-copy numpy view of the logical array (strided layouts only)."""
        return _np_new(np.ndarray, self._pyshape, dtype=self._dtype,
                       buffer=self._counted_bytes(), strides=self._plan.strides)

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
        try:
            same = dtype is None or np.dtype(dtype) == self._dtype
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)
        if copy is False:
            if not self.strided:
                raise ShapeValueError(
                    f"Unable to avoid copy while creating an array as requested: "
                    f"{self._shape} is tiled or packed; its logical array is not "
                    f"expressible by strides")
            if not same:
                raise ShapeValueError("Unable to avoid copy while creating an array as "
                                 f"requested: dtype {np.dtype(dtype)} differs from "
                                 f"{self._dtype}")
            return self._view()
        if copy is None and self.strided:
            out = self._view()
        else:
            out = self.to_numpy()
        if not same:
            try:
                out = out.astype(dtype)
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
        return out

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self._check_alive()
        if not self.comp.numpy_sized:
            # numpy would refuse the shape with its own ValueError; without an
            # export it asks __array__, which raises that as ShapeValueError
            raise ShapeBufferError(
                f"{self._shape} has dimensions whose product is beyond int64: no "
                f"buffer export")
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
                    return self._out_of_bounds(<object>item, i)
            elif not self._index_item(<object>item, key, i, &v):
                return 0
            size = self.prog.dims[i]
            if v < 0:
                if v + size < 0:
                    return self._out_of_bounds(v, i)
                v += size
            elif v >= size:
                return self._out_of_bounds(v, i)
            idx[i] = v
        return 1

    cdef int _out_of_bounds(self, object v, int i) except -1:
        raise ShapeIndexError(
            f"index {v} is out of bounds for axis {i} with size {self.prog.dims[i]}")

    cdef int _index_item(self, object obj, object key, int i, long long* v) except -1:
        """A key entry that is not an exact int (kept out of _parse_index's
        loop): 1 and *v for an integer, 0 for a slice, None or '...' (numpy's
        path), raises for anything else. May run the entry's __index__."""
        if not _is_index_item(obj):
            _check_key_types(key)
            return 0
        if obj is None or obj is Ellipsis or isinstance(obj, slice):
            return 0
        big = _npapi.index_value(obj)
        if not -(2 ** 63) <= big < 2 ** 63:
            return self._out_of_bounds(big, i)
        v[0] = big
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
        :class:`~xlashape.ShapeIndexError` (an ``IndexError``) naming the
        axis and its size, the same on every layout.
        """
        cdef int64_t idx[MAX_RANK]
        cdef int64_t off
        if self.released:
            self._dead()
        if self._full_int_key(key) and self._parse_index(key, idx):
            # _parse_index may have run an index's __index__ (which may have
            # released us); from this check on, C code only.
            if self.released:
                self._dead()
            off = self._offset(idx)
            return load_scalar(&self.di, self.data, off)
        if _check_key_types(key):
            return _npapi.getitem(self, key)
        return self._get_block(key)

    cdef object _get_block(self, key):
        cdef bint pred = self.di.kind == K_BOOL
        nkey, axes, post, full = _normalize_key(key, self._pyshape)
        self._check_alive()
        if self.strided:
            out = self._view()[nkey]       # the view holds an export meanwhile
            if isinstance(out, np.ndarray):
                out = out.copy()
                if pred:
                    bool_array_fix(out)
            return out
        if self.tabs_or_null == NULL:
            return self.to_numpy()[nkey]
        return self._gather(axes, None)[post]

    def __setitem__(self, key, value):
        """``la[i, j] = v`` stores with numpy's conversion rules (rounding,
        OverflowError for out-of-range Python ints); slices, ``...`` and
        ``None`` assign like numpy's basic indexing, writing through to the
        physical buffer (padding is never touched). Values numpy cannot
        convert raise numpy's error as an xlashape one (ShapeValueError,
        ShapeTypeError, ShapeOverflowError); PRED is stored as 0 or 1."""
        cdef int64_t idx[MAX_RANK]
        cdef int64_t off
        self._check_writable()
        if self._full_int_key(key) and self._parse_index(key, idx):
            if self.released:          # an index's __index__ released us
                self._dead()
            off = self._offset(idx)
            # store_fast converts exact int/float/bool in C and runs no
            # Python code before its store.
            if store_fast(&self.di, self.data, off, value, self._dtype):
                return
            self._store_slow(off, value)
            return
        if key is Ellipsis:
            self._assign_all(value)     # la[...] = value, the bulk assignment
            return
        if _check_key_types(key):
            _npapi.setitem(self, key, value)
            return
        self._set_block(key, value)

    def __delitem__(self, key):
        """numpy's answer: array elements cannot be deleted."""
        raise ShapeValueError("cannot delete array elements")

    cdef int _set_block(self, key, value) except -1:
        cdef cnp.ndarray arr
        nkey, axes, post, full = _normalize_key(key, self._pyshape)
        self._check_alive()
        if full:
            self._assign_all(value)
            return 0
        if self.strided:
            view = self._view()            # holds an export while numpy assigns
            try:
                view[nkey] = value
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
            if self.di.kind == K_BOOL:
                # value may be a bool array holding other bytes than 0/1
                # (`...` makes an all-int key give a 0-d view, not a copy)
                bool_array_fix(view[nkey if Ellipsis in nkey else nkey + (Ellipsis,)])
            return 0
        if self.tabs_or_null == NULL:
            arr = self.to_numpy()
            self._assign_into(arr, nkey, value)
            self._copy_in(arr)
            return 0
        # read the selected block, assign like numpy, write the block back
        block = self._gather(axes, None)
        self._assign_into(block, post, value)
        self._gather(axes, block)
        return 0

    cdef int _assign_into(self, cnp.ndarray arr, key, value) except -1:
        """arr[key] = value with numpy's rules and xlashape's errors; PRED
        bytes folded to 0/1 (arr is our own temporary)."""
        try:
            arr[key] = value
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)
        if self.di.kind == K_BOOL:
            bool_array_fix(arr)
        return 0

    cdef int _assign_all(self, value) except -1:
        """``la[...] = value``: pack straight from the source, no unpacking
        (from another LayoutArray of the same shape and dtype: physical to
        physical, a relayout into this buffer)."""
        cdef cnp.ndarray arr
        cdef LayoutArray other
        if type(value) is LayoutArray:
            other = <LayoutArray>value
            if other._pyshape == self._pyshape and other._dtype == self._dtype:
                other._check_alive()
                if not (other.data < self.data + self.nbytes_phys and
                        self.data < other.data + other.nbytes_phys):
                    self._copy_from(other)
                    return 0
        if type(value) is not np.ndarray or value.dtype != self._dtype:
            try:
                scalar = np.ndim(value) == 0
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
            if scalar:
                self._fill_logical(self._encode(value, "value"))
                return 0
            tmp = _np_new(np.empty, self._pyshape, dtype=self._dtype)
            self._assign_into(tmp, Ellipsis, value)
            value = tmp
        elif self.di.kind == K_BOOL:
            value = bool_array_clean(value)
        if (<object>value).shape == self._pyshape:
            arr = value
        else:
            try:
                arr = np.broadcast_to(value, self._pyshape)
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
        self._pin()
        try:
            if _array_overlaps(arr, self.data, self.nbytes_phys):
                arr = arr.copy()     # the source is a view of this very buffer
            self._copy_in(arr)
        finally:
            self._unpin()
        return 0

    cdef object _gather(self, list axes, object block):
        """The block of the selections `axes` (per logical axis an int or a
        (start, stop, step) range): read into a new array (block None) or
        written from `block`. Offsets come from the per-dimension tables,
        restricted to the selected indices. Pins."""
        cdef Side phys, arr_side
        cdef cnp.ndarray sub, tab
        cdef int64_t* tptrs[MAX_RANK]
        cdef int64_t dims[MAX_RANK]
        cdef int d, rank = self.prog.rank
        cdef int64_t unit = 1 if self.di.packed_bits else self.di.itemsize
        cdef bint dirty = False
        if self._tabnp is None:
            self._tabnp = [np.asarray(<int64_t[:self.prog.dims[d]]>self.tabs[d])
                           if self.prog.dims[d] else np.zeros(0, np.int64)
                           for d in range(rank)]
        keep = []
        for d in range(rank):
            a = axes[d]
            sel = np.arange(*a, dtype=np.intp) if type(a) is tuple else \
                np.array([a], dtype=np.intp)
            tab = np.ascontiguousarray(self._tabnp[d][sel] * unit, dtype=np.int64)
            keep.append(tab)
            tptrs[d] = <int64_t*>cnp.PyArray_DATA(tab)
            dims[d] = len(sel)
        if block is None:
            sub = np.empty(tuple(dims[d] for d in range(rank)), dtype=self._dtype)
        else:
            sub = block
        phys.prog = NULL
        phys.tabs = tptrs
        phys.itemsize = self.di.itemsize
        phys.packed_bits = self.di.packed_bits
        phys.minor_dim = -1
        side_from_ndarray(&arr_side, sub)
        self._pin()
        try:
            phys.base = self.data
            if block is None:
                with nogil:
                    copy_sides(&arr_side, &phys, dims, rank, self.di.mask)
                if self.di.kind == K_BOOL and not self.di.packed_bits:
                    with nogil:
                        dirty = bytes_above_one(phys.base, self.nbytes_phys)
            else:
                with nogil:
                    copy_sides(&phys, &arr_side, dims, rank, self.di.mask)
        finally:
            self._unpin()
        if dirty:
            bool_array_fix(sub)
        return sub

    cdef int _store_slow(self, int64_t off, object value) except -1:
        """Store through a one-element numpy array: exactly numpy's rules."""
        cdef cnp.ndarray tmp
        cdef uint8_t elem[16]
        if self._tmp is None:
            self._tmp = np.zeros((), dtype=self._dtype)
        tmp = self._tmp
        if isinstance(value, LayoutArray):
            # numpy stores an array value by casting it (a 0-d ndarray as
            # numpy's own assignment casts it: u16 <- f8 -2.0 is 65534), not
            # through the element type's conversion of a Python object
            value = (<LayoutArray>value).to_numpy()
        try:
            tmp[()] = value            # may run the value's Python code
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)
        memcpy(elem, cnp.PyArray_DATA(tmp), self.di.itemsize)
        if self.released:              # ... which may have released us
            self._dead()
        if self.di.kind == K_BOOL:
            elem[0] = elem[0] != 0
        if self.di.value_bits < 8 or self.di.packed_bits:
            store_code(&self.di, self.data, off, elem[0])
        else:
            memcpy(self.data + off * self.di.itemsize, elem, self.di.itemsize)
        return 0

    # -- whole-array operations --------------------------------------------
    def fill(self, value):
        """Set every logical element to ``value`` (numpy's conversion);
        padding slots keep ``padding_value``."""
        self._check_writable()
        if self.di.kind == K_BOOL and not isinstance(value, (bool, np.bool_, int, float)):
            # numpy packs one PRED element from any object by its truth value
            # (a.fill([1, 2]) is True): its own 0-d fill says what it gives
            probe = np.zeros((), np.bool_)
            try:
                probe.fill(value)
            except _CONVERSION_ERRORS as e:
                _reraise_family(e)
            value = bool(probe)
        elem = self._encode(value, "fill value")    # may run the value's Python code
        # (both pin: they raise if the value's code released the array meanwhile)
        if self.comp.has_padding:
            self._fill_logical(elem)
        else:
            # every slot (every bit, for packed types) is an element: the
            # whole buffer in one sequential pass, which also writes a fresh
            # calloc'd buffer without reading it first
            self._fill_bytes_with(elem)

    def copy(self):
        """A new, writable LayoutArray with the same shape and bytes (padding
        too; PRED bytes as 0/1)."""
        cdef LayoutArray la
        cdef char* src
        self._check_alive()
        la = LayoutArray.__new__(LayoutArray)
        la._setup(self._plan)
        la._allocate()
        self._pin()
        try:
            src = self.data
            with nogil:
                memcpy(la.data, src, self.nbytes_phys)
        finally:
            self._unpin()
        if la.di.kind == K_BOOL and not la.di.packed_bits:
            with nogil:
                bytes_to_bools(la.data, la.nbytes_phys)   # PRED as 0/1
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
        la._copy_from(self)
        return la

    cdef int _copy_from(self, LayoutArray other) except -1:
        """Every logical element := other's (same dimensions and dtype, storage
        not overlapping ours): physical to physical. Pins both."""
        cdef Side dst, src
        cdef char* clean = NULL
        self._pin()
        try:
            other._pin()
            try:
                self._side(&dst)
                other._side(&src)
                if other.di.kind == K_BOOL and not other.di.packed_bits and \
                        bytes_above_one(src.base, other.nbytes_phys):
                    # PRED bytes other than 0/1 (a wrapped buffer, or a write
                    # through a view): copy from a folded copy of the storage
                    clean = <char*>malloc(max(other.nbytes_phys, 1))
                    if clean == NULL:
                        raise ShapeMemoryError(f"cannot allocate {other.nbytes_phys} bytes")
                    memcpy(clean, src.base, other.nbytes_phys)
                    bytes_to_bools(clean, other.nbytes_phys)
                    src.base = clean
                with nogil:
                    copy_sides(&dst, &src, self.prog.dims, self.prog.rank, self.di.mask)
            finally:
                other._unpin()
        finally:
            self._unpin()
            free(clean)
        return 0

    def __reduce__(self):
        self._check_alive()
        return (_rebuild, (bytes(self.physical), self._shape))

    def __repr__(self):
        if self.uninit:
            return "<uninitialized LayoutArray>"
        if not self.released:
            try:
                body = np.array2string(np.asarray(self), separator=", ", prefix="  ")
                return f"LayoutArray({self._shape},\n  {body})"
            except ReleasedArrayError:     # released by another thread meanwhile
                pass
            except XlaShapeError as e:     # values numpy cannot hold (too big a shape)
                return f"LayoutArray({self._shape}, <values not shown: {e}>)"
        return f"<released LayoutArray {self._shape}>"

    # -- numpy's protocols (the logic lives in _numpy_api.py) ---------------
    __hash__ = None       # elementwise ==, as numpy arrays (unhashable)

    @staticmethod
    def _empty(shape):
        """Internal: padding slots hold padding_value, logical elements are
        left uninitialized (the caller writes every one of them)."""
        cdef LayoutArray la = LayoutArray.__new__(LayoutArray)
        la._setup_compiled(_compiled_for_shape(shape))
        la._allocate()
        la._fill_padding(False)
        return la

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NEP 13. Elementwise ufuncs on LayoutArrays of one layout (and
        scalars) run on the physical buffers and return a LayoutArray in that
        layout; anything else gives numpy's result (see ``xlashape._numpy_api``)."""
        return _npapi.array_ufunc(self, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NEP 18: numpy functions see the logical array (numpy results);
        transposes, reshape and astype keep the layout."""
        return _npapi.array_function(self, func, types, args, kwargs)

    def __add__(self, other):
        return _npapi.binop(np.add, self, other)

    def __radd__(self, other):
        return _npapi.rbinop(np.add, self, other)

    def __iadd__(self, other):
        return _npapi.ibinop(np.add, self, other)

    def __sub__(self, other):
        return _npapi.binop(np.subtract, self, other)

    def __rsub__(self, other):
        return _npapi.rbinop(np.subtract, self, other)

    def __isub__(self, other):
        return _npapi.ibinop(np.subtract, self, other)

    def __mul__(self, other):
        return _npapi.binop(np.multiply, self, other)

    def __rmul__(self, other):
        return _npapi.rbinop(np.multiply, self, other)

    def __imul__(self, other):
        return _npapi.ibinop(np.multiply, self, other)

    def __truediv__(self, other):
        return _npapi.binop(np.true_divide, self, other)

    def __rtruediv__(self, other):
        return _npapi.rbinop(np.true_divide, self, other)

    def __itruediv__(self, other):
        return _npapi.ibinop(np.true_divide, self, other)

    def __floordiv__(self, other):
        return _npapi.binop(np.floor_divide, self, other)

    def __rfloordiv__(self, other):
        return _npapi.rbinop(np.floor_divide, self, other)

    def __ifloordiv__(self, other):
        return _npapi.ibinop(np.floor_divide, self, other)

    def __mod__(self, other):
        return _npapi.binop(np.remainder, self, other)

    def __rmod__(self, other):
        return _npapi.rbinop(np.remainder, self, other)

    def __imod__(self, other):
        return _npapi.ibinop(np.remainder, self, other)

    def __divmod__(self, other):
        return _npapi.binop(np.divmod, self, other)

    def __rdivmod__(self, other):
        return _npapi.rbinop(np.divmod, self, other)

    def __pow__(self, other, mod=None):
        return _npapi.power(self, other, mod)

    def __rpow__(self, other, mod=None):
        if mod is not None:
            return NotImplemented
        return _npapi.rbinop(np.power, self, other)

    def __ipow__(self, other):
        return _npapi.ipower(self, other)

    def __matmul__(self, other):
        return _npapi.binop(np.matmul, self, other)

    def __rmatmul__(self, other):
        return _npapi.rbinop(np.matmul, self, other)

    def __imatmul__(self, other):
        return _npapi.ibinop(np.matmul, self, other)

    def __and__(self, other):
        return _npapi.binop(np.bitwise_and, self, other)

    def __rand__(self, other):
        return _npapi.rbinop(np.bitwise_and, self, other)

    def __iand__(self, other):
        return _npapi.ibinop(np.bitwise_and, self, other)

    def __or__(self, other):
        return _npapi.binop(np.bitwise_or, self, other)

    def __ror__(self, other):
        return _npapi.rbinop(np.bitwise_or, self, other)

    def __ior__(self, other):
        return _npapi.ibinop(np.bitwise_or, self, other)

    def __xor__(self, other):
        return _npapi.binop(np.bitwise_xor, self, other)

    def __rxor__(self, other):
        return _npapi.rbinop(np.bitwise_xor, self, other)

    def __ixor__(self, other):
        return _npapi.ibinop(np.bitwise_xor, self, other)

    def __lshift__(self, other):
        return _npapi.binop(np.left_shift, self, other)

    def __rlshift__(self, other):
        return _npapi.rbinop(np.left_shift, self, other)

    def __ilshift__(self, other):
        return _npapi.ibinop(np.left_shift, self, other)

    def __rshift__(self, other):
        return _npapi.binop(np.right_shift, self, other)

    def __rrshift__(self, other):
        return _npapi.rbinop(np.right_shift, self, other)

    def __irshift__(self, other):
        return _npapi.ibinop(np.right_shift, self, other)

    def __eq__(self, other):
        return _npapi.compare(np.equal, self, other)

    def __ne__(self, other):
        return _npapi.compare(np.not_equal, self, other)

    def __lt__(self, other):
        return _npapi.compare(np.less, self, other)

    def __le__(self, other):
        return _npapi.compare(np.less_equal, self, other)

    def __gt__(self, other):
        return _npapi.compare(np.greater, self, other)

    def __ge__(self, other):
        return _npapi.compare(np.greater_equal, self, other)

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return np.positive(self)

    def __abs__(self):
        return np.absolute(self)

    def __invert__(self):
        return np.invert(self)

    def __contains__(self, value):
        """numpy's rule: ``(self == value).any()``, with ``==``'s fallbacks
        (``'a' in f32_array`` is False, not a missing-loop error)."""
        res = self == value
        try:
            return bool(np.asarray(res).any())
        except _CONVERSION_ERRORS as e:
            _reraise_family(e)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    # -- views -------------------------------------------------------------
    @property
    def T(self):
        """The transpose, zero-copy: a LayoutArray on the same storage whose
        ``minor_to_major`` is permuted (tiles apply to the same physical
        dimensions). Writes through either one show in the other."""
        return _npapi.transpose(self, ())

    def transpose(self, *axes):
        """``la.transpose()``, ``la.transpose(1, 0, 2)`` or
        ``la.transpose((1, 0, 2))``: a zero-copy view with the dimensions
        permuted, as numpy's. The storage cannot be released while it lives.

        >>> la = LayoutArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3),
        ...                             "s32[2,3]{1,0:T(2,2)}")
        >>> t = la.transpose()
        >>> t.xla_shape.to_string(), t[2, 1]
        ('s32[3,2]{0,1:T(2,2)}', 5)
        """
        return _npapi.transpose(self, axes)

    def swapaxes(self, axis1, axis2):
        """Two dimensions swapped: a zero-copy view, as ``transpose``."""
        return _npapi.swapaxes(self, axis1, axis2)

    def reshape(self, *shape, order="C", copy=None):
        """The same elements in new dimensions (numpy's ``reshape``).

        A zero-copy view (a LayoutArray on the same storage) when some
        layout of the new dimensions keeps every element where it is: the
        dimensions tiles touch stay as they are and the others split or
        merge as a strided array would. Otherwise a copy in the default
        row-major layout (``copy=False`` raises instead; ``copy=True``
        always copies).

        >>> la = LayoutArray("f32[4,8,128]{2,1,0:T(8,128)}")
        >>> v = la.reshape(2, 2, 8, 128)
        >>> v.xla_shape.to_string(), v.base is la
        ('f32[2,2,8,128]{3,2,1,0:T(8,128)}', True)
        """
        return _npapi.reshape(self, shape, order, copy)

    def ravel(self, order="C"):
        """``reshape(-1)``: a zero-copy view when possible, else a copy."""
        return _npapi.reshape(self, (-1,), order, None)

    def flatten(self, order="C"):
        """A 1-D copy (a LayoutArray in the default layout)."""
        return _npapi.reshape(self, (-1,), order, True)

    @property
    def base(self):
        """The LayoutArray this one is a view of (``T``, ``transpose``,
        ``reshape``), the buffer object it wraps (``frombuffer``), or None
        when it owns its storage."""
        if not self.has_view:
            return None
        obj = <object>self.view.obj
        if isinstance(obj, memoryview) and isinstance(obj.obj, _PhysicalExporter):
            return (<_PhysicalExporter>obj.obj).owner
        return obj

    # -- numpy-style methods -------------------------------------------------
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        """The values converted to ``dtype`` (numpy's rules), in the same layout.

        A new LayoutArray when ``dtype`` is an XLA element type (``E(n)`` and
        ``padding_value`` kept where the new type allows), converted
        directly between the physical buffers; a numpy array otherwise.
        ``copy=False`` returns this array itself when the dtype is unchanged.
        """
        return _npapi.astype(self, dtype, order, casting, subok, copy)

    def tolist(self):
        """The logical array as nested Python lists (numpy's ``tolist``)."""
        return _np_new(lambda: np.asarray(self).tolist())

    def item(self, *args):
        """One element as a Python scalar: ``item()`` (size 1), ``item(flat)``
        or ``item(i, j, ...)``, read straight from the buffer."""
        return _npapi.item(self, args)

    def sum(self, *args, **kwargs):
        """``np.sum`` of the logical array (a numpy result)."""
        return np.sum(self, *args, **kwargs)

    def prod(self, *args, **kwargs):
        return np.prod(self, *args, **kwargs)

    def min(self, *args, **kwargs):
        return np.min(self, *args, **kwargs)

    def max(self, *args, **kwargs):
        return np.max(self, *args, **kwargs)

    def mean(self, *args, **kwargs):
        return np.mean(self, *args, **kwargs)

    def std(self, *args, **kwargs):
        return np.std(self, *args, **kwargs)

    def var(self, *args, **kwargs):
        return np.var(self, *args, **kwargs)

    def any(self, *args, **kwargs):
        return np.any(self, *args, **kwargs)

    def all(self, *args, **kwargs):
        return np.all(self, *args, **kwargs)

    def argmin(self, *args, **kwargs):
        return np.argmin(self, *args, **kwargs)

    def argmax(self, *args, **kwargs):
        return np.argmax(self, *args, **kwargs)

    def cumsum(self, *args, **kwargs):
        return np.cumsum(self, *args, **kwargs)

    @property
    def strides(self):
        """numpy's byte strides of the logical array when the layout has them
        (any dimension order, legacy padding), else None (tiled layouts and
        ``E(n)``-packed sub-byte elements: no strides describe them)."""
        return self._plan.strides if self.strided else None

    @property
    def flags(self):
        """numpy-style flags; ``la.flags.writeable = False`` makes it read-only."""
        return _npapi.LayoutArrayFlags(self)

    def _set_writeable(self, bint flag):
        self._check_alive()
        if flag and self.readonly and self.has_view and self.view.readonly:
            raise ReadOnlyBufferError(
                "cannot make this LayoutArray writeable: it wraps a read-only buffer")
        self.readonly = not flag

    # -- DLPack ----------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (``np.from_dlpack(la)``, ``torch.from_dlpack(la)``,
        ``jax.dlpack.from_dlpack(la)``), zero-copy for layouts that strides
        can express.

        A tiled or packed layout raises ``BufferError`` naming the
        alternatives unless ``copy=True`` (a row-major copy, flagged as
        copied). A versioned capsule (``max_version`` (1, x)) carries the
        read-only flag; an unversioned one refuses read-only arrays. bf16 has
        a DLPack code; the f8 types need ``max_version >= (1, 1)``; the
        sub-byte types have none.
        """
        return dlpack_export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        """``(1, 0)``: kDLCPU, device 0."""
        return (1, 0)


@cython.no_gc_clear     # __releasebuffer__ needs `owner` until the last export is gone
cdef class _PhysicalExporter:
    """Exports a LayoutArray's whole physical buffer as bytes (format 'B').

    Internal: `LayoutArray.physical` is `memoryview(_PhysicalExporter(la))`.
    Holding the LayoutArray keeps its storage alive for as long as any
    memoryview or numpy array made from this object lives.
    """
    cdef LayoutArray owner
    cdef Py_ssize_t shape0
    cdef Py_ssize_t stride0

    def __cinit__(self, LayoutArray owner not None):
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



def _rows(la, n):
    for i in range(n):
        yield la[i]


def _rebuild(data, shape):
    """Unpickle: a writable LayoutArray from its physical bytes."""
    return LayoutArray.frombuffer(bytearray(data), shape)
