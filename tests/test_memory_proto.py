"""memory.analyze() on XLA's protobufs: the ``.hlo.pb`` of a dump (module and
buffer assignment with the heap simulator's traces), a dump directory read
through its protos, ``memory_analysis().serialized_buffer_assignment_proto``
and the ``*-memory-usage-report.pb``; against the text route on the same dump
and against XLA's own ``memory_analysis()`` (the corpora's
``memory_analysis.json``)."""

import gzip
import shutil

import pytest

import corpora
from xlashape import XlaShapeError, memory
from xlashape.errors import UnreadableInputError

SIZE_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "host_alias_size_in_bytes", "host_temp_size_in_bytes")
PEAK_FIELDS = ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
               "peak_unpadded_heap_bytes")
FIELDS = SIZE_FIELDS + PEAK_FIELDS

WITH_PB = [p for p in corpora.programs() if p.hlo_proto is not None]
WITH_BA_PB = [p for p in corpora.programs() if p.buffer_assignment_proto is not None]


def _figures(mm):
    out = dict(mm.figures())
    if mm.peak is not None:
        out.update(mm.peak.figures)
    return out


def _final(result, prog):
    found = [m for m in result.modules if m.path and f".{prog.module}." in m.path]
    assert len(found) == 1, [m.path for m in result.modules]
    return found[0]


def _allocations(mm):
    return sorted((a.index, a.kind, a.memory_space, a.size_in_bytes, a.unpadded_size_in_bytes)
                  for a in mm.allocations)


def test_corpora_have_protos():
    platforms = {p.platform for p in WITH_PB}
    assert platforms == {"cpu", "gpu", "tpu"}
    assert len(WITH_PB) >= 45


@pytest.mark.parametrize("prog", WITH_PB, ids=corpora.program_id)
def test_hlo_pb_equals_text_route_and_xla(prog):
    pb = memory.analyze(str(prog.hlo_proto), chip=prog.chip)
    assert len(pb.modules) == 1
    pm = pb.modules[0]
    assert pm.source == "dump" and pm.from_proto
    tm = _final(memory.analyze(str(prog.dump_dir), chip=prog.chip), prog)
    assert tm.source == "dump" and not tm.from_proto
    fp, ft = _figures(pm), _figures(tm)
    assert {k: fp[k] for k in FIELDS} == {k: ft[k] for k in FIELDS}
    assert _allocations(pm) == _allocations(tm)
    assert pm.platform == tm.platform == prog.platform
    # and XLA's own numbers, where both XLA reports the field and xlashape
    # prints one (a None carries its reason)
    for k in FIELDS:
        if fp[k] is None:
            assert k in pm.reasons or (pm.peak is not None and k in pm.peak.reasons), k
        elif k in prog.memory_analysis:
            assert fp[k] == prog.memory_analysis[k], k


@pytest.mark.parametrize("prog", WITH_PB, ids=corpora.program_id)
def test_dump_dir_prefer_proto(prog):
    via_proto = _final(memory.analyze(str(prog.dump_dir), chip=prog.chip, prefer="proto"), prog)
    via_text = _final(memory.analyze(str(prog.dump_dir), chip=prog.chip), prog)
    assert via_proto.from_proto and not via_text.from_proto
    assert ({k: _figures(via_proto)[k] for k in FIELDS}
            == {k: _figures(via_text)[k] for k in FIELDS})


def test_agreement_counts():
    """How many fields the proto route prints equal XLA's, per platform (all
    that are printed); the peak is printed on every program with traces."""
    printed = {p: 0 for p in corpora.PLATFORMS}
    for prog in WITH_PB:
        fp = _figures(memory.analyze(str(prog.hlo_proto), chip=prog.chip).modules[0])
        for k in FIELDS:
            if k in prog.memory_analysis and fp[k] is not None:
                assert fp[k] == prog.memory_analysis[k], (prog.name, k)
                printed[prog.platform] += 1
    assert all(n > 0 for n in printed.values()), printed


def test_dump_dir_with_protos_only(tmp_path):
    prog = next(p for p in WITH_PB if p.platform == "gpu")
    for f in prog.dump_dir.iterdir():
        if f.name.endswith(".hlo.pb"):
            shutil.copy(f, tmp_path / f.name)
    got = memory.analyze(str(tmp_path))
    mm = _final(got, prog)
    assert mm.from_proto
    for k in SIZE_FIELDS:
        assert getattr(mm, k) == prog.memory_analysis[k], k


