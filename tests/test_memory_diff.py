"""``xlashape memory diff A B`` on real pairs of compiles of one program.

Each side's expected figures are XLA's own ``memory_analysis()``, recorded
with its dump (``memory_analysis.json``); the pairs:

- ``cpu_corpus/sgd_donated`` vs ``diff_pairs/sgd_not_donated`` (XLA:CPU, the
  same SGD step without ``donate_argnums``: tests/oracle/gen_diff_pairs.py);
- ``cpu_corpus/remat_scan`` vs ``diff_pairs/remat_scan_off`` (with and
  without ``jax.checkpoint``);
- ``cpu_corpus/sgd_donated`` vs ``gpu_corpus/dev_sgd_donated`` (the same
  program through XLA:CPU and XLA:GPU);
- ``tpu_corpus/mlp`` (v5e) vs ``tpu_corpus/mlp_v6e``.
"""

import json
import re

import pytest

from cli_util import DATA, fails, ok, one_error_line, run
from xlashape.tiling import format_bytes

SGD = DATA / "cpu_corpus" / "sgd_donated"
SGD_OFF = DATA / "diff_pairs" / "sgd_not_donated"
REMAT = DATA / "cpu_corpus" / "remat_scan"
REMAT_OFF = DATA / "diff_pairs" / "remat_scan_off"
GPU_SGD = DATA / "gpu_corpus" / "dev_sgd_donated"
MLP, MLP_V6E = DATA / "tpu_corpus" / "mlp", DATA / "tpu_corpus" / "mlp_v6e"


def xla(d):
    return json.loads((d / "memory_analysis.json").read_text())["memory_analysis"]


def diff(a, b, *extra):
    return json.loads(ok("memory", "diff", a / "dump", b / "dump", "--json", *extra).stdout)


def check_figures(doc, a, b):
    """Every figure both sides have equals XLA's on each side, the delta their difference."""
    xa, xb = xla(a), xla(b)
    checked = 0
    for k, f in doc["figures"].items():
        if k in xa and f["a"] is not None:
            assert f["a"] == xa[k], (k, "a")
            checked += 1
        if k in xb and f["b"] is not None:
            assert f["b"] == xb[k], (k, "b")
            checked += 1
        if f["a"] is not None and f["b"] is not None:
            assert f["delta"] == f["b"] - f["a"]
    return checked


def test_donation_lost():
    doc = diff(SGD, SGD_OFF)
    assert check_figures(doc, SGD, SGD_OFF) >= 12
    xa, xb = xla(SGD), xla(SGD_OFF)
    assert doc["figures"]["alias_size_in_bytes"]["delta"] == -xa["alias_size_in_bytes"]
    assert doc["figures"]["peak_memory_in_bytes"]["delta"] == \
        xb["peak_memory_in_bytes"] - xa["peak_memory_in_bytes"]
    # donate_argnums=(0, 1): params and mom, four arrays each -> parameters 0..7
    lost = doc["donations_lost"]
    assert [d["parameter_number"] for d in lost] == list(range(8))
    assert sum(d["bytes"] for d in lost) == xa["alias_size_in_bytes"]
    assert doc["donations_gained"] == []
    # the updated arrays are the same buffers (matched by op path and name), now outputs
    moved = doc["buffers_moved"]
    assert {(m["a"]["kind"], m["b"]["kind"]) for m in moved} == {("parameter", "output")}
    assert sum(m["b"]["size_in_bytes"] for m in moved) == xa["alias_size_in_bytes"]
    assert doc["buffers_added"] == [] and doc["buffers_removed"] == []


def test_max_growth_catches_the_lost_donation():
    r = run("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--max-growth", "5%")
    assert r.returncode == 1 and "grew by" in r.stderr and "+66.7%" in r.stderr
    # the other way round it shrinks: no regression
    assert run("memory", "diff", SGD_OFF / "dump", SGD / "dump", "--max-growth", "5%"
               ).returncode == 0
    assert run("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--max-growth", "100M"
               ).returncode == 0
    assert run("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--max-growth", "90M"
               ).returncode == 1
    fails("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--max-growth", "x%")


