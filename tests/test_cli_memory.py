"""``xlashape memory`` (and ``hlo`` on bad input), run through the command's
entry point (in this process, as ``cli_util`` explains; once in a subprocess).

Expected figures come from ``memory_analysis()`` recorded with the real dumps
(``tests/data/cpu_dump``), from the out-of-memory report's own text, or from
arithmetic written out here.
"""

import gzip
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from cli_util import DATA, fails, ok, one_error_line, run, run_subprocess
from xlashape import UnreadableInputError, memory
from xlashape.tiling import format_bytes

CPU_DUMP = DATA / "cpu_dump"
CPU_STATS = json.loads((CPU_DUMP / "memory_analysis.json").read_text())["memory_analysis"]
MODULE_KEYS = ["name", "argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "memory_used_bytes", "memory_limit_bytes", "allocations"]
ALLOCATION_KEYS = ["kind", "size_in_bytes", "unpadded_size_in_bytes", "memory_space", "shape",
                   "values"]


def check_form(doc):
    """The JSON form scripts rely on: these keys, these types."""
    assert list(doc) == ["schema_version", "modules"] and doc["schema_version"] == 2
    for m in doc["modules"]:
        assert [k for k in m if k in MODULE_KEYS] == MODULE_KEYS
        assert m["name"] is None or isinstance(m["name"], str)
        for k in MODULE_KEYS[1:9]:
            assert m[k] is None or type(m[k]) is int, k
        for a in m["allocations"]:
            assert [k for k in a if k in ALLOCATION_KEYS] == ALLOCATION_KEYS
            assert isinstance(a["kind"], str) and type(a["memory_space"]) is int
            assert a["size_in_bytes"] is None or type(a["size_in_bytes"]) is int
            assert a["shape"] is None or isinstance(a["shape"], str)
            assert all(isinstance(v, str) for v in a["values"])


def test_memory_json_on_a_cpu_dump():
    doc = json.loads(ok("memory", CPU_DUMP, "--json").stdout)
    check_form(doc)
    (m,) = doc["modules"]
    assert m["name"] == "jit_step"
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes"):
        assert m[k] == CPU_STATS[k], k
    assert m["memory_used_bytes"] is None and m["memory_limit_bytes"] is None
    assert sum(a["size_in_bytes"] for a in m["allocations"] if a["kind"] == "temporary") == \
        CPU_STATS["temp_size_in_bytes"]


def test_memory_as_a_user_runs_it():
    r = run_subprocess("memory", CPU_DUMP, "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert json.loads(r.stdout)["modules"][0]["name"] == "jit_step"


def test_memory_text_on_a_cpu_dump():
    out = ok("memory", CPU_DUMP).stdout
    assert "module jit_step (XLA dump, buffer assignment read, CPU)" in out
    assert f"argument_size_in_bytes {CPU_STATS['argument_size_in_bytes']}" in out
    assert f"temp_size_in_bytes {CPU_STATS['temp_size_in_bytes']}" in out
    assert "largest allocations:" in out and "no allocation is padded" in out


def test_memory_on_hlo_text_from_stdin_and_gzip(tmp_path):
    text = (DATA / "tpu_module.hlo").read_text()
    doc = json.loads(ok("memory", "-", "--json", input=text).stdout)
    check_form(doc)
    (m,) = doc["modules"]
    # entry_computation_layout: f32[8,1,1024]{1,2,0:T(8,128)} (8 x 1024 x 128
    # f32, dimension 1 padded to 128), bf16[256,512] (no padding), s32[]{:T(128)}
    # (one 128-word tile) -> (f32[8,1024]{1,0:T(8,128)}, s32[]): a 512-byte
    # table, 32K, and 4 bytes for the s32[] the header leaves untiled
    assert m["argument_size_in_bytes"] == 8 * 1024 * 128 * 4 + 256 * 512 * 2 + 128 * 4
    assert m["output_size_in_bytes"] == 512 + 8 * 1024 * 4 + 4
    assert m["temp_size_in_bytes"] is None
    gz = tmp_path / "m.hlo.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert json.loads(ok("memory", gz, "--json").stdout)["modules"][0]["output_size_in_bytes"] == \
        m["output_size_in_bytes"]


def test_memory_on_an_oom_report():
    out = ok("memory", DATA / "oom_report.txt").stdout
    assert "hbm: needs 18.94G of 15.75G: 3.19G too much" in out
    assert "would not fit even without padding" in out
    assert "broadcast.3115" in out and "fix:" in out
    doc = json.loads(ok("memory", DATA / "oom_report.txt", "--json").stdout)
    check_form(doc)
    (m,) = doc["modules"]
    assert m["memory_limit_bytes"] == int(15.75 * 2**30)
    assert [a["size_text"] for a in m["allocations"]] == ["2.00G", "2.50G", "196.50M"]
    assert m["oom"]["fits_without_padding"] is False


def test_memory_two_line_message_says_where_the_breakdown_is():
    msg = ("RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total "
           "memory required for HLO temporaries (20.25G) exceeds available HBM (15.75G). "
           "HLO module: jit_temps.\n")
    r = ok("memory", "-", input=msg)
    assert "needs 20.25G of 15.75G" in r.stdout
    assert "xla_tpu_no_crash_on_oom" in r.stdout


def test_memory_module_filter_and_top():
    fails("memory", CPU_DUMP, "--module", "nothing_like_it")
    out = ok("memory", CPU_DUMP, "--module", "step", "--top", "1").stdout
    assert "   1. " in out and "   2. " not in out


@pytest.mark.parametrize("case", ["empty", "binary", "prose", "empty_dir", "no_modules", "missing",
                                  "truncated_gz", "png_stdin", "memory_report"])
def test_memory_bad_input_is_one_error_line(case, tmp_path):
    path = tmp_path / "x"
    input = None
    if case == "empty":
        path.write_text("")
    elif case == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif case == "prose":
        path.write_text("hello\nworld\n")
    elif case == "empty_dir":
        path.mkdir()
    elif case == "no_modules":
        path.mkdir()
        (path / "notes.txt").write_text("x")
    elif case == "missing":
        path = tmp_path / "nope"
    elif case == "truncated_gz":
        path = tmp_path / "m.hlo.gz"
        path.write_bytes(gzip.compress(b"HloModule m\n" * 100)[:20])
    elif case == "png_stdin":
        path = "-"
        input = "\x89PNG\r\n\x1a\n\x00\x00"
    elif case == "memory_report":
        path = next(CPU_DUMP.glob("*memory-usage-report.txt"))
    r = fails("memory", path, input=input)
    assert len(r.stderr.splitlines()) == 1, r.stderr


def test_memory_partly_readable_file_warns_with_line_numbers(tmp_path):
    good = "  %scale.1 = f32[]{:T(128)} constant(0.5)"
    bad = "  %scale.1 = f33[]{:T(128)} constant(0.5)"
    text = (DATA / "tpu_module.hlo").read_text()
    assert good in text
    text = text.replace(good, bad)
    p = tmp_path / "m.hlo"
    p.write_text(text)
    r = ok("memory", p)
    line = text.splitlines().index(bad) + 1
    assert f"xlashape: warning: line {line}:" in r.stderr
    assert "module jit_train_step" in r.stdout


def test_memory_reads_the_entry_computation_only(tmp_path):
    # the figures come from the header and the entry: a line XLA would
    # reject in a loop body does not change them ('hlo' reads every line)
    good = "  %one.1 = s32[]{:T(128)} constant(1)"
    text = (DATA / "tpu_module.hlo").read_text()
    p = tmp_path / "m.hlo"
    p.write_text(text.replace(good, "  %one.1 = s33[]{:T(128)} constant(1)"))
    assert json.loads(ok("memory", p, "--json").stdout) == json.loads(
        ok("memory", DATA / "tpu_module.hlo", "--json").stdout.replace(
            str(DATA / "tpu_module.hlo"), str(p)))
    assert "line" in ok("hlo", p, "--summary").stderr


def test_memory_needs_a_path_or_the_example():
    fails("memory")
    r = fails("memory", CPU_DUMP, "--example")
    assert "either PATH or --example" in r.stderr


@pytest.mark.parametrize("case", ["directory", "binary", "empty"])
def test_hlo_bad_input_is_one_error_line(case, tmp_path):
    path = tmp_path / "x"
    if case == "directory":
        path.mkdir()
    elif case == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    else:
        path.write_text("")
    r = fails("hlo", path, "--max-warnings", "0")
    assert len(r.stderr.splitlines()) <= 2, r.stderr


# -- the example shipped with the package --------------------------------------------------

# the example of the xlashape being tested (the installed wheel in CI's second
# step, the checkout otherwise)
EXAMPLE = Path(memory.EXAMPLE_DUMP)
CHECKOUT = Path(__file__).resolve().parent.parent


def test_the_example_is_the_corpus_example_dump():
    corpus = DATA / "tpu_corpus" / "example_dump"
    shipped = sorted(p.name for p in EXAMPLE.glob("module_*"))
    assert shipped and all("after_optimizations" in n for n in shipped)
    for name in shipped:
        assert (EXAMPLE / name).read_bytes() == (corpus / name).read_bytes(), name


def test_the_example_is_package_data():
    import fnmatch

    tomllib = pytest.importorskip("tomllib")    # Python 3.11+
    example = CHECKOUT / "xlashape" / "examples" / "tpu_dump"
    if not example.is_dir():
        pytest.skip("not run from a checkout (the installed example is checked above)")
    tool = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "xlashape.examples.tpu_dump" in tool["packages"]
    patterns = tool["package-data"]["xlashape.examples.tpu_dump"]
    for p in example.iterdir():
        assert any(fnmatch.fnmatch(p.name, pat) for pat in patterns), p.name


def test_memory_example():
    ref = json.loads((DATA / "tpu_corpus" / "example_conv_rgb" / "memory_analysis.json")
                     .read_text())["memory_analysis"]
    out = ok("memory", "--example").stdout
    assert "a real XLA:TPU dump shipped with xlashape" in out
    assert "module jit_conv_layer" in out
    assert f"argument_size_in_bytes {ref['argument_size_in_bytes']}" in out
    assert f"output_size_in_bytes {ref['output_size_in_bytes']}" in out
    assert "fix:" in out
    doc = json.loads(ok("memory", "--example", "--json").stdout)
    check_form(doc)
    assert doc["modules"][0]["argument_size_in_bytes"] == ref["argument_size_in_bytes"]


def test_memory_chip_sets_tuple_tables():
    # tuple_outputs_v6e: memory_analysis() on v6e counts a 12-element tuple
    # table as 64 bytes (4 per element in 32-byte granules), v5e as 512
    program = DATA / "tpu_corpus" / "tuple_outputs_v6e"
    ref = json.loads((program / "memory_analysis.json").read_text())["memory_analysis"]
    v6e = json.loads(ok("memory", program / "module.hlo", "--json", "--chip", "v6e").stdout)
    assert v6e["modules"][0]["output_size_in_bytes"] == ref["output_size_in_bytes"]
    default = json.loads(ok("memory", program / "module.hlo", "--json").stdout)
    assert default["modules"][0]["output_size_in_bytes"] == ref["output_size_in_bytes"] - 64 + 512
    assert "--chip" in ok("memory", program / "module.hlo").stdout


# -- hardening: special files, broken dumps, names that read as HLO ------------------------

_CLI_CHILD = "import sys; from xlashape.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/urandom"),
                    reason="needs FIFOs and /dev/urandom")
