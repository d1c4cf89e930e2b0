"""``analyze()``: any input -> its source -> the records -> one accounting pass -> the model.

The one entry point of :mod:`xlashape.memory`: it tells what the input is (a
path, text, bytes, a JAX compiled object), hands it to the source that reads
that kind (each reads its files once), accounts for every module's records
(:func:`xlashape.memory.account.account`) and returns the
:class:`~xlashape.memory.model.MemoryAnalysis` every view reads.
"""

from __future__ import annotations

import gc
import io
import os
import re
from typing import Callable, Optional

from .._files import check_regular_file, open_gzip, open_text, source_kind
from ..errors import ShapeTypeError, ShapeValueError, UnreadableInputError
from ..hlo_warnings import HloWarning, _clip
from ..oom_report import buffers_of_request, looks_like_oom_report
from ..devices import tpu_generation
from ..sizes import chip_of
from .account import Options, account
from .model import MemoryAnalysis
from .records import Reading
from .verdict import device_limit, judge, positive_size
from .source_dump import buffer_assignment_records, dump_records, text_buffer_assignment_records
from .source_hlo import module_records
from .source_jax import compiled_records, is_compiled, is_lowered, lowered_records
from .source_oom import oom_records
from .source_proto import PROTO_KINDS, proto_kind, proto_records
from .whatif import judge_what_if, parse_edit, refused_what_if

__all__ = ["analyze", "match_oom_dump", "PLATFORMS", "EXAMPLE_DUMP"]

#: the platforms whose counting rules xlashape knows
PLATFORMS = ("cpu", "gpu", "tpu")

#: A small real XLA:TPU dump directory shipped with xlashape (the first layer
#: of a convolutional network; ``xlashape memory --example`` reads it).
EXAMPLE_DUMP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "examples", "tpu_dump")

_SNIFF_BYTES = 1 << 16


