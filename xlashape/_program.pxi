# The compiled offset program: a LayoutPlan's ops (xlashape/tiling.py),
# copied into C arrays once and evaluated with no Python objects. The structs,
# limits and C op codes are declared in _core.pxd.

from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy

from xlashape import tiling as _tiling_ops
from xlashape._base import INT64_MAX as _INT64_MAX, check_index as _check_index
from xlashape.errors import (InvalidShapeError as _InvalidShapeError,
                             ShapeMemoryError as _ShapeMemoryError)

# The plan's opcodes (defined once, in tiling.py) and the C code of each.
_C_OPCODES = {
    _tiling_ops.OP_MULADD: OPC_MULADD,
    _tiling_ops.OP_DIV: OPC_DIV,
    _tiling_ops.OP_MOD: OPC_MOD,
    _tiling_ops.OP_CHECK: OPC_CHECK,
}


cdef int64_t c_opcode(object op) except -1:
    """The C code (OPC_*) of one of the plan's opcodes (tiling.OP_*)."""
    try:
        return _C_OPCODES[op]
    except KeyError:
        raise ValueError(f"unknown offset-program opcode {op!r}") from None


cdef int _check_int64_fits(object plan) except -1:
    """ShapeMemoryError, a MemoryError (not a C-level OverflowError), when a figure of the plan
    cannot be an int64: such a buffer could never be allocated or addressed."""
    limit = _INT64_MAX
    if plan.size_in_bytes > limit:
        raise _ShapeMemoryError(
            f"{plan.shape} needs {plan.size_in_bytes} bytes, more than the {limit} "
            f"a 64-bit offset can address")
    if plan.element_count > limit:
        raise _ShapeMemoryError(
            f"{plan.shape} needs {plan.element_count} elements (padding included), "
            f"more than the {limit} a 64-bit offset can address")
    for v in plan.out_strides:
        if not -limit <= v <= limit:
            raise _ShapeMemoryError(
                f"{plan.shape} has an element stride of {v}, more than the {limit} "
                f"a 64-bit offset can address")
    for op in plan.ops:
        if not -limit - 1 <= op[4] <= limit:
            raise _ShapeMemoryError(
                f"{plan.shape} needs an offset constant of {op[4]}, more than the "
                f"{limit} a 64-bit offset can address")
    return 0


cdef int program_from_plan(Program* p, object plan) except -1:
    """Fill `p` from a tiling.LayoutPlan; InvalidShapeError (a ValueError) if it
    is too big for the compiled core."""
    cdef int i
    ops = plan.ops
    _check_int64_fits(plan)
    if plan.rank > MAX_RANK:
        raise _InvalidShapeError(f"rank {plan.rank} exceeds the compiled core's limit of {MAX_RANK}")
    if len(ops) > MAX_OPS or plan.num_registers > MAX_REGS or len(plan.out_registers) > MAX_OUT:
        raise _InvalidShapeError(f"layout of {plan.shape} is too complex for the compiled core "
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
        p.op_code[i] = c_opcode(op[0])
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
        """Offset of one logical index, bounds-checked (for tests)."""
        cdef int64_t idx[MAX_RANK]
        cdef int i
        index = _check_index(index, self.plan.shape)
        for i in range(self.prog.rank):
            idx[i] = index[i]
        return program_offset(&self.prog, idx)
