"""xlashape's packing of the temporaries (``analyze(..., packing=True)``,
``xlashape.memory.packing``), against XLA's own.

Every dump of the CPU, GPU and TPU corpora is copied and erased of what
would give the answer away -- every value's offset and every temporary
allocation's size in the buffer assignment replaced by garbage (different
garbage in two copies), the memory-usage reports and the ``.hlo.pb`` files
deleted -- then packed: each temporary allocation must come out with XLA's
offset for every value and XLA's size, from the original dump. The
exceptions are stated below with why (:data:`TPU_ORDER`, memory-space
assignment's VMEM).

Independently, the heap simulator's replay (the events xlashape feeds its
packer) is compared with XLA's own trace of it, event for event, in every
``.hlo.pb`` of the corpora that has one: same ALLOC / FREE / SHARE_WITH
sequence, same shared values.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import corpora
from xlashape.allocation_kinds import TEMPORARY, kind_of
from xlashape.memory import analyze
from xlashape.memory.packing import HeapModel
from xlashape.memory.records import Reading
from xlashape.memory.source_dump import dump_records
from xlashape.memory.sharing import MSA_COLORS
from xlashape.xla_dump import read_buffer_assignment

ROOT = Path(__file__).resolve().parent.parent

#: XLA:TPU device-memory temporary allocations whose blocks (tuple tables and
#: the heap, put end to end) come in an order xlashape does not rebuild:
#: libtpu's buffer assignment makes its allocations in an order that is not
#: open-source XLA's and that no file of the dump determines. Their size and
#: every heap's packing are XLA's; only where each block starts differs.
TPU_ORDER = {"attention", "attention_v5p", "bottleneck_train", "conv", "kv_decode",
             "kv_decode_donated", "layernorm_stats", "scan", "scatter_add_donated",
             "small_types", "train_step_donated", "while_loop"}

_OFFSET = re.compile(r"offset=\d+")
_TEMP_SIZE = re.compile(r"^(allocation \d+: size )\d+(.*preallocated-temp)", re.M)


def erase(src: Path, dest: Path, seed: int) -> None:
    """A copy of the dump ``src`` at ``dest`` without XLA's offsets, the
    temporary allocations' sizes (both garbage now), the memory-usage report
    and the ``.hlo.pb`` files."""
    rng = random.Random(seed)
    shutil.copytree(src, dest)
    for p in dest.iterdir():
        name = p.name
        if "memory-usage-report" in name or name.endswith((".hlo.pb", ".hlo.pb.gz")):
            p.unlink()
        elif name.endswith("-buffer-assignment.txt"):
            text = p.read_text()
            text = _OFFSET.sub(lambda m: f"offset={rng.randrange(1 << 40)}", text)
            text = _TEMP_SIZE.sub(lambda m: f"{m.group(1)}{rng.randrange(1 << 40)}{m.group(2)}",
                                  text)
            p.write_text(text)


def _dumps():
    for prog in corpora.programs():
        if prog.dump_dir is not None:
            yield prog


def _truth(dump: Path):
    """allocation file name -> {index: allocation} of the original dump."""
    out = {}
    for p in dump.iterdir():
        if p.name.endswith("after_optimizations-buffer-assignment.txt"):
            out[p.name] = {a.index: a for a in read_buffer_assignment(p)}
    return out


@pytest.mark.parametrize("prog", list(_dumps()), ids=corpora.program_id)
def test_packing_equals_xla_without_its_offsets(prog, tmp_path):
    truth = _truth(prog.dump_dir)
    results = []
    for seed in (1, 2):
        copy = tmp_path / f"erased{seed}"
        erase(prog.dump_dir, copy, seed)
        assert not any(p.name.endswith((".hlo.pb", "memory-usage-report.txt"))
                       for p in copy.iterdir())
        r = analyze(copy, packing=True)
        results.append({(os.path.basename(m.path), p.allocation): p
                        for m in r.modules if m.packing for p in m.packing})
    # the garbage is never read: both copies pack the same
    assert results[0].keys() == results[1].keys()
    for k in results[0]:
        assert results[0][k].values == results[1][k].values
        assert results[0][k].size_in_bytes == results[1][k].size_in_bytes
    checked = 0
    for (hlo_name, index), p in results[0].items():
        ba_name = hlo_name.replace("after_optimizations.txt",
                                   "after_optimizations-buffer-assignment.txt")
        a = truth[ba_name][index]
        assert kind_of(a) == TEMPORARY
        if prog.platform == "tpu" and a.color in MSA_COLORS["tpu"]:
            assert p.size_in_bytes is None and "memory-space assignment" in p.reason
            continue
        assert p.reason is None, p.reason
        want = {v.id: (v.offset, v.size) for v in a.values}
        got = {v.id: (v.offset, v.size) for v in p.values}
        assert p.size_in_bytes == a.size
        assert got.keys() == want.keys()
        if prog.platform == "tpu" and a.color == 0 and prog.name in TPU_ORDER:
            assert p.order_note and "XLA:TPU" in p.order_note
            assert got != want      # remove the program from TPU_ORDER once it packs right
            continue
        assert got == want
        checked += 1
    if prog.platform != "tpu":
        assert checked == sum(1 for name in truth for a in truth[name].values()
                              if kind_of(a) == TEMPORARY)


def _trace_programs():
    for prog in corpora.programs():
        if prog.hlo_proto is not None and prog.dump_dir is not None:
            yield prog


@pytest.mark.parametrize("prog", list(_trace_programs()), ids=corpora.program_id)
def test_replay_is_xlas_trace_event_for_event(prog):
    """The heap simulator's events xlashape replays from the text files are
    the ones XLA recorded in the .hlo.pb (its HeapSimulatorTrace)."""
    from xlashape.protos import read_hlo_proto

    hp = read_hlo_proto(str(prog.hlo_proto))
    traces = [t for t in hp.buffer_assignment.heap_simulator_traces
              if t.whole_module_simulation and t.events]
    stem = os.path.basename(str(prog.hlo_proto)).split("after_optimizations")[0]
    rec = next(r for r in dump_records(str(prog.dump_dir), Reading(full_module=True))
               if r.allocations and os.path.basename(r.path).split("after_optimizations")[0]
               == stem)
    model = HeapModel(rec, prog.platform)
    packed = model.pack()
    ours = {}
    for cp in packed.values():
        if cp.events:
            ours[frozenset(e.id for e in cp.events)] = [(e.kind, e.id, e.share_with)
                                                        for e in cp.events]
    kinds = {0: 0, 1: 1, 2: 2}
    assert len(traces) == len(ours)
    for t in traces:
        theirs = [(kinds[e.kind], e.buffer_id, e.share_with_canonical_id if e.kind == 2 else None)
                  for e in t.events]
        key = frozenset(e[1] for e in theirs)
        assert ours.get(key) == theirs


def test_packing_in_the_json_and_the_report(tmp_path):
    dump = corpora.DATA / "gpu_corpus" / "dev_attention_cudnn" / "dump"
    r = analyze(dump, packing=True)
    m = r.modules[0]
    doc = m.to_json()
    assert doc["packing"] == [{"allocation": 4, "memory_space": 0, "size_in_bytes": 512,
                               "values": [{"id": 3, "offset": 0, "size": 16},
                                          {"id": 5, "offset": 256, "size": 256}],
                               "equal_to_dump": True}]
    assert analyze(dump).modules[0].to_json()["packing"] is None
    out = subprocess.run([sys.executable, "-m", "xlashape", "memory", str(dump), "--packing",
                          "--json"], capture_output=True, text=True, check=True,
                         cwd=str(ROOT)).stdout
    assert json.loads(out)["modules"][0]["packing"] == doc["packing"]
    text = subprocess.run([sys.executable, "-m", "xlashape", "memory", str(dump), "--packing"],
                          capture_output=True, text=True, check=True, cwd=str(ROOT)).stdout
    # the sentence as the report wraps it for the terminal
    assert "1 of 1 temporary allocations rebuilt, 1 equal to the dump's" in " ".join(text.split())


def test_without_the_values_file_nothing_is_packed_and_says_why(tmp_path):
    src = corpora.DATA / "gpu_corpus" / "dev_mlp_f32" / "dump"
    copy = tmp_path / "d"
    shutil.copytree(src, copy)
    for p in copy.iterdir():
        if p.name.endswith("-buffer-assignment-values.txt"):
            p.unlink()
    m = analyze(copy, packing=True).modules[0]
    assert m.packing and all(p.size_in_bytes is None and "values file" in p.reason
                             for p in m.packing)
