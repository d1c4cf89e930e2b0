"""xlashape.padding: the padding report (moved from xlashape.tiling, tested
in test_tiling*.py) and the fixes a JAX user can apply: the requested layout
against XLA:TPU's default, dropping a size-1 dimension, no layout fix for a
compiler scratch buffer, and "most padding" listing only what matters.

Sizes are computed here by hand (element count x bytes, dimensions rounded
up to their tiles), independently of the tiling model."""

import re
from pathlib import Path

from cli_util import ok
from xlashape import memory
from xlashape.hlo_text import parse_shape
from xlashape.padding import (
    MIN_PADDING_BYTES,
    advice,
    origin_of,
    padding_matters,
    padding_report,
    padding_summary,
)

DATA = Path(__file__).parent / "data"
PADDED_OUTPUTS = DATA / "tpu_corpus" / "oom_padded_outputs" / "dump"
EXAMPLE = DATA / "tpu_corpus" / "example_dump"


def test_a_requested_padded_layout_says_so_and_what_the_default_takes():
    # the corpus' program asked for this layout with out_shardings (oom.json)
    text = "bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)}"
    assert origin_of(text, kind="output") == "requested"
    a = advice(text, origin="requested")
    padded = 8 * 1280 * 8 * 16384 * 2          # the size-1 dim tiled by 8
    unpadded = 8 * 1280 * 1 * 16384 * 2        # 1280 % 8 == 0 and 16384 % 128 == 0
    assert (a.padded_bytes, a.unpadded_bytes) == (padded, unpadded)
    assert "was requested" in a.note and "320.00M instead of 2.50G" in a.note
    first = a.fixes[0]
    assert first.kind == "default-layout" and first.size_in_bytes == unpadded
    drop = [f for f in a.fixes if f.kind == "drop-dimension"]
    assert len(drop) == 1 and drop[0].size_in_bytes == unpadded
    assert "jnp.squeeze(x, 2)" in drop[0].text and "bf16[8,1280,16384]" in drop[0].text


def test_the_default_layout_is_not_called_requested():
    # XLA:TPU's own choice for f32[8,1024]
    assert origin_of("f32[8,1024]{1,0:T(8,128)}", kind="parameter") == "default"
    a = advice("f32[8,1,1024]{1,2,0:T(8,128)}", origin="default")
    assert a.note is None and all(f.kind != "default-layout" for f in a.fixes)
    # dropping the size-1 dimension: f32[8,1024] takes 8*1024*4 bytes
    drop = [f for f in a.fixes if f.kind == "drop-dimension"]
    assert drop and drop[0].size_in_bytes == 8 * 1024 * 4


def test_drop_dimension_only_where_it_removes_the_padding():
    # the size-1 dimension is major: the padding (100 -> 128 lanes) stays without it,
    # f32[8,100] in its default (8,128) tiles takes 8*128*4 bytes as now
    a = advice("f32[1,8,100]{2,1,0:T(8,128)}", origin="default")
    assert a.padded_bytes == 8 * 128 * 4
    assert all(f.kind != "drop-dimension" for f in a.fixes)
    # second-most-minor: dropping it removes the 8x
    a = advice("f32[1,100]{1,0:T(8,128)}", origin="default")
    assert a.padded_bytes == 8 * 128 * 4
    assert [f.size_in_bytes for f in a.fixes if f.kind == "drop-dimension"] == [128 * 4]


def test_a_compiler_scratch_buffer_gets_no_layout_fix():
    text = "bf16[8,64,64,32]{3,0,2,1:T(8,128)(2,1)S(1)}"
    assert origin_of(text, kind="temporary") == "scratch"
    a = advice(text, origin="scratch")
    assert a.fixes == () and "scratch" in a.note and "VMEM" in a.note
    # in the real dump it comes from: the VMEM temporary has no fix, in the API and the CLI
    m = memory.analyze(EXAMPLE).modules[0]
    vmem = [x for x in m.allocations if x.memory_space == 1 and x.padding_in_bytes > 0]
    assert vmem
    for x in vmem:
        e = x.explanation()
        assert e.fixes == () and e.origin == "scratch"
    out = ok("memory", EXAMPLE).stdout
    block = out.split("most padding", 1)[1]
    first = block.split("\n   2.", 1)[0]
    assert "S(1)" in first and "fix:" not in first and "compiler scratch buffer" in first


