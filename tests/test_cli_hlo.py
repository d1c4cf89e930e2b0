"""``xlashape hlo``: HLO modules and TPU out-of-memory reports."""

import gzip
import json
import re

import pytest

from cli_util import DATA, PADDED_PADDED, PADDED_UNPADDED, fails, ok, run


def _instruction_lines(path):
    """Independent count: lines of the form '[ROOT] %name = ...' in the file."""
    with open(path) as f:
        return [m.group(2) for m in
                (re.match(r"\s*(ROOT\s+)?%([\w.\-]+) = ", line) for line in f)
                if m]


def test_hlo_json_on_a_tpu_dump():
    path = DATA / "tpu_module.hlo"
    r = ok("hlo", path, "--json")
    assert r.stderr == ""     # nothing skipped, stack-frame tables included
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == _instruction_lines(path)
    by = {x["name"]: x for x in rows}
    for x in rows:
        assert {"computation", "name", "opcode", "shape", "bytes", "padded_bytes",
                "memory_space"} <= set(x)
    a = by["Arg_0.1"]
    assert a["computation"] == "main.42" and a["opcode"] == "parameter"
    assert a["shape"] == "f32[8,1,1024]{1,2,0:T(8,128)}"
    assert (a["bytes"], a["padded_bytes"]) == (PADDED_UNPADDED, PADDED_PADDED)
    c = by["copy.5"]
    assert c["memory_space"] == 1
    assert c["bytes"] == c["padded_bytes"] == 256 * 512 * 2
    s = by["Arg_2.3"]                       # s32[]{:T(128)}: one tile of 128 words
    assert (s["bytes"], s["padded_bytes"]) == (4, 128 * 4)
    t = by["many.1"]                        # six f32[]{:T(128)} in a tuple
    assert t["shape"].count("f32[]") == 6 and "/*index=5*/" in t["shape"]
    assert (t["bytes"], t["padded_bytes"]) == (6 * 4, 6 * 128 * 4)
    assert by["token.0"]["bytes"] == 0 and by["token.0"]["memory_space"] is None
    assert by["tuple.43"]["is_root"] is True
    assert by["fusion.7"]["kind"] == "kLoop"
    assert by["fusion.7"]["called_computations"] == ["fused_computation.7"]
    assert by["while.1"]["called_computations"] == ["while_cond.2", "while_body.2"]
    assert by["reduce.2"]["computation"] == "fused_computation.8"


def test_hlo_text_table_and_totals():
    r = ok("hlo", DATA / "tpu_module.hlo")
    out = r.stdout
    assert "ENTRY computation main.42" in out
    assert re.search(r"Arg_0\.1\s+parameter\s+buffer\s+32\.0K\s+4\.00M", out)
    assert re.search(r"gte\.9\s+get-tuple-element\s+view\s", out)
    assert re.search(r"param_0\.11\s+parameter\s+embedded\s", out)
    assert "computation fused_computation.7 (a fusion body" in out
    assert "computation while_body.2 (a while loop's body)" in out
    assert "module jit_train_step: 38 instructions in 6 computations" in out
    assert "12 values in 3 fusion bodies / reducer computations (not materialized" in out
    assert "S(1) fast on-chip memory (VMEM on TPU)" in out
    top = out.split("by padding waste:")[1].splitlines()
    assert top[1].strip().startswith("1. Arg_0.1 = parameter (main.42, line 46)")


def test_hlo_totals_count_new_buffers_only():
    # new S(0) buffers outside fused_computation.7/.8 and region_add.1,
    # counted by hand: not the views (parameters of the loop computations,
    # get-tuple-elements, tuples, the while), not the tokens; copy.5 is in S(1)
    while_body = ["one.1", "next.1"]
    while_cond = ["limit.1", "lt.1"]
    entry = ["Arg_0.1", "Arg_1.2", "Arg_2.3", "fusion.8", "scale.1", "fusion.7"]
    views = ["loop_state.1", "gte.0", "gte.1", "tuple.4", "loop_state.2", "gte.3", "init.1",
             "while.1", "many.1", "gte.9", "gte.10", "tuple.43"]
    r = ok("hlo", DATA / "tpu_module.hlo", "--summary", "--top", "0")
    line = [x for x in r.stdout.splitlines() if x.strip().startswith("S(0)")][0]
    assert line.split()[-4] == str(len(while_body + while_cond + entry))
    # bytes: f32[8,1,1024] 32K, bf16[256,512] 256K, f32[256] 1K, f32[8,1024] 32K, and
    # five 4-byte scalars plus one pred (1 byte)
    logical = 32 * 1024 + 256 * 512 * 2 + 256 * 4 + 8 * 1024 * 4 + 5 * 4 + 1
    assert line.split()[-3] == "321.0K" and logical // 1024 == 321
    assert f"left out: {len(views)} views of other buffers" in r.stdout
    assert "3 tokens (no data)" in r.stdout
    vmem = [x for x in r.stdout.splitlines() if x.strip().startswith("S(1)")][0]
    assert vmem.split()[-4:] == ["1", "256.0K", "256.0K", "0B"]   # copy.5: 256*512*2 bytes
    assert "top" not in r.stdout.split("totals")[1]
    assert "ENTRY computation" not in r.stdout   # --summary: no table


