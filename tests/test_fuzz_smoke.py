"""The fuzz harness (tests/fuzz/run.py) runs, and its oracles catch bugs.

Each target runs a fixed set of cases (``--max-cases`` with a fixed seed, so
the same cases every time) with the known-bug list ``tests/fuzz/known_bugs.txt``
and must report no other failure. Then bugs are planted in the worker
processes (``--plant``: code run in the child before each case) and the
harness must report each with the right signature: a wrong value, an
exception outside the ``XlaShapeError`` family, a crash (and carry on
after it), a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RUN = HERE / "fuzz" / "run.py"
KNOWN = HERE / "fuzz" / "known_bugs.txt"


def fuzz(tmp_path, *args, plant=None, known=True):
    results = tmp_path / "results"
    cmd = [sys.executable, str(RUN), "--results", str(results), "--quiet", "--no-minimize",
           "--seed", "0", *args]
    if known:
        cmd += ["--known", str(KNOWN)]
    if plant is not None:
        p = tmp_path / "plant.py"
        p.write_text(textwrap.dedent(plant))
        cmd += ["--plant", str(p)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert (results / "summary.json").exists(), proc.stderr[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    return proc, summary, results


def new_failures(summary):
    return [f for f in summary["failures"] if not f["known"]]


@pytest.mark.parametrize("target,cases", [("layout_array", 120), ("shapes", 120), ("readers", 40)])
def test_clean_run_has_no_unknown_failure(tmp_path, target, cases):
    proc, summary, _ = fuzz(tmp_path, "--target", target, "--max-cases", str(cases),
                            "--timeout", "120")
    totals = summary["targets"][target]["totals"]
    assert totals["tried"] == cases
    assert totals.get("ok", 0) > cases // 10, totals   # mutated shapes are mostly refused
    assert len(summary["targets"][target]["operations"]) >= 5
    assert new_failures(summary) == [], proc.stdout + proc.stderr[-3000:]
    assert proc.returncode == 0


PLANT_WRONG_VALUE = """
    import numpy as np, xlashape
    from xlashape import _core
    if not getattr(xlashape, "_planted", False):
        xlashape._planted = True
        class Planted(_core.LayoutArray):
            @staticmethod
            def from_numpy(x, shape, *a, **k):
                x = np.array(x, copy=True)
                if x.dtype == np.float32 and x.size:
                    x.flat[0] = 12345.0 if x.flat[0] != 12345.0 else 0.0   # one wrong element
                return _core.LayoutArray.from_numpy(x, shape, *a, **k)
        xlashape.LayoutArray = Planted
"""


def test_planted_wrong_value_is_a_mismatch(tmp_path):
    proc, summary, results = fuzz(tmp_path, "--target", "layout_array", "--max-cases", "150",
                                  "--timeout", "120", plant=PLANT_WRONG_VALUE)
    sigs = [f["signature"] for f in new_failures(summary)]
    assert any(s.startswith("layout_array:mismatch:") and ":value:" in s and "~f32" in s
               for s in sigs), sigs
    assert proc.returncode == 1
    # the reproducer runs on its own and shows both sides
    f = next(f for f in new_failures(summary) if ":value:" in f["signature"])
    text = Path(f["repro"]).read_text()
    assert "xlashape:" in text and "numpy:" in text


PLANT_BUILTIN = """
    import xlashape, xlashape.memory
    if not getattr(xlashape, "_planted", False):
        xlashape._planted = True
        # compiled under xlashape's own file name: the harness only blames an
        # exception on xlashape when a frame of its traceback is xlashape's
        src = (
            "def parse_shape(text):\\n"
            "    raise KeyError('planted')\\n"
            "def analyze(*a, **k):\\n"
            "    raise RuntimeError('planted')\\n")
        ns = {}
        exec(compile(src, xlashape.__file__, "exec"), ns)
        xlashape.parse_shape = ns["parse_shape"]
        xlashape.memory.analyze = ns["analyze"]
