"""HLO text for shapes and layouts (placeholder: being written)."""
def parse_shape(text):
    raise NotImplementedError("parse_shape is being written")
def parse_layout(text):
    raise NotImplementedError("parse_layout is being written")