def test_hlo_top_n():
    r = ok("hlo", DATA / "tpu_module.hlo", "--summary", "--top", "1")
    assert "top 1 by padding waste:" in r.stdout
    assert "1. Arg_0.1" in r.stdout and " 2. " not in r.stdout


def test_hlo_csv():
    r = ok("hlo", DATA / "tpu_module.hlo", "--csv")
    import csv

    rows = list(csv.reader(r.stdout.splitlines()))
    assert rows[0][:8] == ["computation", "name", "opcode", "shape", "bytes", "padded_bytes",
                           "waste", "memory_space"]
    assert len(rows) == 1 + len(_instruction_lines(DATA / "tpu_module.hlo"))
    arg = [x for x in rows if x[1] == "Arg_0.1"][0]
    assert arg[4:7] == [str(PADDED_UNPADDED), str(PADDED_PADDED),
                        str(PADDED_PADDED - PADDED_UNPADDED)]


def test_hlo_json_and_csv_together_is_a_usage_error():
    r = run("hlo", DATA / "tpu_module.hlo", "--json", "--csv")
    assert r.returncode == 2 and r.stderr.startswith("xlashape: error:")


def test_hlo_from_stdin():
    text = (DATA / "tpu_module.hlo").read_text()
    rows = json.loads(ok("hlo", "-", "--json", input=text).stdout)
    assert len(rows) == len(_instruction_lines(DATA / "tpu_module.hlo"))


def test_hlo_gzip(tmp_path):
    gz = tmp_path / "module.txt.gz"
    gz.write_bytes(gzip.compress((DATA / "tpu_module.hlo").read_bytes()))
    rows = json.loads(ok("hlo", gz, "--json").stdout)
    assert len(rows) == len(_instruction_lines(DATA / "tpu_module.hlo"))


def test_hlo_seed_examples_written_across_lines():
    rows = json.loads(ok("hlo", DATA / "seed_examples.hlo", "--json").stdout)
    assert [(x["name"], x["opcode"]) for x in rows] == [("add.936", "add"), ("fusion.3", "fusion")]
    assert rows[0]["bytes"] == 8 * 1 * 1280 * 16384 * 2
    assert rows[1]["memory_space"] == 1
    assert rows[1]["bytes"] == rows[1]["padded_bytes"] == 32 * 32 * 4096 * 2
    assert rows[1]["kind"] == "kCustom"


def test_hlo_malformed_lines_are_reported_and_skipped():
    r = run("hlo", DATA / "malformed.hlo", "--json")
    assert r.returncode == 0
    assert "Traceback" not in r.stderr
    warn = r.stderr.splitlines()
    assert [w.split(":")[2].strip() for w in warn] == ["line 5", "line 6", "line 7", "line 8"]
    assert all(w.startswith("xlashape: warning: line ") for w in warn)
    assert "f33" in warn[1]
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == ["p", "ok.1", "ok.2"]


def test_hlo_max_warnings():
    r = ok("hlo", DATA / "malformed.hlo", "--max-warnings", "1", "--summary")
    lines = r.stderr.splitlines()
    assert len(lines) == 2
    assert "3 more skipped lines not shown" in lines[1]
    assert "4 lines skipped" in r.stdout


def test_hlo_missing_file():
    r = fails("hlo", "/no/such/module.txt")
    assert "No such file or directory: /no/such/module.txt" in r.stderr


