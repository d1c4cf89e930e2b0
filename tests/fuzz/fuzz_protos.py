"""Fuzz xlashape's protobuf readers with malformed bytes.

Seeds are the real protos of the test data (every ``*.hlo.pb``,
``*.hlo.pb.gz`` (uncompressed), ``*-memory-usage-report.pb``,
``buffer_assignment.pb`` under tests/data that is at most 64 KiB, and
ShapeProtos of the shape fixture). Each input
is a seed mutated (bit flips, byte changes, insertions, deletions, cuts,
repeated or spliced chunks, enlarged length prefixes), random bytes, or
(about a third of the HLO and shape inputs) the seed parsed with fields set
to odd values and written back (well-formed bytes, bad content); it
goes to every reader that takes bytes:

- ``protos.read_hlo_proto``, ``read_buffer_assignment``,
  ``read_memory_usage_report``
- ``hlo_proto.read_hlo_proto_module`` (then every instruction's shape
  printed and its ``result`` computed, and the module's text read back: no
  instruction or computation that the module does not have)
- ``memory.analyze`` on the bytes (the proto route: which message it is,
  then the figures, allocations and peak), with no negative figure
- ``hlo_proto``'s compiled reader (``_protoscan``) against its reference
  (the Python reader of the messages): the same model, object for object
  (:func:`model_rows`), or the same error
- ``protos._parse_cost`` (the estimate of a parse that gzip input must pass
  before protobuf parses it) against protobuf: bytes it calls malformed
  must be bytes protobuf refuses too (a group, which XLA's messages never
  have, excepted); and its compiled walk (``_protowire``) against the Python
  one, ``_parse_cost_py``: the same estimate or the same reason, whatever
  the limit it stops at
- ``Shape.from_proto`` (then ``str``, ``hash``, ``to_proto``, its memory
  footprint through the tiling model, ``validate_shape``),
  ``Layout.from_proto``, ``shape_proto.ProgramShape.from_proto``

Each must return or raise an exception of xlashape's family
(``XlaShapeError``); anything else is a failure, printed with the input's
hex; an input that takes more than ``TIME_LIMIT`` seconds is reported as a
hang, with where it was. Inputs run in child processes in batches; a batch whose process dies
is run again (another job may have killed it) and, if it dies again, halved
until the input that kills it is found.

    python tests/fuzz/fuzz_protos.py [N=100000] [SEED=0]

Exit status 0 when every input behaved. ``tests/test_fuzz_protos.py`` runs a
small number of inputs in-process.
"""

import glob
import gzip
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
BATCH = 2000
MAX_SEED_BYTES = 64 * 1024


def seeds():
    """(kind, bytes) of every seed; kind says which reader it was made for."""
    out = []
    data = os.path.join(TESTS, "data")
    for kind, pattern in (("hlo", "*.hlo.pb"), ("report", "*-memory-usage-report.pb"),
                          ("ba", "buffer_assignment.pb")):
        for path in sorted(glob.glob(os.path.join(data, "**", pattern), recursive=True)):
            if os.path.getsize(path) <= MAX_SEED_BYTES:
                with open(path, "rb") as fh:
                    out.append((kind, fh.read()))
    for path in sorted(glob.glob(os.path.join(data, "**", "*.hlo.pb.gz"), recursive=True)):
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
        if len(raw) <= MAX_SEED_BYTES:
            out.append(("hlo", raw))
    fixture = os.path.join(data, "xla_shape_protos.jsonl.gz")
    with gzip.open(fixture, "rt") as fh:
        fh.readline()
        rows = [json.loads(line) for line in fh]
    for row in rows[::40]:
        out.append(("shape", bytes.fromhex(row[2])))
    return out


def _varint(n):
    b = bytearray()
    while True:
        c = n & 0x7F
        n >>= 7
        if n:
            b.append(c | 0x80)
        else:
            b.append(c)
            return bytes(b)


