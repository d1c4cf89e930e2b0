"""The real-compiler corpora of ``tests/data``, one way for all three platforms.

``tests/data/cpu_corpus`` (XLA:CPU of jax 0.10.2, ``tests/oracle/gen_cpu_corpus.py``)
with ``cpu_corpus_jax011`` and ``cpu_corpus_jax012`` (the same generator under jax
0.11.2 and 0.12.0.1), ``tests/data/gpu_corpus`` (XLA:GPU on an H200,
``tests/oracle/copy_gpu_corpus.py``) and ``tests/data/tpu_corpus`` (XLA:TPU
compile-only, ``tests/oracle/gen_tpu_corpus.py``) each hold one directory per
program with ``memory_analysis.json`` (XLA's
``CompiledMemoryStats`` and where it came from), ``module.hlo``
(``compiled.as_text()``) and, for some, ``dump/`` (XLA's dump files of the final
module). :func:`programs` yields them as :class:`CorpusProgram`, so a test can
parametrize over every platform::

    @pytest.mark.parametrize("prog", corpora.programs(), ids=corpora.program_id)
    def test_x(prog): ...

Programs that do not compile (the TPU ``oom_*`` ones, the GPU ``oom/`` files)
have no ``memory_analysis.json`` and are not yielded; :func:`oom_cases` lists
them. Each program carries the jax version that compiled it (``jax``), and a
platform with several corpora (one per jax version: ``<platform>_corpus`` and
``<platform>_corpus_jax0NN``) yields the programs of all of them, the test id
naming the version (``cpu:attention``, ``cpu-jax012:attention``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

DATA = Path(__file__).resolve().parent / "data"
PLATFORMS = ("cpu", "gpu", "tpu")
#: the first corpus of each platform
CORPUS_DIRS = {p: DATA / f"{p}_corpus" for p in PLATFORMS}


def corpus_dirs(platform: str) -> List[Path]:
    """Every corpus of a platform: ``<platform>_corpus`` and, after it, the
    ``<platform>_corpus_jax0NN`` ones (one per further jax version)."""
    first = CORPUS_DIRS[platform]
    more = sorted(p for p in DATA.glob(f"{platform}_corpus_jax*") if p.is_dir())
    return ([first] if first.is_dir() else []) + more


# The integer fields of CompiledMemoryStats that every platform's jax reports
# (jax 0.10.2 on the CPU, 0.11.2 on the GPU, 0.12 on the TPU).
COMMON_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                 "temp_size_in_bytes", "generated_code_size_in_bytes",
                 "host_argument_size_in_bytes", "host_output_size_in_bytes",
                 "host_alias_size_in_bytes", "host_temp_size_in_bytes",
                 "host_generated_code_size_in_bytes", "peak_memory_in_bytes")
# Present from jax 0.11 on (not in jax 0.10.2's memory_analysis()).
NEWER_FIELDS = ("total_allocation_bytes", "indefinite_allocations", "peak_unpadded_heap_bytes")


class CorpusProgram(NamedTuple):
    name: str
    platform: str                      # "cpu", "gpu" or "tpu"
    directory: Path
    memory_analysis: Dict[str, int]    # XLA's integer fields only, by XLA's names
    info: dict                         # the whole memory_analysis.json
    dump_dir: Optional[Path]           # XLA's dump files of the final module, or None
    module_hlo: Path                   # compiled.as_text()
    hlo_proto: Optional[Path]          # dump's *after_optimizations.hlo.pb (HloProto)
    buffer_assignment_proto: Optional[Path]   # serialized_buffer_assignment_proto
    memory_usage_report_proto: Optional[Path]  # dump's *-memory-usage-report.pb
    module: str                        # XLA's module name (jit_<function>)
    corpus: str = ""                   # the corpus directory's name (cpu_corpus_jax012, ...)

    @property
    def jax(self) -> Optional[str]:
        """The version of jax that compiled it (``0.10.2``, ``0.12.0.1``, ...)."""
        return (self.info.get("versions") or {}).get("jax")

    @property
    def chip(self) -> Optional[str]:
        """The TPU topology (``v5e:2x2``, ...); None on CPU and GPU."""
        return self.info.get("chip")

    def dump_file(self, suffix: str) -> Optional[Path]:
        """The dump file of the final module whose name ends with
        ``"after_optimizations" + suffix`` (``".txt"``, ``"-live-range.txt"``,
        ``"-buffer-assignment.txt"``, ...), or None."""
        if self.dump_dir is None:
            return None
        found = sorted(p for p in self.dump_dir.iterdir()
                       if p.name.endswith("after_optimizations" + suffix)
                       and _final_module(p.name, self))
        return found[0] if found else None


def program_id(prog: CorpusProgram) -> str:
    """``cpu:attention`` for the first corpus of a platform, ``cpu-jax012:attention``
    for a further one."""
    tag = prog.corpus[len(prog.platform) + len("_corpus"):].replace("_", "-")
    return f"{prog.platform}{tag}:{prog.name}"


def _final_module(fname: str, prog: "CorpusProgram") -> bool:
    # a TPU host-offload dump also holds an XLA:CPU host module
    # (called_computation); the final module is the program's own (jit_<fn>)
    return f".{prog.module}." in fname


def _module_name(directory: Path, info: dict) -> str:
    if info.get("module"):
        return info["module"]
    with open(directory / "module.hlo") as f:
        first = f.readline().split()
    if len(first) < 2 or first[0] != "HloModule":
        raise ValueError(f"{directory / 'module.hlo'} does not start with 'HloModule NAME'")
    return first[1].rstrip(",")


def _integer_fields(ma: dict) -> Dict[str, int]:
    return {k: v for k, v in ma.items()
            if isinstance(v, int) and not isinstance(v, bool) and not k.endswith("_length")}


def _dump_dir(directory: Path, info: dict) -> Optional[Path]:
    d = directory / "dump"
    if d.is_dir():
        return d
    files = info.get("dump_files") or []
    if files:  # the TPU corpus keeps one dump beside the programs (example_dump/)
        for sibling in sorted(directory.parent.iterdir()):
            if sibling.is_dir() and (sibling / files[0]).is_file():
                return sibling
    return None


def _load(platform: str, directory: Path) -> CorpusProgram:
    with open(directory / "memory_analysis.json") as f:
        info = json.load(f)
    dump = _dump_dir(directory, info)
    ba = directory / "buffer_assignment.pb"
    prog = CorpusProgram(
        name=directory.name, platform=platform, directory=directory,
        memory_analysis=_integer_fields(info.get("memory_analysis") or {}), info=info,
        dump_dir=dump, module_hlo=directory / "module.hlo", hlo_proto=None,
        buffer_assignment_proto=ba if ba.is_file() else None,
        memory_usage_report_proto=None, module=_module_name(directory, info),
        corpus=directory.parent.name)
    return prog._replace(hlo_proto=prog.dump_file(".hlo.pb"),
                         memory_usage_report_proto=prog.dump_file("-memory-usage-report.pb"))


def programs(platforms=PLATFORMS) -> List[CorpusProgram]:
    """Every compiled program of the given platforms' corpora, sorted by
    platform, then corpus (:func:`corpus_dirs`), then name."""
    if isinstance(platforms, str):
        platforms = (platforms,)
    out = []
    for platform in platforms:
        for root in corpus_dirs(platform):
            for d in sorted(root.iterdir()):
                if d.is_dir() and (d / "memory_analysis.json").is_file():
                    out.append(_load(platform, d))
    return out


def iter_programs(platforms=PLATFORMS) -> Iterator[Tuple]:
    """``(name, platform, memory_analysis, dump_dir, module_hlo, protos)`` per
    program, ``protos`` a dict of the proto paths (``hlo``,
    ``buffer_assignment``, ``memory_usage_report``; None where absent)."""
    for p in programs(platforms):
        yield (p.name, p.platform, p.memory_analysis, p.dump_dir, p.module_hlo,
               {"hlo": p.hlo_proto, "buffer_assignment": p.buffer_assignment_proto,
                "memory_usage_report": p.memory_usage_report_proto})


def oom_cases(platforms=PLATFORMS) -> List[Tuple[str, str, List[Path]]]:
    """``(name, platform, files)`` of the programs that did not fit."""
    out = []
    for platform in platforms:
        root = CORPUS_DIRS[platform]
        if platform == "gpu" and (root / "oom").is_dir():
            names = sorted({p.name.split(".")[0] for p in (root / "oom").iterdir()})
            for n in names:
                out.append((n, platform, sorted((root / "oom").glob(n + ".*"))))
        elif root.is_dir():
            for d in sorted(root.iterdir()):
                if (d / "oom").is_dir():
                    out.append((d.name, platform, sorted((d / "oom").iterdir())))
    return out


def hlo_texts(max_bytes: int = 4 << 20) -> Dict[str, str]:
    """Every ``.hlo`` / ``.txt`` file under ``tests/data`` smaller than
    ``max_bytes`` (HLO modules, dump files, out-of-memory reports, logs), by
    its path under ``tests/data``: the inputs of the reader's
    differential tests."""
    out = {}
    for p in sorted(DATA.rglob("*")):
        if p.is_file() and p.suffix in (".hlo", ".txt") and p.stat().st_size < max_bytes:
            out[str(p.relative_to(DATA))] = p.read_text(errors="replace")
    return out
