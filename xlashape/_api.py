"""The package's public names, imported all at once.

``xlashape/__init__.py`` re-exports everything listed in ``__all__`` here the
first time one of its names (or any attribute the package does not have yet)
is asked for, so that ``import xlashape`` alone, and the ``xlashape``
command's start-up (``xlashape --version``, one subcommand), import only what
they use.
"""

try:
    from . import _core
except ImportError as _e:  # pragma: no cover - only without a build
    raise ImportError(
        "xlashape's compiled core (xlashape._core) is not built: "
        f"{_e}. Install the package with `pip install .` (or `pip install -e .` "
        "in a checkout) so that the Cython extension is compiled; a C compiler "
        "and the Python headers are needed."
    ) from _e

from .errors import (
    XlaShapeError,
    HloParseError,
    InvalidShapeError,
    ShapeIndexError,
    ShapeAxisError,
    ShapeTypeError,
    ShapeBufferError,
    ReadOnlyBufferError,
    UnreadableInputError,
    ShapeValueError,
    ShapeOverflowError,
    ShapeMemoryError,
    ReleasedArrayError,
    ProtoDecodeError,
    MissingDependencyError,
)
from .primitive_types import (
    PrimitiveType,
    primitive_type_from_name,
    primitive_type_from_dtype,
)
from .layout import (
    Tile,
    SplitConfig,
    Layout,
    COMBINE_DIMENSION,
    MEMORY_SPACE_DEFAULT,
    MEMORY_SPACE_FAST,
    MEMORY_SPACE_HOST,
    memory_space_name,
)
from .shape import Shape, UNBOUNDED_SIZE
from .hlo_text import parse_shape, parse_layout
from . import shape_util, layout_util, index_util, tiling, index_maps, tpu, padding
from .shape_util import (
    make_shape,
    make_shape_with_dense_layout,
    make_shape_with_descending_layout,
    make_scalar_shape,
    make_tuple_shape,
    make_token_shape,
    make_opaque_shape,
    make_buffer_shape,
    validate_shape,
)
from .layout_util import (
    make_layout,
    make_descending_layout,
    make_ascending_layout,
    make_layout_from_major_to_minor,
    get_default_layout_for_rank,
)
from ._core import LayoutArray

__all__ = [
    "XlaShapeError", "HloParseError", "InvalidShapeError", "ShapeIndexError",
    "ShapeAxisError",
    "ShapeTypeError", "ShapeBufferError", "UnreadableInputError",
    "ShapeValueError", "ShapeOverflowError", "ShapeMemoryError", "ReleasedArrayError",
    "ProtoDecodeError", "MissingDependencyError",
    "PrimitiveType", "primitive_type_from_name", "primitive_type_from_dtype",
    "Tile", "SplitConfig", "Layout", "COMBINE_DIMENSION",
    "MEMORY_SPACE_DEFAULT", "MEMORY_SPACE_FAST", "MEMORY_SPACE_HOST", "memory_space_name",
    "Shape", "UNBOUNDED_SIZE",
    "parse_shape", "parse_layout",
    "shape_util", "layout_util", "index_util", "tiling", "index_maps", "tpu", "padding",
    "make_shape", "make_shape_with_dense_layout", "make_shape_with_descending_layout",
    "make_scalar_shape", "make_tuple_shape", "make_token_shape", "make_opaque_shape",
    "make_buffer_shape", "validate_shape",
    "make_layout", "make_descending_layout", "make_ascending_layout",
    "make_layout_from_major_to_minor", "get_default_layout_for_rank",
    "LayoutArray", "ReadOnlyBufferError",
]
