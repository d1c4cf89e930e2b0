"""XLA's protobufs as hostile input (issue 29), on mutations of the real
protos in ``data/protos`` and the corpora's dumps:

- a FIFO (or a dangling link) named like a ``.hlo.pb``: in a dump directory
  of protos, with ``prefer="proto"``, beside a ``-memory-usage-report.pb``,
  given to the readers; a FIFO is skipped with a ``DumpWarning`` or refused
  with ``UnreadableInputError``, never opened (a child process with a time
  limit: opening one waits forever);
- a gzip bomb (1 MB that unpacks to 1 GiB: zeros, a real proto followed by
  an endless field, a real proto followed by endless empty computations) read
  in a child process whose address space is limited to what it had plus
  512 MiB: refused at the decompression limit, with a message naming the
  limit and how to raise it; the limit set by argument and by environment;
- an uncompressed ``.hlo.pb`` (and bytes, and a bare ``HloModuleProto``)
  held once, not copied (``tracemalloc``);
- corrupt, cut-off and CRC-damaged gzip streams (``.hlo.pb.gz``,
  ``.txt.gz``) raising ``UnreadableInputError`` naming the file from every
  reader, wherever in the stream the damage is;
- negative sizes, offsets and shape indices in a ``BufferAssignmentProto``
  or a memory-usage report refused (``ProtoDecodeError`` naming the field),
  never printed as negative figures nor used to index a tuple from its end;
- names that are not HLO names (a newline that would start a new
  instruction, spaces, quotes, line separators) printed so that the text
  reads back as the same instructions.
"""

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from xlashape import hlo_proto, memory, protos
from xlashape.errors import ProtoDecodeError, ShapeValueError, UnreadableInputError, XlaShapeError
from xlashape.hlo_module import iter_instructions, parse_hlo_module, read_hlo_file, scan_calls
from xlashape.xla_dump import DumpWarning

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FORI = "module_89286.jit_dev_fori_cumulative.sm_9.0a_gpu_after_optimizations"
FORI_PB = DATA / "protos" / (FORI + ".hlo.pb")
FORI_TXT = DATA / "protos" / (FORI + ".txt")
FORI_REPORT = DATA / "protos" / (FORI + "-memory-usage-report.pb")
GEMM_PB = DATA / "protos" / "module_58194.jit_dev_int8_gemm.sm_9.0a_gpu_after_optimizations.hlo.pb"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _child(code, *args, timeout=120, env=None):
    """Run ``code`` in a fresh interpreter with a time limit: a hang fails the
    test instead of the run."""
    try:
        return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                              text=True, timeout=timeout,
                              env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child did not finish in {timeout} s (a hang)")


def _fori():
    return protos.read_hlo_proto(str(FORI_PB))


# -- FIFOs and dangling links ----------------------------------------------------------

_FIFO_CHILD = r"""
import json, os, sys
from xlashape import memory, protos, hlo_proto
from xlashape.cli import main
from xlashape.errors import UnreadableInputError
from xlashape.xla_dump import DumpWarning
d, fifo, report = sys.argv[1:4]
out = {}
for prefer in ("text", "proto"):
    r = memory.analyze(d, prefer=prefer)
    out[prefer] = [[m.name for m in r.modules],
                   [os.path.basename(w.path) for w in r.warnings if isinstance(w, DumpWarning)]]
out["cli"] = main(["memory", d])
out["cli_proto"] = main(["memory", "--proto", d])
r = memory.analyze(report)
out["report"] = [[m.source for m in r.modules],
                 [os.path.basename(w.path) for w in r.warnings if isinstance(w, DumpWarning)]]
out["cli_report"] = main(["memory", report])
refused = []
for reader in (protos.read_hlo_proto, protos.read_buffer_assignment,
               protos.read_memory_usage_report, protos.read_xla_proto,
               hlo_proto.read_hlo_proto_module, memory.analyze):
    try:
        reader(fifo)
    except UnreadableInputError as e:
        refused.append(os.path.basename(fifo) in str(e) and "FIFO" in str(e))
out["refused"] = refused
out["cli_hlo"] = main(["hlo", fifo])
print(json.dumps(out))
"""


