"""xlashape.tpu against XLA:TPU's own choices.

The goldens are the compiler's: ``tests/data/tpu_layouts/<chip>.tsv`` holds
the layout XLA:TPU printed for each jit parameter and the size of its
allocation in XLA's buffer assignment (``tests/oracle/sweep_tpu_layouts.py``
made them, with the versions in each file's header); ``recheck/`` is a second
run with another random seed, made after the model was written.
"""

import pathlib
import re

import pytest

import xlashape
from xlashape import InvalidShapeError, Shape, ShapeTypeError, XlaShapeError, tiling, tpu

DATA = pathlib.Path(__file__).resolve().parent / "data" / "tpu_layouts"
CHIPS = ("v2", "v3", "v4", "v5e", "v5p", "v6e", "v7x")
MAIN_CASES_PER_CHIP = 3000
RECHECK_CASES_PER_CHIP = 2000


def _read(path):
    header, rows = [], []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            header.append(line)
            continue
        text, nbytes = line.split("\t")
        rows.append((text, int(nbytes)))
    return header, rows


_SIZES = {}  # predicted shape text -> its size (chips of a generation predict alike)


def _disagreements(chip, rows):
    bad = []
    for text, nbytes in rows:
        golden = xlashape.parse_shape(text)
        predicted = tpu.with_default_layout(golden.with_layout(None), chip)
        predicted_text = str(predicted)
        size = _SIZES.get(predicted_text)
        if size is None:
            size = _SIZES[predicted_text] = tiling.physical_size_in_bytes(predicted)
        if predicted_text != text or size != nbytes:
            bad.append(f"XLA: {text} ({nbytes} bytes); model: {predicted} ({size} bytes)")
    return bad


@pytest.mark.parametrize("folder,expected", [("", MAIN_CASES_PER_CHIP),
                                             ("recheck", RECHECK_CASES_PER_CHIP)])
@pytest.mark.parametrize("chip", CHIPS)
def test_every_swept_case_agrees(chip, folder, expected):
    header, rows = _read(DATA / folder / f"{chip}.tsv")
    assert any("libtpu 0.0.50.1" in h for h in header)
    assert len(rows) >= expected  # a truncated fixture must not pass quietly
    assert not any("REJECTED" in h for h in header)
    bad = _disagreements(chip, rows)
    assert not bad, f"{len(bad)} of {len(rows)} disagree on {chip}, e.g.\n" + "\n".join(bad[:10])


def test_fixture_covers_every_type_and_rank():
    _, rows = _read(DATA / "v5e.tsv")
    shapes = [xlashape.parse_shape(t) for t, _ in rows]
    types = {s.element_type.hlo_name for s in shapes}
    assert {"pred", "s2", "u2", "s4", "u4", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64",
            "f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz",
            "f8e3m4", "f8e5m2fnuz", "f8e4m3fnuz", "f8e8m0fnu", "f4e2m1fn", "c64",
            "c128"} <= types
    assert set(range(7)) <= {len(s.dimensions) for s in shapes}


def _acceptance():
    return [ln.split("\t") for ln in (DATA / "acceptance.tsv").read_text().splitlines()
            if not ln.startswith("#")]


def test_copying_programs_see_the_same_parameter_layouts():
    # acceptance.tsv: one array per compile, copied to the output
    checked = 0
    for chip, shape, status, answer in _acceptance():
        if status != "ok":
            continue
        if shape.startswith("s1["):
            # JAX passes its 1-bit integer to XLA as pred: no s1 reaches the compiler
            assert answer.startswith("pred[")
            with pytest.raises(InvalidShapeError, match="s1"):
                tpu.default_layout(shape, chip)
            continue
        assert str(tpu.with_default_layout(shape, chip)) == answer, (chip, shape)
        checked += 1
    assert checked > 3000


def test_what_the_compiler_refuses_is_what_the_docstring_says():
    # every u1 array (JAX cannot serialize it); copies of some 2-bit arrays crash
    # libtpu: rank 1 on every chip, most of rank 2 and more on v4; nothing else
    refused = [(c, s, a) for c, s, status, a in _acceptance() if status == "rejected"]
    assert {s.split("[")[0] for _, s, _ in refused} == {"u1", "s2", "u2"}
    for chip, shape, answer in refused:
        if shape.startswith("u1["):
            assert "serialize" in answer
        elif shape.count(",") == 0:
            assert "SIGILL" in answer
        else:
            assert chip == "v4" and "Unsupported B2 packed type" in answer
    assert "u1" in tpu.__doc__ and "Unsupported B2 packed type" in tpu.__doc__


