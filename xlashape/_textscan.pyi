"""Type stub for xlashape._textscan, the HLO parser's compiled fast path (hand-written)."""

from typing import Optional, Tuple

from .layout import Layout
from .primitive_types import PrimitiveType
from .shape import Shape

def fast_shape(text: str) -> Optional[Shape]: ...
def fast_array_rest(text: str, pos: int, element_type: PrimitiveType) -> Optional[Tuple[Shape, int]]: ...
def default_layout(rank: int) -> Layout: ...
