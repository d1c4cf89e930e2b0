"""The ``xlashape`` command as a whole: usage, errors, input handling shared by
every command (SHAPE from standard input, 64-bit numbers, printable output),
the entry points, and the package structure. Each command has its own
``test_cli_<command>.py``; the helpers are in ``cli_util.py``.
"""

import re
import sys
from pathlib import Path

import pytest
import strategies as S
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_util import DATA, PADDED, fails, ok, one_error_line, run, run_subprocess


def _command_names():
    from xlashape.cli import COMMANDS

    return [c.NAME for c in COMMANDS]


@pytest.mark.parametrize("cmd", _command_names())
def test_every_subcommand_has_help_with_an_example(cmd):
    r = ok(cmd, "--help")
    assert "example" in r.stdout
    assert f"xlashape {cmd} " in r.stdout


def test_top_level_help_lists_the_subcommands():
    r = ok("--help")
    for cmd in _command_names():
        assert cmd in r.stdout


def test_no_subcommand_is_a_usage_error():
    r = run()
    assert r.returncode == 2
    assert "usage" in r.stderr


def test_unknown_option_is_one_error_line():
    r = fails("show", "f32[2]", "--bogus")
    assert len(r.stderr.splitlines()) == 1
    assert "--bogus" in r.stderr


def test_unknown_subcommand_is_one_error_line():
    r = fails("frobnicate")
    assert len(r.stderr.splitlines()) == 1
    assert "invalid choice" in r.stderr


def test_bad_shape_reports_line_column_and_caret():
    r = fails("describe", "f32[2,3]{0,1")
    lines = r.stderr.splitlines()
    assert "line 1, column 13" in lines[0]
    assert lines[1] == "f32[2,3]{0,1"
    assert lines[2] == " " * 12 + "^"


def test_unknown_element_type_is_an_error():
    r = fails("explain", "f33[2]")
    assert "f33" in r.stderr


def test_non_array_shape_is_refused_by_show():
    r = fails("show", "(f32[2], s32[])")
    assert "not an array shape" in r.stderr


def test_pad_needs_one_width_per_dimension():
    r = fails("show", "f32[2,3]{0,1}", "--pad", "3")
    assert "one width per dimension" in r.stderr
    assert "2 dimensions" in r.stderr


def test_pad_smaller_than_the_dimension_is_an_error():
    r = fails("show", "f32[2,3]{0,1}", "--pad", "3,2")
    assert "smaller than its size 3" in r.stderr


def test_pad_must_be_integers():
    r = fails("describe", "f32[2,3]", "--pad", "3,x")
    assert "integers" in r.stderr


def test_padding_value_must_be_a_number():
    r = fails("show", "f32[2,3]", "--padding-value", "zero")
    assert "--padding-value must be a number" in r.stderr


# 2**62 * 4 elements overflow int64 (ShapeUtil::ValidateShape: "Dimensions overflow")
HUGE = f"f32[{2 ** 62},4]{{1,0}}"


@pytest.mark.parametrize("args", [("describe", HUGE), ("explain", HUGE),
                                  ("show", HUGE), ("index", HUGE, "0,0")])
def test_shape_xla_rejects_gets_a_warning(args):
    r = ok(*args)
    warn = [x for x in r.stderr.splitlines() if "XLA would reject this shape" in x]
    assert len(warn) == 1, r.stderr
    assert warn[0].startswith("xlashape: warning: XLA would reject this shape: ")
    assert "overflow" in warn[0]


def test_valid_shape_gets_no_warning():
    assert ok("describe", "f32[2,3]{1,0}").stderr == ""


@pytest.mark.parametrize("shape,value,fragment", [
    ("u8[2,3]{1,0}", "999", "999"),      # u8 holds 0..255
    ("u8[2,3]{1,0}", "-1", "-1"),
    ("s4[2,3]{1,0}", "8", "8"),          # s4 holds -8..7
    ("pred[2,3]{1,0}", "2", "2"),        # pred holds 0 and 1
    ("f16[2,3]{1,0}", "1e10", "1e10"),   # f16's largest finite value is 65504
])
def test_padding_value_the_element_type_cannot_hold(shape, value, fragment):
    r = fails("show", shape, "--pad", "4,4", "--padding-value", value)
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1
    assert f"--padding-value {fragment} cannot be held by {shape.split('[')[0]}" in r.stderr