# The shapes the documentation names, with what XLA:TPU printed for them
# (they are also rows of the fixture: checked below).
DOCUMENTED = [
    ("v5e", "f32[100,5]", "f32[100,5]{0,1:T(8,128)}"),
    ("v5e", "s32[1024,1]", "s32[1024,1]{0,1:T(1,128)}"),
    ("v5e", "bf16[8,1,1280]", "bf16[8,1,1280]{2,0,1:T(8,128)(2,1)}"),
    ("v5e", "f32[3,5,7]", "f32[3,5,7]{2,0,1:T(4,128)}"),
    ("v5e", "s8[7]", "s8[7]{0:T(512)(128)(4,1)}"),
    ("v5e", "s4[3,5,7]", "s4[3,5,7]{2,1,0:T(8,128)(8,1)E(4)}"),
    ("v3", "s4[3,5,7]", "s4[3,5,7]{2,1,0:T(8,128)(4,1)}"),
    ("v5e", "f32[]", "f32[]{:T(128)}"),
    ("v2", "f32[]", "f32[]{:T(256)}"),
]


@pytest.mark.parametrize("chip,shape,xla", DOCUMENTED)
def test_documented_examples(chip, shape, xla):
    _, rows = _read(DATA / f"{chip}.tsv")
    assert xla in {t for t, _ in rows}  # the golden is the compiler's
    assert str(tpu.with_default_layout(shape, chip)) == xla
    assert str(tpu.default_layout(shape, chip)) == xla[xla.index("]") + 1:]


def test_default_layout_ignores_a_given_layout_and_accepts_shapes():
    s = Shape("f32", (100, 5), xlashape.Layout((1, 0)))
    assert str(tpu.default_layout(s)) == "{0,1:T(8,128)}"
    assert str(tpu.with_default_layout(s)) == "f32[100,5]{0,1:T(8,128)}"


def test_tuples_get_a_layout_per_array():
    t = tpu.with_default_layout("(f32[100,5], (s32[1024,1], pred[]))", "v4")
    assert str(t) == "(f32[100,5]{0,1:T(8,128)}, (s32[1024,1]{0,1:T(1,128)}, pred[]{:T(512)}))"


@pytest.mark.parametrize("name,chip", [("v5e", "v5e"), ("TPU v5 lite", "v5e"), (" V5E ", "v5e"),
                                       ("TPU v5", "v5p"), ("TPU v6 lite", "v6e"),
                                       ("TPU7x", "v7x"), ("tpu7x", "v7x"), ("TPU v4", "v4"),
                                       ("v2", "v2"), ("v5p:2x2x1", "v5p"), ("v6e:2x2", "v6e")])
def test_chip_names(name, chip):
    # jax's device_kind strings, as the compile-only topologies report them
    assert tpu.canonical_chip(name) == chip


def test_chips_differ_only_between_generations():
    # what the module docstring says about the compiler's data: every chip file
    # holds the same cases; within a generation the layouts are the same
    layouts = {c: [t for t, _ in _read(DATA / f"{c}.tsv")[1]] for c in CHIPS}
    assert len({len(v) for v in layouts.values()}) == 1
    for a, b in (("v2", "v3"), ("v4", "v5e"), ("v4", "v5p"), ("v4", "v6e"), ("v4", "v7x")):
        assert layouts[a] == layouts[b], (a, b)
    differ = sum(x != y for x, y in zip(layouts["v3"], layouts["v4"]))
    assert differ > len(layouts["v4"]) // 4


@pytest.mark.parametrize("shape,chip,cls,words", [
    ("f32[2]", "v9", InvalidShapeError, "unknown TPU chip 'v9'"),
    ("f32[2]", 5, ShapeTypeError, "chip must be a string"),
    ("s1[4,4]", "v5e", InvalidShapeError, "layout of s1 arrays is not known"),
    ("u1[]", "v5e", InvalidShapeError, "layout of u1 arrays is not known"),
    ("(f32[2], s32[])", "v5e", InvalidShapeError, "not an array shape"),
    ("token[]", "v5e", InvalidShapeError, "not an array shape"),
    ("f32[<=4,3]", "v5e", InvalidShapeError, "dynamic dimension"),
    ("f32[?,3]", "v5e", InvalidShapeError, "dynamic dimension"),
    (Shape("f32", (3, -2)), "v5e", InvalidShapeError, "negative dimension"),
    (42, "v5e", ShapeTypeError, "expects a Shape or shape text"),
])
def test_errors(shape, chip, cls, words):
    with pytest.raises(cls, match=re.escape(words)) as e:
        tpu.default_layout(shape, chip)
    assert isinstance(e.value, XlaShapeError)


def test_large_shapes():
    # 2**40 rows of 3: only dimension 0 as the minor one avoids padding the
    # 2**40 to a multiple of the row tile; 3 rows take the 4-row tile of bf16
    s = tpu.with_default_layout(Shape("bf16", (2**40, 3)))
    xlashape.validate_shape(s)
    assert s.layout.minor_to_major == (0, 1)
    assert s.layout.tiles[0].dimensions == (4, 128)
    assert tiling.physical_size_in_bytes(s) == 2**40 * 4 * 2