@pytest.mark.parametrize("command", ["memory", "hlo"])
def test_special_files_are_one_error_line_naming_them(command, tmp_path):
    import subprocess
    import sys

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    dev = tmp_path / "random-buffer-assignment.txt"
    dev.symlink_to("/dev/urandom")
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT))
    for path, what in ((fifo, "a FIFO (named pipe)"), (dev, "a character device")):
        # in a child with a time limit: opening a FIFO blocks, /dev/urandom never ends
        r = subprocess.run([sys.executable, "-c", _CLI_CHILD, command, str(path), "--no-progress"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
        assert r.stderr.splitlines() == [
            f"xlashape: error: {path} is {what}, not a regular file: xlashape reads files "
            "(or a symbolic link to one)"]


def test_memory_dump_with_a_broken_link_warns_and_goes_on(tmp_path):
    d = tmp_path / "dump"
    import shutil

    shutil.copytree(CPU_DUMP, d)
    gone = d / "module_0009.jit_gone.cpu_after_optimizations.txt"
    gone.symlink_to(d / "nowhere")
    r = ok("memory", d)
    assert f"xlashape: warning: {gone}: skipped, a dangling symbolic link" in r.stderr
    assert "module jit_step" in r.stdout and "jit_gone" not in r.stdout


def test_a_file_whose_name_reads_as_hlo_is_read_as_a_file(tmp_path):
    # the command's PATH is a file whatever its name: "{" in it once made
    # the call-graph pass of 'hlo' take the name for the text
    (src,) = CPU_DUMP.glob("*after_optimizations.txt")
    odd = tmp_path / "ENTRY %main {x}.txt"
    odd.write_bytes(src.read_bytes())
    assert ok("hlo", odd, "--json").stdout == ok("hlo", src, "--json").stdout
    got = json.loads(ok("memory", odd, "--json").stdout)
    want = json.loads(ok("memory", src, "--json").stdout.replace(str(src), str(odd)))
    assert got == want


def test_every_warning_is_counted_only_the_first_shown(tmp_path):
    p = tmp_path / "junk.hlo"
    n = 2500
    p.write_text("HloModule junk\n" + "this is not HLO ;\n" * n)
    r = run("hlo", p, "--max-warnings", "3")
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[:3] == [f"xlashape: warning: line {i}: not an HLO instruction, computation "
                         "header or '}': this is not HLO ;" for i in (2, 3, 4)]
    assert lines[3:] == [
        f"xlashape: warning: {n - 3} more skipped lines not shown (see --max-warnings)",
        f"xlashape: error: no HLO instructions or out-of-memory allocations found in {p} "
        f"({n} lines skipped)"]


def test_a_dump_whose_files_have_different_module_numbers_is_one_module(tmp_path):
    # XLA may number the optimized module anew: module_0000...before_optimizations.txt
    # and module_0005...after_optimizations*.txt are one module (it showed two, and a
    # false warning that one was read before optimizations)
    import shutil

    src = DATA / "tpu_corpus" / "while_loop" / "dump"
    for f in src.iterdir():
        name = f.name
        if "after_optimizations" in name:
            name = "module_0005" + name[len("module_0000"):]
        shutil.copy(f, tmp_path / name)
    assert len(list(tmp_path.glob("module_0000.*"))) == 1
    result = memory.analyze(tmp_path)
    (m,) = result.modules
    assert m.optimized and m.path.endswith("module_0005.jit_loop.cl_1004524046.after_optimizations.txt")
    assert not any("before optimizations" in w for w in m.warnings + list(result.warnings))
    out = ok("memory", tmp_path).stdout
    assert "1 module" in out and "before optimizations" not in out


def test_memory_gpu_oom_with_its_dump():
    d = DATA / "gpu_corpus" / "oom"
    text = (d / "dev_oom_broadcast_output.log.txt").read_text() + (d / "dev_oom_broadcast_output.txt").read_text()
    out = ok("memory", "-", "--dump", d / "dev_oom_broadcast_output.cpu_dump", input=text).stdout
    assert "request that failed: 150.00GiB (161061273600 bytes" in out
    assert "memory limit: 104.85G (112583507968 bytes" in out
    assert "buffers of the dump with that size (1)" in out and "f32[600,8192,8192]" in out


def test_memory_dump_option_needs_a_gpu_oom_error():
    d = DATA / "gpu_corpus" / "oom"
    r = fails("memory", DATA / "tpu_corpus" / "oom_temps" / "oom" / "exception.txt",
              "--dump", d / "dev_oom_three_temps.cpu_dump")
    assert "--dump DIR goes with an XLA:GPU out-of-memory error" in r.stderr
    r = fails("memory", d / "dev_oom_three_temps.txt", "--dump", d / "no_such_dump")
    assert "no_such_dump" in r.stderr


# -- issue 29: a dump whose module files were all skipped says which and why ---------------

_FIFO_DUMP_CHILD = r"""
import json, os, sys
from xlashape import UnreadableInputError
from xlashape.memory import analyze
seen = []
try:
    analyze(sys.argv[1], on_warning=seen.append)
    print(json.dumps({"error": None}))
except UnreadableInputError as e:
    print(json.dumps({"error": str(e), "warnings": [[type(w).__name__, w.path, w.message]
                                                    for w in seen]}))
"""


def _fifo_dump(tmp_path):
    """A dump directory whose one module text is a FIFO (a real module's
    buffer assignment and report beside it)."""
    d = tmp_path / "dump"
    d.mkdir()
    for f in CPU_DUMP.glob("module_0008.*"):
        if f.name.endswith("after_optimizations.txt"):
            os.mkfifo(d / f.name)
            fifo = d / f.name
        else:
            (d / f.name).write_bytes(f.read_bytes())
    return d, fifo


FIFO_WHY = "skipped, a FIFO (named pipe), not a regular file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_dump_whose_module_text_is_a_fifo_names_the_file_it_skipped(tmp_path):
    # before: "no XLA modules in DIR" from analyze(), nothing about the FIFO;
    # in a child with a time limit: opening the FIFO would block forever
    d, fifo = _fifo_dump(tmp_path)
    r = run_subprocess("memory", d)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [
        f"xlashape: warning: {fifo}: {FIFO_WHY}",
        f"xlashape: error: no XLA modules in {d} that can be read ({fifo}: {FIFO_WHY}): a dump "
        "directory holds files named module_NNNN.NAME...after_optimizations.txt "
        "(XLA_FLAGS=--xla_dump_to=DIR writes them)"]
    # with no warning printed, the error still names it
    r = run_subprocess("memory", d, "--max-warnings", "0")
    assert r.returncode == 2 and r.stderr.splitlines()[0] == (
        "xlashape: warning: 1 more warning not shown (see --max-warnings)")
    assert f"that can be read ({fifo}: {FIFO_WHY})" in r.stderr.splitlines()[1]
    # the API: the exception names it, on_warning gets the DumpWarning
    r = run_subprocess(d, command=[sys.executable, "-c", _FIFO_DUMP_CHILD])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert f"no XLA modules in {d} that can be read ({fifo}: {FIFO_WHY})" in got["error"]
    assert got["warnings"] == [["DumpWarning", str(fifo), FIFO_WHY]]


def test_a_dump_of_dangling_links_names_the_first_three_and_counts_the_rest(tmp_path):
    d = tmp_path / "dump"
    d.mkdir()
    links = []
    for i in range(5):
        link = d / f"module_000{i}.jit_f.cpu_after_optimizations.txt"
        link.symlink_to(tmp_path / f"gone{i}")
        links.append(link)
    with pytest.raises(UnreadableInputError) as e:
        memory.analyze(d)
    msg = str(e.value)
    named = [str(p) for p in links if f"{p}: skipped, a dangling symbolic link" in msg]
    assert len(named) == 3 and "; and 2 more files skipped)" in msg
    r = run("memory", d)
    assert r.returncode == 2
    *warned, error = r.stderr.splitlines()
    assert sorted(warned) == [f"xlashape: warning: {p}: skipped, a dangling symbolic link (its "
                              "target does not exist)" for p in links]
    assert error == "xlashape: error: " + msg


def test_memory_diff_prints_the_files_it_skipped(tmp_path):
    # memory diff passed no on_warning: a skipped file went unmentioned
    d = tmp_path / "dump"
    shutil.copytree(CPU_DUMP, d)
    gone = d / "module_0009.jit_gone.cpu_after_optimizations.txt"
    gone.symlink_to(tmp_path / "nowhere")
    r = run("memory", "diff", d, CPU_DUMP)
    assert r.returncode == 0 and r.stdout.startswith(f"A: {d}  module jit_step")
    assert r.stderr.splitlines() == [
        f"xlashape: warning: {gone}: skipped, a dangling symbolic link (its target does not exist)"]
    r = run("memory", "diff", d, CPU_DUMP, "--max-warnings", "0")
    assert r.stderr.splitlines() == [
        "xlashape: warning: 1 more warning not shown (see --max-warnings)"]


# -- the live-at-peak table at a terminal's width (issue 25) -----------------------------


def _table(out: str):
    """The live-at-peak table's lines (from its heading to its last buffer)."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("live at the peak:"))
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].startswith(("  ... and", "by JAX op path:")))
    return lines[start + 1:end]


def _prefix(ops):
    """The first component every op path with a '/' outside parentheses
    starts with, computed here."""
    firsts = set()
    for op in ops:
        depth = 0
        for i, c in enumerate(op or ""):
            depth += (c == "(") - (c == ")")
            if c == "/" and depth == 0:
                firsts.add(op[:i + 1])
                break
    return firsts.pop() if len(firsts) == 1 else None


LIVE_DUMPS = [DATA / "escaped_op_paths" / "dump",
              DATA / "gpu_corpus" / "dev_remat_scan" / "dump",
              DATA / "tpu_corpus" / "train_step_donated" / "dump",
              Path(memory.EXAMPLE_DUMP)]


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("dump", LIVE_DUMPS, ids=lambda p: p.parent.name)
def test_live_at_peak_table_shows_shape_and_whole_op_paths(dump, columns):
    r = run("memory", dump, "--top", "3", env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr
    table = _table(r.stdout)
    (m,) = json.loads(run("memory", dump, "--json").stdout)["modules"]
    shown = [b for b in m["peak"]["live_at_peak"] if b["size"] >= 16 * 1024][:6]
    prefix = _prefix(b["op_name"] for b in shown)
    body = "\n".join(table)
    # an op path longer than a line goes on over the next, after a '/'
    joined = re.sub(r"/\n +", "/", body)
    if prefix is not None:
        # the common start said once, above the table, and nowhere in it
        assert table[0] == f"  ({prefix} left out of the JAX op paths below, which start with it)"
        assert prefix not in "\n".join(table[1:])
    for b in shown:
        op = b["op_name"] or ""
        if prefix is not None and op.startswith(prefix):
            op = op[len(prefix):]
        assert b["shape"] in body, b["shape"]
        assert op in joined, op                    # whole: not cut
        if b["source"]:
            assert b["source"] in body
    assert all(len(line) <= columns for line in table), max(table, key=len)
    one_line = len(table) == 1 + (prefix is not None) + len(shown)
    header = table[1 if prefix is not None else 0]
    if one_line:
        assert re.match(r"\s+size\s+padding kind\s+space live\s+buffer\s+shape\s+JAX op path"
                        r"\s+source$", header)
        for b, line in zip(shown, table[-len(shown):]):
            assert b["shape"] in line and (b["op_name"] or "").split("/")[-1] in line
    else:
        assert table[(prefix is not None) + 1].split() == ["shape", "JAX", "op", "path", "source"]


def test_live_at_peak_table_one_line_a_buffer_on_a_wide_terminal():
    dump = DATA / "escaped_op_paths" / "dump"
    wide = _table(run("memory", dump, env={"COLUMNS": "200"}).stdout)
    narrow = _table(run("memory", dump, env={"COLUMNS": "80"}).stdout)
    # 9 buffers of at least 16K: one line each at 200 columns, more at 80
    assert len(wide) == 1 + 1 + 9 and len(narrow) > len(wide)
    assert "f32[64,128]{1,0}  transpose(jvp())/transpose" in wide[2]


def test_a_heap_above_its_allocations_is_said_in_the_terminal_too():
    # issue 25: kv_decode (XLA:TPU, an in-place cache update): XLA's heap simulator counts
    # 7356416 bytes of VMEM live at its peak (XLA's peak_memory_in_bytes is that plus the
    # HBM buffers) while the buffer assignment allocates 6300160 bytes of VMEM
    d = DATA / "tpu_corpus" / "kv_decode"
    xla = json.loads((d / "memory_analysis.json").read_text())["memory_analysis"]
    (m,) = json.loads(ok("memory", d / "dump", "--json").stdout)["modules"]
    vmem = sum(a["size_in_bytes"] for a in m["allocations"] if a["memory_space"] == 1)
    (over,) = m["heaps_over_allocations"]
    assert over["memory_space"] == 1 and over["allocated_bytes"] == vmem
    (hbm,) = [h["peak_bytes"] for h in m["peak"]["heap"] if h["color"] == 0]
    assert over["heap_bytes"] + hbm == xla["peak_memory_in_bytes"]
    assert over["heap_bytes"] > vmem >= over["memory_at_peak"]
    text = " ".join(ln.strip() for ln in ok("memory", d / "dump").stdout.splitlines())
    assert (f"at its highest XLA's heap simulator counts 7.02M live, more than the 6.01M the "
            f"buffer assignment allocates in S(1)") in text


def test_the_terminals_op_paths_keep_buffers_without_metadata_apart():
    # issue 25: buffers without an op path (XLA's copies, slices of no jax op) were grouped
    # under their instruction names among the op paths
    d = DATA / "tpu_corpus" / "bottleneck_train" / "dump"
    (m,) = json.loads(ok("memory", d, "--json").stdout)["modules"]
    live = m["peak"]["live_at_peak"]
    bare = [b for b in live if not b["op_name"]]
    assert m["peak"]["without_op_path"]["bytes"] == sum(b["size"] for b in bare)
    assert m["peak"]["without_op_path"]["count"] == len(bare)
    text = ok("memory", d, "--top", "3").stdout.splitlines()
    rows = text[text.index("by JAX op path:") + 1:]
    rows = rows[:next(i for i, ln in enumerate(rows) if not ln.startswith("   "))]
    (noop,) = [r for r in rows if "no op path: " in r]
    assert re.match(rf"^ +\S+ +\S+% +{len(bare)} buffers  no op path: ", noop)
    names = {b["instruction"] for b in bare}
    ops = {b["op_name"] for b in live if b["op_name"]}
    for r in rows:
        tail = r.split("  ")[-1].strip()
        assert tail not in names
        if r is not noop and "more op paths" not in r:
            # the jit(train_step)/ the live table's note says is left out
            assert tail in ops or "jit(train_step)/" + tail in ops, r


def test_the_figure_lines_wrap_at_the_terminal_width_without_splitting_a_figure():
    ref = json.loads((DATA / "tpu_corpus" / "example_conv_rgb" / "memory_analysis.json")
                     .read_text())["memory_analysis"]
    for columns in (60, 80):
        out = run("memory", "--example", env={"COLUMNS": str(columns)}).stdout.splitlines()
        start = next(i for i, l in enumerate(out) if l.startswith("CompiledMemoryStats figures:"))
        end = next(i for i, l in enumerate(out) if l.startswith("largest allocations"))
        block = out[start:end]
        assert all(len(line) <= columns for line in block), block
        joined = " ".join(line.strip() for line in block)
        for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes"):
            assert f"{k} {ref[k]}," in joined      # each figure with its value, on one line
        peak = next(i for i, l in enumerate(out) if l.startswith("peak figures:"))
        assert len(out[peak]) <= columns and len(out[peak + 1]) <= columns


def test_the_allocation_lists_wrap_at_the_terminal_width():
    out = run("memory", "--example", "--top", "3", env={"COLUMNS": "80"}).stdout.splitlines()
    start = next(i for i, l in enumerate(out) if l.startswith("largest allocations"))
    end = next(i for i, l in enumerate(out) if l.startswith("the peak:"))
    block = out[start:end]
    assert any(l.lstrip().startswith("why:") for l in block)
    # every line fits, unless it is one word (a shape) that cannot be cut
    assert all(len(l) <= 80 or len(l.split()) == 1 for l in block), \
        [l for l in block if len(l) > 80]


def test_the_memory_space_table_fits_the_terminal():
    # the example's three memory spaces: the full names where they fit, the short
    # ones at 80 columns, each row's total the JSON's
    (m,) = json.loads(ok("memory", "--example", "--json").stdout)["modules"]
    for columns, vmem in (("80", "S(1) VMEM "), ("200", "S(1) VMEM (fast on-chip memory)")):
        out = run("memory", "--example", "--top", "0", env={"COLUMNS": columns}).stdout
        lines = out.splitlines()
        at = next(i for i, l in enumerate(lines) if l.split()[:2] == ["memory", "space"])
        table = lines[at:at + 4]
        assert all(len(l) <= int(columns) for l in table), table
        assert table[2].lstrip().startswith(vmem), table
        for row in table[1:]:
            total = next(s["total"] for s in m["memory_spaces"]
                         if row.lstrip().startswith(f"S({s['memory_space']})"))
            assert row.split()[-1] == format_bytes(total)
