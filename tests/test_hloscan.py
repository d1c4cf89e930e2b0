"""The compiled fast lane of the HLO reader (xlashape._hloscan) reads exactly
what the Python reader reads.

Every comparison runs the same text through ``HloReader`` twice, with the
compiled scanner and without it (``XLASHAPE_PURE_PYTHON=1``), and compares
every field of every instruction, the warnings, the computations and how
they are used; and ``xlashape hlo --json`` both ways, byte for byte. Inputs:
every module in tests/data (and the XLA:TPU corpus when present), a module
from the benchmark generator, and lines mutated at random.
"""

import io
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

from corpora import hlo_texts
from cli_util import run
from strategies import edited_lines
from xlashape.hlo_calls import _scan_chunk, _scan_chunk_python
from xlashape.hlo_module import HloReader, scan_calls

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))


TEXTS = hlo_texts()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    import bench_hlo

    p = tmp_path_factory.mktemp("gen") / "module.txt"
    bench_hlo.generate(str(p), 1.5, seed=3)
    return p.read_text()


def _pure(flag):
    if flag:
        os.environ["XLASHAPE_PURE_PYTHON"] = "1"
    else:
        os.environ.pop("XLASHAPE_PURE_PYTHON", None)


def read_all(text, pure, kinds=True):
    _pure(pure)
    try:
        r = HloReader(call_kinds=scan_calls(text) if kinds else None)
        rows = []
        held = []
        for ins in r.read(io.StringIO(text)):
            if kinds:
                # with the call-graph pass, how a computation is used is known
                # when its instructions are yielded
                rows.append((ins.computation, ins.name, str(ins.shape), ins.opcode, ins.is_root,
                             ins.line, ins.operands_text, ins.attributes_text, ins.result,
                             ins.computation_kind))
            else:
                # without it, once the callers are read: compare at the end
                held.append(ins)
        for ins in held:
            rows.append((ins.computation, ins.name, str(ins.shape), ins.opcode, ins.is_root,
                         ins.line, ins.operands_text, ins.attributes_text, ins.result,
                         ins.computation_kind))
        comps = [(c.name, c.is_entry, c.signature, c.line, sorted(c.kinds))
                 for c in r.computations.values()]
        return (rows, list(r.warnings), comps, sorted(r.fused_computations),
                sorted(r.applied_computations), {k: sorted(v) for k, v in r.call_kinds.items()},
                r.module_name, r.module_attributes, r.lines_read)
    finally:
        _pure(False)


def assert_same(text):
    for kinds in (True, False):
        assert read_all(text, False, kinds) == read_all(text, True, kinds)


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_test_module_reads_the_same(name):
    assert_same(TEXTS[name])


def test_a_generated_module_reads_the_same(generated):
    assert_same(generated)


def test_scan_calls_in_c_and_in_python(generated):
    for text in list(TEXTS.values()) + [generated]:
        b = text.encode()
        fast, slow = {}, {}
        _scan_chunk(b, fast)
        _scan_chunk_python(b, slow)
        assert fast == slow


def _json(path, pure):
    _pure(pure)
    try:
        r = run("hlo", path, "--json", "--max-warnings", "0")
    finally:
        _pure(False)
    return r.returncode, r.stdout


def _json_inputs():
    names = [n for n in sorted(TEXTS) if not n.startswith("tpu_corpus")]
    return names + ["tpu_corpus"]


@pytest.mark.parametrize("name", _json_inputs())
def test_hlo_json_is_the_same(name):
    if name == "tpu_corpus":
        paths = sorted((DATA / "tpu_corpus").rglob("module.hlo"))
        if not paths:
            pytest.skip("no XLA:TPU corpus")
    else:
        paths = [DATA / name]
    for path in paths:
        assert _json(path, False) == _json(path, True)


def test_hlo_json_of_a_generated_module_is_the_same(generated, tmp_path):
    p = tmp_path / "m.txt"
    p.write_text(generated)
    fast = _json(p, False)
    assert fast == _json(p, True)
    assert fast[0] == 0 and fast[1].count('"name"') > 5000


# -- mutated lines ------------------------------------------------------------------------

_BASE = (TEXTS.get("tpu_module.hlo", "") + "\n" + TEXTS.get("seed_examples.hlo", "")).splitlines()
_NOISE = list(' ,={}()[]"\\%/*\t') + ["ROOT ", "ENTRY ", "/*index=5*/", "//", ", kind=kLoop",
                                         "\u00e9", "\r", "\n"]


@settings(max_examples=150, deadline=None)
@given(edited_lines(_BASE, _NOISE))
def test_mutated_modules_read_the_same(text):
    assert read_all(text, False) == read_all(text, True)
