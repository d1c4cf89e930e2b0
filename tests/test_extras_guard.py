"""``extras_guard``: under ``XLASHAPE_REQUIRE_EXTRAS=1`` (CI's, set by
``.ci/run``) a skip for a missing extra fails; other skips stay skips.
Checked in a child pytest on a small test file of skips, with and without
the variable."""

import os
import pathlib
import subprocess
import sys

import pytest

from extras_guard import blames_an_extra

HERE = pathlib.Path(__file__).resolve().parent

_TESTS = '''
import pytest

pytestmark = pytest.mark.filterwarnings("ignore")

@pytest.mark.skipif(True, reason="needs jax (pip install -e '.[jax]')")
def test_jax():
    pass

def test_libtpu():
    pytest.skip("needs jax and libtpu (pip install -e '.[tpu]')")

def test_importorskip():
    pytest.importorskip("no_such_module_named_matplotlib_xyz", reason="matplotlib is not installed")

@pytest.mark.skipif(True, reason="needs Debian's chromium (headless)")
def test_chromium():
    pass

def test_version():
    pytest.skip("this jax has no Format")
'''


def _run(tmp_path, require: bool):
    (tmp_path / "test_skips.py").write_text(_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "XLASHAPE_REQUIRE_EXTRAS"}
    if require:
        env["XLASHAPE_REQUIRE_EXTRAS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "extras_guard", "-p",
                           "no:cacheprovider", "-q", "-rfEs", "--rootdir", str(tmp_path),
                           "-c", os.devnull, str(tmp_path / "test_skips.py")],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)


def test_skips_for_a_missing_extra_fail_where_the_extras_are_required(tmp_path):
    r = _run(tmp_path, require=True)
    assert r.returncode == 1, r.stdout + r.stderr
    tail = r.stdout.strip().splitlines()[-1]
    assert "2 skipped" in tail and "passed" not in tail, r.stdout
    # a skipif marker's skip is its setup's, which pytest reports as an error: a failure all the same
    failed = {ln.split()[1].split("::")[1] for ln in r.stdout.splitlines()
              if ln.startswith(("FAILED ", "ERROR "))}
    assert failed == {"test_jax", "test_libtpu", "test_importorskip"}, r.stdout
    assert "XLASHAPE_REQUIRE_EXTRAS=1" in r.stdout


def test_without_the_variable_they_are_skips(tmp_path):
    r = _run(tmp_path, require=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 skipped" in r.stdout.strip().splitlines()[-1], r.stdout


@pytest.mark.parametrize("reason,blamed", [
    ("needs jax (pip install -e '.[jax]')", True),
    ("jax is not installed", True),
    ("could not import 'jax': No module named 'jax'", True),
    ("jaxlib (XLA's parser) is not importable", True),
    ("needs jax, nbclient (pip install -e '.[test,jax]')", True),
    ("matplotlib (the 'plot' extra) is not installed", True),
    ("needs Debian's chromium (headless)", False),
    ("this jax has no Format", False),
    ("no XLA:TPU corpus", False),
    ("chromium did not finish in 180 s", False),
])
def test_which_reasons_blame_an_extra(reason, blamed):
    assert blames_an_extra(reason) is blamed