def mutate(rng, data, other):
    """One malformed variant of ``data`` (``other``: a second seed to splice)."""
    b = bytearray(data)
    k = rng.random()
    if not b or k < 0.04:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    n_edits = rng.choice((1, 1, 1, 2, 3, 8))
    for _ in range(n_edits):
        op = rng.randrange(9)
        if not b:
            b = bytearray(rng.getrandbits(8) for _ in range(8))
        i = rng.randrange(len(b))
        if op == 0:  # bit flip
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # byte change
            b[i] = rng.choice((0, 0x7F, 0x80, 0xFF, rng.getrandbits(8)))
        elif op == 2:  # insert
            b[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8)))
        elif op == 3:  # delete
            del b[i:i + rng.randint(1, 16)]
        elif op == 4:  # cut
            del b[i:]
        elif op == 5:  # repeat a chunk
            j = min(len(b), i + rng.randint(1, 64))
            b[j:j] = b[i:j] * rng.randint(1, 4)
        elif op == 6:  # splice another seed
            j = rng.randrange(len(other) + 1)
            b[i:] = other[j:j + rng.randint(1, 256)]
        elif op == 7:  # a length prefix made huge or off by one
            b[i:i + 1] = rng.choice((_varint(rng.getrandbits(35)), _varint(1 << 62),
                                     bytes([max(0, b[i] - 1)]), bytes([min(255, b[i] + 1)])))
        else:  # a well-formed field with a random number and wire type
            field = rng.choice((1, 2, 3, 4, 5, 6, 7, 9, 15, 16, 17, 99, 536870911))
            wire = rng.choice((0, 1, 2, 5))
            payload = {0: _varint(rng.getrandbits(64)), 1: bytes(8), 5: bytes(4),
                       2: _varint(3) + b"abc"}[wire]
            b[i:i] = _varint(field << 3 | wire) + payload
    return bytes(b)


_INTS = (0, 1, -1, 2, 7, 13, 17, 34, 99, 1 << 31, -(1 << 63), (1 << 63) - 1)


def _rand_int(rng):
    return rng.choice(_INTS) if rng.random() < 0.7 else rng.randint(-(1 << 63), (1 << 63) - 1)


def _shake_shape(rng, shape):
    """Change one field of a ShapeProto message in place (well-formed bytes,
    odd values)."""
    op = rng.randrange(8)
    if op == 0:
        shape.element_type = rng.choice((0, 1, 11, 13, 14, 17, 34, 35, 36, 99, 1 << 20))
    elif op == 1:
        shape.dimensions.append(_rand_int(rng))
    elif op == 2:
        shape.is_dynamic_dimension.append(rng.random() < 0.5)
    elif op == 3:
        shape.layout.minor_to_major.append(_rand_int(rng))
    elif op == 4:
        shape.layout.tiles.add().dimensions.extend(_rand_int(rng) for _ in range(rng.randint(0, 3)))
    elif op == 5:
        field = rng.choice(("element_size_in_bits", "memory_space", "dynamic_shape_metadata_prefix_bytes",
                            "tail_padding_alignment_in_elements"))
        setattr(shape.layout, field, _rand_int(rng))
    elif op == 6:
        shape.layout.index_primitive_type = rng.choice((0, 1, 6, 8, 11, 13, 99))
        shape.layout.split_configs.add(dimension=_rand_int(rng), split_indices=[_rand_int(rng)])
    else:
        sub = shape.tuple_shapes.add()
        sub.element_type = rng.choice((11, 13, 17, 34))
        if rng.random() < 0.5:
            shape.layout.physical_shape.element_type = rng.choice((4, 13, 17))


