"""The compiled proto readers agree with their Python references.

- ``_protowire.parse_cost`` (what ``protos._parse_cost`` runs) against
  ``protos._parse_cost_py``, the estimate of a gzip input's parse: the same
  estimate, or the same reason for calling the bytes malformed, on every
  real proto of the test data (as each message type, with limits that stop
  the walk anywhere), on the fuzz harness's mutated and random bytes and on
  the wire format's edge cases (10-byte tags and lengths, bits past the
  64th, nesting at protobuf's limit, groups, field 0);
- ``_protoscan`` (what ``hlo_proto.read_hlo_proto_module`` runs) against
  ``hlo_proto._reference_module``, which reads the messages: the same model,
  object for object, on every ``.hlo.pb`` / ``.hlo.pb.gz`` of the test data
  (which ``test_hlo_proto.py`` compares with XLA's text), on messages, on
  encodings XLA does not write but protobuf reads (unpacked ids, fields out
  of order or given twice, wrong wire types, a module given twice) and on
  the fuzz harness's inputs; and the compiled reader really reads the real
  modules (it does not leave them to the reference).
"""

import glob
import gzip
import os
import random
import sys

import pytest

from xlashape import hlo_proto, protos
from xlashape.errors import ProtoDecodeError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fuzz"))

import fuzz_protos  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")
PROTOS = sorted(glob.glob(os.path.join(DATA, "**", "*.hlo.pb"), recursive=True)
                + glob.glob(os.path.join(DATA, "**", "*.hlo.pb.gz"), recursive=True))
ALL_PB = sorted(glob.glob(os.path.join(DATA, "**", "*.pb"), recursive=True)) + PROTOS
CLASSES = (protos.HloProto, protos.HloModuleProto, protos.BufferAssignmentProto,
           protos.MemoryUsageReportProto, protos.ShapeProto, protos.LayoutProto)
GEMM = os.path.join(DATA, "protos",
                    "module_58194.jit_dev_int8_gemm.sm_9.0a_gpu_after_optimizations.hlo.pb")
FORI = os.path.join(DATA, "protos",
                    "module_89286.jit_dev_fori_cumulative.sm_9.0a_gpu_after_optimizations.hlo.pb")

pytestmark = pytest.mark.skipif(protos._protowire is None or hlo_proto._protoscan is None,
                                reason="needs the compiled extensions")


def _bytes(path):
    with open(path, "rb") as fh:
        data = fh.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


def _varint(n):
    return fuzz_protos._varint(n)


def _field(number, wire, payload):
    if wire == 2:
        payload = _varint(len(payload)) + payload
    return _varint(number << 3 | wire) + payload


def _fields(data):
    """[(number, wire, payload bytes)] of a well-formed message (lengths
    stripped from length-delimited payloads)."""
    return [(n, w, bytes(data[s:e])) for n, w, s, e in protos._top_fields(data, 1 << 30)]


def _join(fields):
    return b"".join(_field(n, w, p) for n, w, p in fields)


# -- the parse estimate ----------------------------------------------------------------

def _same_cost(data, cls, stops=(1 << 62,)):
    for stop in stops:
        got = protos._parse_cost(data, cls.DESCRIPTOR, stop)
        want = protos._parse_cost_py(data, cls.DESCRIPTOR, stop)
        assert got == want, (cls.__name__, stop, got, want, bytes(data[:40]).hex())


def test_the_compiled_estimate_is_what_protos_runs(monkeypatch):
    calls = []
    real = protos._protowire.parse_cost
    monkeypatch.setattr(protos._protowire, "parse_cost",
                        lambda *a: calls.append(1) or real(*a))
    assert protos._parse_cost(b"\x0a\x00", protos.HloProto.DESCRIPTOR, 1 << 62)[0] > 0
    assert calls == [1]


