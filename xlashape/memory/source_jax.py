"""The source of JAX programs: a lowered function compiled here with a dump, or a compiled object.

A *lowered* function (``jax.jit(f).lower(*args)``, a ``jax.stages.Lowered``)
is compiled once more, with ``compiler_options={"xla_dump_to": DIR}`` for a
fresh temporary ``DIR`` (XLA takes the dump flags per compile: no
``XLA_FLAGS``, no restart; a new directory each time, since jax caches a
compile by its options and a cached compile writes no dump). The dump is
then read as any dump directory (:mod:`xlashape.memory.source_dump`, or
:mod:`~xlashape.memory.source_proto` with ``prefer="proto"``, which asks
XLA for the ``.hlo.pb`` instead of the text files): the buffer assignment,
the live ranges, the module text with its op paths and source lines. The
module of the jitted function is kept (a dump may hold others), with that
compile's own ``memory_analysis()`` beside it, how many devices it was
compiled for and their kind. The directory is removed when the analysis is
built (:meth:`~xlashape.memory.records.Reading.later`): every file the
accounting reads, the values file it reads only on demand included, is read
by then, and the model holds no path into it.

A compile that runs out of memory (XLA:TPU's ``RESOURCE_EXHAUSTED`` at
compile time) is read as the out-of-memory report its exception carries
(:mod:`xlashape.memory.source_oom`); any other compile error is jax's, and
propagates unchanged.

A *compiled* object (``....compile()``) gives its optimized module as HLO
text (``as_text()``) and XLA's figures (``memory_analysis()``), but no
buffer assignment and no live ranges: its text is read as any module's
(:mod:`xlashape.memory.source_hlo`), XLA's figures kept beside it.

jax is never imported at the top of this module: the objects bring their
methods, and the one function that flattens their shardings imports the jax
that made them.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

from ..errors import ShapeTypeError, UnreadableInputError
from ..oom_report import looks_like_oom_report
from .figures import PEAK_FIELDS
from .records import ModuleRecords, Reading
from .source_dump import dump_records
from .source_hlo import module_records
from .source_oom import oom_records

__all__ = ["is_compiled", "is_lowered", "compiled_records", "lowered_records", "DUMP_PREFIX"]

#: the temporary dump directories are named ``DUMP_PREFIX...``
DUMP_PREFIX = "xlashape-jax-"


def is_compiled(source) -> bool:
    """Whether ``source`` looks like a JAX compiled object."""
    return hasattr(source, "as_text") and hasattr(source, "memory_analysis")


def is_lowered(source) -> bool:
    """Whether ``source`` looks like a JAX lowered function
    (``jax.jit(f).lower(...)``: it compiles, and has a compiler IR)."""
    return (not is_compiled(source) and callable(getattr(source, "compile", None))
            and callable(getattr(source, "compiler_ir", None)))


def _stats_dict(stats) -> dict:
    """The integer fields of a ``CompiledMemoryStats``."""
    out = {}
    for k in dir(stats):
        if not (k.endswith("_in_bytes") or k in PEAK_FIELDS):
            continue
        try:
            v = getattr(stats, k)
        except Exception:  # noqa: BLE001 - a field the binding cannot give
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            out[k] = v
    return out


def compiled_records(compiled, reading: Reading) -> ModuleRecords:
    text = compiled.as_text()
    if not isinstance(text, str) or not text.strip():
        raise UnreadableInputError("the compiled object's as_text() gave no HLO text")
    rec = module_records(text.splitlines(), reading.warn, "jax", None)
    stats = compiled.memory_analysis()
    if stats is not None:
        rec.memory_analysis = _stats_dict(stats)
    rec.notes.append("a compiled object gives its module text and memory_analysis() only: "
                     "analyze the lowered function (jax.jit(f).lower(...), before .compile()) "
                     "for the buffer assignment, the peak and what is live at it")
    rec.devices, rec.device_kind, rec.parameter_shardings = _devices(compiled)
    return rec


def lowered_records(lowered, reading: Reading, compiler_options: Optional[dict] = None
                    ) -> Tuple[str, List[ModuleRecords]]:
    """``(kind, records)`` of a lowered function: compiled with a dump into
    a fresh temporary directory (removed when the analysis is built), the
    jitted function's module read from it (``kind`` ``"jax"``); or, when the
    compile runs out of memory, the report its error carries (``"oom"``).
    ``compiler_options`` are passed to the compile with the dump's own
    (which replace any ``xla_dump_*`` of theirs)."""
    options = {}
    if compiler_options is not None:
        if not isinstance(compiler_options, dict):
            raise ShapeTypeError("compiler_options: expected a dict of XLA options, not "
                                 f"{type(compiler_options).__name__}")
        options.update(compiler_options)
    for k in [k for k in options if str(k).startswith("xla_dump_")]:
        del options[k]      # the dump is this source's: where, and in which form
    where = tempfile.mkdtemp(prefix=DUMP_PREFIX)
    reading.later(lambda: shutil.rmtree(where, ignore_errors=True))
    options["xla_dump_to"] = where
    if reading.prefer == "proto":
        options["xla_dump_hlo_as_proto"] = True
    try:
        compiled = lowered.compile(compiler_options=options)
    except Exception as e:  # noqa: BLE001 - jax's own error types vary by version
        text = str(e)
        if looks_like_oom_report(text):
            records = oom_records(text.splitlines(), reading, None)
            name = _module_name(lowered)
            for r in records:
                r.name = r.name or name
            return "oom", records
        raise
    records = [r for r in dump_records(where, reading) if r.optimized]
    if not records:   # pragma: no cover - XLA writes the optimized module of every compile
        raise UnreadableInputError("the compile wrote no optimized module into its dump")
    rec = _pick(records, lowered)
    rec.source = "jax"
    rec.path = None     # the directory goes away: nothing may point into it
    if rec.allocations is None:
        rec.warnings.append(_NO_BUFFER_ASSIGNMENT + _cache_dir_said())
    stats = compiled.memory_analysis()
    if stats is not None:
        rec.memory_analysis = _stats_dict(stats)
    rec.devices, rec.device_kind, rec.parameter_shardings = _devices(compiled)
    return "jax", [rec]


_NO_BUFFER_ASSIGNMENT = (
    "XLA wrote no buffer assignment for this compile, only its module: jax's persistent "
    "compilation cache answers a compile it has seen without running XLA's passes, so the "
    "figures here are the module text's and memory_analysis()'s, with no peak of their own; "
    "analyze in a process where the cache is off (jax_enable_compilation_cache=False before "
    "the first compile) for the buffer assignment and what is live at the peak")


def _cache_dir_said() -> str:
    """`` (jax_compilation_cache_dir is DIR)`` when the jax that is loaded
    has a persistent cache directory set, else nothing."""
    import sys

    jax = sys.modules.get("jax")
    try:
        where = jax.config.jax_compilation_cache_dir if jax is not None else None
    except AttributeError:
        where = None
    return f" (jax_compilation_cache_dir is {where})" if where else ""


def _module_name(lowered) -> Optional[str]:
    """The name of the lowered module (``jit_f``), from its IR's symbol name;
    ``None`` where the IR does not give it."""
    try:
        attr = lowered.compiler_ir("stablehlo").operation.attributes["sym_name"]
        return getattr(attr, "value", None) or str(attr).strip('"')
    except Exception:  # noqa: BLE001 - an IR of another shape: pick by position
        return None


def _pick(records: List[ModuleRecords], lowered) -> ModuleRecords:
    """The module of the jitted function among a dump's (usually one): the
    last one of its name, else the last one compiled."""
    if len(records) == 1:
        return records[0]
    name = _module_name(lowered)
    named = [r for r in records if name is not None and r.name == name]
    rec = (named or records)[-1]
    others = [r.name or "?" for r in records if r is not rec]
    if others:
        rec.notes.append(f"the compile dumped {len(records)} modules; this is the jitted "
                         f"function's, the others were left out ({', '.join(others[:5])})")
    return rec


def _describe(sharding) -> str:
    """A sharding as a JAX user writes it: a ``NamedSharding``'s
    ``PartitionSpec`` and its mesh (``P('data', None) over mesh data=4
    model=2``); any other sharding as jax prints it."""
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    shape = getattr(mesh, "shape", None)
    if spec is not None and shape is not None:
        try:
            axes = " ".join(f"{k}={v}" for k, v in dict(shape).items())
        except (TypeError, ValueError):
            axes = str(shape)
        return f"{spec} over mesh {axes}"
    return str(sharding)


def _devices(compiled) -> Tuple[Optional[int], Optional[str], Optional[Dict[int, str]]]:
    """How many devices the compiled program runs on, their
    ``device_kind``, and its parameters' shardings (parameter number ->
    :func:`_describe`; jax's ``input_shardings`` in the order of its
    flattened arguments, which is the order of the entry parameters, with an
    unused argument jit left out as ``None``); ``None`` for what it does not
    say."""
    try:
        import jax  # the caller's jax: it made the compiled object (never imported at the top)
        trees = [compiled.input_shardings, compiled.output_shardings]
    except Exception:  # noqa: BLE001 - an object of another jax, or not jax's
        return None, None, None
    count, kind, params = None, None, None
    for i, tree in enumerate(trees):
        leaves = jax.tree_util.tree_leaves(tree)
        if i == 0:
            params = {n: _describe(s) for n, s in enumerate(leaves)}
        for s in leaves:
            try:
                devices = list(s.device_set)
            except Exception:  # noqa: BLE001 - an abstract sharding
                continue
            if devices and (count is None or len(devices) > count):
                count = len(devices)
                kind = getattr(devices[0], "device_kind", None)
    return count, kind, params