def test_hlo_no_instructions_is_an_error(tmp_path):
    p = tmp_path / "prose.txt"
    p.write_text("hello\nthis is not a module\n")
    r = run("hlo", p)
    assert r.returncode == 2
    assert "no HLO instructions" in r.stderr.splitlines()[-1]
    assert "line 1:" in r.stderr


def test_hlo_empty_input_is_an_error():
    r = fails("hlo", "-", input="")
    assert "no HLO instructions" in r.stderr


def test_hlo_reads_a_tpu_out_of_memory_report():
    r = ok("hlo", DATA / "oom_report.txt", "--json")
    assert r.stderr == ""          # prose around the allocations is not "malformed"
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == ["fusion.1265", "broadcast.3115", "copy.77"]
    assert [x["opcode"] for x in rows] == ["fusion", "broadcast", "copy"]
    f, b, c = rows
    assert f["bytes"] == f["padded_bytes"] == 32 * 4096 * 4096 * 4
    # bf16[8,1280,1,16384]{3,2,1,0:...}: the size-1 dim is second-most-minor, tiled by 8
    assert b["bytes"] == 8 * 1280 * 1 * 16384 * 2
    assert b["padded_bytes"] == 8 * 1280 * 8 * 16384 * 2
    # f32[1024,50257]{1,0:T(8,128)}: 50257 rounds up to 50304
    assert c["padded_bytes"] == 1024 * 50304 * 4
    assert b["report"] == {"size": "2.50G", "unpadded_size": "320.00M",
                           "allocation_type": "HLO temp",
                           "op_name": "jit(train_step)/jit(main)/mlp/up_proj/broadcast_in_dim",
                           "label": "broadcast.3115 = broadcast(param.7), dimensions={0,1,3}",
                           "report": 1}


def test_hlo_oom_text_output_matches_the_reports_own_figures():
    out = ok("hlo", DATA / "oom_report.txt").stdout
    assert "3 allocations from an out-of-memory report" in out
    row = [x for x in out.splitlines() if x.strip().startswith("broadcast.3115")][0]
    assert row.split()[2:6] == ["buffer", "320.00M", "2.50G", "2.19G"]   # as the report says
    assert "report: size 2.50G, unpadded size 320.00M" in out


def test_hlo_oom_single_line_message():
    msg = ("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. 1. Size: 2.50G "
           "Shape: bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)} Unpadded size: 320.00M\n")
    rows = json.loads(ok("hlo", "-", "--json", input=msg).stdout)
    assert len(rows) == 1
    assert rows[0]["padded_bytes"] == 8 * 1280 * 8 * 16384 * 2
    assert rows[0]["report"]["size"] == "2.50G"


def test_hlo_small_dump_used_in_the_readme():
    out = ok("hlo", DATA / "small_dump.hlo", "--top", "3").stdout
    # bf16[8,1,1280]{2,1,0:T(8,128)(2,1)}: physical (8, 1, 1280); the (8,128) tile
    # pads the size-1 dim to 8: 8*8*1280*2 bytes instead of 8*1*1280*2
    logical, padded = 8 * 1 * 1280 * 2, 8 * 8 * 1280 * 2
    assert (logical, padded) == (20 * 1024, 160 * 1024)
    row = [x for x in out.splitlines() if x.strip().startswith("x.vmem")][0]
    assert row.split()[2:7] == ["buffer", "20.0K", "160.0K", "140.0K", "1"]
    assert "module jit_layer_norm: 11 instructions in 3 computations" in out
    assert "in 2 fusion bodies / reducer computations (not materialized in memory)" in out
    rows = json.loads(ok("hlo", DATA / "small_dump.hlo", "--json").stdout)
    x = [r for r in rows if r["name"] == "x"][0]
    assert (x["bytes"], x["padded_bytes"], x["waste"]) == (logical, padded, padded - logical)


def test_hlo_negative_top_is_a_usage_error():
    r = fails("hlo", DATA / "small_dump.hlo", "--top", "-1")
    assert "--top must be >= 0" in r.stderr


def test_progress_is_drawn_on_a_terminal_and_erased(monkeypatch, capsys):
    # in-process: the display logic of `hlo` progress (shown only when stderr is
    # a terminal and the input is large, which a subprocess test cannot fake)
    from xlashape.cli import hlo as cli

    clock = iter(range(0, 10_000))
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    lines = ["x = f32[] constant(0)\n"] * (3 * 16384)
    total = sum(map(len, lines))
    p = cli._Progress(iter(lines), total, enabled=True)
    assert sum(1 for _ in p) == len(lines)
    p.done()
    err = capsys.readouterr().err
    assert "xlashape: reading" in err and "(67%)" in err
    assert err.endswith("\r")          # the line is cleared at the end


