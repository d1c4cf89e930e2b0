"""XLA's protobuf messages (xlashape.protos): reading what XLA:GPU wrote.

The files in data/protos were written by XLA (see data/protos/README.md);
the figures compared against come from XLA's own text dumps of the same
compilation, never from the code under test.
"""

import gzip
import os
import re

import pytest

from xlashape import protos
from xlashape.errors import UnreadableInputError, XlaShapeError

DATA = os.path.join(os.path.dirname(__file__), "data", "protos")
FORI = os.path.join(DATA, "module_89286.jit_dev_fori_cumulative.sm_9.0a_gpu_after_optimizations")
GEMM = os.path.join(DATA, "module_58194.jit_dev_int8_gemm.sm_9.0a_gpu_after_optimizations")
GEMM_BEFORE = os.path.join(DATA, "module_58194.jit_dev_int8_gemm.before_optimizations")


def _read(path):
    with open(path, "rb") as fh:
        return fh.read()


def _text_allocations(path):
    """(index, size) of every allocation in XLA's buffer-assignment text."""
    with open(path) as fh:
        text = fh.read()
    return [(int(i), int(s)) for i, s in re.findall(r"^allocation (\d+): size (\d+)", text, re.M)]


@pytest.mark.parametrize("stem", [FORI, GEMM])
def test_hlo_proto_buffer_assignment_matches_xla_text(stem):
    proto = protos.read_hlo_proto(stem + ".hlo.pb")
    ba = proto.buffer_assignment
    got = [(a.index, a.size) for a in ba.buffer_allocations]
    want = _text_allocations(stem + "-buffer-assignment.txt")
    assert want and got == want
    # every assigned logical buffer is one of the logical buffers
    ids = {lb.id for lb in ba.logical_buffers}
    for alloc in ba.buffer_allocations:
        for a in alloc.assigned:
            assert a.logical_buffer_id in ids


@pytest.mark.parametrize("stem", [FORI, GEMM])
def test_hlo_proto_module_matches_xla_text(stem):
    module = protos.read_hlo_proto(stem + ".hlo.pb").hlo_module
    with open(stem + ".txt") as fh:
        text = fh.read()
    assert re.match(r"HloModule (\S+),", text).group(1) == module.name
    # every instruction the text defines is in the proto (the text of this
    # XLA elides some get-tuple-elements: `%while.6#1`, so not conversely)
    names = {inst.name for comp in module.computations for inst in comp.instructions}
    defined = re.findall(r"^\s*(?:ROOT )?%?([\w.-]+) = ", text, re.M)
    assert defined and set(defined) <= names
    entry = [c for c in module.computations if c.id == module.entry_computation_id]
    assert len(entry) == 1 and entry[0].name == module.entry_computation_name


def test_heap_simulator_traces_refer_to_logical_buffers():
    ba = protos.read_hlo_proto(FORI + ".hlo.pb").buffer_assignment
    assert len(ba.heap_simulator_traces) >= 1
    ids = {lb.id for lb in ba.logical_buffers}
    kinds = set()
    for trace in ba.heap_simulator_traces:
        for ev in trace.events:
            assert ev.buffer_id in ids
            kinds.add(protos.HeapSimulatorTrace.Event.Kind.Name(ev.kind))
    assert "ALLOC" in kinds and "FREE" in kinds


def test_unoptimized_module_has_no_buffer_assignment():
    proto = protos.read_hlo_proto(GEMM_BEFORE + ".hlo.pb")
    assert not proto.HasField("buffer_assignment")
    assert proto.hlo_module.computations


@pytest.mark.parametrize("stem", [FORI, GEMM])
def test_memory_usage_report_matches_xla_text(stem):
    report = protos.read_memory_usage_report(stem + "-memory-usage-report.pb")
    with open(stem + "-memory-usage-report.txt") as fh:
        text = fh.read()
    totals = [int(t) for t in re.findall(r"^Total bytes: (\d+)", text, re.M)]
    colors = [int(c) for c in re.findall(r"\(color=(\d+)\)", text)]
    spaces = report.memory_space_allocation_entries
    assert [s.total_bytes for s in spaces] == totals
    assert [s.memory_space_color for s in spaces] == colors
    assert all(s.HasField("memory_space_color") for s in spaces)
    # the total is the sum of the allocations' sizes
    for s in spaces:
        assert s.total_bytes == sum(e.size for e in s.allocation_entries)


@pytest.mark.parametrize("suffix", [".hlo.pb", "-memory-usage-report.pb"])
def test_reserialization_keeps_every_byte(suffix):
    raw = _read(GEMM + suffix)
    if suffix == ".hlo.pb":
        msg = protos.read_hlo_proto(raw)
        # undeclared fields come back as unknown fields, appended: same bytes, maybe reordered
        again = msg.SerializeToString()
        assert len(again) == len(raw) and sorted(again) == sorted(raw)
        assert protos.parse_message(protos.HloProto, again) == msg
    else:
        msg = protos.read_memory_usage_report(raw)
        assert msg.SerializeToString() == raw  # every field declared: identical bytes