def structured(rng, kind, data):
    """A seed parsed, one or a few of its fields set to odd values, written
    back: well-formed protobuf that xlashape must still judge."""
    from xlashape import protos

    if kind == "shape":
        msg = protos.ShapeProto()
        msg.ParseFromString(data)
        for _ in range(rng.randint(1, 3)):
            target = msg
            if msg.tuple_shapes and rng.random() < 0.5:
                target = rng.choice(msg.tuple_shapes)
            _shake_shape(rng, target)
        return msg.SerializeToString()
    if kind != "hlo":
        return data
    msg = protos.read_hlo_proto(data)  # an HloProto or a bare HloModuleProto
    mod = msg.hlo_module
    comps = list(mod.computations)
    if not comps:
        return data
    ba = msg.buffer_assignment if msg.HasField("buffer_assignment") else None
    for _ in range(rng.randint(1, 3)):
        comp = rng.choice(comps)
        if not comp.instructions:
            continue
        ins = rng.choice(comp.instructions)
        op = rng.randrange(12)
        if op == 9 and ba is not None and len(ba.buffer_allocations) and len(ba.logical_buffers):
            # sizes, offsets and shape indices that cannot be
            a = rng.choice(ba.buffer_allocations)
            lb = rng.choice(ba.logical_buffers)
            target = rng.choice((a, lb, lb.defined_at, a.assigned[0] if len(a.assigned) else a))
            if target is lb.defined_at:
                target.shape_index.append(rng.choice((-1, -5, 0, 1, 7, _rand_int(rng))))
            else:
                field = rng.choice(("size", "offset") if target is not a and target is not lb
                                   else ("size",))
                setattr(target, field, rng.choice((-1, -(1 << 40), _rand_int(rng))))
            continue
        if op in (10, 11):
            # names that are not HLO names: a line of HLO text in them, quotes,
            # line separators (to_text, which memory's proto route reads)
            bad = rng.choice(("\nROOT %x = f32[] constant(0)", "\n}\nENTRY %e {", " ", '"',
                              "{", "\u2028", "\r", "9", "", "\x85"))
            where = rng.randrange(5)
            if where == 0:
                ins.name = rng.choice((ins.name + bad, bad + ins.name, bad))
            elif where == 1:
                comp.name += bad
            elif where == 2:
                ins.metadata.op_name += bad
            elif where == 3:
                ins.opcode += bad
            else:
                mod.name += bad
            continue
        if op < 3:
            _shake_shape(rng, ins.shape)
        elif op == 3:
            ins.operand_ids.append(rng.choice((ins.id, -1, 0, _rand_int(rng))))
        elif op == 4:
            ins.called_computation_ids.append(rng.choice((comp.id, -1, _rand_int(rng))))
        elif op == 5:
            ins.opcode = rng.choice(("while", "fusion", "conditional", "parameter", "", "\u00e9"))
        elif op == 6:
            comp.root_id = _rand_int(rng)
        elif op == 7:
            mod.entry_computation_id = _rand_int(rng)
        else:
            seq = mod.schedule.sequences[rng.choice((comp.id, _rand_int(rng)))]
            seq.instruction_ids.append(rng.choice((ins.id, _rand_int(rng))))
    return msg.SerializeToString()


_POOL = []


def inputs(n, seed, start=0):
    """Inputs ``start`` .. ``n - 1`` of run ``seed``; input k depends only on
    (seed, k), so any range can be regenerated alone."""
    if not _POOL:
        _POOL.extend(seeds())
    pool = _POOL
    for k in range(start, n):
        rng = random.Random(f"{seed}:{k}")
        kind, data = rng.choice(pool)
        _, other = rng.choice(pool)
        if kind in ("hlo", "shape") and rng.random() < 0.35:
            yield kind, structured(rng, kind, data)
        else:
            yield kind, mutate(rng, data, other)


def model_rows(m):
    """Everything an ``HloProtoModule`` holds, as plain values in order:
    two readers built the same model if these are equal."""
    rows = [m.name, m.id, m.mode, dict(m.attributes), m.instruction_ids, m.computation_ids,
            m.schedule, sorted(m.fused_computations), sorted(m.applied_computations),
            m.proto.SerializeToString()]
    for c in m.computations:
        rows.append((c.name, c.is_entry, c.signature, c.line, sorted(c.kinds), c.kind))
        for i in c.instructions:
            rows.append((type(i).__name__, i.computation, i.name, i.shape, str(i.shape), i.opcode,
                         i.is_root, i.line, i.operands_text, i.attributes_text, tuple(i._called),
                         i.computation_object is c))
    return rows


