# cython: language_level=3
"""xlashape's compiled core: offset programs, vectorized index maps, LayoutArray.

Split by concern into .pxi files:
  _program.pxi  the compiled offset program (shared by everything below)
  _offsets.pxi  vectorized linear_index / multidimensional_index
  _array.pxi    LayoutArray
"""

include "_program.pxi"
include "_offsets.pxi"
include "_array.pxi"
