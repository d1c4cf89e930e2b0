# Vectorized index maps: millions of logical indices <-> element offsets.
#
# The forward map runs the plan's offset program (LayoutPlan.ops, compiled by
# program_from_plan in _program.pxi, the same program program_offset runs for
# single offsets); the inverse map runs the plan's inverse program
# (LayoutPlan.inverse_ops, see xlashape/tiling.py). Both are evaluated 256
# rows at a time, one op over a column of registers, with power-of-two
# DIV/MOD as shifts and masks; the loops hold no Python objects and release
# the GIL. Every input of a block is bounds-checked before the block is
# computed, and the output array is only returned when every row was valid:
# a bad row raises IndexError naming the row, the axis and the size.

import numpy as np

from xlashape.errors import ShapeIndexError as _ShapeIndexError

from libc.stdint cimport uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset

cdef enum:
    BLOCK = 256        # rows evaluated together, one op at a time


cdef inline int _log2_exact(int64_t c) noexcept nogil:
    """k if c == 2**k (c >= 1), else -1."""
    cdef int k = 0
    if c <= 0 or (c & (c - 1)) != 0:
        return -1
    while (<int64_t>1 << k) != c:
        k += 1
    return k


cdef inline void _block_op(const BlockOp* op, int64_t* regs, int64_t n,
                           uint8_t* pad) noexcept nogil:
    """Apply one op to the first n rows of a block of column registers."""
    cdef int64_t* d = regs + <Py_ssize_t>op.dst * BLOCK
    cdef const int64_t* x = regs + <Py_ssize_t>op.a * BLOCK
    cdef const int64_t* y = regs + <Py_ssize_t>op.b * BLOCK
    cdef int64_t c = op.c
    cdef int64_t i
    if op.code == OPC_MULADD:
        for i in range(n):
            d[i] = x[i] * c + y[i]
    elif op.code == OPC_SHR:
        for i in range(n):
            d[i] = x[i] >> c
    elif op.code == OPC_AND:
        for i in range(n):
            d[i] = x[i] & c
    elif op.code == OPC_DIV:
        for i in range(n):
            d[i] = x[i] // c
    elif op.code == OPC_MOD:
        for i in range(n):
            d[i] = x[i] % c
    else:
        for i in range(n):
            pad[i] |= x[i] >= c


cdef int _to_block_ops(BlockOp* out, int nops, const int64_t* code, const int64_t* dst,
                       const int64_t* a, const int64_t* b, const int64_t* c) noexcept nogil:
    """Translate program ops, turning power-of-two DIV/MOD into shifts and masks."""
    cdef int i, k
    for i in range(nops):
        out[i].dst = <int>dst[i]
        out[i].a = <int>a[i]
        out[i].b = <int>b[i]
        out[i].c = c[i]
        if code[i] == OPC_MULADD:
            out[i].code = OPC_MULADD
        elif code[i] == OPC_DIV or code[i] == OPC_MOD:
            k = _log2_exact(c[i])
            if k < 0:
                out[i].code = OPC_DIV if code[i] == OPC_DIV else OPC_MOD
            elif code[i] == OPC_DIV:
                out[i].code = OPC_SHR
                out[i].c = k
            else:
                out[i].code = OPC_AND
                out[i].c = c[i] - 1
        else:
            out[i].code = OPC_CHECK
    return 0


cdef int inverse_from_plan(InvProgram* p, object plan) except -1:
    """Fill `p` from a LayoutPlan's inverse program (allocating its op arrays);
    InvalidShapeError (a ValueError) if it is too big."""
    cdef int i
    cdef Py_ssize_t nops
    ops = plan.inverse_ops
    if plan.rank > MAX_RANK:
        raise _InvalidShapeError(f"rank {plan.rank} exceeds the compiled core's limit of {MAX_RANK}")
    if plan.inverse_num_registers > MAX_INV_REGS:
        raise _InvalidShapeError(f"layout of {plan.shape} is too complex for the compiled core "
                                 f"(inverse: {len(ops)} ops, {plan.inverse_num_registers} registers)")
    if plan.element_count == 0:
        # no offset is in range, so the program never runs (and a zero-size
        # shape's constants may be beyond int64)
        ops = ()
    for op in ops:
        if not -_INT64_MAX - 1 <= op[4] <= _INT64_MAX:
            raise _ShapeMemoryError(
                f"{plan.shape} needs an offset constant of {op[4]} in its inverse map, "
                f"more than the {_INT64_MAX} a 64-bit offset can address")
    nops = len(ops)
    p.rank = plan.rank
    p.nops = <int>nops
    p.nregs = plan.inverse_num_registers
    p.element_count = plan.element_count
    p.op_code = <int64_t*>malloc(sizeof(int64_t) * 5 * (nops + 1))
    if p.op_code == NULL:
        raise _ShapeMemoryError("cannot allocate the index maps' working memory")
    p.op_dst = p.op_code + (nops + 1)
    p.op_a = p.op_dst + (nops + 1)
    p.op_b = p.op_a + (nops + 1)
    p.op_c = p.op_b + (nops + 1)
    for i in range(p.nops):
        op = ops[i]
        p.op_code[i] = c_opcode(op[0])
        p.op_dst[i] = op[1]
        p.op_a[i] = op[2]
        p.op_b[i] = op[3]
        p.op_c[i] = op[4]
    for i in range(p.rank):
        p.out_reg[i] = plan.inverse_out_registers[i]
    return 0