def test_remat_off_costs_temporaries():
    doc = diff(REMAT, REMAT_OFF)
    check_figures(doc, REMAT, REMAT_OFF)
    xa, xb = xla(REMAT), xla(REMAT_OFF)
    assert doc["figures"]["temp_size_in_bytes"]["delta"] == \
        xb["temp_size_in_bytes"] - xa["temp_size_in_bytes"]
    # XLA:CPU's peak leaves temporaries out: it does not move, the total does
    growth = {g["figure"]: g for g in doc["growth"]}
    assert growth["peak_memory_in_bytes"]["delta"] == 0
    total = growth["arguments + outputs + temporaries - aliased"]
    assert total["delta"] == xb["temp_size_in_bytes"] - xa["temp_size_in_bytes"]
    r = run("memory", "diff", REMAT / "dump", REMAT_OFF / "dump", "--max-growth", "5%")
    assert r.returncode == 1
    # without checkpointing, the forward scan keeps f32[16,1024,1024] stacks
    assert any(b["shape"].startswith("f32[16,1024,1024]") for b in doc["buffers_added"])


def test_cpu_and_gpu_compiles_of_one_program():
    doc = diff(SGD, GPU_SGD)
    assert check_figures(doc, SGD, GPU_SGD) >= 12
    # the arguments have other names (params/p): parameters are matched by type
    assert not [b for b in doc["buffers_added"] if b["kind"] == "parameter"]
    assert doc["donations_lost"] == [] and doc["donations_gained"] == []


def test_tpu_v5e_and_v6e():
    doc = diff(MLP, MLP_V6E)
    check_figures(doc, MLP, MLP_V6E)
    xa, xb = xla(MLP), xla(MLP_V6E)
    assert doc["figures"]["total_allocation_bytes"]["delta"] == \
        xb["total_allocation_bytes"] - xa["total_allocation_bytes"]


def test_text_and_html(tmp_path):
    text = ok("memory", "diff", SGD / "dump", SGD_OFF / "dump").stdout
    assert "donations lost" in text and "parameter 0: 16.00M" in text
    assert "peak_memory_in_bytes" in text
    out = tmp_path / "d.html"
    ok("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--html", out)
    page = out.read_text(encoding="utf-8")
    assert "https://" not in page and "http://" not in page
    assert "donations lost" in page and "251,699,264" in page


def test_bad_use():
    fails("memory", "diff", SGD / "dump")
    fails("memory", "diff", SGD / "dump", DATA / "no-such-dir")


def test_two_out_of_memory_reports():
    a = DATA / "tpu_corpus" / "oom_temps" / "oom" / "tpu_driver.WARNING.txt"
    b = DATA / "tpu_corpus" / "oom_padded_temps" / "oom" / "tpu_driver.WARNING.txt"
    doc = json.loads(ok("memory", "diff", a, b, "--json").stdout)
    used = doc["figures"]["memory_used_bytes"]
    # the reports' own lines: "Used 20.26G of 15.75G hbm" and "Used 18.00G of 15.75G hbm"
    assert round(used["a"] / 2**30, 2) == 20.26 and round(used["b"] / 2**30, 2) == 18.00
    assert doc["growth"][0]["figure"] == "memory_used_bytes"
    # buffers are named by their instruction (a report's label is the instruction's text)
    names = [x["label"] for x in doc["buffers_added"] + doc["buffers_removed"]]
    assert names and not [n for n in names if " = " in n]
    assert "broadcast_multiply_fusion" in names


PADDING = DATA / "tpu_corpus" / "padding"
PADDING_DEFAULT = DATA / "diff_pairs" / "padding_default"


