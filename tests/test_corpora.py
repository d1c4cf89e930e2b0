"""The real-compiler corpora themselves (``tests/data/{cpu,gpu,tpu}_corpus``, and
``cpu_corpus_jax011`` / ``cpu_corpus_jax012``: the CPU programs compiled again by
jax 0.11.2 and 0.12.0.1):
every program has the files its corpus README promises, XLA's figures are
whole, no fixture holds a path of the machine that made it, the protos are
well-formed, and :func:`xlashape.memory.analyze` reads each dump to XLA's own
argument/output/alias/temp sizes.

These tests read the committed files only (no jax). The figures they compare
with were written by XLA (see each corpus's README and generator).
"""

from __future__ import annotations

import json
import re

import pytest

import corpora
from xlashape.memory import analyze

ALL = corpora.programs()
BY_PLATFORM = {p: corpora.programs(p) for p in corpora.PLATFORMS}
ids = corpora.program_id

MACHINE_PATH = re.compile(rb"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/|/proc/|/dev/shm|"
                          rb"site-packages/)")
MAX_FILE = 1 << 20
DUMP_SUFFIXES = (".txt", "-buffer-assignment.txt", "-buffer-assignment-values.txt",
                 "-live-range.txt", "-memory-usage-report.txt", "-memory-usage-report.pb",
                 ".hlo.pb")
SIZE_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "host_alias_size_in_bytes", "host_temp_size_in_bytes")
CPU_CORPORA = corpora.corpus_dirs("cpu")
NEW_FILES = [p for d in CPU_CORPORA + [corpora.CORPUS_DIRS["gpu"]] for p in sorted(d.rglob("*"))
             if p.is_file()]
ALL_FILES = NEW_FILES + [p for p in sorted(corpora.CORPUS_DIRS["tpu"].rglob("*")) if p.is_file()]


def test_corpus_sizes():
    cpu = {}
    for p in BY_PLATFORM["cpu"]:
        cpu.setdefault(p.corpus, []).append(p)
    assert {k: len(v) >= 5 for k, v in cpu.items()} == {
        "cpu_corpus": True, "cpu_corpus_jax011": True, "cpu_corpus_jax012": True}
    assert len(cpu["cpu_corpus"]) >= 20 and len(cpu["cpu_corpus_jax012"]) >= 20
    assert len(BY_PLATFORM["gpu"]) == 16
    assert len(BY_PLATFORM["tpu"]) >= 15
    with_dumps = {p: sum(x.dump_dir is not None for x in v) for p, v in BY_PLATFORM.items()}
    assert with_dumps["cpu"] == len(BY_PLATFORM["cpu"])
    assert with_dumps["gpu"] == 16
    assert with_dumps["tpu"] >= 15
    # dumps written with --xla_dump_hlo_as_proto: the module and its buffer
    # assignment as an HloProto, and the live ranges
    for platform, least in (("cpu", 20), ("gpu", 15), ("tpu", 15)):
        progs = BY_PLATFORM[platform]
        assert sum(p.hlo_proto is not None for p in progs) >= least, platform
        assert sum(p.dump_file("-live-range.txt") is not None for p in progs) >= least, platform
    assert len([c for c in corpora.oom_cases() if c[1] == "gpu"]) == 2
    # a few MB in all (2 MB a CPU corpus), no file over 1 MB
    assert sum(p.stat().st_size for p in NEW_FILES) < 6 << 20
    assert max(p.stat().st_size for p in ALL_FILES) < MAX_FILE