def analyze(source, *, top: int = 10, chip: Optional[str] = None, platform: Optional[str] = None,
            peak: bool = True, on_warning: Optional[Callable[[HloWarning], None]] = None,
            progress: Optional[Callable[[int, Optional[int]], None]] = None,
            prefer: str = "text", dump=None, packing: bool = False,
            what_if=None, device: Optional[str] = None,
            limit=None, force_device: bool = False,
            compiler_options: Optional[dict] = None) -> MemoryAnalysis:
    """XLA's memory figures for ``source``: a path (an HLO text file, ``.gz``
    too; an XLA dump directory; a TPU out-of-memory report or libtpu log), the
    text of one of those, a JAX lowered function or a JAX compiled object.

    A lowered function (``jax.jit(f).lower(*args)``, with arrays or
    ``jax.ShapeDtypeStruct``, sharded or not) is compiled here with a dump
    into a temporary directory, read as that dump directory would be and
    removed (:mod:`xlashape.memory.source_jax`): every figure, the heap,
    what is live at the peak with its JAX op paths and source lines, the
    compile's own ``memory_analysis()`` beside them (in ``memory_analysis``),
    and for a partitioned program how many devices its (per-device) figures
    are for. ``compiler_options`` go to that compile. A compiled object
    (``....compile()``) gives its ``as_text()`` and ``memory_analysis()``
    only: no buffer assignment, so no peak of its own.

    XLA's protobufs too, as a path or bytes: a ``*.hlo.pb`` / ``.hlo.pb.gz``
    (``--xla_dump_hlo_as_proto``: the module and its buffer assignment, the
    peak from the heap simulator's traces), the bytes of
    ``memory_analysis().serialized_buffer_assignment_proto`` (a
    ``BufferAssignmentProto`` alone: the figures that need the module's
    shapes or the traces are ``None`` with the reason), and a
    ``*-memory-usage-report.pb`` (the ``.hlo.pb`` beside it is read when it
    is there; alone, only its memory spaces' totals). A dump directory with
    both the text files and the ``.hlo.pb`` is read from the text unless
    ``prefer="proto"``; one with the protos only is read from them.

    ``top``: how many allocations to keep in each module's ``largest`` and
    ``padding_wasters``. ``chip``: the TPU generation (``v5e``, ``v6e:2x2``,
    ``TPU v5 lite``, ...), which the text does not say but which sets the
    size of a tuple's table of pointers (:func:`xlashape.sizes.tuple_table_size`);
    without it, v4/v5e sizes are assumed for HLO text, and a dump's buffer
    assignment shows which applies. ``platform`` (``cpu``, ``gpu``, ``tpu``)
    overrides the platform read from the dump's file names and the layouts:
    XLA counts the peak and host memory differently on each. ``peak=False``
    skips the peak and what is live at it (:attr:`ModuleMemory.peak` stays
    ``None``) and the files only it needs (live ranges, values). ``on_warning``
    receives each :class:`~xlashape.hlo_module.HloWarning` (lines that could
    not be read) and :class:`~xlashape.xla_dump.DumpWarning` (files of a dump
    that were skipped); ``progress(bytes_read, total_bytes)`` is called now
    and then on long inputs.

    ``dump``: for an XLA:GPU out-of-memory error, the dump directory of the
    same program: the allocations of the requested size are named
    (:func:`match_oom_dump`).

    ``device`` (``h100``, ``v5e``, ...: :mod:`xlashape.devices`) or ``limit``
    (bytes, or a size such as ``"16G"``): judge each module's peak against
    it (:attr:`ModuleMemory.verdict`, shown by ``print()`` and the page). A
    device of another kind than the input was compiled for (an XLA:CPU
    compile against an H100) raises :class:`~xlashape.ShapeValueError`, as
    ``xlashape memory --device`` does, unless ``force_device`` (then the
    verdict says so).

    ``packing=True``: xlashape's own packing of each temporary allocation as
    XLA's heap simulator does it (``ModuleMemory.packing``), and the peak
    each padding fix would give (``ModuleMemory.fix_predictions``).
    ``what_if``: edits (``["undonate", "dtype:bf16=f32"]``; see
    :mod:`xlashape.memory.whatif`) whose predicted figures are
    ``ModuleMemory.what_if`` (it implies ``packing``). Both read the module
    text whole.

    A ``str`` is a path or text as :func:`~xlashape.hlo_module.source_kind`
    decides (pass a ``pathlib.Path`` to name any file).

    Raises :class:`~xlashape.UnreadableInputError` for input that is none of
    these (empty, binary, a directory without modules, another kind of file,
    not a regular file: a FIFO, a device), ``OSError`` for a path that cannot
    be read.
    """
    edits = tuple(parse_edit(e) for e in (what_if or ()))
    if dump is not None:
        result = analyze(source, top=top, chip=chip, platform=platform, peak=peak,
                         on_warning=on_warning, progress=progress, packing=packing,
                         what_if=edits, device=device, limit=limit, force_device=force_device)
        match_oom_dump(result, dump, top=top, what_if=edits)
        return result
    spec = _limit(device, limit)
    chip_of(chip)   # a bad name fails before anything is read or compiled
    if compiler_options is not None and not is_lowered(source):
        raise ShapeTypeError("compiler_options go with a JAX lowered function "
                             "(jax.jit(f).lower(...)), which analyze() compiles")
    if platform is not None:
        platform = platform.lower()
        if platform not in PLATFORMS:
            raise ShapeValueError(f"unknown platform {platform!r}: expected one of "
                                  + ", ".join(PLATFORMS))
    if prefer not in ("text", "proto"):
        raise ShapeValueError(f"prefer={prefer!r}: expected 'text' or 'proto'")
    packing = bool(packing or edits)
    reading = Reading(on_warning, progress, peak=peak, prefer=prefer, platform=platform,
                      full_module=packing)
    # Hundreds of thousands of records and model objects, none of them
    # garbage until the analysis is dropped: the cyclic collector's passes
    # over them would cost a fifth of the time (a 6 MB dump: 0.1 s of 0.5 s).
    collecting = gc.isenabled()
    gc.disable()
    try:
        if is_lowered(source):
            kind, records = lowered_records(source, reading, compiler_options)
            path = None
            if chip is None:   # the TPU generation the compile was for (its device kind)
                chip = next((tpu_generation(r.device_kind) for r in records if r.device_kind),
                            None)
        else:
            kind, path, records = _read(source, reading)
        opts = Options(top, chip_of(chip), platform, peak, packing=packing, what_if=edits)
        result = MemoryAnalysis(kind, path)
        result.modules = [account(rec, opts) for rec in records]
    finally:
        # what a source made to read (a JAX compile's dump) goes once the
        # accounting has read it: the model holds everything the views need
        reading.close()
        if collecting:
            gc.enable()
    for rec, mm in zip(records, result.modules):
        if rec.oom is not None and rec.oom.platform == "gpu":
            mm._gpu_report = rec.oom
    if kind == "oom":
        for m in result.modules[:-1]:
            m.superseded = True
        if edits:
            for m in result.modules:
                m.what_if = refused_what_if(
                    edits, "an out-of-memory report lists allocations, not the schedule: run "
                    "--what-if on the dump of the same program compiled for that device "
                    "(XLA_FLAGS=--xla_dump_to=DIR)")
    if spec is not None:
        limit_bytes, name, basis, device_platform = spec
        for m in result.modules:
            m.verdict = v = judge(m, limit_bytes, name, limit_basis=basis,
                                  device_platform=device_platform)
            if v is not None and v.platform_mismatch and not force_device:
                raise ShapeValueError(
                    f"device {device!r} is a {v.device_platform.upper()} and {m.name or 'the input'} "
                    f"was compiled for {v.module_platform.upper()}: its layouts and sizes there "
                    "would not be these; give the device it was compiled for, a size (limit=), "
                    "or force_device=True to judge it anyway")
    result.warnings = reading.warnings
    return result