def test_requested_padded_layouts_vs_xlas_defaults():
    doc = diff(PADDING, PADDING_DEFAULT)
    assert check_figures(doc, PADDING, PADDING_DEFAULT) >= 14
    xa, xb = xla(PADDING), xla(PADDING_DEFAULT)
    assert doc["figures"]["peak_memory_in_bytes"]["delta"] == \
        xb["peak_memory_in_bytes"] - xa["peak_memory_in_bytes"]
    # the requested row-major tiles pad the size-1 dimension: those layouts change
    changed = {c["a"]["label"]: (c["a"]["shape"], c["b"]["shape"], c["delta"])
               for c in doc["layouts_changed"]}
    # s32[4096,1] row-major T(8,128): 4096 rows of 8x128 tiles / 8 = 2M; default {0,1:T(1,128)}: 16K
    assert changed["ids.1"] == ("s32[4096,1]{1,0:T(8,128)}", "s32[4096,1]{0,1:T(1,128)}",
                                16 * 1024 - 2 * 1024 * 1024)
    assert changed["act.1"][0].startswith("f32[8,1,1280]{2,1,0:T(8,128)}")
    r = run("memory", "diff", PADDING_DEFAULT / "dump", PADDING / "dump", "--max-growth", "5%")
    assert r.returncode == 1


def test_diff_needs_two_inputs():
    for args in ((), (SGD / "dump",), (SGD / "dump", SGD / "dump", SGD / "dump")):
        r = run("memory", "diff", *args)
        assert r.returncode == 2 and "takes two inputs" in r.stderr, r.stderr


def test_the_diff_page_escapes_text_from_the_artifacts(tmp_path):
    evil = "<script>alert(1)</script>"
    sides = []
    for n in (1024, 4096):
        hlo = tmp_path / f"m{n}.hlo"
        hlo.write_text(
            f"HloModule jit_evil, entry_computation_layout={{(f32[{n}]{{0}})->f32[{n}]{{0}}}}\n\n"
            f"ENTRY %main (p: f32[{n}]) -> f32[{n}] {{\n"
            f"  %p = f32[{n}]{{0}} parameter(0)\n"
            f'  ROOT %n = f32[{n}]{{0}} negate(%p), metadata={{op_name="{evil}"}}\n'
            "}\n")
        sides.append(hlo)
    out = tmp_path / "d.html"
    ok("memory", "diff", *sides, "--html", out)
    page = out.read_text(encoding="utf-8")
    assert "<script>alert" not in page and page.count("<script>") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the op path, shown as text


# -- issue 29: a gate a typo turns off; standard input as one side --------------------------

OOM_A = DATA / "tpu_corpus" / "oom_padded_temps" / "oom" / "tpu_driver.WARNING.txt"  # 18.00G
OOM_B = DATA / "tpu_corpus" / "oom_temps" / "oom" / "tpu_driver.WARNING.txt"         # 20.26G


@pytest.mark.parametrize("limit, why", [
    ("nan%", "(write e.g. 5%)"), ("NaN%", "(write e.g. 5%)"), ("nan %", "(write e.g. 5%)"),
    ("inf%", "an infinite limit never fails"), ("Infinity%", "an infinite limit never fails"),
    ("1e400%", "an infinite limit never fails"),
    ("-5%", "it must be 0% or more"), ("-inf%", "it must be 0% or more"),
    ("x%", "(write e.g. 5%)"), ("%", "(write e.g. 5%)"), ("x", "not a size"),
])
def test_max_growth_refuses_what_would_turn_the_gate_off(limit, why):
    # B's peak is 66.7% above A's: nan% was accepted and exited 0 (the gate
    # never fired); the option is now checked before anything is read or printed
    r = one_error_line("memory", "diff", SGD / "dump", SGD_OFF / "dump", f"--max-growth={limit}")
    if "%" in limit:
        assert r.stderr.startswith(f"xlashape: error: --max-growth: not a percentage: {limit!r}")
    assert why in r.stderr


def test_max_growth_as_a_plain_size_still_gates():
    # "5" is 5 bytes, not 5%: B grew by far more
    r = run("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--max-growth", "5")
    assert r.returncode == 1 and "more than --max-growth 5" in r.stderr
    for limit, status in (("0%", 1), ("+66%", 1), ("67%", 0), ("1e300%", 0)):
        r = run("memory", "diff", SGD / "dump", SGD_OFF / "dump", "--max-growth", limit)
        assert r.returncode == status, (limit, r.stderr)


