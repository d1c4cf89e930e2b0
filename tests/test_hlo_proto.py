"""HLO modules read from XLA's .hlo.pb agree with the same module read from
XLA's text dump (xlashape.hlo_proto against xlashape.hlo_module).

Every ``*.hlo.pb`` under tests/data that has XLA's text of the same module
beside it (``X.hlo.pb`` and ``X.txt``, as ``--xla_dump_hlo_as_text
--xla_dump_hlo_as_proto`` writes them) is compared: computations, ENTRY,
instructions with shapes and layouts, opcodes, roots, operands, called
computations and their kinds, metadata, parameters, the header's
entry_computation_layout / aliasing / donors.
"""

import glob
import gzip
import os
import re

import pytest

from xlashape import hlo_proto, protos
from xlashape.errors import ProtoDecodeError, ShapeValueError, UnreadableInputError
from xlashape.hlo_module import parse_entry_computation_layout, parse_hlo_module

DATA = os.path.join(os.path.dirname(__file__), "data")
# (proto, text of the same module): XLA's dumps (X.hlo.pb beside X.txt), and
# XLA's serialization of each TPU corpus module (oracle/gen_module_protos.py)
PAIRS = sorted(
    (p, p[:-len(".hlo.pb")] + ".txt")
    for p in glob.glob(os.path.join(DATA, "**", "*.hlo.pb"), recursive=True)
    if os.path.exists(p[:-len(".hlo.pb")] + ".txt"))
PAIRS += sorted(
    (p, os.path.join(DATA, "tpu_corpus", os.path.basename(p)[:-len(".hlo.pb.gz")], "module.hlo"))
    for p in glob.glob(os.path.join(DATA, "protos", "tpu", "*.hlo.pb.gz")))
GEMM = os.path.join(DATA, "protos",
                    "module_58194.jit_dev_int8_gemm.sm_9.0a_gpu_after_optimizations.hlo.pb")
FORI = os.path.join(DATA, "protos",
                    "module_89286.jit_dev_fori_cumulative.sm_9.0a_gpu_after_optimizations.hlo.pb")

# Attributes compared as text. backend_config is not: the proto holds the
# string the compiler stored, the text XLA's re-printing of it as JSON.
ATTRS = ("kind", "index", "dimensions", "iota_dimension", "custom_call_target", "direction",
         "channel_id")


def _no_frame(metadata):
    return {k: v for k, v in metadata.items() if k != "stack_frame_id"}


def _base(name):
    # newer XLA prints `%while.6#1` for the get-tuple-element it leaves out
    return name.split("#")[0]


def test_there_are_pairs():
    assert len(PAIRS) >= 3
    assert all(os.path.exists(text) for _, text in PAIRS)


