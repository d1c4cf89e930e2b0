"""The integer limits of XLA's fields: sizes, strides, offsets and dimensions
are int64, and the shape lexer reads uint64. One definition, for the
library and for the command line (which checks its integer arguments
against them before anything else is loaded)."""

__all__ = ["INT64_MIN", "INT64_MAX", "UINT64_MAX"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