def _limit(device, limit):
    """``(bytes, name, basis, platform)`` to judge against, from ``device``
    or ``limit`` (:func:`~xlashape.memory.verdict.device_limit`)."""
    if device is not None and limit is not None:
        raise ShapeValueError("give device= or limit=, not both")
    if limit is not None:
        return positive_size(limit, "limit"), f"limit {limit}", None, None
    if device is not None:
        return device_limit(device)
    return None


def _read(source, reading: Reading):
    """``(kind of input, path, records)`` of ``source``."""
    if is_compiled(source):
        return "jax", None, [compiled_records(source, reading)]
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if _sniff_kind(data[:_SNIFF_BYTES], "", maybe_proto=True) == "proto":
            found = proto_kind(data)            # parsed once
            if found is not None:
                return "dump", None, proto_records(found[0], found[1], None, reading)
        return _read_text(_decode(data, "the given bytes"), reading)   # bytes are never a path
    kind = source_kind(source)
    if kind == "path":
        path = os.fspath(source)
        if os.path.isdir(path):
            return "dump", path, dump_records(path, reading)
        return _read_file(check_regular_file(path), reading)
    if kind == "text":
        return _read_text(source, reading)
    raise ShapeTypeError("analyze() takes a path, HLO or report text, XLA's protobuf bytes, "
                         "or a JAX lowered function or compiled object, "
                         f"not {type(source).__name__}")


def _decode(data: bytes, what: str) -> str:
    if b"\0" in data[:_SNIFF_BYTES]:
        raise UnreadableInputError(f"{what} is binary but none of XLA's protobufs xlashape reads "
                                   "(HloProto, BufferAssignmentProto, MemoryUsageReportProto), "
                                   "nor text: expected an HLO module, a buffer assignment or an "
                                   "out-of-memory report")
    return data.decode("utf-8", "replace")


def _sniff_kind(head, name: str = "", maybe_proto: bool = False) -> Optional[str]:
    """The kind of input whose first bytes (or text) are ``head``: ``hlo``,
    ``oom``, ``buffer-assignment``, ``memory-report`` (text), ``hlo-proto``,
    ``buffer-assignment-proto``, ``memory-report-proto`` (XLA's protobufs,
    told by the file ``name``), ``proto`` (bytes that neither the name nor
    the text tells, when ``maybe_proto``: :func:`~xlashape.memory.source_proto.proto_kind`
    reads which message), or ``None``."""
    if isinstance(head, (bytes, bytearray)):
        base = name[: -len(".gz")] if name.endswith(".gz") else name
        binary = b"\0" in head or base.endswith(".pb")
        if not binary:
            text_kind = _sniff_kind(head.decode("utf-8", "replace"))
            if text_kind is not None:
                return text_kind
        if base.endswith(".hlo.pb"):
            return "hlo-proto"
        if base.endswith("memory-usage-report.pb"):
            return "memory-report-proto"
        if base.endswith("buffer-assignment.pb") or base.endswith("buffer_assignment.pb"):
            return "buffer-assignment-proto"
        return "proto" if maybe_proto else None
    if looks_like_oom_report(head):
        return "oom"
    stripped = head.lstrip()
    if stripped.startswith("BufferAssignment:") or stripped.startswith("allocation 0: size"):
        return "buffer-assignment"
    if stripped.startswith("Memory Space:"):
        return "memory-report"
    if "HloModule" in head or "ENTRY" in head:
        return "hlo"
    if re.search(r"(?m)^\s*(ROOT\s+)?%?[A-Za-z_][\w.\-]*\s*=\s*[(a-z]", head):
        return "hlo"
    return None