def test_max_growth_without_diff_is_refused():
    one_error_line("memory", SGD / "dump", "--max-growth", "5%")


def test_diff_reads_one_side_from_standard_input():
    # as `xlashape memory -` does: before, "No such file or directory: -"
    by_file = run("memory", "diff", OOM_A, OOM_B, "--max-growth", "5%")
    assert by_file.returncode == 1 and "memory_used_bytes grew by" in by_file.stderr
    for args, text, label in ((("-", OOM_B), OOM_A, "A"), ((OOM_A, "-"), OOM_B, "B")):
        r = run("memory", "diff", *args, "--max-growth", "5%", input=text.read_text())
        assert (r.returncode, r.stderr) == (by_file.returncode, by_file.stderr)
        got, want = r.stdout.splitlines(), by_file.stdout.splitlines()
        i = "AB".index(label)
        assert got[i].startswith(f"{label}: <stdin>  module ")
        assert got[i][len(f"{label}: <stdin>"):] == want[i][len(f"{label}: {text}"):]
        assert got[:i] + got[i + 1:] == want[:i] + want[i + 1:]
        doc = json.loads(ok("memory", "diff", *args, "--json", input=text.read_text()).stdout)
        want = json.loads(ok("memory", "diff", OOM_A, OOM_B, "--json").stdout)
        side = label.lower()
        assert want[side]["path"] == str(text) and doc[side]["path"] == "<stdin>"
        doc[side]["path"] = want[side]["path"]    # no temporary file named
        assert doc == want


def test_diff_of_standard_input_with_itself_is_refused():
    r = one_error_line("memory", "diff", "-", "-", input=OOM_A.read_text())
    assert "only one of A and B can be standard input" in r.stderr


@pytest.mark.parametrize("text", ["", "garbage\n"])
def test_bad_standard_input_is_named_stdin_not_its_temporary_file(text):
    for args in (("memory", "diff", "-", SGD / "dump"), ("memory", "diff", SGD / "dump", "-"),
                 ("memory", "-")):
        r = one_error_line(*args, input=text)
        assert r.stderr.startswith("xlashape: error: <stdin> is "), r.stderr
        assert "xlashape-stdin-" not in r.stderr


# -- issue 25: a diff without noise ---------------------------------------------------------

SGD_BF16 = DATA / "diff_pairs" / "sgd_mom_bf16"


def _allocated(x):
    return x["argument_size_in_bytes"] + x["output_size_in_bytes"] + x["temp_size_in_bytes"]


