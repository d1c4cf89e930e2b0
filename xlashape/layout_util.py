"""LayoutUtil (placeholder: being written)."""
def _todo(*a, **k):
    raise NotImplementedError
make_layout = make_descending_layout = make_ascending_layout = _todo
make_layout_from_major_to_minor = get_default_layout_for_rank = _todo
