"""Type stub for xlashape._protoscan, the .hlo.pb reader's compiled fast path (hand-written)."""

from typing import Any, Callable, Dict, List, Optional, Tuple

from ._hloscan import InstructionBase
from .shape import Shape

class ProtoInstructionBase(InstructionBase):
    _ip: Any
    _called: Any
    _index: int

class ModuleScan:
    @property
    def ok(self) -> bool: ...
    @property
    def instructions_per_computation(self) -> List[int]: ...
    def __init__(self, data: object) -> None: ...
    def names(self) -> Optional[List[str]]: ...
    def instruction_ids(self, names: List[str]) -> Optional[Dict[int, str]]: ...
    def build(self, cls: type, computations: List[Any], messages: List[Any],
              root_ids: List[int], names: List[str],
              shape_of: Callable[[bytes], Optional[Shape]]
              ) -> Optional[List[Tuple[Any, Optional[Tuple[int, ...]]]]]: ...