@pytest.mark.parametrize("prog", ALL, ids=ids)
def test_program_files(prog):
    assert prog.module_hlo.is_file()
    with open(prog.module_hlo) as f:
        assert f.readline().startswith(f"HloModule {prog.module}")
    for fname in prog.info.get("dump_files", []):
        assert (prog.dump_dir / fname).is_file(), fname
    if prog.dump_dir is not None:
        names = sorted(p.name for p in prog.dump_dir.iterdir())
        assert names == sorted(prog.info["dump_files"])
        assert prog.dump_file(".txt") is not None
        assert prog.dump_file("-buffer-assignment.txt") is not None
        assert prog.dump_file("-memory-usage-report.txt") is not None
    if prog.dump_dir is not None and "dump_dropped" in prog.info:
        # every kind of dump file of the final module, unless it was too big
        # (example_dump/ of the TPU corpus predates the proto flag)
        dropped = prog.info["dump_dropped"]
        for suffix in DUMP_SUFFIXES:
            if prog.dump_file(suffix) is None:
                assert any(n.endswith("after_optimizations" + suffix) for n in dropped), suffix
        if prog.platform != "tpu":  # a TPU host offload adds XLA:CPU's host module
            assert {n.split(".")[1] for n in names} == {prog.module}
    if prog.platform == "cpu":
        # the serialized buffer assignment is never empty on the CPU, and is the
        # length memory_analysis() said
        assert prog.buffer_assignment_proto is not None
        assert prog.buffer_assignment_proto.stat().st_size == \
            prog.info["memory_analysis"]["serialized_buffer_assignment_proto_length"] > 0


@pytest.mark.parametrize("prog", ALL, ids=ids)
def test_memory_analysis_fields(prog):
    ma = prog.memory_analysis
    for k in corpora.COMMON_FIELDS:
        assert isinstance(ma[k], int) and ma[k] >= 0, k
    if prog.platform == "cpu" and prog.jax.startswith("0.10."):
        assert not set(corpora.NEWER_FIELDS) & set(ma)
    else:
        for k in corpora.NEWER_FIELDS:
            assert isinstance(ma[k], int) and ma[k] >= 0, k
    assert "description" in prog.info and "input_formats" in prog.info


@pytest.mark.parametrize("prog", BY_PLATFORM["cpu"], ids=ids)
def test_each_cpu_corpus_is_one_jax_version(prog):
    # cpu_corpus: jax 0.10.x; cpu_corpus_jax0NN: jax 0.NN (the generator's
    # default directory), jax and jaxlib of one release
    v = prog.info["versions"]
    assert v["jax"] == v["jaxlib"] == prog.jax
    minor = prog.jax.split(".")[1]
    assert prog.corpus == ("cpu_corpus" if minor == "10" else f"cpu_corpus_jax0{minor}")


def test_gpu_index_agrees_with_programs():
    with open(corpora.CORPUS_DIRS["gpu"] / "index.json") as f:
        index = json.load(f)
    assert index["device"]["memory_stats"]["bytes_limit"] == 112583507968
    assert index["versions"] == {"jax": "0.11.2", "jaxlib": "0.11.2"}
    assert sorted(index["programs"]) == [p.name for p in BY_PLATFORM["gpu"]]
    for p in BY_PLATFORM["gpu"]:
        assert index["programs"][p.name]["memory_analysis"] == p.info["memory_analysis"]


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(corpora.DATA)))
def test_no_machine_paths(path):
    data = path.read_bytes()
    m = MACHINE_PATH.search(data)
    assert m is None, data[max(0, m.start() - 60):m.end() + 60]


def _walk_proto(data: bytes, depth: int = 0) -> int:
    """Walk protobuf wire format; return the number of fields, raise on a
    malformed message (a length that runs past the end, a bad wire type)."""
    i, n, count = 0, len(data), 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            if i >= n or shift > 63:
                raise ValueError("truncated varint")
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < n:
        key = varint()
        wire, field = key & 7, key >> 3
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length = varint()
            if i + length > n:
                raise ValueError("length past the end")
            i += length
        else:
            raise ValueError(f"wire type {wire}")
        if i > n:
            raise ValueError("fixed field past the end")
        count += 1
    return count


PROTOS = [p for p in ALL_FILES if p.suffix == ".pb"]