@pytest.mark.parametrize("path, text_path", PAIRS, ids=[os.path.basename(p) for p, _ in PAIRS])
def test_proto_and_text_agree(path, text_path):
    m = hlo_proto.read_hlo_proto_module(path)
    reparsed = path.endswith(".gz")
    with open(text_path) as fh:
        t = parse_hlo_module(fh.read())
    assert not t.warnings
    assert m.name == t.name and m.entry.name == t.entry.name
    assert sorted(c.name for c in m.computations) == sorted(c.name for c in t.computations)
    for key in ("input_output_alias", "buffer_donor", "entry_computation_layout"):
        assert (getattr(m, key) is None) == (getattr(t, key) is None), key
        assert getattr(m, key) == getattr(t, key), key
    assert m.attributes.get("is_scheduled") == t.attributes.get("is_scheduled")
    checked = 0
    for tc in t.computations:
        mc = m.computation(tc.name)
        assert mc.is_entry == tc.is_entry and mc.kind == tc.kind, tc.name
        assert mc.signature == tc.signature, tc.name
        assert mc.root.name == tc.root.name, tc.name
        by_name = {i.name: i for i in mc.instructions}
        for ti in tc.instructions:
            mi = by_name[ti.name]
            assert mi.shape == ti.shape and str(mi.shape) == str(ti.shape), ti.name
            assert (mi.opcode, mi.is_root, mi.parameter_number) == \
                (ti.opcode, ti.is_root, ti.parameter_number), ti.name
            if reparsed:
                # XLA's parser numbers the stack frames anew
                assert _no_frame(mi.metadata) == _no_frame(ti.metadata), ti.name
            else:
                assert mi.metadata == ti.metadata, ti.name
            assert mi.called_computations == ti.called_computations, ti.name
            assert mi.result == ti.result, ti.name
            for key in ATTRS:
                assert mi.attribute(key) == ti.attribute(key), (ti.name, key)
            if ti.opcode != "constant":
                want = [_base(n) for n in ti.operand_names]
                got = []
                for n in mi.operand_names:
                    op = m.instruction(n)
                    # an elided get-tuple-element stands for its tuple operand
                    hidden = op.opcode == "get-tuple-element" and op.name not in \
                        {i.name for i in tc.instructions}
                    got.append(op.operand_names[0] if hidden else n)
                assert got == want, ti.name
            checked += 1
    assert checked == sum(len(c.instructions) for c in t.computations)


def test_schedule_and_stack_frames():
    m = hlo_proto.read_hlo_proto_module(FORI)
    assert m.schedule is not None and m.attributes["is_scheduled"] == "true"
    for cname, names in m.schedule.items():
        comp = m.computation(cname)
        assert set(names) <= {i.name for i in comp.instructions}
        # a schedule orders operands before their users
        pos = {n: k for k, n in enumerate(names)}
        for ins in comp.instructions:
            if ins.name in pos:
                for op in ins.operand_names:
                    if op in pos:
                        assert pos[op] < pos[ins.name]
    # the text's StackFrames section, read independently from the .txt
    with open(FORI[:-len(".hlo.pb")] + ".txt") as fh:
        text = fh.read()
    functions = dict(re.findall(r'^(\d+) "(.*)"$', text.split("FunctionNames", 1)[1]
                                .split("FileLocations", 1)[0], re.M))
    locations = {(functions[f], int(line), int(col)) for f, line, col in re.findall(
        r"function_name_id=(\d+) line=(\d+) end_line=\d+ column=(\d+)", text)}
    for ins in m.instructions():
        fid = ins.metadata.get("stack_frame_id")
        if not fid:
            continue
        trace = m.stack_trace(fid)
        assert trace, ins.name
        for frame in trace:
            assert frame.file_name.endswith("make_gpu_corpus.py")
            assert (frame.function_name, frame.line, frame.column) in locations
        assert (trace[-1].function_name, trace[-1].line) == ("<module>", 645)
    assert m.stack_trace(0) == [] and m.stack_trace(10 ** 6) == []


def test_buffer_assignment_and_ids():
    m = hlo_proto.read_hlo_proto_module(GEMM)
    ba = m.buffer_assignment
    assert ba is not None and len(ba.buffer_allocations) > 0
    names = {i.name for i in m.instructions()}
    for lb in ba.logical_buffers:
        assert m.instruction_ids[lb.defined_at.instruction_id] in names
    before = hlo_proto.read_hlo_proto_module(GEMM.replace(
        "sm_9.0a_gpu_after_optimizations", "before_optimizations"))
    assert before.buffer_assignment is None and before.schedule is None


def test_inputs_bytes_gzip_message_bare_module(tmp_path):
    with open(GEMM, "rb") as fh:
        raw = fh.read()
    gz = tmp_path / "x.hlo.pb.gz"
    gz.write_bytes(gzip.compress(raw))
    msg = protos.read_hlo_proto(raw)
    for source in (raw, str(gz), msg, msg.hlo_module, msg.hlo_module.SerializeToString()):
        m = hlo_proto.read_hlo_proto_module(source)
        assert [(i.name, str(i.shape)) for i in m.instructions()] == \
            [(i.name, str(i.shape)) for i in hlo_proto.read_hlo_proto_module(GEMM).instructions()]