def _model_or_error(read):
    from xlashape.errors import XlaShapeError

    try:
        return read()
    except XlaShapeError as e:
        return f"{type(e).__name__}: {e}"


def compiled_and_reference_agree(data):
    """Raise AssertionError if ``hlo_proto`` reads ``data`` into another model
    (or error) than its reference reader does."""
    from xlashape import hlo_proto, protos

    fast = _model_or_error(lambda: hlo_proto.read_hlo_proto_module(data))
    ref = _model_or_error(lambda: hlo_proto._reference_module(protos.read_hlo_proto(data)))
    if isinstance(fast, str) or isinstance(ref, str):
        got = fast if isinstance(fast, str) else "a model"
        want = ref if isinstance(ref, str) else "a model"
        if got != want:
            raise AssertionError(f"compiled reader: {got[:200]}; reference: {want[:200]}")
        return
    a, b = model_rows(fast), model_rows(ref)
    if a != b:
        k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise AssertionError(f"compiled reader's model differs at row {k}: "
                             f"{a[k] if k < len(a) else None!r:.200} != "
                             f"{b[k] if k < len(b) else None!r:.200}")


def check(data):
    """Feed ``data`` to every reader; the failures (not of xlashape's family)."""
    from xlashape import Layout, Shape
    from xlashape import hlo_proto, memory, protos
    from xlashape.errors import XlaShapeError
    from xlashape.shape_proto import ProgramShape

    def shape_use(s):
        from xlashape import shape_util
        from xlashape.hlo_module import memory_footprint

        str(s)
        hash(s)
        s.to_proto()
        memory_footprint(s)  # sizes through the tiling model, whatever the layout
        shape_util.validate_shape(s)

    def module_use(m):
        from xlashape.hlo_module import parse_hlo_module

        for ins in m.instructions():
            str(ins.shape)
            ins.result
            ins.called_computations
        # its text reads back as no more than its own instructions (a name
        # holding a line of HLO must not become one)
        back = parse_hlo_module(m.to_text())
        names = {i.name for i in m.instructions()}
        extra = [i.name for i in back.instructions() if i.name not in names]
        if extra or sum(1 for _ in back.instructions()) > sum(1 for _ in m.instructions()):
            raise AssertionError(f"to_text() read back has instructions the module has not: "
                                 f"{extra[:3]}")

    def analysis_use(result):
        for mm in result.modules:
            figures = dict(mm.figures())
            if mm.peak is not None:
                figures.update(mm.peak.figures)
            sizes = [a.size_in_bytes for a in mm.allocations] + list(figures.values())
            negative = [x for x in sizes if isinstance(x, int) and x < 0]
            if negative:
                raise AssertionError(f"negative figures: {negative[:5]}")

    def parse_cost(data):
        for cls in (protos.HloProto, protos.HloModuleProto, protos.BufferAssignmentProto,
                    protos.MemoryUsageReportProto, protos.ShapeProto):
            cost, why = protos._parse_cost(data, cls.DESCRIPTOR, 1 << 62)
            for stop in (1 << 62, len(data), 3 * len(data)):
                got = protos._parse_cost(data, cls.DESCRIPTOR, stop)
                want = protos._parse_cost_py(data, cls.DESCRIPTOR, stop)
                if got != want:
                    raise AssertionError(f"_parse_cost (compiled) {got} != _parse_cost_py "
                                         f"{want} ({cls.__name__}, stop {stop})")
            if cost is not None or "a group" in why:
                continue
            try:
                cls().ParseFromString(data)
            except Exception:  # noqa: BLE001 - protobuf refuses it too
                continue
            raise AssertionError(f"_parse_cost: {why}, but protobuf reads it as {cls.__name__}")

    targets = (
        ("read_hlo_proto", protos.read_hlo_proto, None),
        ("read_buffer_assignment", protos.read_buffer_assignment, None),
        ("read_memory_usage_report", protos.read_memory_usage_report, None),
        ("read_hlo_proto_module", hlo_proto.read_hlo_proto_module, module_use),
        ("Shape.from_proto", Shape.from_proto, shape_use),
        ("Layout.from_proto", Layout.from_proto, lambda lay: (str(lay), lay.to_proto())),
        ("ProgramShape.from_proto", ProgramShape.from_proto, lambda p: (str(p), p.to_proto())),
        ("memory.analyze", memory.analyze, analysis_use),
        ("_parse_cost", parse_cost, None),
        ("compiled module reader", compiled_and_reference_agree, None),
    )
    failures = []
    for name, fn, use in targets:
        try:
            out = fn(data)
            if use is not None:
                use(out)
        except XlaShapeError:
            pass
        except Exception as e:  # noqa: BLE001 - any other exception is the finding
            failures.append((name, f"{type(e).__name__}: {e}"[:300]))
    return failures


