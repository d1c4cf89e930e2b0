"""What an allocation holds: one vocabulary and one rule for every reader and view.

XLA's buffer assignment flags each allocation (``BufferAllocation`` in
``buffer_assignment.h``): an entry computation parameter, ``maybe-live-out``
(it may hold an output), ``thread-local``, ``constant``; an allocation with
none of these flags holds the program's temporaries
(``IsPreallocatedTempBuffer``). XProf's memory viewer groups allocations the
same way. :func:`kind_of` is that rule, applied to the flags of any record
(the text buffer assignment, the ``BufferAssignmentProto``, the peak's
buffers), so a ``--json`` document, the page and the terminal call one buffer
by one name:

- ``parameter``: an entry parameter's buffer (also when an output reuses it);
- ``output``: may hold part of the program's result;
- ``temporary``: a temporary allocation (XLA's "preallocated temp" buffer);
- ``thread-local``: scratch of computations run inside one instruction;
- ``constant``: a literal of the program.

A TPU out-of-memory report lists allocations by its own types:
:data:`OOM_REPORT_KINDS` maps them (its "HLO temp" is ``temporary``;
``scoped``, ``global`` and ``overlays`` are libtpu's own and keep their names).

>>> class A:
...     is_entry_computation_parameter, maybe_live_out, is_thread_local, is_constant = False, True, False, False
>>> kind_of(A())
'output'
"""

from typing import Optional

__all__ = ["PARAMETER", "OUTPUT", "TEMPORARY", "THREAD_LOCAL", "CONSTANT", "OTHER", "KINDS",
           "OOM_REPORT_KINDS", "kind_of", "is_indefinite", "oom_report_kind",
           "LIBRARY_TARGETS", "library_of", "workspace_of"]

PARAMETER = "parameter"
OUTPUT = "output"
TEMPORARY = "temporary"
THREAD_LOCAL = "thread-local"
CONSTANT = "constant"
#: what an out-of-memory report or a memory-usage report lists without saying
OTHER = "other"

#: the kinds of a buffer assignment's allocations, in this order
KINDS = (PARAMETER, OUTPUT, TEMPORARY, THREAD_LOCAL, CONSTANT)

#: a TPU out-of-memory report's allocation types (lower case) -> kind
OOM_REPORT_KINDS = {"hlo temp": TEMPORARY, "scoped": "scoped", "global": "global",
                    "overlays": "overlays"}


def kind_of(allocation) -> str:
    """The kind of an allocation from its flags: any object with
    ``is_entry_computation_parameter``, ``maybe_live_out``,
    ``is_thread_local`` and ``is_constant`` (a buffer assignment's record,
    text or proto)."""
    if allocation.is_entry_computation_parameter:
        return PARAMETER
    if allocation.maybe_live_out:
        return OUTPUT
    if allocation.is_thread_local:
        return THREAD_LOCAL
    if allocation.is_constant:
        return CONSTANT
    return TEMPORARY


def is_indefinite(allocation) -> bool:
    """Lives for the whole program (XProf's ``IsIndefinite``): a parameter,
    an output, a constant or thread-local scratch."""
    return kind_of(allocation) != TEMPORARY


def oom_report_kind(label: Optional[str], allocation_type: Optional[str], section: str) -> str:
    """The kind of an allocation listed in a TPU out-of-memory report: in its
    "arguments and outputs" section by its label (``Argument ...`` /
    ``Output ...``), elsewhere by its allocation type."""
    if section == "arguments and outputs":
        label = label or ""
        return (PARAMETER if label.startswith("Argument") else
                OUTPUT if label.startswith("Output") else OTHER)
    at = (allocation_type or "").strip().lower()
    return OOM_REPORT_KINDS.get(at, at or OTHER)


#: the custom-call targets of the NVIDIA libraries XLA:GPU calls with a
#: workspace (their prefix -> the library's name): XLA's gemm rewriter appends
#: an ``s8[N]`` workspace to a cuBLAS call's result tuple, the cuDNN rewriters a
#: ``u8[N]`` scratch buffer (``__cublas$lt$matmul``, ``__cublas$gemm``,
#: ``__cublas$triangularSolve``, ``__cudnn$convForward``, ``__cudnn$fmhaSoftmax``...)
LIBRARY_TARGETS = {"__cublas$": "cuBLAS", "__cudnn$": "cuDNN"}


def library_of(target: Optional[str]) -> Optional[str]:
    """``cuBLAS`` / ``cuDNN`` for a custom-call target of that library, else ``None``.

    >>> library_of("__cublas$lt$matmul"), library_of("__cudnn$fmhaSoftmax"), library_of("foo")
    ('cuBLAS', 'cuDNN', None)
    """
    if target:
        for prefix, name in LIBRARY_TARGETS.items():
            if target.startswith(prefix):
                return name
    return None


def workspace_of(target: Optional[str], index, arity: Optional[int], shape) -> Optional[str]:
    """The library (``cuBLAS`` / ``cuDNN``) whose workspace a value is, else
    ``None``: the value at ``index`` of the result of a custom call to
    ``target`` (a tuple of ``arity`` elements) is its last element, an array
    of bytes (``s8`` / ``u8``, one dimension: a :class:`~xlashape.Shape`)."""
    lib = library_of(target)
    if lib is None or arity is None or arity < 2 or tuple(index or ()) != (arity - 1,):
        return None
    if shape is None or not shape.is_array or len(shape.dimensions) != 1:
        return None
    return lib if str(shape.element_type).lower() in ("s8", "u8") else None