@pytest.mark.parametrize("path", PROTOS, ids=lambda p: str(p.relative_to(corpora.DATA)))
def test_protos_are_well_formed(path):
    assert _walk_proto(path.read_bytes()) > 0
    # and a one-byte change of a length is caught (the walker can fail)
    bad = path.read_bytes() + b"\x0a\x7f"
    with pytest.raises(ValueError):
        _walk_proto(bad)


# -- xlashape.memory.analyze against XLA's figures ------------------------------

# Where the existing reader disagrees with memory_analysis(), by (platform,
# program): each is an xfail(strict=True), so fixing one makes its test fail
# until it is taken off these lists.
WRONG_TEXT: dict = {}


def _analyzed(prog, source):
    res = analyze(source, chip=prog.chip)
    mods = [m for m in res.modules if m.name == prog.module]
    assert len(mods) == 1, [m.name for m in res.modules]
    return mods[0]


def _cases(progs, wrong):
    out = []
    for p in progs:
        reason = wrong.get((p.platform, p.name))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(p, id=ids(p), marks=marks))
    return out


DUMPED = [p for p in ALL if p.dump_dir is not None]


@pytest.mark.parametrize("prog", _cases(DUMPED, {}))
def test_analyze_dump_sizes(prog):
    # arguments, outputs, aliases and their host variants from the dump's
    # buffer assignment: XLA's numbers on every platform
    m = _analyzed(prog, prog.dump_dir)
    fields = [k for k in SIZE_FIELDS if k not in ("temp_size_in_bytes", "host_temp_size_in_bytes")]
    assert {k: getattr(m, k) for k in fields} == {k: prog.memory_analysis[k] for k in fields}


@pytest.mark.parametrize("prog", _cases(DUMPED, {}))
def test_analyze_dump_temp(prog):
    m = _analyzed(prog, prog.dump_dir)
    if prog.platform == "tpu":
        # libtpu's allocator decides XLA:TPU's temp after the buffer
        # assignment: no dump file determines it, so it is null with the reason
        assert m.temp_size_in_bytes is None
        assert "libtpu" in m.reasons["temp_size_in_bytes"]
        assert m.hbm_temp_allocation_bytes is not None
        return
    assert m.temp_size_in_bytes == prog.memory_analysis["temp_size_in_bytes"]
    assert m.host_temp_size_in_bytes in (None, prog.memory_analysis["host_temp_size_in_bytes"])


@pytest.mark.parametrize("prog", _cases(ALL, WRONG_TEXT))
def test_analyze_module_text_sizes(prog):
    # the module text alone: arguments, outputs and aliases (no buffer
    # assignment, so no temporaries: temp is None, never a guess)
    m = _analyzed(prog, prog.module_hlo)
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "host_argument_size_in_bytes", "host_output_size_in_bytes")
    assert {k: getattr(m, k) for k in fields} == {k: prog.memory_analysis[k] for k in fields}
    assert m.temp_size_in_bytes is None


HLO_PROTOS = [p for p in PROTOS if p.name.endswith("after_optimizations.hlo.pb")]


@pytest.mark.parametrize("path", HLO_PROTOS, ids=lambda p: str(p.relative_to(corpora.DATA)))
def test_hlo_protos_read_back_with_xla(path):
    # with jaxlib: XLA itself reads the module of each HloProto (field 1,
    # hlo_module), so the path scrubbing kept the protos valid
    pytest.importorskip("jax")
    from jax._src.lib import xla_client

    module = next(body for field, body in _fields(path.read_bytes()) if field == 1)
    kind = type(xla_client.hlo.hlo_module_from_text(
        "HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }"))
    m = kind.from_serialized_hlo_module_proto(module)
    assert m.name == path.name.split(".")[1]


def _fields(data: bytes):
    """The length-delimited top-level fields of a message: (number, bytes)."""
    i, n, out = 0, len(data), []

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < n:
        key = varint()
        wire = key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            length = varint()
            out.append((key >> 3, data[i:i + length]))
            i += length
    return out