def test_the_estimates_agree_on_every_real_proto():
    assert len(ALL_PB) > 100
    for path in ALL_PB:
        data = _bytes(path)
        for cls in CLASSES:
            full = protos._parse_cost_py(data, cls.DESCRIPTOR, 1 << 62)[0] or 0
            # stops anywhere along the walk, and the walk stopped nowhere
            stops = {1 << 62, 0, full - 1, full, full // 2, len(data), 1 << 70}
            _same_cost(data, cls, stops)
            # bytes, bytearray, memoryview (a slice of a bigger buffer too)
            _same_cost(bytearray(data), cls)
            _same_cost(memoryview(b"x" + data)[1:], cls)


def test_the_estimates_agree_on_the_wire_formats_edges():
    deep = b"\x10\x0b"
    for _ in range(101):
        deep = b"\x22" + _varint(len(deep)) + deep
    cases = [
        b"", b"\x00", b"\x08", b"\x80", b"\x0a", b"\x0a\x80", b"\x0a\x05ab", b"\x09\x00",
        b"\x0d\x00\x00\x00", b"\x0b\x0c", b"\x0e", b"\x0f", b"\x1a\x00" * 300,
        deep, deep[2:], deep[4:],
        # 10-byte tags: field numbers past 2**61, bits past the 64th, too long
        b"\xfa" + b"\xff" * 8 + b"\x01" + b"\x00",
        b"\x9a\x80\x80\x80\x80\x80\x80\x80\x80\x02" + b"\x00",
        b"\x9a\x80\x80\x80\x80\x80\x80\x80\x80\x7e" + b"\x00",
        b"\x9a" + b"\x80" * 9 + b"\x80\x01\x00",
        # 10-byte lengths: past the end, 2**63 and more
        b"\x1a" + b"\xff" * 9 + b"\x01", b"\x1a" + b"\xff" * 9 + b"\x7f",
        b"\x1a" + b"\x80" * 9 + b"\x01", b"\x1a" + b"\xff" * 10 + b"\x01",
        # a number of 11 bytes and more (the estimate skips it), cut off numbers
        b"\x08" + b"\xff" * 12 + b"\x01", b"\x08" + b"\xff" * 12,
        # a packed field that is a number elsewhere; a message given as a number
        _field(36, 2, b"\x01\x02\x03"), _field(3, 0, b"\x05"), _field(1, 5, b"abcd"),
        _field(1, 2, _field(3, 2, _field(2, 2, _field(3, 2, b"\x08\x0b")))),
    ]
    for data in cases:
        for cls in CLASSES:
            _same_cost(data, cls, (1 << 62, 0, 10, 100, 1000))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_estimates_agree_on_mutated_and_random_bytes(seed):
    rng = random.Random(seed)
    for k, (_kind, data) in enumerate(fuzz_protos.inputs(700, 3000 + seed)):
        stops = (1 << 62, rng.randrange(0, 40 * len(data) + 2))
        for cls in CLASSES:
            _same_cost(data, cls, stops)
    for _ in range(3000):
        data = rng.randbytes(rng.randrange(0, 40))
        for cls in CLASSES:
            _same_cost(data, cls, (1 << 62, 64))


def test_a_strided_buffer_is_left_to_the_reference():
    data = bytes(range(1, 200))
    strided = memoryview(data)[::2]
    assert protos._protowire.parse_cost(strided, protos._COST_TABLES.get(
        protos.HloProto.DESCRIPTOR.full_name) or protos._protowire.CostTable(
            protos._fields_of(protos.HloProto.DESCRIPTOR), 16, 16, 100), 100, 1 << 62) is None
    assert protos._parse_cost(strided, protos.HloProto.DESCRIPTOR, 1 << 62) == \
        protos._parse_cost_py(strided, protos.HloProto.DESCRIPTOR, 1 << 62)
    with pytest.raises(ValueError):
        protos._protowire.CostTable({}, 16, 16, 5000)


def test_field_spans_are_the_top_fields():
    for path in ALL_PB:
        data = _bytes(path)
        top = protos._top_fields(data, 1 << 30)
        for number in (1, 2, 3, 4, 99):
            want = [(s, e) for n, w, s, e in top if n == number and w == 2]
            well_formed = sum(e - s for *_, s, e in top) <= len(data) and (
                not top or top[-1][3] == len(data))
            got = protos._protowire.field_spans(data, number)
            if well_formed:
                assert got == want, (path, number)
    assert protos._protowire.field_spans(b"\x0a\x05ab", 1) is None
    assert protos._protowire.field_spans(b"\x0b", 1) is None
    assert protos._protowire.field_spans(b"\x0a\x01a\x0a\x00\x10\x01", 1) == [(2, 3), (5, 5)]
    assert protos._protowire.field_spans(12, 1) is None


# -- the module reader -----------------------------------------------------------------

@pytest.fixture
def reference_calls(monkeypatch):
    """Counts the modules left to the reference reader."""
    calls = []
    real = hlo_proto._reference_module
    monkeypatch.setattr(hlo_proto, "_reference_module", lambda p: calls.append(1) or real(p))
    return calls


def _agree(source, reference_calls=None, compiled=True):
    """The model of ``source`` (or the error) equals the reference's; with
    ``reference_calls``, the compiled reader read it (``compiled``) or left
    it to the reference."""
    n = len(reference_calls) if reference_calls is not None else 0
    got = fuzz_protos._model_or_error(lambda: hlo_proto.read_hlo_proto_module(source))
    if reference_calls is not None:
        assert (len(reference_calls) == n) == compiled, "compiled" if compiled else "reference"
    msg = source if isinstance(source, (protos.HloProto, protos.HloModuleProto)) else \
        protos.read_hlo_proto(source)
    if isinstance(msg, protos.HloModuleProto):
        msg = protos.read_hlo_proto(msg.SerializeToString())
    want = fuzz_protos._model_or_error(lambda: hlo_proto._reference_module(msg))
    if isinstance(got, str) or isinstance(want, str):
        assert got == want
    else:
        assert fuzz_protos.model_rows(got) == fuzz_protos.model_rows(want)
    return got


def test_the_compiled_reader_reads_every_real_module(reference_calls):
    assert len(PROTOS) > 100
    instructions = 0
    for path in PROTOS:
        m = _agree(path, reference_calls)
        instructions += sum(len(c.instructions) for c in m.computations)
    assert instructions > 5000


def test_messages_and_bare_modules(reference_calls):
    msg = protos.read_hlo_proto(GEMM)
    for source in (msg, msg.hlo_module, msg.hlo_module.SerializeToString(),
                   msg.SerializeToString(), bytearray(msg.SerializeToString())):
        _agree(source, reference_calls)


def _rewrite(path, change, index=None):
    """The HloProto of ``path`` as bytes, with the instructions (each as its
    fields) passed through ``change`` (only instruction ``index`` of each
    computation, if given)."""
    data = _bytes(path)
    top = _fields(data)
    out = []
    for n, w, p in top:
        if n == 1 and w == 2:
            module = []
            for mn, mw, mp in _fields(p):
                if mn == 3 and mw == 2:
                    comp = []
                    k = 0
                    for cn, cw, cp in _fields(mp):
                        if cn == 2 and cw == 2:
                            fields = _fields(cp)
                            if index is None or k == index:
                                fields = change(fields)
                            cp = _join(fields)
                            k += 1
                        comp.append((cn, cw, cp))
                    mp = _join(comp)
                module.append((mn, mw, mp))
            p = _join(module)
        out.append((n, w, p))
    return _join(out)


def _unpack(fields):
    out = []
    for n, w, p in fields:
        if n in (36, 38) and w == 2:
            i = 0
            while i < len(p):
                value, j = protos._read_varint(p, i, len(p))
                out.append((n, 0, p[i:j]))
                i = j
        else:
            out.append((n, w, p))
    return out


@pytest.mark.parametrize("change, compiled", [
    (_unpack, True),                                             # ids one by one
    (lambda f: f[::-1], True),                                   # fields in reverse order
    (lambda f: [(1, 2, b"x")] + f, True),                        # a name given twice: the last
    (lambda f: f + [(2, 2, b"tuple")], True),                    # an opcode given twice
    (lambda f: f + [(35, 2, b"\x05")], True),                    # an id of the wrong wire type
    (lambda f: f + [(1, 0, b"\x05")], True),                     # a name that is a number
    (lambda f: f + [(36, 5, b"\x01\x00\x00\x00")], True),        # a fixed-size operand id
    (lambda f: f + [(9, 0, b"\x07"), (999, 2, b"unknown")], True),
    # a shape given twice (protobuf merges the two): left to the reference
    (lambda f: f + [n for n in f if n[0] == 3], False),
    # an id of 10 bytes whose last holds bits past the 64th (protobuf reads 0)
    (lambda f: f + [(35, 0, b"\x81" + b"\x80" * 8 + b"\x7e")], False),
])
def test_encodings_xla_does_not_write(change, compiled, reference_calls):
    for path in (GEMM, FORI):
        try:
            data = _rewrite(path, change)
            protos.read_hlo_proto(data)
        except Exception:       # noqa: BLE001 - protobuf refuses it: nothing to compare
            continue
        _agree(data, reference_calls, compiled)


def test_a_module_given_twice_is_read_merged(reference_calls):
    # an HloProto whose field 1 comes twice: protobuf merges the two modules,
    # and the compiled reader reads the merged module (serialized again), not
    # either piece of the input
    fields = _fields(_bytes(GEMM))
    twice = _join([(1, 2, _field(5, 0, _varint(7)) + _field(2, 2, b"main"))] + fields)
    assert protos._protowire.field_spans(twice, 1)[0] == (2, 10)
    m = _agree(twice, reference_calls)
    assert m.id == hlo_proto.read_hlo_proto_module(GEMM).id


def test_errors_are_the_references():
    # a dangling operand, a dangling callee, an empty opcode, a bad shape:
    # the compiled reader leaves them to the reference, which names them
    msg = protos.read_hlo_proto(GEMM)
    cases = []
    for change in (lambda i: i.operand_ids.append(987654),
                   lambda i: i.called_computation_ids.append(4242),
                   lambda i: setattr(i, "opcode", ""),
                   lambda i: setattr(i.shape, "element_type", 99),
                   lambda i: i.ClearField("shape")):
        m = protos.HloProto()
        m.CopyFrom(msg)
        change(m.hlo_module.computations[-1].instructions[-1])
        cases.append(m.SerializeToString())
    for data in cases:
        fuzz_protos.compiled_and_reference_agree(data)
        with pytest.raises(ProtoDecodeError):
            hlo_proto.read_hlo_proto_module(data)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_readers_agree_on_mutated_modules(seed):
    read = 0
    for _kind, data in fuzz_protos.inputs(500, 4000 + seed):
        fuzz_protos.compiled_and_reference_agree(data)
        try:
            hlo_proto.read_hlo_proto_module(data)
            read += 1
        except ProtoDecodeError:
            pass
    assert read > 20
