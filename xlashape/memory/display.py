"""How the model shows itself: ``print()`` and a notebook's inline page.

:class:`~xlashape.memory.model.MemoryAnalysis` and
:class:`~xlashape.memory.model.ModuleMemory` have ``__str__`` (the terminal
report of ``xlashape memory``, :mod:`xlashape.reporters.text`) and
``_repr_html_`` (the memory page as an HTML fragment,
:func:`xlashape.reporters.html.render_fragment`, which Jupyter and IPython
show inline). The views read the model, so the model cannot import them:
it looks them up in :data:`xlashape.memory.model.VIEWS`, which
:func:`install` fills when the public API (:mod:`xlashape.memory`, one
layer above the views) is imported.
"""

from __future__ import annotations

from typing import List

from ..safe_text import printable
from . import model

__all__ = ["text", "html", "install"]

#: how many allocations and live buffers the report lists (``xlashape memory``'s ``--top``)
TOP = 10


def _verdicts(modules) -> dict:
    return {id(m): m.verdict for m in modules if getattr(m, "verdict", None) is not None}


def text(obj) -> str:
    """The terminal report of a :class:`~xlashape.memory.model.MemoryAnalysis`
    or one :class:`~xlashape.memory.model.ModuleMemory`, control characters
    from the artifact escaped as the command prints them."""
    # The views import the model, whose package imports this module: imported
    # here, when a report is asked for, they are never half-initialized (and
    # `import xlashape.memory` does not pay for them).
    from ..reporters.text import module_lines, oom_lines, report_lines
    if isinstance(obj, model.MemoryAnalysis):
        name = obj.path or ("a JAX program" if obj.kind == "jax" else "the input")
        lines = report_lines(obj, obj.modules, name, TOP, _verdicts(obj.modules))
    else:
        lines: List[str] = list(oom_lines(obj, TOP) if obj.source == "oom"
                                else module_lines(obj, TOP))
        if getattr(obj, "verdict", None) is not None:
            lines.extend(obj.verdict.lines())
    return "\n".join(printable(line) for line in lines)


def html(obj) -> str:
    """The memory page of a :class:`~xlashape.memory.model.MemoryAnalysis`
    or one :class:`~xlashape.memory.model.ModuleMemory` as an HTML fragment."""
    # imported here for the reason given in text()
    from ..reporters.html import render_fragment
    if isinstance(obj, model.MemoryAnalysis):
        modules = obj.modules
        title = obj.path or ", ".join(m.name or "?" for m in modules[:3])
    else:
        modules = [obj]
        title = obj.name or "?"
    return render_fragment(modules, title=title, verdicts=_verdicts(modules))


def install() -> None:
    """Make the model display itself with these views."""
    model.VIEWS.update(text=text, html=html)