@pytest.mark.parametrize("a,b", [(REMAT, REMAT_OFF), (REMAT_OFF, REMAT)])
def test_checkpointing_is_matched_and_shared_memory_counted_once(a, b, tmp_path):
    doc = diff(a, b)
    xa, xb = xla(a), xla(b)
    grown = xb["temp_size_in_bytes"] - xa["temp_size_in_bytes"]
    added, removed = ((doc["buffers_added_memory_bytes"], doc["buffers_removed_memory_bytes"])
                      if grown > 0 else
                      (doc["buffers_removed_memory_bytes"], doc["buffers_added_memory_bytes"]))
    # without checkpointing the forward scan keeps two f32[16,1024,1024] stacks: XLA's own
    # temp_size_in_bytes grows by exactly their memory, whatever names share it
    assert added == abs(grown) == 2 * 16 * 1024 * 1024 * 4
    # with it, what is gone is the one recomputed f32[1024,1024] (jax's rematted_computation)
    assert removed == 1024 * 1024 * 4
    gone = doc["buffers_removed"] if grown > 0 else doc["buffers_added"]
    assert [x["op_path"].split("/")[-2] for x in gone] == ["rematted_computation"]
    # no list counts more memory than its side allocates
    assert doc["buffers_added_memory_bytes"] <= _allocated(xb)
    assert doc["buffers_removed_memory_bytes"] <= _allocated(xa)
    # the buffers whose op paths only gained or lost checkpoint/ are matched, not listed
    pairs = doc["op_paths_changed"]
    assert pairs
    for p in pairs:
        with_ckpt, without = ((p["a"], p["b"]) if "checkpoint/" in p["a"]["op_path"]
                              else (p["b"], p["a"]))
        assert with_ckpt["op_path"].replace("checkpoint/", "") == without["op_path"]
        assert p["a"]["label"] == p["b"]["label"] and p["a"]["shape"] == p["b"]["shape"]
    listed = {x["label"] for x in doc["buffers_added"] + doc["buffers_removed"]}
    assert not listed & {p["a"]["label"] for p in pairs}
    text = ok("memory", "diff", a / "dump", b / "dump").stdout
    assert "the op paths changed (e.g. checkpointing" in text
    side = "added in B" if grown > 0 else "removed from A"
    assert f"buffers {side} (10 values in 2 places, 128.00M of memory):" in text
    # each of the two stacks once in the list (the names that share its memory under it),
    # and once live at the peak
    assert text.count("f32[16,1024,1024]{2,1,0}") == 2 + 2
    assert "the same memory as" in text
    out = tmp_path / "d.html"
    ok("memory", "diff", a / "dump", b / "dump", "--html", out)
    page = out.read_text(encoding="utf-8")
    assert f"buffers {side} (10, 128.00M of memory)" in page
    # the eight names of the two stacks' memory say whose memory it is, the two count it
    deltas = re.findall(r'<td class="n( shared)?" data-v="(-?\d+)">([^<]*)</td><td>temporary',
                        page.split(f"buffers {side}", 1)[1].split("</table>", 1)[0])
    assert sorted(abs(int(v)) for _, v, _ in deltas) == [0] * 8 + [64 << 20] * 2
    assert all(t.startswith("the memory of ") for sh, _, t in deltas if sh)
    # XLA:CPU's peak_memory_in_bytes leaves the temporaries out: the heaps' tops are not it
    assert "XLA&#x27;s peak at" not in page and "A: highest at" in page


def test_a_changed_element_type_is_said_with_both_shapes(tmp_path):
    doc = diff(SGD, SGD_BF16)
    xa, xb = xla(SGD), xla(SGD_BF16)
    # the momentum (parameters 4..7, donated) kept in bf16: three f32[2048,2048] and one
    # f32[2048] of 4 bytes an element now 2
    saved = 3 * 2048 * 2048 * 2 + 2048 * 2
    assert xa["argument_size_in_bytes"] - xb["argument_size_in_bytes"] == saved
    assert doc["buffers_added"] == [] and doc["buffers_removed"] == []
    dt = {p["a"]["label"]: (p["a"]["shape"], p["b"]["shape"]) for p in doc["dtypes_changed"]}
    for i, dims in ((0, "[2048,2048]"), (1, "[2048,2048]"), (2, "[2048,2048]"), (3, "[2048]")):
        a_shape, b_shape = dt[f"mom_{i}_.1"]
        assert a_shape.startswith("f32" + dims + "{") and b_shape.startswith("bf16" + dims + "{")
    for p in doc["dtypes_changed"]:
        assert p["b"]["size_in_bytes"] * 2 == p["a"]["size_in_bytes"]
    # the tuple of outputs (its table of pointers) is one buffer on both sides
    assert doc["peak"]["live_added"] == [] and doc["peak"]["live_removed"] == []
    text = ok("memory", "diff", SGD / "dump", SGD_BF16 / "dump").stdout
    # the momentum and the update written into its donated buffer share memory: once
    assert f"dtype changed (8, -{format_bytes(saved)} of memory):" in text
    assert "  mom_0_.1: f32[2048,2048]{1,0} -> bf16[2048,2048]{1,0}, -8.00M (-50.0%)" in text
    assert "buffers grown or shrunk" not in text
    out = tmp_path / "d.html"
    ok("memory", "diff", SGD / "dump", SGD_BF16 / "dump", "--html", out)
    page = out.read_text(encoding="utf-8")
    assert "dtype changed (8)" in page
    assert "f32[2048,2048]{1,0} -&gt; bf16[2048,2048]{1,0}" in page
