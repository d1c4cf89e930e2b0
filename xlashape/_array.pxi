# LayoutArray (placeholder: being written)
cdef class LayoutArray:
    pass