def test_hlo_pb_gz_and_bytes(tmp_path):
    prog = next(p for p in WITH_PB if p.platform == "cpu")
    data = prog.hlo_proto.read_bytes()
    gz = tmp_path / prog.hlo_proto.name.replace(".hlo.pb", ".hlo.pb.gz")
    gz.write_bytes(gzip.compress(data))
    want = _figures(memory.analyze(str(prog.hlo_proto)).modules[0])
    from_gz = memory.analyze(str(gz)).modules[0]
    # bytes carry no file name: the platform comes from the module itself
    from_bytes = memory.analyze(data, platform="cpu").modules[0]
    assert {k: _figures(from_gz)[k] for k in FIELDS} == {k: want[k] for k in FIELDS}
    assert {k: _figures(from_bytes)[k] for k in FIELDS} == {k: want[k] for k in FIELDS}


@pytest.mark.parametrize("prog", WITH_BA_PB, ids=corpora.program_id)
def test_serialized_buffer_assignment_proto(prog):
    data = prog.buffer_assignment_proto.read_bytes()
    mm = memory.analyze(data, platform=prog.platform).modules[0]
    assert mm.source == "dump" and mm.from_proto
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes"):
        assert getattr(mm, k) == prog.memory_analysis[k], k
    if prog.platform != "tpu":
        assert mm.temp_size_in_bytes == prog.memory_analysis["temp_size_in_bytes"]
    # no traces and no shapes in it: the heap peak and unpadded figures are
    # None with the reason, never a guess under XLA's name
    assert mm.peak.figures["peak_unpadded_heap_bytes"] is None
    assert ".hlo.pb" in mm.peak.reasons["peak_unpadded_heap_bytes"]
    if prog.platform != "cpu":
        assert mm.peak.figures["peak_memory_in_bytes"] is None
    else:
        # XLA:CPU reads this very proto: its peak is the whole-program buffers
        want = prog.memory_analysis["peak_memory_in_bytes"]
        assert mm.peak.figures["peak_memory_in_bytes"] == want
    # the totals need nothing but the allocations: XLA's where the platform's
    # rule is one number (on CPU: no thread-local allocations), else None with
    # the reason
    for k in ("total_allocation_bytes", "indefinite_allocations"):
        got = mm.peak.figures[k]
        if got is None:
            assert prog.platform == "cpu" and "thread-local" in mm.peak.reasons[k], k
        elif k in prog.memory_analysis:
            assert got == prog.memory_analysis[k], k
    # the path works too, and without a platform temp is not printed as XLA's
    bare = memory.analyze(str(prog.buffer_assignment_proto)).modules[0]
    assert bare.argument_size_in_bytes == prog.memory_analysis["argument_size_in_bytes"]
    assert bare.temp_size_in_bytes is None and "platform" in bare.reasons["temp_size_in_bytes"]


def test_memory_usage_report_pb():
    prog = next(p for p in WITH_PB if p.memory_usage_report_proto is not None)
    # beside its .hlo.pb: the module's figures
    mm = memory.analyze(str(prog.memory_usage_report_proto)).modules[0]
    assert mm.argument_size_in_bytes == prog.memory_analysis["argument_size_in_bytes"]
    # alone (bytes): the memory spaces' totals; the XLA fields None with the reason
    alone = memory.analyze(prog.memory_usage_report_proto.read_bytes()).modules[0]
    assert alone.source == "memory-report" and alone.from_proto
    assert alone.argument_size_in_bytes is None
    assert "hlo.pb" in alone.reasons["argument_size_in_bytes"]
    assert alone.space(0).reported_total == mm.space(0).reported_total == mm.space(0).total


@pytest.mark.parametrize("data", [b"\x0a\xff\xff\xff\x0f garbage", b"\x00\x01\x02\x03" * 10,
                                  b"\x08\x96\x01"])
def test_bad_bytes(data, tmp_path):
    with pytest.raises(XlaShapeError):
        memory.analyze(data)
    path = tmp_path / "module_0001.jit_f.cpu_after_optimizations.hlo.pb"
    path.write_bytes(data)
    with pytest.raises(UnreadableInputError) as e:
        memory.analyze(str(path))
    assert "module_0001.jit_f.cpu_after_optimizations.hlo.pb" in str(e.value)


def test_truncated_hlo_pb(tmp_path):
    prog = WITH_PB[0]
    path = tmp_path / prog.hlo_proto.name
    path.write_bytes(prog.hlo_proto.read_bytes()[:-7])
    with pytest.raises(UnreadableInputError) as e:
        memory.analyze(str(path))
    assert prog.hlo_proto.name in str(e.value)