def test_padding_value_at_the_type_limit_is_accepted():
    out = ok("show", "u8[2,3]{1,0}", "--pad", "4,4", "--padding-value", "255").stdout
    assert "padding shown as 255" in out


def test_every_command_module_has_the_documented_interface():
    import argparse

    from xlashape import cli

    names = [c.NAME for c in cli.COMMANDS]
    assert {"describe", "explain", "show", "index", "hlo"} <= set(names)
    assert len(set(names)) == len(names)
    for c in cli.COMMANDS:
        assert c.__name__ == f"xlashape.cli.{c.NAME}"
        assert callable(c.add_parser) and callable(c.run)
    sub = cli.build_parser()._subparsers._group_actions[0]
    assert isinstance(sub, argparse._SubParsersAction)
    assert list(sub.choices) == names


def test_pyproject_packages_every_package_directory():
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").exists() or not (root / "xlashape").is_dir():
        pytest.skip("not run from a checkout")
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = sorted(".".join(p.parent.relative_to(root).parts)
                   for p in (root / "xlashape").rglob("__init__.py"))
    assert "xlashape.cli" in found
    # every Python package is listed; the others listed are data directories
    # (the example dump and its parent) that exist and hold no Python code
    assert set(found) <= set(packages)
    for name in set(packages) - set(found):
        d = root.joinpath(*name.split("."))
        assert d.is_dir() and not list(d.rglob("*.py")), name


def test_the_cli_imports_no_private_name_of_another_module():
    # `from ..hlo_module import _open_text` and the like: the CLI uses public API
    pkg = Path(__file__).resolve().parent.parent / "xlashape" / "cli"
    if not pkg.exists():
        pytest.skip("not run from a checkout")
    bad = []
    for path in pkg.glob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*from \.\.([\w.]*) import (.*)", line)
            if not m:
                continue
            names = [x.strip().split(" ")[0] for x in m.group(2).strip("()").split(",")]
            private = [x for x in names + m.group(1).split(".")
                       if x.startswith("_") and not x.endswith("__")]
            if private:
                bad.append(f"{path.name}:{n}: {line.strip()}")
    assert bad == []


def test_the_cli_reads_no_private_attribute_of_other_objects():
    # e.g. the tiling plan's private per-level objects: LayoutPlan.tile_levels is public
    pkg = Path(__file__).resolve().parent.parent / "xlashape" / "cli"
    if not pkg.exists():
        pytest.skip("not run from a checkout")
    bad = []
    for path in pkg.glob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            for m in re.finditer(r"(\w+)\._[A-Za-z]\w*", code):
                if m.group(1) not in ("self", "cls"):
                    bad.append(f"{path.name}:{n}: {line.strip()}")
    assert bad == []


# -- the entry points, in a real process --------------------------------------------


def test_python_m_xlashape_runs_the_command():
    import xlashape

    r = run_subprocess("--version")
    assert (r.returncode, r.stdout.strip()) == (0, f"xlashape {xlashape.__version__}")
    r = run_subprocess("explain", PADDED)
    assert r.returncode == 0 and r.stdout.splitlines()[0] == PADDED


_IMPORTED = """
import json, sys
from xlashape.cli import COMMAND_NAMES, main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
commands = sorted(m for m in sys.modules
                  if m.startswith("xlashape.cli.") and m.split(".")[-1] in COMMAND_NAMES)
package = sorted(m for m in sys.modules if m.startswith("xlashape"))
print(json.dumps({"numpy": "numpy" in sys.modules, "commands": commands, "package": package}))
"""