def test_progress_is_silent_when_disabled(capsys):
    from xlashape.cli import hlo as cli

    p = cli._Progress(iter(["a\n"] * 40000), 80000, enabled=False)
    assert sum(1 for _ in p) == 40000
    p.done()
    assert capsys.readouterr().err == ""


def test_hlo_windows_line_endings_and_tabs():
    text = "ENTRY %e {\r\n\t%p = f32[4]{0} parameter(0)\r\n\tROOT %n = f32[4]{0} negate(f32[4]{0} %p)\r\n}\r\n"
    rows = json.loads(ok("hlo", "-", "--json", input=text).stdout)
    assert [(x["name"], x["bytes"]) for x in rows] == [("p", 16), ("n", 16)]


def test_hlo_details_show_operands_and_attributes():
    out = ok("hlo", DATA / "seed_examples.hlo", "--details").stdout
    assert "      operands: %exponential.183, %broadcast.3115" in out
    assert "      operands: bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} %fusion.32" in out
    assert "      attributes: kind=kCustom, calls=%all-reduce-scatter.3" in out
    rows = json.loads(ok("hlo", DATA / "tpu_module.hlo", "--details", "--json").stdout)
    by = {x["name"]: x for x in rows}
    assert by["sum.1"]["operands"] == [
        {"name": "lhs.1", "shape": "f32[]{:T(128)}"}, {"name": "rhs.1", "shape": "f32[]{:T(128)}"}]
    assert by["Arg_2.3"]["argument"] == "2" and by["Arg_2.3"]["operands"] == []
    assert by["reduce.2"]["attributes"]["dimensions"] == "{1}"
    assert by["Arg_0.1"]["attributes"]["sharding"] == "{replicated}"


def test_hlo_details_bad_operand_shape_is_a_warning():
    r = ok("hlo", "-", "--details", input="%x = f32[2]{0} negate(f33[2]{0} %p)\n")
    assert "operands: f33[2]{0} %p" in r.stdout
    assert r.stderr.startswith("xlashape: warning: line 1: operand of x: ")
    assert "1 instruction, 1 line, 1 other warning" in r.stdout


def _hlo_rows(text):
    r = ok("hlo", "-", "--json", input=text)
    return r, json.loads(r.stdout)


@pytest.mark.parametrize("attr", [
    r'metadata={op_name="jit(f)/5\" screen"}',   # one escaped quote inside braces
    r'backend_config="a\"b"',                    # one escaped quote, no braces
    r'backend_config="\"\\"',                    # escaped quote then escaped backslash
])
def test_hlo_strings_with_escaped_quotes_do_not_swallow_lines(attr):
    text = ("ENTRY %main {\n"
            "  %p = u8[3]{0} parameter(0)\n"
            f"  %a = u8[3]{{0}} custom-call(%p), {attr}\n"
            "  ROOT %b = u8[3]{0} negate(%a)\n"
            "}\n")
    r, rows = _hlo_rows(text)
    assert r.stderr == ""
    assert [(x["name"], x["line"]) for x in rows] == [("p", 2), ("a", 3), ("b", 4)]
    details = ok("hlo", "-", "--details", input=text).stdout
    assert f"attributes: {attr}" in details


def test_hlo_even_backslashes_before_a_quote_end_the_string():
    # "a\\" is the string a\ : the quote after the two backslashes closes it,
    # so the brace after it closes the block and the instruction is complete
    text = ('ENTRY %main {\n'
            '  %a = u8[3]{0} custom-call(), backend_config={x="a\\\\"}\n'
            '  ROOT %b = u8[3]{0} negate(%a)\n'
            '}\n')
    assert '"a\\\\"}' in text  # two backslash characters in the input
    r, rows = _hlo_rows(text)
    assert r.stderr == ""
    assert [x["name"] for x in rows] == ["a", "b"]