"""


def test_planted_builtin_exceptions_are_reported(tmp_path):
    proc, summary, _ = fuzz(tmp_path, "--target", "shapes,readers", "--max-cases", "40",
                            "--timeout", "120", plant=PLANT_BUILTIN)
    sigs = {f["signature"] for f in new_failures(summary)}
    assert "shapes:builtin:parse_shape:KeyError" in sigs, sigs
    assert any(s.startswith("readers:builtin:analyze.") and ":RuntimeError" in s for s in sigs), sigs
    assert proc.returncode == 1


PLANT_CRASH_AND_HANG = """
    import ctypes, time
    if case["id"] % 6 == 3:           # `case`: the case about to run
        ctypes.string_at(0)           # SIGSEGV
    if case["id"] % 6 == 5:
        time.sleep(60)
"""


def test_planted_crash_and_hang_are_recorded_and_the_run_goes_on(tmp_path):
    proc, summary, results = fuzz(tmp_path, "--target", "shapes", "--max-cases", "30",
                                  "--timeout", "3", plant=PLANT_CRASH_AND_HANG, known=False)
    sigs = {f["signature"]: f for f in summary["failures"]}
    crashes = [s for s in sigs if s.startswith("shapes:crash:") and s.endswith((":SIGSEGV", ":ASAN-SEGV"))]
    hangs = [s for s in sigs if s.startswith("shapes:hang:")]
    assert crashes and hangs, sorted(sigs)
    assert summary["targets"]["shapes"]["totals"]["tried"] == 30
    assert summary["targets"]["shapes"]["totals"].get("ok", 0) + \
        summary["targets"]["shapes"]["totals"].get("refused", 0) > 5
    repro = Path(sigs[crashes[0]]["repro"]).read_text()
    assert "T = " in repro          # the mutated text that was being parsed
    assert proc.returncode == 1


def test_known_list_turns_failures_into_known(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("# every crash\nshapes:crash:*\n")
    plant = "import ctypes\nctypes.string_at(0)\n"
    proc, summary, _ = fuzz(tmp_path, "--target", "shapes", "--max-cases", "5", "--known",
                            str(known), plant=plant, known=False)
    assert summary["failures"] and all(f["known"] for f in summary["failures"])
    assert proc.returncode == 0


def test_unknown_target_is_a_usage_error():
    proc = subprocess.run([sys.executable, str(RUN), "--target", "nope"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 2 and "unknown target" in proc.stderr


def test_an_exception_without_an_xlashape_frame_is_not_blamed_on_xlashape(tmp_path):
    plant = """
        import xlashape
        def parse_shape(text):          # a frame of the plant, not of xlashape
            raise KeyError("not xlashape's")
        xlashape.parse_shape = parse_shape
    """
    proc, summary, _ = fuzz(tmp_path, "--target", "shapes", "--max-cases", "30", plant=plant)
    ops = summary["targets"]["shapes"]["operations"]
    assert ops["parse_shape"].get("external", 0) > 0, ops
    assert not [f for f in summary["failures"] if ":parse_shape:" in f["signature"]]


def test_oracle_compares_bits_and_dtypes():
    sys.path.insert(0, str(HERE / "fuzz"))
    try:
        import oracle
    finally:
        sys.path.remove(str(HERE / "fuzz"))
    import numpy as np
    nan = np.array([np.nan, 1.0], np.float32)
    assert oracle.compare(nan.copy(), nan) is None                     # NaN equals NaN
    assert oracle.compare(np.array([-0.0]), np.array([0.0])) == "value"  # bit for bit
    assert oracle.compare(np.array([1.0], np.float32), np.array([1.0])) == "dtype"
    assert oracle.compare(np.zeros(3, np.longlong), np.zeros(3, np.int64)) == "dtype"
    assert oracle.compare(np.zeros((3, 1)), np.zeros(3)) == "shape"
    assert oracle.compare(1.5, np.float32(1.5)) is None                 # Python scalar vs numpy's
    assert oracle.compare(True, np.int8(1)) == "type"
    assert oracle.compare((np.zeros(2), 1), (np.zeros(2), 2)) == "value"