@pytest.mark.parametrize("args, numpy, commands", [
    (("--version",), False, []),
    (("index", "f32[3,5]{1,0:T(2,2)}", "2,3"), True, ["xlashape.cli.index"]),
    (("hlo", "--help"), None, ["xlashape.cli.hlo"]),     # numpy: either way
])
def test_start_up_imports_only_what_the_command_needs(args, numpy, commands):
    # `xlashape --version` imports no numpy; a command imports its own
    # module and no other command's
    import json

    r = run_subprocess(*args, command=[sys.executable, "-c", _IMPORTED])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["commands"] == commands
    if numpy is not None:
        assert got["numpy"] == numpy
    if args == ("--version",):
        # the parser's helpers and the package's top, nothing of the model
        # (the SHAPE argument and the size helpers are modules of their own)
        assert got["package"] == ["xlashape", "xlashape.cli", "xlashape.cli._common",
                                  "xlashape.cli._output", "xlashape.errors", "xlashape.limits",
                                  "xlashape.reporters", "xlashape.reporters.tables",
                                  "xlashape.safe_text"]


def test_python_m_xlashape_bad_input_is_one_line_and_status_2():
    r = run_subprocess("explain", "f33[2]")
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 3     # message, source line, caret
    assert r.stderr.startswith("xlashape: error: ") and "Traceback" not in r.stderr