@needs_fifo
def test_a_fifo_named_like_a_hlo_pb_is_skipped_or_refused_never_opened(tmp_path):
    d = tmp_path / "dump"
    d.mkdir()
    shutil.copy(FORI_PB, d / FORI_PB.name)
    fifo = d / "module_0001.jit_other.sm_9.0a_gpu_after_optimizations.hlo.pb"
    os.mkfifo(fifo)
    # a memory-usage report whose .hlo.pb beside it is a FIFO
    r = tmp_path / "beside"
    r.mkdir()
    report = r / "module_0002.jit_f.sm_9.0a_gpu_after_optimizations-memory-usage-report.pb"
    shutil.copy(FORI_REPORT, report)
    os.mkfifo(r / "module_0002.jit_f.sm_9.0a_gpu_after_optimizations.hlo.pb")
    p = _child(_FIFO_CHILD, d, fifo, report)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    for prefer in ("text", "proto"):
        assert out[prefer] == [["jit_dev_fori_cumulative"], [fifo.name]], prefer
    assert out["cli"] == out["cli_proto"] == out["cli_report"] == 0
    assert f"{fifo.name}: skipped, a FIFO (named pipe), not a regular file" in p.stderr
    # the report alone (its .hlo.pb is a FIFO), saying which file was skipped
    assert out["report"] == [["memory-report"],
                             ["module_0002.jit_f.sm_9.0a_gpu_after_optimizations.hlo.pb"]]
    assert out["refused"] == [True] * 6
    assert out["cli_hlo"] == 2


def test_a_dangling_hlo_pb_link_is_skipped_with_a_warning(tmp_path):
    shutil.copy(FORI_PB, tmp_path / FORI_PB.name)
    link = tmp_path / "module_0001.jit_gone.sm_9.0a_gpu_after_optimizations.hlo.pb"
    link.symlink_to(tmp_path / "nowhere.hlo.pb")
    loop = tmp_path / "module_0002.jit_loop.sm_9.0a_gpu_after_optimizations.hlo.pb"
    loop.symlink_to(loop)
    for prefer in ("text", "proto"):
        seen = []
        r = memory.analyze(str(tmp_path), prefer=prefer, on_warning=seen.append)
        assert [m.name for m in r.modules] == ["jit_dev_fori_cumulative"]
        skipped = {os.path.basename(w.path): w.message for w in seen if isinstance(w, DumpWarning)}
        assert skipped == {link.name: "skipped, a dangling symbolic link (its target does not exist)",
                           loop.name: "skipped, a symbolic link that loops"}
    # beside a memory-usage report: the report alone, with the warning
    report = tmp_path / "module_0001.jit_gone.sm_9.0a_gpu_after_optimizations-memory-usage-report.pb"
    shutil.copy(FORI_REPORT, report)
    r = memory.analyze(str(report))
    assert r.modules[0].source == "memory-report"
    assert [os.path.basename(w.path) for w in r.warnings] == [link.name]