def _read_file(path: str, reading: Reading):
    size = os.path.getsize(path) if os.path.isfile(path) else None
    with open(path, "rb") as f:
        raw = f.read(_SNIFF_BYTES)
    if path.endswith(".gz"):
        with open_gzip(path) as f:           # a corrupt stream: UnreadableInputError
            raw = f.read(_SNIFF_BYTES)
    if not raw.strip():
        raise UnreadableInputError(f"{path} is empty: expected an HLO module, an XLA dump "
                                   "directory or a TPU out-of-memory report")

    kind = _sniff_kind(raw, os.path.basename(path), maybe_proto=True)
    if kind == "proto":
        found = proto_kind(path)             # read and parsed once
        if found is not None:
            return "dump", path, proto_records(found[0], found[1], path, reading)
        kind = None
    if kind in PROTO_KINDS:
        return "dump", path, proto_records(kind, path, path, reading)
    head = _decode(raw, path)
    if kind == "oom":
        with open_text(path) as f:
            return "oom", path, oom_records(f, reading, path)
    if kind == "buffer-assignment":
        return "dump", path, [buffer_assignment_records(path, reading)]
    if kind == "memory-report":
        raise UnreadableInputError(
            f"{path} is a memory-usage report: give the dump directory it belongs to "
            "(xlashape reads the buffer assignment and module text next to it)")
    if kind != "hlo":
        raise UnreadableInputError(
            f"{path} is not an HLO module, an XLA dump directory or a TPU out-of-memory report "
            f"(it starts with {_clip(head.strip().splitlines()[0] if head.strip() else '', 50)!r})")
    with open_text(path) as f:
        rec = module_records(reading.text_blocks(f, size), reading.warn, "hlo", path)
    return "hlo", path, [rec]


def _read_text(text: str, reading: Reading):
    if not text.strip():
        raise UnreadableInputError("the input is empty: expected an HLO module, an XLA dump "
                                   "directory or a TPU out-of-memory report")
    if "\0" in text[:_SNIFF_BYTES]:
        raise UnreadableInputError("the input is binary, not text: expected an HLO module or "
                                   "a TPU out-of-memory report")
    kind = _sniff_kind(text[:_SNIFF_BYTES])
    if kind == "oom":
        return "oom", None, oom_records(text.splitlines(), reading, None)
    if kind == "buffer-assignment":
        return "dump", None, [text_buffer_assignment_records(io.StringIO(text), reading)]
    if kind != "hlo":
        first = text.strip().splitlines()[0]
        raise UnreadableInputError(
            "the input is not an HLO module or a TPU out-of-memory report "
            f"(it starts with {_clip(first, 50)!r})")
    return "hlo", None, [module_records(text.splitlines(), reading.warn, "hlo", None)]


def match_oom_dump(result: MemoryAnalysis, dump, *, top: int = 10, what_if=()) -> None:
    """Given the dump of the same program (a directory, or what
    :func:`analyze` made of it), name in each XLA:GPU out-of-memory module of
    ``result`` the allocations whose size is the failed request
    (``oom.matching_buffers``: module, allocation index, kind, size, the
    values in it), largest first. With ``what_if`` edits, the prediction
    made on the dump's module of that executable (compiled for the GPU) is
    the report's, judged against the report's limit."""
    dumped = dump if isinstance(dump, MemoryAnalysis) else analyze(dump, top=top,
                                                                    what_if=what_if)
    for mm in result.modules:
        r = getattr(mm, "_gpu_report", None)
        if r is None:
            continue
        found = []
        # the dump's module of the failed executable, when the message names it
        named = [dm for dm in dumped.modules if r.executable_name and dm.name == r.executable_name]
        for dm in named or dumped.modules:
            for a in buffers_of_request(r, dm.allocations):
                found.append({"module": dm.name, "index": a.index, "kind": a.kind,
                              "size_in_bytes": a.size_in_bytes, "shape": a.shape,
                              "holds": a.holds, "names": list(a.values)[:8]})
        mm.oom = mm.oom._replace(matching_buffers=found)
        if what_if:
            src = [dm for dm in named or dumped.modules if dm.what_if is not None]
            if len(src) == 1 and src[0].platform == "gpu":
                w = mm.what_if = src[0].what_if
                if mm.memory_limit_bytes is not None:
                    w.verdict = judge_what_if(w, mm.memory_limit_bytes, "the report's limit")
            else:
                mm.what_if = refused_what_if(
                    what_if, "the dump given is not the XLA:GPU compile of this executable "
                    + ("(it was compiled for " + (src[0].platform or "another platform") + ")"
                       if len(src) == 1 else "(no single module of it matches)"))
        if not found:
            mm.notes.append(f"no allocation of the dump has the requested size "
                            f"({r.requested_text}): is it the dump of the same program?")