#: Seconds one input may take in all the readers together before it is
#: reported as a hang (and the batch goes on with the next input).
TIME_LIMIT = 20

_CHILD = r"""
import json, signal, sys, traceback
sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})
import fuzz_protos as F
class Hang(BaseException):
    pass
def alarm(*_):
    raise Hang()
signal.signal(signal.SIGALRM, alarm)
n, seed, start, stop = map(int, sys.argv[1:5])
bad = 0
for k, (kind, data) in enumerate(F.inputs(stop, seed, start), start):
    signal.alarm(F.TIME_LIMIT)
    try:
        found = F.check(data)
    except Hang as e:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.name != "alarm"][-3:]
        found = [("HANG", " <- ".join(
            f"{{f.filename.rsplit('/', 1)[-1]}}:{{f.lineno}} {{f.name}}" for f in reversed(frames)))]
    finally:
        signal.alarm(0)
    for name, err in found:
        bad += 1
        print(json.dumps([k, name, err, data.hex()[:400]]), flush=True)
print(json.dumps(["done", bad]), flush=True)
"""


def run_batch(n, seed, start, stop):
    code = _CHILD.format(root=ROOT, here=HERE)
    proc = subprocess.run([sys.executable, "-c", code, str(n), str(seed), str(start),
                           str(stop)], capture_output=True, text=True)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("[")]
    done = bool(lines) and lines[-1][0] == "done"
    return proc.returncode, done, [x for x in lines if x[0] != "done"], proc.stderr[-2000:]


def find_crashes(n, seed, start, stop, out):
    """Halve [start, stop) until the inputs whose process dies are found."""
    rc, done, _bad, err = run_batch(n, seed, start, stop)
    if rc == 0 and done:
        return
    if stop - start == 1:
        out.append((start, rc, err[-500:]))
        return
    mid = (start + stop) // 2
    find_crashes(n, seed, start, mid, out)
    find_crashes(n, seed, mid, stop, out)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    failures, crashes = [], []
    for start in range(0, n, BATCH):
        stop = min(n, start + BATCH)
        rc, done, bad, err = run_batch(n, seed, start, stop)
        if rc != 0 or not done:
            # the process died: once more (another job may have killed it),
            # then look for the input that kills it
            print(f"batch {start}-{stop}: exit status {rc}, run again", flush=True)
            rc, done, bad, err = run_batch(n, seed, start, stop)
            if rc != 0 or not done:
                find_crashes(n, seed, start, stop, crashes)
        failures += bad
        print(f"{stop}/{n} inputs: {len(failures)} failures, {len(crashes)} crashes", flush=True)
    hangs = [f for f in failures if f[1] == "HANG"]
    failures = [f for f in failures if f[1] != "HANG"]
    for f in failures[:20]:
        print("FAILURE", f)
    for h in hangs[:20]:
        print("HANG", h)
    for c in crashes[:20]:
        print("CRASH", c)
    print(json.dumps({"inputs": n, "seed": seed, "seeds": len(seeds()),
                      "failures": len(failures), "hangs": len(hangs),
                      "crashes": len(crashes)}))
    return 1 if failures or crashes or hangs else 0


if __name__ == "__main__":
    sys.exit(main())
