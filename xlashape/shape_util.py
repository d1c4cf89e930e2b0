"""ShapeUtil (placeholder: being written)."""
def _todo(*a, **k):
    raise NotImplementedError
make_shape = make_shape_with_dense_layout = make_shape_with_descending_layout = _todo
make_scalar_shape = make_tuple_shape = make_token_shape = make_opaque_shape = _todo
make_buffer_shape = validate_shape = byte_size_of = _todo