def test_unknown_fields_are_kept_and_listed():
    msg = protos.read_hlo_proto(GEMM + ".hlo.pb")
    unknown = protos.unknown_field_numbers(msg)
    # HloModuleProto.device_assignment (15) is not declared here; XLA:GPU writes it
    assert ("xla.HloModuleProto", 15) in unknown
    assert all(isinstance(n, int) for _, n in unknown)


def test_gzip_and_bare_module(tmp_path):
    raw = _read(GEMM + ".hlo.pb")
    gz = tmp_path / "m.hlo.pb.gz"
    gz.write_bytes(gzip.compress(raw))
    assert protos.read_hlo_proto(str(gz)) == protos.read_hlo_proto(raw)
    module = protos.read_hlo_proto(raw).hlo_module
    bare = protos.read_hlo_proto(module.SerializeToString())
    assert bare.hlo_module == module and not bare.HasField("buffer_assignment")
    assert protos.read_hlo_module_proto(raw) == module


@pytest.mark.parametrize("data", [
    b"", b"\x0a", b"\x0a\x05ab", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x1f\x8b\x08\x00garbage", b"\x0f", b"\x0a\x80\x80\x80\x80\x10",
])
def test_malformed_bytes_raise_the_error_family(data):
    for reader in (protos.read_hlo_proto, protos.read_buffer_assignment,
                   protos.read_memory_usage_report):
        with pytest.raises(UnreadableInputError) as exc:
            reader(data)
        assert isinstance(exc.value, XlaShapeError) and isinstance(exc.value, ValueError)


def test_error_names_the_file(tmp_path):
    bad = tmp_path / "broken.hlo.pb"
    bad.write_bytes(_read(GEMM + ".hlo.pb")[:100])
    with pytest.raises(UnreadableInputError, match="broken.hlo.pb"):
        protos.read_hlo_proto(str(bad))
    with pytest.raises(UnreadableInputError, match="cannot read"):
        protos.read_hlo_proto(str(tmp_path / "missing.hlo.pb"))
    with pytest.raises(UnreadableInputError):
        protos.read_hlo_proto(12)


def test_messages_live_in_a_private_pool():
    from google.protobuf import descriptor_pool

    with pytest.raises(KeyError):
        descriptor_pool.Default().FindFileByName("xlashape/hlo_subset.proto")
    assert protos.HloProto.DESCRIPTOR.file.pool is not descriptor_pool.Default()


DATA_ALL = os.path.join(os.path.dirname(__file__), "data")


def _all(pattern):
    import glob

    return sorted(glob.glob(os.path.join(DATA_ALL, "**", pattern), recursive=True))


def test_every_memory_usage_report_reads_and_writes_back_identically():
    paths = _all("*-memory-usage-report.pb")
    assert paths
    for path in paths:
        raw = _read(path)
        report = protos.read_memory_usage_report(raw)
        assert report.SerializeToString() == raw, path
        assert protos.unknown_field_numbers(report) == [], path
        with open(path[:-len(".pb")] + ".txt") as fh:
            totals = [int(t) for t in re.findall(r"^Total bytes: (\d+)", fh.read(), re.M)]
        assert [s.total_bytes for s in report.memory_space_allocation_entries] == totals, path


def test_every_hlo_proto_reads():
    paths = _all("*.hlo.pb") + _all("*.hlo.pb.gz")
    assert paths
    for path in paths:
        proto = protos.read_hlo_proto(path)
        assert proto.hlo_module.computations, path
        again = protos.parse_message(protos.HloProto, proto.SerializeToString())
        assert again == proto, path


def test_serialized_buffer_assignment_is_the_dumps_without_heap_traces():
    # memory_analysis().serialized_buffer_assignment_proto (saved by the CPU
    # corpus generator) against the buffer assignment in the same
    # compilation's .hlo.pb: the same allocations and logical buffers
    import glob

    pairs = 0
    for path in _all("buffer_assignment.pb"):
        dumps = glob.glob(os.path.join(os.path.dirname(path), "dump", "*.hlo.pb"))
        if not dumps:
            continue
        ba = protos.read_buffer_assignment(path)
        full = protos.read_hlo_proto(dumps[0]).buffer_assignment
        assert list(ba.buffer_allocations) == list(full.buffer_allocations), path
        assert list(ba.logical_buffers) == list(full.logical_buffers), path
        pairs += 1
    if not pairs:
        pytest.skip("no serialized buffer assignments in the test data")
