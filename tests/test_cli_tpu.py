"""``xlashape explain --tpu`` and ``describe --tpu``: a shape written without a
layout gets the layout XLA:TPU gives it. The expected layouts and byte counts
are the compiler's, read from the sweep's fixture (tests/data/tpu_layouts)."""

import json

import pytest

from cli_util import DATA, fails, ok


def _xla(chip):
    """shape without layout -> (shape as XLA:TPU printed it, bytes it allocated)."""
    table = {}
    for line in (DATA / "tpu_layouts" / f"{chip}.tsv").read_text().splitlines():
        if not line.startswith("#"):
            text, nbytes = line.split("\t")
            table[text[:text.index("]") + 1]] = (text, int(nbytes))
    return table


# the README's shapes
README_SHAPES = ["f32[100,5]", "s32[1024,1]", "bf16[8,1,1280]", "f32[1024,8,4]",
                 "bf16[8,1,1280,16384]"]


@pytest.mark.parametrize("shape", README_SHAPES)
def test_explain_tpu_says_how_the_array_is_stored(shape):
    text, nbytes = _xla("v5e")[shape]
    out = ok("explain", "--tpu", shape).stdout.splitlines()
    assert out[0].startswith(f"on TPU v5e this array is stored as {text}: {nbytes} bytes (")
    assert "when no layout is requested" in out[1]
    assert out[2] == text
    assert "padded size" in out[4] and f"({nbytes} bytes)" in out[4]


@pytest.mark.parametrize("chip", ["v2", "v3", "v4", "v5e", "v5p", "v6e", "v7x"])
def test_explain_tpu_chip_json(chip):
    text, nbytes = _xla(chip)["s4[3,5,7]"]
    obj = json.loads(ok("explain", "--tpu", chip, "s4[3,5,7]", "--json").stdout)
    assert obj["shape"] == text
    assert obj["padded_bytes"] == nbytes
    assert obj["tpu"] == chip


def test_tpu_flag_positions_and_chip_spellings():
    text, nbytes = _xla("v5e")["f32[100,5]"]
    first = f"on TPU v5e this array is stored as {text}: {nbytes} bytes"
    for argv in (["--tpu", "f32[100,5]"], ["f32[100,5]", "--tpu"], ["--tpu", "v5e", "f32[100,5]"],
                 ["f32[100,5]", "--tpu", "TPU v5 lite"], ["--tpu=v5e", "f32[100,5]"]):
        assert ok("explain", *argv).stdout.startswith(first), argv
    assert ok("explain", "--tpu", "-", input="f32[100,5]\n").stdout.startswith(first)


def test_describe_tpu():
    text, nbytes = _xla("v6e")["bf16[8,1,1280]"]
    out = ok("describe", "--tpu", "v6e", "bf16[8,1,1280]").stdout
    assert out.startswith(f"on TPU v6e this array is stored as {text}: {nbytes} bytes")
    assert f"shape           {text}" in out
    obj = json.loads(ok("describe", "--tpu", "v6e", "bf16[8,1,1280]", "--json").stdout)
    assert (obj["shape"], obj["padded_bytes"], obj["tpu"]) == (text, nbytes, "v6e")


def test_describe_tpu_tuple_gives_each_array_its_layout():
    table = _xla("v4")
    a, na = table["f32[100,5]"]
    b, nb = table["s8[7]"]
    out = ok("describe", "--tpu", "v4", "(f32[100,5], s8[7])").stdout
    assert out.startswith(f"on TPU v4 these arrays are stored as ({a}, {b}): {na + nb} bytes")
    obj = json.loads(ok("describe", "--tpu", "v4", "(f32[100,5], s8[7])", "--json").stdout)
    assert [e["shape"] for e in obj["elements"]] == [a, b]
    assert obj["padded_bytes"] == na + nb


def test_without_tpu_nothing_changes():
    out = ok("explain", "f32[100,5]").stdout
    assert out.splitlines()[0] == "f32[100,5]{1,0}"
    assert "TPU" not in out.splitlines()[0]
    assert "tpu" not in json.loads(ok("explain", "f32[100,5]", "--json").stdout)


@pytest.mark.parametrize("argv,words", [
    (["explain", "--tpu", "v4"], "the following arguments are required: SHAPE"),
    (["describe", "--tpu"], "the following arguments are required: SHAPE"),
    (["explain", "--tpu", "v9", "f32[2]"], "unknown TPU chip 'v9'"),
    (["explain", "--tpu", "f32[2]{0}"], "written without a layout"),
    (["describe", "--tpu", "(f32[2]{0}, s8[])"], "written without a layout"),
    (["explain", "--tpu", "u1[8]"], "layout of u1 arrays is not known"),
    (["explain", "--tpu", "f32[<=8]"], "dynamic dimension"),
    (["explain", "--tpu", "f32[2"], "expects"),
])
def test_tpu_errors_are_one_line(argv, words):
    r = fails(*argv)
    assert words in r.stderr
    assert "Traceback" not in r.stderr


def test_help_shows_shape_as_required():
    out = ok("explain", "--help").stdout
    assert "[--tpu [CHIP]]" in out and "[SHAPE]" not in out
    assert "v5e" in out


def test_readme_session_is_what_the_command_prints():
    import pathlib
    import shlex

    readme = pathlib.Path(__file__).resolve().parent.parent / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not next to the tests")
    lines = readme.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("$ xlashape explain --tpu"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i])
    argv = shlex.split(lines[start][len("$ xlashape "):])
    assert ok(*argv).stdout.splitlines() == lines[start + 1:end]
    # and the stored shape it names is the compiler's
    text, nbytes = _xla("v5e")["f32[100,5]"]
    assert lines[start + 1].startswith(f"on TPU v5e this array is stored as {text}: {nbytes} bytes")


@pytest.mark.parametrize("argv,chip", [
    (["describe", "--tpu", "f32[100,5]"], "v5e"),            # '--tpu SHAPE': the default chip
    (["describe", "f32[100,5]", "--tpu"], "v5e"),
    (["explain", "--tpu", "TPU v5 lite", "f32[100,5]"], "v5e"),  # jax's device_kind
    (["explain", "--tpu", "v6e", "f32[100,5]", "--json"], "v6e"),
    (["explain", "f32[100,5]"], None),
    (["show", "f32[100,5]", "--pad", "101,6", "--padding-value", "2"], None),
    (["index", "f32[100,5]", "1,2"], None),
])
def test_load_shape_returns_the_chip_and_leaves_args_alone(argv, chip):
    # the commands read the chip from load_shape's answer; the parsed
    # arguments stay what the user wrote
    from xlashape.cli import build_parser
    from xlashape.cli._shape_arg import load_shape

    args = build_parser([argv[0]]).parse_args(argv)
    before = dict(vars(args))
    shape, got = load_shape(args)
    assert vars(args) == before
    assert got == chip
    if chip is not None:
        assert str(shape) == _xla(chip)["f32[100,5]"][0]
    elif argv[0] == "show":
        assert shape.layout.padded_dimensions == (101, 6)
        assert shape.layout.padding_value == 2
    else:
        assert str(shape) == "f32[100,5]{1,0}"