@needs_fifo
def test_no_modules_says_which_files_were_skipped(tmp_path):
    code = r"""
import sys
from xlashape import memory
try:
    memory.analyze(sys.argv[1])
except ValueError as e:
    print(e)
"""
    os.mkfifo(tmp_path / "module_0001.jit_a.cpu_after_optimizations.txt")
    p = _child(code, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "no XLA modules in" in p.stdout
    assert "module_0001.jit_a.cpu_after_optimizations.txt: skipped, a FIFO" in p.stdout


# -- gzip bombs and the decompression limit ------------------------------------------------

def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _bomb(path, prefix, fill, total):
    """A gzip file of ``prefix`` then ``fill`` repeated to ``total`` bytes: one
    member per 64 MiB of filler (a concatenation of gzip members is one
    stream), so it is made in a second, about 1 KB per MiB."""
    block = fill * ((64 << 20) // len(fill))
    member = gzip.compress(block, 9)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(prefix, 9))
        for _ in range(total // len(block)):
            fh.write(member)
    return path


def _nested(inner: bytes, *tags: int) -> bytes:
    """``inner`` wrapped in length-delimited fields, innermost tag first."""
    for tag in tags:
        inner = bytes([tag]) + _varint(len(inner)) + inner
    return inner


def _dense(mib=16):
    """HloProto bytes that protobuf parses into many times their size: empty
    computations, empty instructions, instructions of 11 bytes (``mib`` MiB
    of each), and packed numbers (a field of ``4 * mib`` MiB of zeros, 8 bytes
    each in memory)."""
    size = mib << 20
    out = []
    for name, fill, wrap in (("computations", b"\x1a\x00", (0x0A,)),
                             ("instructions", b"\x12\x00", (0x1A, 0x0A)),
                             ("abs", b"\x12\x09\x12\x03abs\x1a\x02\x10\x0b", (0x1A, 0x0A))):
        out.append((name, _nested(fill * (size // len(fill)), *wrap)))
    out.append(("packed", _nested(b"\x72" + _varint(4 * size) + bytes(4 * size), 0x12, 0x1A, 0x0A)))
    return out


def _small_bombs(tmp_path):
    """gzip inputs that unpack to less than the limit (8 to 32 MiB, from 8 to
    33 KB) but that protobuf would parse into gigabytes (:func:`_dense`)."""
    out = []
    for name, data in _dense(8):
        path = tmp_path / f"{name}.hlo.pb.gz"
        path.write_bytes(gzip.compress(data, 9))
        out.append(path)
    return out


_BOMB_CHILD = r"""
import json, os, resource, sys
from xlashape import memory, protos
from xlashape.errors import UnreadableInputError
def vm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmSize:"))
limit = vm() + (512 << 20)                  # what it has, plus 512 MiB
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
out = {}
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    for source in (path, data):
        for read in (protos.read_hlo_proto, memory.analyze):
            key = " ".join((os.path.basename(path), read.__name__, type(source).__name__))
            try:
                read(source)
                out[key] = "read"
            except UnreadableInputError as e:
                msg = str(e)
                out[key] = ("limit" if "decompresses to more than 268435456 bytes" in msg
                            and "XLASHAPE_MAX_DECOMPRESSED_BYTES" in msg else
                            "parse" if "would take more than 268435456 bytes of memory" in msg
                            and "XLASHAPE_MAX_DECOMPRESSED_BYTES" in msg else msg[:200])
            except BaseException as e:
                out[key] = type(e).__name__ + ": " + str(e)[:200]
print(json.dumps(out))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc")
def test_a_gzip_bomb_stops_at_the_limit_within_512_mib(tmp_path):
    real = FORI_PB.read_bytes()
    gib = 1 << 30
    bombs = [
        _bomb(tmp_path / "zeros.hlo.pb.gz", b"", b"\0", gib),
        # a real HloProto, then an unknown length-delimited field of 1 GiB
        _bomb(tmp_path / "field.hlo.pb.gz", real + _varint(99 << 3 | 2) + _varint(gib),
              b"\0", gib),
        # a real HloProto, then a module field of 1 GiB of empty computations,
        # the bytes that cost protobuf the most memory per byte
        _bomb(tmp_path / "empties.hlo.pb.gz", real + b"\x0a" + _varint(gib), b"\x1a\x00", gib),
    ]
    assert all(b.stat().st_size < 1.1e6 for b in bombs)
    small = _small_bombs(tmp_path)
    assert all(b.stat().st_size < 40e3 for b in small)
    p = _child(_BOMB_CHILD, *bombs, *small, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert len(got) == 28
    for key, outcome in got.items():
        if key.split()[0] in ("zeros.hlo.pb.gz", "field.hlo.pb.gz", "empties.hlo.pb.gz"):
            assert outcome == "limit", key
        elif key.endswith("analyze bytes"):
            # bare bytes are read as whichever message they parse as cheaply:
            # the small instructions are unknown fields of a memory-usage
            # report (their bytes, once)
            assert outcome in ("parse", "read"), (key, outcome)
        else:
            assert outcome == "parse", (key, outcome)


def _big_module(copies=400):
    """A real module's computations repeated with fresh ids and names (what
    a large module looks like to protobuf, about 4.6 MB), as an HloProto."""
    hlo = _fori()
    mp = hlo.hlo_module
    comps = list(mp.computations)
    for k in range(1, copies):
        for c in comps:
            new = mp.computations.add()
            new.CopyFrom(c)
            new.name = f"{c.name}.copy{k}"
            new.id = c.id + 1000 * k
            for ins in new.instructions:
                ins.name = f"{ins.name}.copy{k}"
                ins.id += 1000000 * k
                ins.operand_ids[:] = [o + 1000000 * k for o in ins.operand_ids]
            new.root_id += 1000000 * k
            new.instructions[-1].ClearField("called_computation_ids")
    hlo.ClearField("buffer_assignment")
    return hlo


def test_a_parse_estimate_lets_real_modules_through(tmp_path):
    hlo = _big_module()
    data = hlo.SerializeToString()
    gz = tmp_path / "big.hlo.pb.gz"
    gz.write_bytes(gzip.compress(data, 9))
    ratio = len(data) / gz.stat().st_size
    # big enough to be estimated (no message of that size is small enough
    # to skip it), compressed like XLA's modules
    assert len(data) * protos._MOST_PER_BYTE > protos.MAX_DECOMPRESSED_BYTES and 5 < ratio < 40
    assert len(protos.read_hlo_proto(str(gz)).hlo_module.computations) == 4000
    assert len(protos.read_hlo_proto(gz.read_bytes()).hlo_module.computations) == 4000
    # 4 MiB of a real proto's bytes that do not compress: read too
    pad = random.Random(1).randbytes(4 << 20)
    raw = FORI_PB.read_bytes() + _varint(99 << 3 | 2) + _varint(len(pad)) + pad
    assert protos.read_hlo_proto(gzip.compress(raw)).hlo_module.name == "jit_dev_fori_cumulative"


_RSS_CHILD = r"""
import json, resource, sys
from xlashape import protos
data = open(sys.argv[1], "rb").read()
cost, _ = protos._parse_cost(data, protos.HloProto.DESCRIPTOR, 1 << 62)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
msg = protos.HloProto()
msg.ParseFromString(data)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps([cost, (after - before) * 1024, len(data)]))
"""


def test_the_parse_estimate_is_from_above(tmp_path):
    # what protobuf's parse takes (the child's peak resident memory) is at
    # most the estimate, on a real module and on the small bombs
    path = tmp_path / "big.hlo.pb"
    path.write_bytes(_big_module().SerializeToString())
    paths = [path]
    for name, data in _dense(2):
        paths.append(tmp_path / f"{name}.hlo.pb")
        paths[-1].write_bytes(data)
    for p in paths:
        out = _child(_RSS_CHILD, p)
        assert out.returncode == 0, out.stderr[-2000:]
        cost, grew, size = json.loads(out.stdout.splitlines()[-1])
        if p.name.startswith("big") or grew > (8 << 20):
            assert cost is not None and grew <= cost, (p.name, grew, cost)
        assert cost <= size * protos._MOST_PER_BYTE


def test_the_parse_estimate_reads_the_wire_format_as_protobuf_does():
    # on every real proto: well-formed, and from 1 to 40 bytes per byte (a buffer
    # assignment of small logical buffers is the most: about 16)
    for path in sorted(DATA.rglob("*.pb")) + sorted(DATA.rglob("*.hlo.pb.gz")):
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        msg = protos.read_xla_proto(data)
        cls = type(msg)
        if cls is protos.HloProto and protos._starts_like_bare_module(data):
            cls = protos.HloModuleProto
        cost, why = protos._parse_cost(data, cls.DESCRIPTOR, 1 << 62)
        assert cost is not None, (path.name, why)
        assert len(data) <= cost <= 40 * len(data) + 1000, (path.name, cost / len(data))
    # what protobuf refuses, the estimate calls malformed too
    for bad, why in ((b"\x0a\x05ab", "runs past its end"), (b"\x08", "number cut off"),
                     (b"\x0b\x0c", "a group"), (b"\x80", "tag cut off"),
                     (b"\x0a\x80", "length cut off"), (b"\x09\x00", "fixed-size")):
        cost, got = protos._parse_cost(bad, protos.HloProto.DESCRIPTOR, 1 << 62)
        assert cost is None and why in got, (bad, got)
    deep = b"\x10\x0b"
    for depth in range(101):
        deep = b"\x22" + _varint(len(deep)) + deep
    assert protos._parse_cost(deep, protos.ShapeProto.DESCRIPTOR, 1 << 62)[0] is None
    with pytest.raises(Exception):
        protos.ShapeProto().ParseFromString(deep)
    # it stops once past what it was asked to count to
    cost, _ = protos._parse_cost(b"\x1a\x00" * 100000, protos.HloModuleProto.DESCRIPTOR, 10000)
    assert 10000 < cost < 11000


def test_the_decompression_limit_names_itself_and_can_be_raised(tmp_path, monkeypatch):
    raw = FORI_PB.read_bytes()
    gz = tmp_path / "m.hlo.pb.gz"
    gz.write_bytes(gzip.compress(raw))
    monkeypatch.delenv(protos.MAX_DECOMPRESSED_ENV, raising=False)
    # exactly the size is fine; one byte less is not
    assert protos.read_hlo_proto(str(gz), max_decompressed_bytes=len(raw)) == protos.read_hlo_proto(raw)
    with pytest.raises(UnreadableInputError) as e:
        protos.read_hlo_proto(str(gz), max_decompressed_bytes=len(raw) - 1)
    msg = str(e.value)
    assert f"'m.hlo.pb.gz': decompresses to more than {len(raw) - 1} bytes, the limit" in msg
    assert "XLASHAPE_MAX_DECOMPRESSED_BYTES" in msg and "max_decompressed_bytes=" in msg
    for read in (protos.read_buffer_assignment, protos.read_memory_usage_report,
                 protos.read_xla_proto):
        with pytest.raises(UnreadableInputError, match="the limit"):
            read(gzip.compress(raw), max_decompressed_bytes=100)
    # the environment variable, for memory.analyze and the command
    monkeypatch.setenv(protos.MAX_DECOMPRESSED_ENV, "1K")
    assert protos.max_decompressed_bytes() == 1024
    with pytest.raises(UnreadableInputError, match="more than 1024 bytes, the limit"):
        memory.analyze(str(gz))
    from xlashape.cli import main
    assert main(["memory", str(gz)]) == 2
    monkeypatch.setenv(protos.MAX_DECOMPRESSED_ENV, "1 MiB")
    assert memory.analyze(str(gz)).modules[0].name == "jit_dev_fori_cumulative"
    for bad in ("lots", "-5", "1T", "1.5G"):
        monkeypatch.setenv(protos.MAX_DECOMPRESSED_ENV, bad)
        with pytest.raises(ShapeValueError, match="XLASHAPE_MAX_DECOMPRESSED_BYTES"):
            protos.read_hlo_proto(str(gz))
    monkeypatch.delenv(protos.MAX_DECOMPRESSED_ENV)
    assert protos.max_decompressed_bytes() == protos.MAX_DECOMPRESSED_BYTES == 256 << 20
    for bad in (-1, 1.5, "1G", True):
        with pytest.raises(ShapeValueError, match="max_decompressed_bytes"):
            protos.read_hlo_proto(str(gz), max_decompressed_bytes=bad)


def test_several_gzip_members_are_one_stream(tmp_path):
    raw = FORI_PB.read_bytes()
    half = len(raw) // 2
    gz = tmp_path / "m.hlo.pb.gz"
    gz.write_bytes(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))
    assert protos.read_hlo_proto(str(gz)) == protos.read_hlo_proto(raw)
    gz.write_bytes(gzip.compress(raw) + b"trailing garbage")
    with pytest.raises(UnreadableInputError, match="m.hlo.pb.gz"):
        protos.read_hlo_proto(str(gz))


# -- one copy of an uncompressed file ------------------------------------------------------

def _peak(fn):
    tracemalloc.start()
    try:
        out = fn()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def _pure_python_protobuf():
    from google.protobuf.internal import api_implementation

    return api_implementation.Type() == "python"


@pytest.mark.skipif(_pure_python_protobuf(), reason="the pure-Python protobuf keeps the message "
                    "itself in Python objects, which tracemalloc counts")
def test_an_uncompressed_proto_is_held_once_and_parsed_once(tmp_path):
    # A real HloProto and a real bare HloModuleProto, each with 16 MiB of an
    # unknown field (kept by protobuf, in its own memory): the readers' own
    # Python copies show in tracemalloc's peak, the file once at most.
    pad = 16 << 20
    filler = _varint(99 << 3 | 2) + _varint(pad) + bytes(pad)
    hlo = _fori()
    whole = hlo.SerializeToString() + filler
    bare = hlo.hlo_module.SerializeToString() + filler
    for name, data in (("x.hlo.pb", whole), ("bare.hlo.pb", bare), ("bare.pb", bare)):
        path = tmp_path / name
        path.write_bytes(data)
        peak, msg = _peak(lambda: protos.read_hlo_proto(str(path)))
        assert len(msg.hlo_module.computations) == 10
        assert peak < 1.25 * len(data), (name, peak / len(data))
        peak, msg = _peak(lambda: protos.read_hlo_proto(data))      # bytes: no copy
        assert len(msg.hlo_module.computations) == 10
        assert peak < 0.25 * len(data), (name, peak / len(data))
        del msg
    # memory.analyze on bytes and on a file whose name does not say which
    # message it is: read once and parsed once (the model of this small
    # module, without the filler, is what the peak holds beyond the file)
    small = tmp_path / "small.pb"
    small.write_bytes(hlo.hlo_module.SerializeToString())
    model, _ = _peak(lambda: memory.analyze(str(small), platform="gpu"))
    for source in (bare, str(tmp_path / "bare.pb")):
        peak, r = _peak(lambda: memory.analyze(source, platform="gpu"))
        assert r.modules[0].name == "jit_dev_fori_cumulative"
        held = 0 if isinstance(source, bytes) else len(bare)
        assert peak - model < held + 0.25 * len(bare), (type(source), (peak - model) / len(bare))


def test_a_parse_is_decided_by_the_first_fields():
    hlo = _fori()
    whole, bare = hlo.SerializeToString(), hlo.hlo_module.SerializeToString()
    assert not protos._starts_like_bare_module(whole)
    assert protos._starts_like_bare_module(bare)
    ba = hlo.buffer_assignment.SerializeToString()
    report = FORI_REPORT.read_bytes()
    assert protos._likely_classes(whole)[0] is protos.HloProto
    assert protos._likely_classes(bare)[0] is protos.HloProto
    assert protos._likely_classes(ba)[0] is protos.BufferAssignmentProto
    assert protos._likely_classes(report)[0] is protos.MemoryUsageReportProto
    for data, cls in ((whole, protos.HloProto), (bare, protos.HloProto),
                      (ba, protos.BufferAssignmentProto), (report, protos.MemoryUsageReportProto)):
        assert type(protos.read_xla_proto(data)) is cls
    with pytest.raises(ProtoDecodeError, match="none of XLA's protobufs"):
        protos.read_xla_proto(b"\x08\x01")


def test_every_real_proto_is_told_from_its_first_fields():
    # every real .hlo.pb, memory-usage report and serialized buffer
    # assignment of the test data: the first guess is the right one (so each
    # is parsed once)
    seen = {protos.HloProto: 0, protos.BufferAssignmentProto: 0, protos.MemoryUsageReportProto: 0}
    for path in sorted(DATA.rglob("*.pb")) + sorted(DATA.rglob("*.hlo.pb.gz")):
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        want = type(protos.read_xla_proto(data))
        assert protos._likely_classes(data)[0] is want, path.name
        seen[want] += 1
        if want is protos.HloProto:
            module = protos.read_hlo_proto(data).hlo_module.SerializeToString()
            assert protos._likely_classes(module)[0] is protos.HloProto, path.name
            whole = protos.HloProto()
            try:
                whole.ParseFromString(data)
            except Exception:
                pass
            assert protos._starts_like_bare_module(data) != bool(
                len(whole.hlo_module.computations)), path.name
            assert protos._starts_like_bare_module(module), path.name
            seen[protos.BufferAssignmentProto] += 1
            ba = protos.read_hlo_proto(data).buffer_assignment.SerializeToString()
            if ba:
                assert protos._likely_classes(ba)[0] is protos.BufferAssignmentProto, path.name
    assert min(seen.values()) >= 20, seen


# -- corrupt gzip streams -------------------------------------------------------------------

def _damaged(gz: bytes, how: str) -> bytes:
    if how == "cut":                      # the end of the stream is missing
        return gz[:-30]
    if how == "crc":                      # the trailer's CRC does not match
        return gz[:-8] + bytes(b ^ 0xFF for b in gz[-8:-4]) + gz[-4:]
    if how == "early":                    # the deflate stream broken near its start
        return gz[:20] + bytes(b ^ 0x55 for b in gz[20:120]) + gz[120:]
    assert how == "late"                  # ... and far past the first 64 KiB
    k = int(len(gz) * 0.9)
    return gz[:k] + bytes(b ^ 0x55 for b in gz[k:k + 64]) + gz[k + 64:]


def _long_text():
    # the module, then 300 KiB of lines no compressor can shrink (comments
    # to the reader), so that damage at 90% of the stream is read late
    rng = random.Random(5)
    pad = "".join(f"/* {rng.getrandbits(256):064x} */\n" for _ in range(4200))
    return FORI_TXT.read_text() + pad


@pytest.mark.parametrize("how", ["cut", "crc", "early", "late"])
def test_a_damaged_txt_gz_is_unreadable_input_naming_the_file(tmp_path, how):
    path = tmp_path / f"module_0001.{how}.cpu_after_optimizations.txt.gz"
    path.write_bytes(_damaged(gzip.compress(_long_text().encode()), how))
    readers = [memory.analyze, read_hlo_file, lambda p: list(iter_instructions(Path(p))),
               scan_calls]
    for read in readers:
        with pytest.raises(UnreadableInputError) as e:
            read(str(path))
        assert path.name in str(e.value) and "not a readable gzip file" in str(e.value)
    from xlashape.cli import main
    assert main(["memory", str(path)]) == 2
    assert main(["hlo", str(path)]) == 2


@pytest.mark.parametrize("how", ["cut", "crc", "early", "late"])
def test_a_damaged_hlo_pb_gz_is_unreadable_input_naming_the_file(tmp_path, how):
    raw = GEMM_PB.read_bytes() + _varint(99 << 3 | 2) + _varint(300000) + random.Random(
        3).randbytes(300000)
    path = tmp_path / f"module_0001.{how}.sm_9.0a_gpu_after_optimizations.hlo.pb.gz"
    path.write_bytes(_damaged(gzip.compress(raw), how))
    for read in (protos.read_hlo_proto, protos.read_xla_proto, hlo_proto.read_hlo_proto_module,
                 memory.analyze):
        with pytest.raises(UnreadableInputError) as e:
            read(str(path))
        assert path.name in str(e.value) and "not a readable gzip file" in str(e.value)
    with pytest.raises(UnreadableInputError, match="not a readable gzip file"):
        protos.read_hlo_proto(path.read_bytes())
    with pytest.raises(UnreadableInputError, match="not a readable gzip file"):
        memory.analyze(path.read_bytes())
    # in a dump directory, read through its protos
    with pytest.raises(UnreadableInputError, match=path.name):
        memory.analyze(str(tmp_path), prefer="proto")


# -- negative sizes, offsets and shape indices -----------------------------------------------

def _tuple_buffer(hlo):
    """The index of a logical buffer defined at a shape index of a tuple."""
    return next(i for i, lb in enumerate(hlo.buffer_assignment.logical_buffers)
                if len(lb.defined_at.shape_index))


@pytest.mark.parametrize("mutate, field", [
    (lambda h: setattr(h.buffer_assignment.buffer_allocations[1], "size", -1000),
     r"buffer_assignment\.buffer_allocations\[1\]\.size is -1000"),
    (lambda h: setattr(h.buffer_assignment.buffer_allocations[0].assigned[0], "size", -8),
     r"buffer_allocations\[0\]\.assigned\[0\]\.size is -8"),
    (lambda h: setattr(h.buffer_assignment.buffer_allocations[0].assigned[0], "offset", -4),
     r"buffer_allocations\[0\]\.assigned\[0\]\.offset is -4: a offset|offset is -4"),
    (lambda h: setattr(h.buffer_assignment.logical_buffers[3], "size", -(1 << 40)),
     r"logical_buffers\[3\]\.size is -1099511627776"),
    (lambda h: h.buffer_assignment.logical_buffers[_tuple_buffer(h)].defined_at.shape_index
     .__setitem__(0, -1), r"defined_at\.shape_index is \[-1"),
    (lambda h: h.buffer_assignment.logical_buffers[0].defined_at.shape_index.append(-5),
     r"logical_buffers\[0\]\.defined_at\.shape_index is \[.*-5\]: a shape index cannot be "
     "negative"),
])
def test_negative_sizes_and_shape_indices_are_refused(mutate, field, tmp_path):
    hlo = _fori()
    mutate(hlo)
    data = hlo.SerializeToString()
    path = tmp_path / FORI_PB.name
    path.write_bytes(data)
    for source in (data, str(path)):
        with pytest.raises(ProtoDecodeError, match=field):
            memory.analyze(source)
    with pytest.raises(ProtoDecodeError, match=field):
        memory.analyze(str(tmp_path), prefer="proto")
    with pytest.raises(ProtoDecodeError, match=field):
        memory.analyze(data, platform="gpu", peak=True)
    from xlashape.memory.traces import peak_from_hlo_proto
    with pytest.raises(ProtoDecodeError, match=field):
        peak_from_hlo_proto(hlo, "gpu")
    # the buffer assignment alone (serialized_buffer_assignment_proto)
    with pytest.raises(ProtoDecodeError, match=field.replace(r"buffer_assignment\.", "")):
        memory.analyze(hlo.buffer_assignment.SerializeToString(), platform="gpu")


@pytest.mark.parametrize("mutate, field", [
    (lambda r: setattr(r.memory_space_allocation_entries[0], "total_bytes", -1),
     r"memory_space_allocation_entries\[0\]\.total_bytes is -1"),
    (lambda r: setattr(r.memory_space_allocation_entries[0].allocation_entries[2], "size", -64),
     r"allocation_entries\[2\]\.size is -64"),
    (lambda r: setattr(r.memory_space_allocation_entries[0].allocation_entries[0],
                       "cumulative_size", -7), r"allocation_entries\[0\]\.cumulative_size is -7"),
])
def test_negative_sizes_in_a_memory_usage_report_are_refused(mutate, field, tmp_path):
    report = protos.read_memory_usage_report(str(FORI_REPORT))
    mutate(report)
    data = report.SerializeToString()
    path = tmp_path / FORI_REPORT.name
    path.write_bytes(data)
    with pytest.raises(ProtoDecodeError, match=field):
        memory.analyze(data)                        # alone
    with pytest.raises(ProtoDecodeError, match=field):
        memory.analyze(str(path))                   # alone: no .hlo.pb beside it
    shutil.copy(FORI_PB, tmp_path / FORI_PB.name)
    with pytest.raises(ProtoDecodeError, match=field):
        memory.analyze(str(path))                   # with its .hlo.pb


def test_the_real_protos_have_no_negative_size():
    # the check refuses nothing XLA wrote
    for path in sorted(DATA.rglob("*.hlo.pb")):
        protos.check_sizes(protos.read_hlo_proto(str(path)), path.name)
    for path in sorted(DATA.rglob("*-memory-usage-report.pb")):
        protos.check_sizes(protos.read_memory_usage_report(str(path)), path.name)
    with pytest.raises(TypeError):
        protos.check_sizes(protos.ShapeProto(), "a shape")


# -- names the HLO text cannot hold -----------------------------------------------------------

INJECTED = "\nROOT %injected = f32[] constant(0)\n}\nENTRY %evil () -> f32[] {"


def _instructions(module):
    return [(i.computation, i.name, i.opcode, tuple(i.called_computations))
            for i in module.instructions()]


@pytest.mark.parametrize("where", ["instruction", "operand", "computation", "parameter_name",
                                   "module", "opcode", "fusion_kind", "metadata",
                                   "backend_config", "backend_config_attributes", "many"])
def test_names_that_are_not_hlo_names_cannot_inject_lines(where):
    hlo = _fori()
    mp = hlo.hlo_module
    entry = next(c for c in mp.computations if c.id == mp.entry_computation_id)
    fusion = next(i for c in mp.computations for i in c.instructions if i.opcode == "fusion")
    used = {o for c in mp.computations for i in c.instructions for o in i.operand_ids}
    operand = next(i for c in mp.computations for i in c.instructions if i.id in used)
    if where == "instruction":
        entry.instructions[1].name += INJECTED
    elif where == "operand":
        operand.name = operand.name + INJECTED
    elif where == "computation":
        mp.computations[0].name += INJECTED
    elif where == "parameter_name":
        entry.program_shape.parameter_names[0] = "p" + INJECTED
    elif where == "module":
        mp.name += INJECTED
    elif where == "opcode":
        entry.instructions[-1].opcode += INJECTED
    elif where == "fusion_kind":
        fusion.fusion_kind += INJECTED
    elif where == "metadata":
        fusion.metadata.op_name = "a\u2028b\rc\x85d\x0be" + INJECTED
    elif where == "backend_config":
        fusion.backend_config = ('{"a": 1,' + INJECTED + "}").encode()
    elif where == "backend_config_attributes":
        # one line, but more than one attribute value: not printed as it is
        fusion.backend_config = ('{"a": 1}, calls=%' + mp.computations[0].name + ", x={").encode()
    else:
        # distinct names that sanitize into the same one stay distinct ("a b0",
        # "a_b0", "a\nb0"); a quote, a brace, a leading digit, non-ASCII
        # letters, a name of a digit alone
        kinds = ["a b", 'q"x', "{x}", "9lives", "\u00e9t\u00e9", "", "a_b", "a\nb", "x%y"]
        for k, (c, ins) in enumerate((c, i) for c in mp.computations for i in c.instructions):
            ins.name = kinds[k % len(kinds)] + str(k // len(kinds))
    m = hlo_proto.module_from_proto(hlo)
    text = m.to_text()
    want = hlo_proto.module_from_proto(_fori())
    assert len(text.splitlines()) == len(want.to_text().splitlines())
    back = parse_hlo_module(text)
    assert "injected" not in {i.name for i in back.instructions()}
    assert "evil" not in {c.name for c in back.computations}
    got, orig = _instructions(back), _instructions(m)
    if where == "opcode":
        # the garbled opcode's instruction is skipped with a warning, nothing more
        assert got == orig[:-1] or got == [x for x in orig if x != orig[-1]]
        assert len(back.warnings) == 1
    else:
        assert got == orig and not back.warnings
        assert len({n for _, n, _, _ in got}) == len(got)       # names stay unique
    if where in ("instruction", "operand", "many"):
        assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789_.-") for _, n, _, _ in got)
    # memory's proto route reads the module through this text: the same figures
    ours = memory.analyze(hlo.SerializeToString(), platform="gpu").modules[0]
    ref = memory.analyze(str(FORI_PB)).modules[0]
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"):
        assert getattr(ours, k) == getattr(ref, k), k
    assert ours.peak.figures == ref.peak.figures


def test_real_names_are_kept_as_they_are():
    for path in sorted(DATA.rglob("*.hlo.pb")):
        hlo = protos.read_hlo_proto(str(path))
        m = hlo_proto.module_from_proto(hlo)
        assert [i.name for i in m.instructions()] == \
            [i.name for c in hlo.hlo_module.computations for i in c.instructions], path.name
        assert [c.name for c in m.computations] == \
            [c.name for c in hlo.hlo_module.computations], path.name


def test_sanitized_names_follow_xlas_name_uniquer():
    # NameUniquer::GetSanitizedName: a first character that is not a letter or
    # "_" becomes "_", any other character outside [A-Za-z0-9_.-] "_"
    assert hlo_proto._sanitized("9lives") == "_lives"
    assert hlo_proto._sanitized("a b\nc") == "a_b_c"
    assert hlo_proto._sanitized("fusion.3") == "fusion.3"
    assert hlo_proto._renames(["a\nb", "a_b", "a b", "ok"]) == {"a\nb": "a_b.1", "a b": "a_b.2"}
    assert hlo_proto._renames(["ok", "fusion.1", "_x"]) == {}


def test_errors_stay_in_the_family_for_every_mutation_above(tmp_path):
    # a last sweep: each corrupt input of this file raises an XlaShapeError
    # subclass that is also a ValueError
    for data in (b"\x1f\x8b", gzip.compress(b"\x0a\x02ab")[:-3], b"\x1f\x8b\x08\x00" + bytes(20)):
        for read in (protos.read_hlo_proto, memory.analyze):
            with pytest.raises(XlaShapeError) as e:
                read(data)
            assert isinstance(e.value, ValueError)
