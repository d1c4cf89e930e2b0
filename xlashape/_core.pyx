# cython: language_level=3
"""xlashape's compiled core: offset programs, vectorized index maps, LayoutArray.

Split by concern into .pxi files:
  _program.pxi  the compiled offset program (shared by everything below)
  _offsets.pxi  vectorized linear_index / multidimensional_index
  _dtypes.pxi   element types: storage, scalar load/store
  _kernels.pxi  bulk pack/unpack/relayout/fill kernels (their C loops:
                _kernels.c / _kernels.h, declared in _core.pxd)
  _array.pxi    LayoutArray
  _dlpack.pxi   DLPack export of LayoutArray
"""

include "_program.pxi"
include "_offsets.pxi"
include "_dtypes.pxi"
include "_kernels.pxi"
include "_array.pxi"
include "_dlpack.pxi"