def test_prefer_checked():
    with pytest.raises(ValueError):
        memory.analyze(str(WITH_PB[0].hlo_proto), prefer="binary")


@pytest.mark.parametrize("prog", WITH_PB, ids=corpora.program_id)
def test_live_at_peak_from_traces(prog):
    """The buffers live at the peak, from the heap simulator's trace, make
    the same bytes as the text route's replay of the live ranges (which value
    of a shared buffer names it can differ), with op paths from the proto's
    metadata."""
    pm = memory.analyze(str(prog.hlo_proto), chip=prog.chip).modules[0]
    tm = _final(memory.analyze(str(prog.dump_dir), chip=prog.chip), prog)
    assert pm.peak.live_at_peak_bytes == tm.peak.live_at_peak_bytes
    assert (sum(b.unpadded_size for b in pm.peak.live_at_peak)
            == sum(b.unpadded_size for b in tm.peak.live_at_peak))
    with_op = [b for b in tm.peak.live_at_peak if b.op_name]
    if with_op:
        assert any(b.op_name for b in pm.peak.live_at_peak)


# -- the CLI -----------------------------------------------------------------------

def _gpu_prog():
    return next(p for p in WITH_PB if p.platform == "gpu" and p.name == "dev_fori_cumulative")


def test_cli_memory_hlo_pb_json():
    import json
    from cli_util import ok
    prog = _gpu_prog()
    doc = json.loads(ok("memory", str(prog.hlo_proto), "--json").stdout)
    (m,) = doc["modules"]
    assert m["from_proto"] is True
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"):
        assert m[k] == prog.memory_analysis[k]
    assert m["peak"]["peak_memory_in_bytes"] == prog.memory_analysis["peak_memory_in_bytes"]
    assert m["peak"]["live_at_peak"]
    text = ok("memory", str(prog.hlo_proto)).stdout
    assert "read from XLA's protobuf" in text
    assert "of the heap simulator's trace" in " ".join(text.split())   # not a program position


def test_cli_memory_proto_flag_html_and_diff(tmp_path):
    import json
    from cli_util import fails, ok
    prog = _gpu_prog()
    page = tmp_path / "m.html"
    text = ok("memory", str(prog.dump_dir), "--proto", "--html", str(page)).stdout
    assert "read from XLA's protobuf" in text
    assert "trace events" in page.read_text()   # the x axis is not program order
    doc = json.loads(ok("memory", "diff", str(prog.hlo_proto), str(prog.dump_dir),
                        "--json").stdout)
    assert len(doc["figures"]) >= 10
    for name, f in doc["figures"].items():
        assert f["a"] == f["b"], name
    assert doc["buffers_added"] == doc["buffers_removed"] == doc["buffers_changed"] == []
    bad = tmp_path / "x.hlo.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0f")
    r = fails("memory", str(bad))
    assert "x.hlo.pb" in r.stderr


def test_mutated_hlo_pb_bytes():
    """Bit flips, cuts and insertions in a real .hlo.pb: a result or an
    error of the XlaShapeError family, never another exception."""
    import random
    rng = random.Random(19)
    originals = [p.hlo_proto.read_bytes() for p in WITH_PB[:6]]
    outcomes = set()
    for _ in range(300):
        data = bytearray(rng.choice(originals))
        how = rng.randrange(3)
        if how == 0:
            for _ in range(rng.randrange(1, 5)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1:
            del data[rng.randrange(len(data)):]
        else:
            i = rng.randrange(len(data))
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        try:
            memory.analyze(bytes(data))
            outcomes.add("read")
        except XlaShapeError:
            outcomes.add("error")
    assert outcomes == {"read", "error"}


def test_hlo_proto_without_buffer_assignment():
    """A module before optimizations (or as_serialized_hlo_module_proto()'s
    bare HloModuleProto) has no buffer assignment: the text figures of its
    entry, temporaries null, and a warning that says why."""
    from xlashape import protos
    prog = _gpu_prog()
    hlo = protos.read_hlo_proto(str(prog.hlo_proto))
    hlo.ClearField("buffer_assignment")
    for data in (hlo.SerializeToString(), hlo.hlo_module.SerializeToString()):
        mm = memory.analyze(data).modules[0]
        assert mm.from_proto
        assert mm.argument_size_in_bytes == prog.memory_analysis["argument_size_in_bytes"]
        assert mm.temp_size_in_bytes is None
        assert any("no buffer assignment" in w for w in mm.warnings)
