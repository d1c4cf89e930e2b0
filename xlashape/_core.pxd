# C declarations of xlashape._core, shared by its .pxi files: the limits of
# the compiled programs, the C instruction set they run, and the structs that
# several files pass around (Program, InvProgram, BlockOp, DInfo, Side).
#
# The offset program itself is defined once, in Python, by
# xlashape.tiling.LayoutPlan (its opcodes are tiling.OP_MULADD, OP_DIV, OP_MOD
# and OP_CHECK); program_from_plan / inverse_from_plan (_program.pxi,
# _offsets.pxi) translate each op into the C codes below, which never need to
# equal the Python ones.

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint64_t


cdef extern from "Python.h":
    object PyBool_FromLong(long v)
    object PyLong_FromLongLong(long long v)
    object PyLong_FromUnsignedLongLong(unsigned long long v)
    object PyFloat_FromDouble(double v)
    object PyComplex_FromDoubles(double re, double im)
    bint PyLong_CheckExact(object o)
    bint PyFloat_CheckExact(object o)
    bint PyBool_Check(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    double PyFloat_AS_DOUBLE(object o)
    double PyLong_AsDouble_noexc "PyLong_AsDouble" (object o) noexcept
    PyObject* PyErr_Occurred() noexcept
    void PyErr_Clear() noexcept
    # Borrowed-pointer variants for the scalar index path (no reference counting).
    PyObject* PyTuple_GET_ITEM_PTR "PyTuple_GET_ITEM" (object t, Py_ssize_t i)
    bint PyLong_CheckExact_ptr "PyLong_CheckExact" (PyObject* o)
    long long PyLong_AsLongLongAndOverflow_ptr "PyLong_AsLongLongAndOverflow" (
        PyObject* o, int* overflow) except? -1


# -- limits of a compiled program ----------------------------------------------
cdef enum:
    MAX_RANK = 64
    MAX_REGS = 320
    MAX_OPS = 256
    MAX_OUT = 192
    MAX_INV_REGS = 65536


# -- the C instruction set -----------------------------------------------------
# Each op is (code, dst, a, b, c) over int64 registers r[]:
cdef enum:
    OPC_MULADD = 0   # r[dst] = r[a] * c + r[b]
    OPC_DIV = 1      # r[dst] = r[a] // c
    OPC_MOD = 2      # r[dst] = r[a] % c
    OPC_CHECK = 3    # inverse programs: the slot is padding unless r[a] < c
    OPC_SHR = 4      # r[dst] = r[a] >> c: DIV by 2**c (registers are >= 0)
    OPC_AND = 5      # r[dst] = r[a] & c: MOD by c + 1, a power of two


# A LayoutPlan's forward program (logical index -> element offset). Registers
# 0..rank-1 hold the logical index, register `rank` the constant 0, the rest
# are temporaries; offset = sum(r[out_reg[i]] * out_stride[i]).
cdef struct Program:
    int rank
    int nops
    int nregs
    int nout
    int minor_dim          # logical dim of the bulk runs (-1 for scalars)
    int64_t minor_run      # run length promised by the plan (1 = none)
    int64_t minor_stride   # element stride inside a run
    int64_t element_count  # elements in the buffer incl. padding
    int64_t element_bits
    int64_t size_in_bytes
    int64_t dims[MAX_RANK]
    int64_t op_code[MAX_OPS]
    int64_t op_dst[MAX_OPS]
    int64_t op_a[MAX_OPS]
    int64_t op_b[MAX_OPS]
    int64_t op_c[MAX_OPS]
    int64_t out_reg[MAX_OUT]
    int64_t out_stride[MAX_OUT]


# A LayoutPlan's inverse program (element offset -> logical index or padding).
# Register 0 holds the offset, register 1 the constant 0.
cdef struct InvProgram:
    int rank
    int nops
    int nregs
    int64_t element_count
    int64_t* op_code       # nops entries each, malloc'ed (freed by IndexMaps)
    int64_t* op_dst
    int64_t* op_a
    int64_t* op_b
    int64_t* op_c
    int64_t out_reg[MAX_RANK]


# One op as the block evaluator runs it (power-of-two DIV/MOD already turned
# into OPC_SHR / OPC_AND).
cdef struct BlockOp:
    int code
    int dst
    int a
    int b
    int64_t c


# -- element types (_dtypes.pxi) -----------------------------------------------
cdef enum:
    K_BOOL = 0
    K_SINT = 1
    K_UINT = 2
    K_F16 = 3
    K_BF16 = 4
    K_F32 = 5
    K_F64 = 6
    K_TABLE = 7     # floats of 8 bits or fewer: table lookup
    K_C64 = 8
    K_C128 = 9

cdef enum:
    MAX_TABLES = 16

cdef struct DInfo:
    int kind
    int itemsize      # numpy itemsize (bytes of one element on the numpy side)
    int value_bits    # the type's bit width (1, 2, 4, 8, 16, ...)
    int packed_bits   # 0: byte-addressable storage; else E(n) = n bits per element
    uint64_t mask     # (1 << value_bits) - 1 for sub-byte types
    const double* table


# -- one side of a bulk copy (_kernels.pxi) ------------------------------------
cdef struct Side:
    char* base
    const Program* prog     # NULL: a strided side
    int64_t** tabs          # per-dim offset tables of a separable program, or NULL
    int64_t itemsize        # bytes per element (byte-addressable sides)
    int packed_bits         # n for E(n)-packed elements (prog sides only), else 0
    int minor_dim           # the dimension along which runs are longest
    int64_t bstride[MAX_RANK]   # byte strides of a strided side


# -- the hand-written C kernels (_kernels.h, _kernels.c) -----------------------
# The byte-moving inner loops of the bulk copies; _kernels.pxi drives them.
cdef extern from "_kernels.h" nogil:
    void xs_prefetch(const char* p) noexcept
    void xs_prefetch_span(const char* p, int64_t n) noexcept
    void xs_copy(char* d, const char* s, int64_t n, int stream) noexcept
    void xs_store_fence() noexcept
    void xs_row_run(char* d, const char* s, int64_t L, const char* prev_end,
                    int defer) noexcept
    void xs_zip(char* d, const char** rows, int64_t ss, int64_t n, int k,
                int64_t isz, int stream) noexcept
    void xs_unzip(char** rows, int64_t ds, const char* s, int64_t n, int k,
                  int64_t isz, int stream) noexcept
    void xs_unzip_direct(char** rows, int64_t ds, const char* s, int64_t n, int k,
                         int64_t isz) noexcept
    ctypedef struct xs_dimoff:
        const int64_t* tab
        int64_t scale
    ctypedef int64_t (*xs_addr_fn)(void* ctx, int64_t a, int64_t b) noexcept nogil
    ctypedef struct xs_plane:
        xs_dimoff A
        xs_dimoff B
        xs_addr_fn fn
        void* ctx
    void xs_band_runs(char* dbase, const int64_t* rd, xs_dimoff dD, int64_t wd,
                      const char* sbase, const int64_t* rs, xs_dimoff sD, int64_t ws,
                      int nb, int64_t n, int64_t isz, int stream) noexcept
    void xs_transpose_plane(char* dbase, const xs_plane* dp, const char* sbase,
                            const xs_plane* sp, int64_t na, int64_t wsa, int64_t ssa,
                            int64_t nbd, int64_t wdb, int64_t sdb, int64_t isz, int64_t R,
                            int64_t C, int stream, int64_t b_begin, int64_t b_end,
                            char* buf) noexcept
    void xs_transpose_plane2(char* dbase, const xs_plane* dp, const char* sbase,
                             const xs_plane* sp, int64_t na, int64_t wsa, int64_t ssa,
                             int64_t nbd, int64_t wdb, int64_t sdb, int64_t isz, int64_t R,
                             int64_t C, int stream) noexcept