cdef class IndexMaps:
    """A LayoutPlan's forward and inverse programs in C, for bulk index maps.

    The forward program is the plan's offset program exactly as
    ``program_from_plan`` (``_program.pxi``) compiles it for single offsets;
    here it is evaluated 256 rows at a time, one op over a whole column of
    registers at a time (the loops vectorize), with power-of-two DIV/MOD as
    shifts and masks (valid: every register is >= 0 once indices are checked).

    Internal: use :func:`xlashape.tiling.linear_indices` and
    :func:`xlashape.tiling.multidimensional_indices`, which validate their
    arguments and call these.
    """

    cdef Program prog
    cdef InvProgram inv
    cdef BlockOp* fwd_ops
    cdef BlockOp* inv_ops
    cdef readonly object plan

    def __cinit__(self, plan):
        self.plan = plan
        program_from_plan(&self.prog, plan)
        inverse_from_plan(&self.inv, plan)
        self.fwd_ops = <BlockOp*>malloc(sizeof(BlockOp) * (self.prog.nops + 1))
        self.inv_ops = <BlockOp*>malloc(sizeof(BlockOp) * (self.inv.nops + 1))
        if self.fwd_ops == NULL or self.inv_ops == NULL:
            raise _ShapeMemoryError("cannot allocate the index maps' working memory")
        _to_block_ops(self.fwd_ops, self.prog.nops, self.prog.op_code, self.prog.op_dst,
                      self.prog.op_a, self.prog.op_b, self.prog.op_c)
        _to_block_ops(self.inv_ops, self.inv.nops, self.inv.op_code, self.inv.op_dst,
                      self.inv.op_a, self.inv.op_b, self.inv.op_c)

    def __dealloc__(self):
        free(self.inv.op_code)
        free(self.fwd_ops)
        free(self.inv_ops)

    def offset(self, index):
        """Offset of one index via ``program_offset`` (bounds-checked; for tests)."""
        cdef int64_t idx[MAX_RANK]
        cdef int i
        index = _check_index(index, self.plan.shape)
        for i in range(self.prog.rank):
            idx[i] = index[i]
        return program_offset(&self.prog, idx)

    def linear_indices(self, const int64_t[:, ::1] indices not None):
        """(N, rank) int64 C-contiguous -> (N,) int64 element offsets."""
        cdef Py_ssize_t n = indices.shape[0]
        cdef int rank = self.prog.rank
        cdef Py_ssize_t row, start, bad_row = -1
        cdef int64_t m, i
        cdef int axis, bad_axis = -1, j
        cdef uint64_t bad
        cdef const int64_t* src
        cdef int64_t* dst
        cdef int64_t* col
        cdef int64_t* regs
        cdef uint64_t dim
        cdef int64_t stride, v
        if indices.shape[1] != rank:
            raise _ShapeIndexError(
                f"indices have {indices.shape[1]} columns but the shape has {rank} dimensions")
        out = np.zeros(n, dtype=np.int64)
        if n == 0 or rank == 0:
            return out
        cdef int64_t[::1] out_v = out
        regs = <int64_t*>malloc(sizeof(int64_t) * BLOCK * self.prog.nregs)
        if regs == NULL:
            raise _ShapeMemoryError("cannot allocate the index maps' working memory")
        try:
            with nogil:
                memset(regs, 0, sizeof(int64_t) * BLOCK * self.prog.nregs)  # r[rank] = 0
                src = &indices[0, 0]
                dst = &out_v[0]
                start = 0
                if self.prog.nops == 0:
                    # no DIV/MOD: offset = sum of index * stride, one pass over the rows
                    start = n
                    for row in range(n):
                        bad = 0
                        v = 0
                        for axis in range(rank):
                            bad |= (<uint64_t>src[row * rank + axis] >=
                                    <uint64_t>self.prog.dims[axis])
                        for j in range(self.prog.nout):
                            v = v + src[row * rank + self.prog.out_reg[j]] * self.prog.out_stride[j]
                        if bad:
                            start = 0
                            break
                        dst[row] = v
                while start < n:
                    m = n - start if n - start < BLOCK else BLOCK
                    bad = 0
                    for axis in range(rank):
                        col = regs + <Py_ssize_t>axis * BLOCK
                        dim = <uint64_t>self.prog.dims[axis]
                        for i in range(m):
                            col[i] = src[(start + i) * rank + axis]
                            bad |= (<uint64_t>col[i] >= dim)
                    if bad:
                        for row in range(start, start + m):
                            for axis in range(rank):
                                if <uint64_t>src[row * rank + axis] >= <uint64_t>self.prog.dims[axis]:
                                    bad_row = row
                                    bad_axis = axis
                                    break
                            if bad_row >= 0:
                                break
                        break
                    for j in range(self.prog.nops):
                        _block_op(&self.fwd_ops[j], regs, m, NULL)
                    for j in range(self.prog.nout):
                        col = regs + <Py_ssize_t>self.prog.out_reg[j] * BLOCK
                        stride = self.prog.out_stride[j]
                        for i in range(m):
                            dst[start + i] += col[i] * stride
                    start += m
        finally:
            free(regs)
        if bad_row >= 0:
            v = indices[bad_row, bad_axis]
            raise _ShapeIndexError(
                f"index {v} is out of bounds for axis {bad_axis} with size "
                f"{self.prog.dims[bad_axis]} (row {bad_row} of the indices)")
        return out

    def multidimensional_indices(self, const int64_t[::1] linear not None):
        """(N,) int64 offsets -> ((N, rank) int64 indices, (N,) bool padding).

        Padding rows are filled with -1.
        """
        cdef Py_ssize_t n = linear.shape[0]
        cdef int rank = self.inv.rank
        cdef Py_ssize_t row, start, bad_row = -1
        cdef int64_t m, i
        cdef int axis, j
        cdef uint64_t count = <uint64_t>self.inv.element_count
        cdef uint64_t bad
        cdef int64_t* regs
        cdef const int64_t* col
        cdef int64_t* dst
        cdef uint8_t* pad_p
        cdef const int64_t* src
        out = np.empty((n, rank), dtype=np.int64)
        pad = np.zeros(n, dtype=np.bool_)
        if n == 0:
            return out, pad
        cdef uint8_t[::1] pad_v = pad.view(np.uint8)
        cdef int64_t[:, ::1] out_v = out
        regs = <int64_t*>malloc(sizeof(int64_t) * BLOCK * self.inv.nregs)
        if regs == NULL:
            raise _ShapeMemoryError("cannot allocate the index maps' working memory")
        try:
            with nogil:
                memset(regs, 0, sizeof(int64_t) * BLOCK * self.inv.nregs)  # r[1] = 0
                src = &linear[0]
                pad_p = &pad_v[0]
                dst = &out_v[0, 0] if rank > 0 else NULL
                start = 0
                while start < n:
                    m = n - start if n - start < BLOCK else BLOCK
                    bad = 0
                    for i in range(m):
                        regs[i] = src[start + i]
                        bad |= (<uint64_t>regs[i] >= count)
                    if bad:
                        for row in range(start, start + m):
                            if <uint64_t>src[row] >= count:
                                bad_row = row
                                break
                        break
                    for j in range(self.inv.nops):
                        _block_op(&self.inv_ops[j], regs, m, pad_p + start)
                    for axis in range(rank):
                        col = regs + <Py_ssize_t>self.inv.out_reg[axis] * BLOCK
                        for i in range(m):
                            dst[(start + i) * rank + axis] = -1 if pad_p[start + i] else col[i]
                    start += m
        finally:
            free(regs)
        if bad_row >= 0:
            raise _ShapeIndexError(
                f"linear index {linear[bad_row]} is out of bounds for a buffer of "
                f"{self.inv.element_count} elements (entry {bad_row})")
        return out, pad