def test_memory_on_a_dump_with_requested_layouts_offers_the_default_first():
    out = ok("memory", PADDED_OUTPUTS).stdout
    assert "fix: drop the layout request" in out
    assert "or: drop the size-1 dimension 2" in out
    d = memory.analyze(PADDED_OUTPUTS).modules[0]
    outs = [a for a in d.padding_wasters if a.kind == "output"]
    assert outs and outs[0].to_json()["padding"]["origin"] == "requested"


class _A:
    def __init__(self, size, pad):
        self.size_in_bytes, self.padding_in_bytes = size, pad


def test_most_padding_lists_only_what_matters():
    assert not padding_matters(MIN_PADDING_BYTES - 1, 10 * MIN_PADDING_BYTES)
    assert not padding_matters(2 * MIN_PADDING_BYTES, 1000 * MIN_PADDING_BYTES)   # 0.2%
    assert padding_matters(50 * MIN_PADDING_BYTES, 1000 * MIN_PADDING_BYTES)
    small = [_A(300 << 20, 0), _A(4 << 20, 137 << 10)]
    s = padding_summary(small)
    assert s.listed == [] and not s.worth_fixing
    assert s.text == "padding 137.0K = 0.04% of 304.00M: nothing to fix"
    big = [_A(3 << 30, 2 << 30), _A(1 << 30, 0), _A(8 << 20, 4 << 10)]
    s = padding_summary(big)
    assert [a.padding_in_bytes for a in s.listed] == [2 << 30] and s.worth_fixing


def test_a_real_module_lists_the_padding_that_matters():
    for d in (EXAMPLE, PADDED_OUTPUTS):
        m = memory.analyze(d).modules[0]
        allocs = m.allocations
        total = sum(a.size_in_bytes for a in allocs)
        expected = sorted((a.padding_in_bytes for a in allocs
                           if a.padding_in_bytes >= max(MIN_PADDING_BYTES, 0.01 * total)),
                          reverse=True)[:10]
        assert [a.padding_in_bytes for a in m.padding_wasters] == expected
        assert m.padding_summary.padding_bytes == sum(a.padding_in_bytes for a in allocs)


def test_a_layout_that_is_some_generations_default_is_not_called_requested():
    from xlashape import tpu

    v3 = tpu.with_default_layout("s4[3,5,7]", chip="v3")
    v5p = tpu.default_layout("s4[3,5,7]", chip="v5p")
    assert v3.layout != v5p
    # without the chip, a default of any generation counts as XLA's own choice
    assert origin_of(v3, kind="parameter") == "default"
    assert origin_of(v3, kind="parameter", chip="v3") == "default"
    assert origin_of(v3, kind="parameter", chip="v5p") == "requested"


def test_a_suggestion_never_reads_as_a_size_against_itself():
    # f32[7,34]{1,0:T(2,4)}: 8 x 36 f32 = 1152 bytes; with {0,1}, 34 x 8 = 1088:
    # both print "1.1K", so the sentence gives the bytes (computed by hand here)
    rep = padding_report("f32[7,34]{1,0:T(2,4)}")
    moved = [s for s in rep.suggestions if "{0,1:T(2,4)}" in s]
    assert moved and "1.1K (1088 bytes) instead of 1.1K (1152 bytes)" in moved[0]
    pattern = re.compile(r"(\d[\d.]*[KMGTPE]?B?(?: \(\d+ bytes\))?) instead of "
                         r"(\d[\d.]*[KMGTPE]?B?(?: \(\d+ bytes\))?)")
    for et in ("f32", "s8"):
        for a in range(1, 12):
            for b in range(30, 40):
                for text in padding_report(f"{et}[{a},{b}]{{1,0:T(2,4)}}").suggestions:
                    for x, y in pattern.findall(text):
                        assert x != y, text