def test_hlo_buffer_shaped_result():
    text = ("ENTRY %main {\n"
            '  %buf = b(f32[16]{0:T(256)}) custom-call(), custom_call_target="alloc"\n'
            "  ROOT %r = u8[3]{0} custom-call()\n"
            "}\n")
    r, rows = _hlo_rows(text)
    assert r.stderr == ""
    buf = rows[0]
    assert (buf["name"], buf["opcode"], buf["shape"]) == ("buf", "custom-call", "b(f32[16]{0:T(256)})")
    # 16 f32 = 64 bytes; the T(256) tile pads the 16 elements to 256: 1024 bytes
    assert (buf["bytes"], buf["padded_bytes"]) == (16 * 4, 256 * 4)


def test_hlo_details_give_the_parameter_number_not_an_operand():
    text = "ENTRY %m {\n  %p = f32[4]{0} parameter(7)\n  ROOT %n = f32[4]{0} negate(%p)\n}\n"
    out = ok("hlo", "-", "--details", input=text).stdout
    assert "parameter number: 7" in out
    assert "operands: 7" not in out
    assert "operands: %p" in out


def test_hlo_one_left_out_computation_is_singular():
    text = ("%add (x: f32[], y: f32[]) -> f32[] {\n"
            "  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(%x, %y)\n}\n\n"
            "ENTRY %m {\n  %p = f32[4]{0} parameter(0)\n  %z = f32[] constant(0)\n"
            "  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add\n}\n")
    out = ok("hlo", "-", input=text).stdout
    assert "3 values in 1 fusion body / reducer computation (not materialized" in out


# -- --max-warnings and --top limits ----------------------------------------------------


@pytest.mark.parametrize("path", [DATA / "small_dump.hlo", DATA / "malformed.hlo"])
def test_hlo_negative_max_warnings_is_a_usage_error(path):
    # it used to print "1 more skipped lines" on a clean file
    r = fails("hlo", path, "--max-warnings", "-1")
    assert r.stderr.splitlines() == [
        "xlashape: error: --max-warnings must be >= 0 (0 shows none), got -1"]
    assert r.stdout == ""


def test_hlo_max_warnings_zero_shows_none_and_counts_them():
    r = ok("hlo", DATA / "malformed.hlo", "--max-warnings", "0", "--summary")
    assert r.stderr.splitlines() == [
        "xlashape: warning: 4 more skipped lines not shown (see --max-warnings)"]


def test_hlo_clean_file_has_no_warnings_at_any_limit():
    for n in ("0", "1", "20"):
        assert ok("hlo", DATA / "small_dump.hlo", "--max-warnings", n).stderr == ""


# -- text from the file is printable ------------------------------------------------------

ESC = "\x1b"
HOSTILE = (f"HloModule evil{ESC}[2J, is_scheduled=true\n\n"
           "ENTRY %main {\n"
           f'  %p = f32[4]{{0}} parameter(0), metadata={{op_name="a{ESC}]0;pwned\x07"}}\n'
           f"  %bad = f33{ESC}[31m[2]{{0}} negate(%p)\n"
           "  ROOT %n = f32[4]{0} negate(%p)\n"
           "}\n")


def _no_raw_controls(text):
    return all(c.isprintable() or c in "\n\t" for c in text)


@pytest.mark.parametrize("fmt", [(), ("--details",), ("--csv", "--details"), ("--summary",)])
def test_hlo_output_and_warnings_never_pass_control_characters(fmt):
    r = ok("hlo", "-", *fmt, input=HOSTILE)
    assert _no_raw_controls(r.stdout) and _no_raw_controls(r.stderr), (r.stdout, r.stderr)
    assert "f33\\x1b[31m[2]" in r.stderr                   # the skipped line, escaped
    if fmt in ((), ("--summary",)):
        assert "module evil\\x1b[2J: 2 instructions" in r.stdout
    if "--details" in fmt:
        assert "a\\x1b]0;pwned\\x07" in r.stdout


def test_hlo_json_escapes_control_characters_and_keeps_the_value():
    r = ok("hlo", "-", "--json", "--details", input=HOSTILE)
    assert _no_raw_controls(r.stdout) and r.stdout.isascii()
    rows = json.loads(r.stdout)
    assert rows[0]["attributes"]["metadata"] == f'{{op_name="a{ESC}]0;pwned\x07"}}'


def test_hlo_json_is_ascii_and_reads_back_non_ascii_names():
    text = 'ENTRY %m {\n  ROOT %p = f32[2]{0} parameter(0), metadata={op_name="café ∑"}\n}\n'
    r = ok("hlo", "-", "--json", "--details", input=text)
    assert r.stdout.isascii()
    assert json.loads(r.stdout)[0]["attributes"]["metadata"] == '{op_name="café ∑"}'


