"""The ``--json`` documents of ``xlashape memory`` and ``xlashape memory diff``.

``{"schema_version": 2, "modules": [...]}``: one object per module (or
out-of-memory report) with XLA's figures by their names, the memory spaces,
the peak, the verdict and every allocation (see the README's schema). A pure
function of the model: the document is produced as pieces of text
(:func:`memory_document`), each module's allocations one by one, so a module
with a hundred thousand allocations is never one string.

Schema versions: 2 calls a temporary allocation ``"temporary"`` (as the
peak's buffers always were; 1 said ``"temp"``), gives each value its ``id``
and each padding fix its ``kind`` and ``size_in_bytes``.
"""

from __future__ import annotations

import json
from typing import Iterator

from ..memory.model import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "memory_document", "diff_document"]


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=True)


def memory_document(modules, verdicts=None) -> Iterator[str]:
    """The document of ``modules`` (:class:`~xlashape.memory.ModuleMemory`),
    with the verdicts (``id(module) -> Verdict``; else each module's own
    ``verdict``), as pieces of text to write
    one after the other. A log's superseded out-of-memory reports come after
    the one that counts."""
    modules = [m for m in modules if not m.superseded] + [m for m in modules if m.superseded]
    yield '{"schema_version": %d, "modules": [' % SCHEMA_VERSION
    for i, m in enumerate(modules):
        head = dict(m.header_json())
        head.update(m.extra_json())
        v = (verdicts or {}).get(id(m), m.verdict)
        head["verdict"] = v.to_json() if v is not None else None
        text = _dumps(head)
        yield ("\n" if i == 0 else ",\n") + text[:-1] + ', "allocations": ['
        first = True
        for a in m.allocations:
            yield ("\n  " if first else ",\n  ") + _dumps(a.to_json())
            first = False
        yield "]}"
    yield "\n]}\n"


def diff_document(d) -> str:
    """The document of a :class:`~xlashape.memory.diff.ModuleDiff`."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **d.to_json()}, ensure_ascii=True,
                      indent=1) + "\n"