def _module_with(mutate):
    msg = protos.read_hlo_proto(GEMM)
    mutate(msg.hlo_module)
    return msg.SerializeToString()


@pytest.mark.parametrize("mutate, where", [
    (lambda mp: mp.computations[-1].instructions[-1].operand_ids.append(987654321),
     "operand_ids"),
    (lambda mp: mp.computations[-1].instructions[-1].called_computation_ids.append(424242),
     "called_computation_ids"),
    (lambda mp: mp.computations[0].instructions[0].ClearField("shape"),
     r"instructions\[0\]\.shape\.element_type: element type PRIMITIVE_TYPE_INVALID"),
    (lambda mp: setattr(mp.computations[0].instructions[0].shape, "element_type", 99),
     r"instructions\[0\]\.shape\.element_type"),
    (lambda mp: mp.schedule.sequences[mp.computations[-1].id].instruction_ids.append(-5),
     "schedule"),
    # what XLA's HloModule::CreateFromProto refuses too (issue 29: each empty
    # computation costs 2 bytes of file and hundreds of bytes of model)
    (lambda mp: mp.computations[0].ClearField("instructions"),
     r"computations\[0\] \('.*'\): a computation without instructions"),
    (lambda mp: setattr(mp.computations[1], "id", mp.computations[0].id),
     r"computations\[1\]\.id: \d+ is also the id of computations\[0\]"),
    (lambda mp: setattr(mp.computations[1], "name", mp.computations[0].name),
     r"computations\[1\]\.name: '.*' is given twice"),
    (lambda mp: setattr(mp.computations[-1].instructions[1], "id",
                        mp.computations[-1].instructions[0].id), r"instructions\[1\]\.id: \d+ is also"),
    (lambda mp: setattr(mp.computations[-1].instructions[1], "name",
                        mp.computations[0].instructions[0].name), r"is given twice"),
    (lambda mp: setattr(mp.computations[-1].instructions[1], "opcode", ""),
     r"instructions\[1\]: an instruction without an opcode"),
])
def test_dangling_ids_and_bad_shapes_are_named(mutate, where):
    with pytest.raises(ProtoDecodeError, match=where) as exc:
        hlo_proto.read_hlo_proto_module(_module_with(mutate))
    assert isinstance(exc.value, ShapeValueError) and isinstance(exc.value, UnreadableInputError)


DUMP_PAIRS = [(p, t) for p, t in PAIRS if not p.endswith(".gz")]
FIGURES = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
           "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
           "host_alias_size_in_bytes", "host_temp_size_in_bytes")


@pytest.mark.parametrize("path, text_path", DUMP_PAIRS,
                         ids=[os.path.basename(p) for p, _ in DUMP_PAIRS])
def test_to_text_reads_back_and_gives_the_text_routes_memory_figures(path, text_path):
    from xlashape import memory

    m = hlo_proto.read_hlo_proto_module(path)
    text = m.to_text()
    back = parse_hlo_module(text)
    assert not back.warnings
    assert [(c.name, c.is_entry, c.kind) for c in back.computations] == \
        [(c.name, c.is_entry, c.kind) for c in m.computations]
    assert [(i.name, str(i.shape), i.opcode, i.operand_names, i.metadata, i.result)
            for i in back.instructions()] == \
        [(i.name, str(i.shape), i.opcode, i.operand_names, i.metadata, i.result)
         for i in m.instructions()]
    with open(text_path) as fh:
        xla = memory.analyze(fh.read()).modules[0]
    ours = memory.analyze(text).modules[0]
    assert {k: getattr(ours, k) for k in FIGURES} == {k: getattr(xla, k) for k in FIGURES}
