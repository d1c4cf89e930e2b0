"""The source of JAX compiled objects: ``jax.jit(f).lower(...).compile()``.

A compiled object gives its optimized module as HLO text (``as_text()``) and
XLA's own figures (``memory_analysis()``): the text is read as any module's
(:mod:`xlashape.memory.source_hlo`) and XLA's figures are kept beside it, to
fill in what the text cannot determine (the temporaries) and to check the
rest. jax itself is never imported here: the object brings its methods.
"""

from __future__ import annotations

from ..errors import UnreadableInputError
from .figures import PEAK_FIELDS
from .records import ModuleRecords, Reading
from .source_hlo import module_records

__all__ = ["is_compiled", "compiled_records"]


def is_compiled(source) -> bool:
    """Whether ``source`` looks like a JAX compiled object."""
    return hasattr(source, "as_text") and hasattr(source, "memory_analysis")


def _stats_dict(stats) -> dict:
    """The integer fields of a ``CompiledMemoryStats``."""
    return {k: getattr(stats, k) for k in dir(stats)
            if (k.endswith("_in_bytes") or k in PEAK_FIELDS)
            and isinstance(getattr(stats, k), int) and not isinstance(getattr(stats, k), bool)}


def compiled_records(compiled, reading: Reading) -> ModuleRecords:
    text = compiled.as_text()
    if not isinstance(text, str) or not text.strip():
        raise UnreadableInputError("the compiled object's as_text() gave no HLO text")
    rec = module_records(text.splitlines(), reading.warn, "jax", None)
    stats = compiled.memory_analysis()
    if stats is not None:
        rec.memory_analysis = _stats_dict(stats)
    return rec
