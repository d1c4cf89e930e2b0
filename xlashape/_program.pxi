# The compiled offset program (DESIGN.md decision 5): a LayoutPlan's ops,
# copied into C arrays once, evaluated with no Python objects.
#
# Registers 0..rank-1 hold the logical index, register `rank` is the constant
# 0, the rest are temporaries written by the ops (see xlashape/tiling.py).

from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy

cdef enum:
    MAX_RANK = 64
    MAX_REGS = 320
    MAX_OPS = 256
    MAX_OUT = 192

cdef enum:
    OPC_MULADD = 0
    OPC_DIV = 1
    OPC_MOD = 2

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


cdef object _INT64_MAX = 2 ** 63 - 1


cdef int _check_int64_fits(object plan) except -1:
    """MemoryError (not a C-level OverflowError) when a figure of the plan
    cannot be an int64: such a buffer could never be allocated or addressed."""
    limit = _INT64_MAX
    if plan.size_in_bytes > limit:
        raise MemoryError(
            f"{plan.shape} needs {plan.size_in_bytes} bytes, more than the {limit} "
            f"a 64-bit offset can address")
    if plan.element_count > limit:
        raise MemoryError(
            f"{plan.shape} needs {plan.element_count} elements (padding included), "
            f"more than the {limit} a 64-bit offset can address")
    for v in plan.out_strides:
        if not -limit <= v <= limit:
            raise MemoryError(
                f"{plan.shape} has an element stride of {v}, more than the {limit} "
                f"a 64-bit offset can address")
    for op in plan.ops:
        if not -limit - 1 <= op[4] <= limit:
            raise MemoryError(
                f"{plan.shape} needs an offset constant of {op[4]}, more than the "
                f"{limit} a 64-bit offset can address")
    return 0


cdef int program_from_plan(Program* p, object plan) except -1:
    """Fill `p` from a tiling.LayoutPlan; ValueError if it is too big."""
    cdef int i
    ops = plan.ops
    _check_int64_fits(plan)
    if plan.rank > MAX_RANK:
        raise ValueError(f"rank {plan.rank} exceeds the compiled core's limit of {MAX_RANK}")
    if len(ops) > MAX_OPS or plan.num_registers > MAX_REGS or len(plan.out_registers) > MAX_OUT:
        raise ValueError(f"layout of {plan.shape} is too complex for the compiled core "
                         f"({len(ops)} ops, {plan.num_registers} registers)")
    p.rank = plan.rank
    p.nops = len(ops)
    p.nregs = plan.num_registers
    p.nout = len(plan.out_registers)
    p.minor_dim = plan.minor_dim
    p.minor_run = plan.minor_run
    p.minor_stride = plan.minor_stride
    p.element_count = plan.element_count
    p.element_bits = plan.element_bits
    p.size_in_bytes = plan.size_in_bytes
    for i in range(p.rank):
        p.dims[i] = plan.dimensions[i]
    for i in range(p.nops):
        op = ops[i]
        p.op_code[i] = op[0]
        p.op_dst[i] = op[1]
        p.op_a[i] = op[2]
        p.op_b[i] = op[3]
        p.op_c[i] = op[4]
    for i in range(p.nout):
        p.out_reg[i] = plan.out_registers[i]
        p.out_stride[i] = plan.out_strides[i]
    return 0


cdef inline int64_t program_offset(const Program* p, const int64_t* idx) noexcept nogil:
    """Element offset of a logical index (which the caller has bounds-checked)."""
    cdef int64_t r[MAX_REGS]
    cdef int i
    cdef int64_t off = 0
    for i in range(p.rank):
        r[i] = idx[i]
    r[p.rank] = 0
    for i in range(p.nops):
        if p.op_code[i] == OPC_MULADD:
            r[p.op_dst[i]] = r[p.op_a[i]] * p.op_c[i] + r[p.op_b[i]]
        elif p.op_code[i] == OPC_DIV:
            r[p.op_dst[i]] = r[p.op_a[i]] // p.op_c[i]
        else:
            r[p.op_dst[i]] = r[p.op_a[i]] % p.op_c[i]
    for i in range(p.nout):
        off += r[p.out_reg[i]] * p.out_stride[i]
    return off


cdef class CompiledPlan:
    """A LayoutPlan's offset program in C. Internal; see xlashape.tiling."""

    cdef Program prog
    cdef readonly object plan

    def __cinit__(self, plan):
        self.plan = plan
        program_from_plan(&self.prog, plan)

    def offset(self, index):
        """Offset of an already-validated index (for tests)."""
        cdef int64_t idx[MAX_RANK]
        cdef int i
        if len(index) != self.prog.rank:
            raise IndexError(f"index has {len(index)} entries, expected {self.prog.rank}")
        for i in range(self.prog.rank):
            idx[i] = index[i]
            if idx[i] < 0 or idx[i] >= self.prog.dims[i]:
                raise IndexError(f"index {idx[i]} is out of bounds for axis {i} "
                                 f"with size {self.prog.dims[i]}")
        return program_offset(&self.prog, idx)