def test_the_installed_xlashape_script_runs_the_command():
    import shutil

    script = Path(sys.executable).parent / "xlashape"
    if not script.exists():
        script = shutil.which("xlashape")
        if script is None:
            pytest.skip("the xlashape console script is not installed")
    r = run_subprocess("index", "f32[3,5]{1,0:T(2,2)}", "2,3", command=[str(script)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "(2,3) -> element offset 17, byte offset 68"


# -- SHAPE '-' reads standard input --------------------------------------------------


@pytest.mark.parametrize("args", [
    ("describe",), ("describe", "--json"), ("explain",), ("explain", "--json"),
    ("show", "--pad", "9,1,1024"), ("index", "7,0,1000", "--offset", "5"),
])
def test_shape_dash_reads_standard_input(args):
    command, rest = args[0], args[1:]
    direct = ok(command, PADDED, *rest)
    piped = ok(command, "-", *rest, input=f"  {PADDED}\n")
    assert piped.stdout == direct.stdout
    assert piped.stderr == direct.stderr


def test_shape_dash_with_an_empty_standard_input():
    r = one_error_line("explain", "-", input=" \n")
    assert "no shape on standard input" in r.stderr


def test_shape_dash_with_too_much_input_is_refused_without_reading_it_all():
    from xlashape.cli._shape_arg import MAX_STDIN_SHAPE_CHARS

    r = one_error_line("describe", "-", input="f32[2]" + " " * MAX_STDIN_SHAPE_CHARS)
    assert f"longer than {MAX_STDIN_SHAPE_CHARS} bytes" in r.stderr


def test_shape_dash_with_bytes_that_are_not_utf8():
    r = fails("explain", "-", input=b"f32[2]\xff\xfe")
    assert "Extra content after shape" in r.stderr
    assert "\ufffd" in r.stderr            # shown as replacement characters


def test_shape_dash_that_does_not_parse_points_at_the_right_line():
    r = fails("describe", "-", input="(f32[2],\n f33[1])\n")
    lines = r.stderr.splitlines()
    assert "line 2, column 2" in lines[0]
    assert lines[1:] == [" f33[1])", " ^"]


# -- integers on the command line are 64-bit -------------------------------------------

BIG = "99999999999999999999"      # > 2**63 - 1


@pytest.mark.parametrize("args", [
    ("show", "f32[2,3]", "--pad", f"{BIG},5"),
    ("describe", "f32[2,3]", "--pad", f"3,{BIG}"),
    ("explain", "f32[2,3]", "--pad", f"{BIG},5"),
    ("index", "f32[2,3]", "--pad", f"{BIG},5", "0,0"),
    ("index", "f32[2,3]", f"1,{BIG}"),
    ("index", "f32[2,3]", f"-{BIG},1"),
    ("index", "f32[2,3]", "--offset", BIG),
    ("index", "f32[2,3]", "--offset", str(2 ** 63)),
    ("index", "f32[2,3]", "--offset", str(-2 ** 63 - 1)),
    ("show", "f32[2,3]", "--rows", BIG),
    ("show", "f32[2,3]", "--slots", BIG),
    ("hlo", DATA / "small_dump.hlo", "--top", BIG),
    ("hlo", DATA / "small_dump.hlo", "--max-warnings", BIG),
])
def test_integers_outside_int64_are_one_line_errors(args):
    r = one_error_line(*args)
    assert "outside the 64-bit integer range" in r.stderr
    assert BIG in r.stderr or str(2 ** 63) in r.stderr or str(-2 ** 63 - 1) in r.stderr


def test_int64_limits_themselves_are_accepted():
    # in range, so the command goes on and says what is really wrong
    r = one_error_line("index", "f32[2,3]", "--offset", str(2 ** 63 - 1))
    assert "out of bounds" in r.stderr and "64-bit integer range" not in r.stderr
    r = one_error_line("index", "f32[2,3]", f"{-2 ** 63},0")
    assert "out of bounds" in r.stderr and "64-bit integer range" not in r.stderr
    assert "top 2 by padding waste" in ok("hlo", DATA / "small_dump.hlo", "--summary",
                                          "--top", str(2 ** 63 - 1)).stdout


def test_pad_whose_element_count_overflows_int64_is_an_error():
    # 2**62 * 5 slots do not fit in a 64-bit count
    r = one_error_line("show", "f32[2,3]", "--pad", f"{2 ** 62},5")
    assert f"{2 ** 62 * 5} elements" in r.stderr


@pytest.mark.parametrize("shape,value", [
    ("s64[2]", str(2 ** 63)), ("f32[2]", BIG), ("u64[2]", str(2 ** 64)), ("u64[2]", "-1"),
])
def test_padding_value_integers_outside_64_bits_are_errors(shape, value):
    r = one_error_line("show", shape, "--pad", "3", "--padding-value", value)
    assert "--padding-value" in r.stderr and value in r.stderr


def test_padding_value_at_the_64_bit_limits_is_accepted():
    out = ok("show", "u64[2]", "--pad", "3", "--padding-value", str(2 ** 64 - 1)).stdout
    assert f"padding shown as {2 ** 64 - 1}" in out
    out = ok("show", "s64[2]", "--pad", "3", "--padding-value", str(-2 ** 63)).stdout
    assert f"padding shown as {-2 ** 63}" in out


def test_padding_value_that_overflows_a_float_is_an_error():
    r = one_error_line("show", "f64[2]", "--pad", "3", "--padding-value", "1e400")
    assert "1e400" in r.stderr
    assert "padding shown as inf" in ok("show", "f32[2]", "--pad", "3",
                                        "--padding-value", "inf").stdout


# -- echoed input is printable ------------------------------------------------------------

ESC = "\x1b"


def assert_no_control_characters(*texts):
    for text in texts:
        bad = [c for c in text if not (c.isprintable() or c in "\n\t")]
        assert bad == [], f"raw control characters {bad!r} in {text!r}"


def test_printable_escapes_every_unprintable_character_and_keeps_the_rest():
    from xlashape.cli._output import printable

    everything = "".join(map(chr, range(0x110000)))
    out = printable(everything)
    assert_no_control_characters(out.replace("\t", ""))
    assert "\n" not in out
    assert printable("f32[2] café ∑ 日本 \t") == "f32[2] café ∑ 日本 \t"
    assert printable("a\x1b[2Jb\x9b\u202e\udcff\n") == "a\\x1b[2Jb\\x9b\\u202e\\udcff\\n"


def test_shape_with_a_terminal_escape_is_echoed_escaped_with_the_caret_in_place():
    r = fails("describe", f"f32[2]{ESC}[31m{{0}}")
    assert_no_control_characters(r.stderr)
    lines = r.stderr.splitlines()
    assert lines[1] == "f32[2]\\x1b[31m{0}"
    assert lines[2].index("^") == lines[1].index("\\x1b")


def test_the_caret_stays_under_its_character_after_escapes():
    from xlashape.cli._common import error_text
    from xlashape.errors import HloParseError

    text = f"a{ESC}b\u202e\tc d"
    e = HloParseError("bad token", text, position=text.index("d"))
    msg, src, caret = error_text(e).split("\n")
    assert msg == "bad token (line 1, column 8)"
    assert src == "a\\x1bb\\u202e c d"         # the tab becomes a space
    assert src[caret.index("^")] == "d"


def test_undecodable_argument_bytes_are_escaped_not_a_crash():
    # a real process: the argument arrives as surrogate escapes, which a
    # UTF-8 terminal stream cannot encode
    r = run_subprocess("describe", b"f32[2]\xff\x1b]0;title\x07")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "\\udcff\\x1b]0;title\\x07" in r.stderr
    assert_no_control_characters(r.stderr)


@pytest.mark.parametrize("args,echoed", [
    (("show", "f32[2]", f"--bo{ESC}gus"), "--bo\\x1bgus"),
    (("hlo", f"/no/such/{ESC}[2J"), "/no/such/\\x1b[2J"),
    ((f"fr{ESC}ob",), "fr\\x1bob"),
    (("index", "f32[2,3]", f"1,{ESC}"), "\\x1b"),
    (("show", "f32[2,3]", "--pad", f"3,{ESC}"), "\\x1b"),
    (("show", "f32[2,3]", "--padding-value", f"{ESC}[0m"), "\\x1b[0m"),
])
def test_errors_echo_arguments_escaped(args, echoed):
    r = one_error_line(*args)
    assert echoed in r.stderr
    assert_no_control_characters(r.stderr)


def test_help_never_says_seeds():
    from xlashape.cli import COMMANDS

    for args in [("--help",)] + [(c.NAME, "--help") for c in COMMANDS]:
        assert "seed" not in ok(*args).stdout.lower(), args


# -- no input makes a traceback ------------------------------------------------------------

_SHAPE_SAMPLES = ["f32[3,5]{1,0:T(2,2)}", "(f32[2], s4[3]{0:E(4)})",
                  "bf16[8,1,1280]{2,1,0:T(8,128)(2,1)S(1)}", "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}"]
_OPTIONS = [(), ("--json",), ("--pad", "3,5"), ("--pad", "0"), ("--padding-value", "1"),
            ("--padding-value", "-0.5"), ("--offset", "0"), ("--offset", "-1"), ("0",),
            ("0,0",), ("1,2,3",), ("--pad", "100,100,100"), ("--pad", "9223372036854775807,2")]


def _exits_cleanly(r):
    assert r.returncode in (0, 2), (r.returncode, r.stderr)
    if r.returncode == 2:
        errors = [x for x in r.stderr.splitlines() if x.startswith("xlashape: error: ")]
        assert len(errors) == 1, r.stderr
    for text in (r.stdout, r.stderr):
        assert all(c.isprintable() or c in "\n\t" for c in text), text


@settings(max_examples=150)
@given(st.sampled_from(["describe", "explain", "show", "index"]),
       st.one_of(S.shapes(max_leaves=4).map(str), S.mutated(_SHAPE_SAMPLES)),
       st.sampled_from(_OPTIONS), st.sampled_from(_OPTIONS))
def test_no_shape_argument_makes_a_traceback(command, text, opt1, opt2):
    # run_in_process lets any unexpected exception through: the test fails on it
    _exits_cleanly(run(command, text, *opt1, *opt2))


_HLO_LINES = [line for name in ("tpu_module.hlo", "oom_report.txt", "malformed.hlo")
              for line in (DATA / name).read_text().splitlines()]


@settings(max_examples=100)
@given(st.lists(st.one_of(st.sampled_from(_HLO_LINES), S.mutated(_HLO_LINES[:60]),
                          st.text(max_size=30)), max_size=25),
       st.sampled_from([(), ("--json", "--details"), ("--csv", "--details"), ("--details",)]))
def test_no_hlo_input_makes_a_traceback(lines, options):
    _exits_cleanly(run("hlo", "-", *options, input="\n".join(lines)))