def test_hlo_oom_report_text_is_printable():
    msg = (f"RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm.\n"
           f"  1. Size: 2.50G\n"
           f"     Shape: bf16[8,1280,1,16384]{{3,2,1,0:T(8,128)(2,1)}}\n"
           f"     Unpadded size: 320.00M\n"
           f"     Allocation type: HLO temp{ESC}[5m\n")
    r = ok("hlo", "-", input=msg)
    assert _no_raw_controls(r.stdout)
    assert "allocation type HLO temp\\x1b[5m" in r.stdout


def _log_sizes(text, report_line):
    """Independent reading: the listed sizes of the report starting at
    ``report_line`` (1-based), as libtpu printed them."""
    lines = text.splitlines()[report_line:]
    out = []
    for line in lines:
        if re.match(r"^[IWEF]\d{4} ", line):
            break
        m = re.match(r"^\s+\d+\. Size: (\S+)$", line)
        if m:
            out.append(m.group(1))
    return out


def test_hlo_on_a_log_with_several_reports_lists_only_the_last():
    # libtpu logs one report per allocation it tries: adding them all up counted the
    # program several times (225.57G printed for a program that needs 48.25G)
    log = DATA / "tpu_corpus" / "oom_gather_v6e" / "oom" / "tpu_driver.WARNING.txt"
    text = log.read_text()
    starts = [i + 1 for i, line in enumerate(text.splitlines()) if "Ran out of memory in memory space" in line]
    assert len(starts) > 2
    out = ok("hlo", log, "--summary").stdout
    assert "the last of" in out and f"report at line {starts[-1]}" in out
    # the total is the last report's own "Used" figure (tuple-shaped allocations are
    # their tables of pointers, as the report sizes them, not their elements again)
    used = re.findall(r"Used (\S+) of", text)[-1]
    row = [x for x in out.splitlines() if x.strip().startswith("S(0)")][0]
    assert row.split()[-3:-1] == [used, used]
    rows = json.loads(ok("hlo", log, "--json").stdout)
    assert {r["report"]["report"] for r in rows} == {rows[0]["report"]["report"]}
    listed = _log_sizes(text, starts[-1])
    assert 0 < len(rows) <= len(listed)
    assert [r["report"]["size"] for r in rows] == [
        x for x in listed if x in {r["report"]["size"] for r in rows}][:len(rows)]
    assert all(r["line"] > starts[-1] for r in rows)


def test_hlo_on_a_concatenation_of_real_logs_counts_one_report():
    # two real logs one after the other: the last report of the second counts
    a = (DATA / "tpu_corpus" / "oom_temps" / "oom" / "tpu_driver.WARNING.txt").read_text()
    b = (DATA / "tpu_corpus" / "oom_padded_temps" / "oom" / "tpu_driver.WARNING.txt").read_text()
    rows = json.loads(ok("hlo", "-", "--json", input=a + b).stdout)
    offset = len(a.splitlines())
    starts = [i + 1 for i, line in enumerate((a + b).splitlines())
              if "Ran out of memory in memory space" in line]
    assert all(r["line"] > starts[-1] > offset for r in rows)


def test_hlo_finds_a_report_after_a_long_log_and_lists_the_one_that_counts():
    # the report starts past the first 64 KB (a long libtpu log): the whole input
    # is read for a report. Before, the HLO reader's out-of-memory mode listed the
    # allocations of every report in it, counting the program several times
    a = (DATA / "tpu_corpus" / "oom_temps" / "oom" / "tpu_driver.WARNING.txt").read_text()
    b = (DATA / "tpu_corpus" / "oom_padded_temps" / "oom" / "tpu_driver.WARNING.txt").read_text()
    filler = "I0101 00:00:00.000000   1 compiler.cc:1] a line of the log before the report\n" * 1000
    text = filler + a + b
    assert len(filler) > 1 << 16
    starts = [i + 1 for i, line in enumerate(text.splitlines())
              if "Ran out of memory in memory space" in line]
    assert len(starts) > 1
    rows = json.loads(ok("hlo", "-", "--json", input=text).stdout)
    assert rows and all(r["line"] > starts[-1] for r in rows)
    assert len({r["report"]["report"] for r in rows}) == 1
    out = ok("hlo", "-", input=text).stdout
    assert f"report at line {starts[-1]}" in out and f"{len(text.splitlines())} lines" in out


