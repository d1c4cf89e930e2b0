"""Type stub for xlashape._protowire, protos' compiled wire-format walks (hand-written)."""

from typing import Dict, List, Optional, Tuple, Union

_Buffer = Union[bytes, bytearray, memoryview]

class CostTable:
    @property
    def pointer(self) -> int: ...
    @property
    def repeated_number(self) -> int: ...
    @property
    def max_depth(self) -> int: ...
    def __init__(self, fields: Dict[int, tuple], pointer: int, repeated_number: int,
                 max_depth: int) -> None: ...

def parse_cost(data: object, table: CostTable, message_cost: int,
               stop: int) -> Optional[Tuple[Optional[int], str]]: ...
def field_spans(data: object, number: int, start: int = 0,
                end: Optional[int] = None) -> Optional[List[Tuple[int, int]]]: ...
