# Vectorized index maps: millions of logical indices <-> element offsets.
#
# The forward map runs the plan's offset program (`program_offset`, from
# _program.pxi); the inverse map runs the plan's inverse program
# (LayoutPlan.inverse_ops, see xlashape/tiling.py), compiled here into C
# arrays the same way. Both loops hold no Python objects and release the GIL.
# Every input is bounds-checked before anything is computed, so a bad row
# raises IndexError (naming the row, the axis and the size) and no output is
# returned.

import numpy as np

from xlashape.errors import ShapeIndexError as _ShapeIndexError

cdef enum:
    MAX_INV_OPS = 1024
    MAX_INV_REGS = 1024
    OPC_CHECK = 3


cdef struct InvProgram:
    int rank
    int nops
    int nregs
    int64_t element_count
    int64_t op_code[MAX_INV_OPS]
    int64_t op_dst[MAX_INV_OPS]
    int64_t op_a[MAX_INV_OPS]
    int64_t op_b[MAX_INV_OPS]
    int64_t op_c[MAX_INV_OPS]
    int64_t out_reg[MAX_RANK]


cdef int inverse_from_plan(InvProgram* p, object plan) except -1:
    """Fill `p` from a LayoutPlan's inverse program; ValueError if too big."""
    cdef int i
    ops = plan.inverse_ops
    if plan.rank > MAX_RANK:
        raise ValueError(f"rank {plan.rank} exceeds the compiled core's limit of {MAX_RANK}")
    if len(ops) > MAX_INV_OPS or plan.inverse_num_registers > MAX_INV_REGS:
        raise ValueError(f"layout of {plan.shape} is too complex for the compiled core "
                         f"(inverse: {len(ops)} ops, {plan.inverse_num_registers} registers)")
    p.rank = plan.rank
    p.nops = len(ops)
    p.nregs = plan.inverse_num_registers
    p.element_count = plan.element_count
    for i in range(p.nops):
        op = ops[i]
        p.op_code[i] = op[0]
        p.op_dst[i] = op[1]
        p.op_a[i] = op[2]
        p.op_b[i] = op[3]
        p.op_c[i] = op[4]
    for i in range(p.rank):
        p.out_reg[i] = plan.inverse_out_registers[i]
    return 0


cdef inline bint inverse_index(const InvProgram* p, int64_t linear, int64_t* out) noexcept nogil:
    """Logical index of element offset `linear` (0 <= linear < element_count,
    checked by the caller) into `out`; returns False for a padding slot."""
    cdef int64_t r[MAX_INV_REGS]
    cdef int i
    cdef int64_t code
    r[0] = linear
    r[1] = 0
    for i in range(p.nops):
        code = p.op_code[i]
        if code == OPC_MULADD:
            r[p.op_dst[i]] = r[p.op_a[i]] * p.op_c[i] + r[p.op_b[i]]
        elif code == OPC_DIV:
            r[p.op_dst[i]] = r[p.op_a[i]] // p.op_c[i]
        elif code == OPC_MOD:
            r[p.op_dst[i]] = r[p.op_a[i]] % p.op_c[i]
        elif r[p.op_a[i]] >= p.op_c[i]:
            return False
    for i in range(p.rank):
        out[i] = r[p.out_reg[i]]
    return True


cdef class IndexMaps:
    """A LayoutPlan's forward and inverse programs in C, for bulk index maps.

    Internal: use :func:`xlashape.tiling.linear_indices` and
    :func:`xlashape.tiling.multidimensional_indices`, which validate their
    arguments and call these.
    """

    cdef Program prog
    cdef InvProgram inv
    cdef readonly object plan

    def __cinit__(self, plan):
        self.plan = plan
        program_from_plan(&self.prog, plan)
        inverse_from_plan(&self.inv, plan)

    def linear_indices(self, const int64_t[:, ::1] indices not None):
        """(N, rank) int64 C-contiguous -> (N,) int64 element offsets."""
        cdef Py_ssize_t n = indices.shape[0]
        cdef int rank = self.prog.rank
        cdef Py_ssize_t row, bad_row = -1
        cdef int axis, bad_axis = -1
        cdef int64_t v
        cdef const int64_t* src
        cdef int64_t* dst
        if indices.shape[1] != rank:
            raise _ShapeIndexError(
                f"indices have {indices.shape[1]} columns but the shape has {rank} dimensions")
        out = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] out_v = out
        if n == 0:
            return out
        with nogil:
            for row in range(n):
                src = &indices[row, 0] if rank > 0 else NULL
                for axis in range(rank):
                    v = src[axis]
                    if v < 0 or v >= self.prog.dims[axis]:
                        bad_row = row
                        bad_axis = axis
                        break
                if bad_row >= 0:
                    break
            if bad_row < 0:
                dst = &out_v[0]
                if rank == 0:
                    for row in range(n):
                        dst[row] = 0
                else:
                    for row in range(n):
                        dst[row] = program_offset(&self.prog, &indices[row, 0])
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
        cdef Py_ssize_t row, bad_row = -1
        cdef int axis
        cdef int64_t count = self.inv.element_count
        cdef int64_t v
        cdef int64_t dummy[1]
        out = np.empty((n, rank), dtype=np.int64)
        pad = np.zeros(n, dtype=np.bool_)
        cdef int64_t[:, ::1] out_v = out
        cdef uint8_t[::1] pad_v = pad.view(np.uint8)
        cdef int64_t* dst
        if n == 0:
            return out, pad
        with nogil:
            for row in range(n):
                v = linear[row]
                if v < 0 or v >= count:
                    bad_row = row
                    break
            if bad_row < 0:
                for row in range(n):
                    dst = &out_v[row, 0] if rank > 0 else dummy
                    if not inverse_index(&self.inv, linear[row], dst):
                        pad_v[row] = 1
                        for axis in range(rank):
                            dst[axis] = -1
        if bad_row >= 0:
            raise _ShapeIndexError(
                f"linear index {linear[bad_row]} is out of bounds for a buffer of "
                f"{count} elements (entry {bad_row})")
        return out, pad