def test_hlo_counts_every_listed_allocation_as_a_buffer():
    # an allocation the report lists is memory XLA allocated, whatever its label's
    # opcode: a tuple's table of pointers (512B as the report sizes it) was called a
    # "view" and left out of the totals, by the HLO reader's rule for instructions
    msg = ("Ran out of memory in memory space hbm. Used 18.94G of 15.75G hbm.\n"
           "  Largest program allocations in hbm:\n"
           "  1. Size: 512B\n"
           "     Shape: (f32[8]{0:T(256)}, s32[]{:T(128)})\n"
           "     XLA label: tuple.3 = tuple(a, b)\n"
           "     Allocation type: HLO temp\n"
           "     ==========================\n")
    (row,) = json.loads(ok("hlo", "-", "--json", input=msg).stdout)
    assert (row["name"], row["opcode"], row["result"]) == ("tuple.3", "tuple", "buffer")
    assert row["padded_bytes"] == 512 and row["report"]["size"] == "512B"
    out = ok("hlo", "-", "--summary", input=msg).stdout
    (total,) = [x for x in out.splitlines() if x.strip().startswith("S(0)")]
    assert total.split()[-4:-2] == ["1", "16B"] and total.split()[-2] == "512B"
    assert "view" not in out


def test_hlo_reads_a_module_with_a_report_pasted_before_it_as_hlo():
    # one reader per format: the module header says HLO, and the report's lines
    # are lines skipped (before, the report's allocations and the module's
    # instructions were listed and counted together, as "allocations")
    report = (DATA / "oom_report.txt").read_text()
    module = (DATA / "small_dump.hlo").read_text()
    r = run("hlo", "-", "--json", input=report + "\n" + module)   # (the report quotes a Traceback)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows and all(x["computation"] != "(out-of-memory report)" for x in rows)
    assert [x["name"] for x in rows] == [x["name"] for x in
                                         json.loads(ok("hlo", "-", "--json", input=module).stdout)]
    assert "not an HLO instruction" in r.stderr


def test_hlo_on_the_two_line_error_points_to_memory():
    exc = (DATA / "tpu_corpus" / "oom_temps" / "oom" / "exception.txt").read_text()
    r = fails("hlo", "-", input=exc)
    assert "two-line out-of-memory error" in r.stderr
    assert "'xlashape memory - < (the same input)'" in r.stderr
    gpu = (DATA / "gpu_corpus" / "oom" / "dev_oom_three_temps.txt")
    r = fails("hlo", gpu)
    assert "XLA:GPU's out-of-memory error" in r.stderr and "--dump DIR" in r.stderr


def test_hlo_and_memory_on_the_rematerialization_warning_alone():
    # XLA's warning, without byte counts as older XLA printed it: no allocation failed
    text = ("W0130 11:23:59.296923 hlo_rematerialization.cc:3204] Can't reduce memory use below "
            "2.52GiB by rematerialization; only reduced to 631.67GiB\n")
    r = fails("hlo", "-", input=text)
    assert "rematerialization warning" in r.stderr and "--dump" not in r.stderr
    out = ok("memory", "-", input=text).stdout
    assert "no allocation failed in this text" in out and "request that failed" not in out
    assert "the program needs 631.67G" in out


def test_hlo_reads_an_hlo_pb_like_its_text(tmp_path):
    # XLA:GPU wrote both files for one compilation (data/protos/README.md)
    import os

    from cli_util import ok, one_error_line

    stem = os.path.join(os.path.dirname(__file__), "data", "protos",
                        "module_89286.jit_dev_fori_cumulative.sm_9.0a_gpu_after_optimizations")

    def totals(out):
        # buffers and bytes per memory space (the proto also has the
        # get-tuple-elements that this XLA's text leaves out: more views)
        rows = [line for line in out.split("totals per memory space", 1)[1].splitlines()
                if line.strip().startswith("S(")]
        assert rows
        return rows

    from_proto = ok("hlo", stem + ".hlo.pb").stdout
    from_text = ok("hlo", stem + ".txt").stdout
    assert totals(from_proto) == totals(from_text)
    bad = tmp_path / "cut.hlo.pb"
    with open(stem + ".hlo.pb", "rb") as fh:
        bad.write_bytes(fh.read()[:200])
    assert "cut.hlo.pb" in one_error_line("hlo", str(bad)).stderr
