"""``xlashape explain``."""

import json

import pytest

from cli_util import PADDED, PADDED_PADDED, PADDED_UNPADDED, fails, ok


def test_explain_prints_sizes_as_the_tpu_oom_report_does():
    out = ok("explain", PADDED).stdout
    assert out.splitlines()[0] == PADDED
    assert "32.0K" in out and f"{PADDED_UNPADDED} bytes" in out
    assert "4.00M" in out and f"{PADDED_PADDED} bytes" in out
    assert f"{PADDED_PADDED / PADDED_UNPADDED:.1f}x expansion" in out  # 128.0x
    assert "dimension 1 has size 1" in out
    assert "suggestions:" in out


def test_explain_json():
    obj = json.loads(ok("explain", PADDED, "--json").stdout)
    assert obj["shape"] == PADDED
    assert obj["unpadded_bytes"] == PADDED_UNPADDED
    assert obj["padded_bytes"] == PADDED_PADDED
    assert obj["expansion"] == pytest.approx(128.0)
    assert obj["physical_dimensions"] == [8, 128, 1, 8, 128]
    assert any(1 in s["dimensions"] for s in obj["sources"])


def test_explain_a_shape_without_padding():
    out = ok("explain", "f32[8,128]{1,0:T(8,128)}").stdout
    assert "1.0x expansion" in out
    assert "no padding" in out


def test_explain_the_seeds_padded_example():
    obj = json.loads(ok("explain", "f32[2,3]{0,1}", "--pad", "3,5", "--json").stdout)
    assert obj["unpadded_bytes"] == 2 * 3 * 4
    assert obj["padded_bytes"] == 3 * 5 * 4
    assert obj["expansion"] == pytest.approx(15 / 6)
    assert obj["padded_dimensions"] == [3, 5]


def test_explain_invalid_layout_is_an_error():
    r = fails("explain", "f32[2,3]{0,0}")
    assert "permutation" in r.stderr or "duplicate" in r.stderr


def test_explain_json_keys_are_stable():
    # scripts rely on these keys: the same set as before the CLI became a package
    obj = json.loads(ok("explain", PADDED, "--json").stdout)
    assert list(obj) == ["shape", "unpadded_bytes", "padded_bytes", "expansion",
                         "physical_dimensions", "sources", "suggestions"]
    assert set(obj["sources"][0]) == {"kind", "level", "dimensions", "size", "padded_size",
                                      "factor", "description"}
    padded = json.loads(ok("explain", "f32[2,3]{0,1}", "--pad", "3,5", "--json").stdout)
    assert list(padded)[-1] == "padded_dimensions"


def test_explain_dash_reads_the_shape_from_standard_input():
    assert ok("explain", "-", input=PADDED + "\n").stdout == ok("explain", PADDED).stdout
