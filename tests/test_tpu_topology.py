"""A TPU without a TPU: ``lower_for_tpu`` + ``analyze(lowered, device=...)``
compile the programs of ``tpu_programs.py`` with XLA:TPU on this host (a
``v5e:2x2`` and a ``v6e:2x2`` topology; one program sharded over the four
devices of the v5e topology; one that does not fit), in a child process.

Golden values: the ``memory_analysis()`` of a compile of the same lowered
function -- XLA:TPU's own. Every size and peak figure xlashape reads from
the dump equals it; ``temp_size_in_bytes`` is the one figure a TPU dump does
not determine (libtpu's allocator decides it), and the analysis says it is
taken from ``memory_analysis()``. The program that does not fit is the
compile's out-of-memory error, with the verdict and ``assert_fits`` failing.

Needs jax and libtpu: ``pip install -e '.[tpu]'`` installs the libtpu the
installed jax pairs with (jax 0.10.2, CI's: libtpu 0.0.42.*); or set
``XLASHAPE_TEST_LIBTPU`` to a directory where ``pip install --target`` put
one. Skipped, with that reason, without them. Without libtpu (forced in a
child), ``lower_for_tpu`` raises an error naming the package.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HAS_JAX = importlib.util.find_spec("jax") is not None

SIZE_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "host_alias_size_in_bytes")
PEAK_FIELDS = ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
               "peak_unpadded_heap_bytes")


def _libtpu_env():
    """The environment of a child that compiles for TPU, or ``None``
    (then the reason is in :data:`WHY`)."""
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"     # a host without a TPU: run nothing on one
    env["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in sys.path if p])
    target = os.environ.get("XLASHAPE_TEST_LIBTPU")
    if target:
        so = os.path.join(target, "libtpu", "libtpu.so")
        if not os.path.isfile(so):
            return None
        env["PYTHONPATH"] = os.pathsep.join([target, env["PYTHONPATH"]])
        env["TPU_LIBRARY_PATH"] = so
        return env
    if importlib.util.find_spec("libtpu") is not None:
        return env
    return None


WHY = ("needs jax and libtpu (pip install -e '.[tpu]': the libtpu the installed jax pairs "
       "with, 0.0.42.* for jax 0.10.2; or XLASHAPE_TEST_LIBTPU=DIR of a pip install --target)")
ENV = _libtpu_env() if HAS_JAX else None
needs_tpu = pytest.mark.skipif(ENV is None, reason=WHY)


@pytest.fixture(scope="module")
def tpu():
    if ENV is None:
        pytest.skip(WHY)
    r = subprocess.run([sys.executable, os.path.join(HERE, "tpu_programs.py")],
                       capture_output=True, text=True, timeout=1200, env=ENV)
    assert r.returncode == 0, r.stderr[-4000:]
    return {d["name"]: d for d in map(json.loads, (ln for ln in r.stdout.splitlines()
                                                   if ln.startswith("{")))}


FITTING = ("mlp_v5e", "train_step_donated_v6e", "cumsum_v5e", "sharded_v5e_2x2")


@needs_tpu
@pytest.mark.parametrize("name", FITTING)
def test_the_full_analysis_of_a_tpu_compile_equals_its_memory_analysis(tpu, name):
    d = tpu[name]
    assert d["kind"] == "jax" and d["platform"] == "tpu"
    assert d["device_kind"].startswith("TPU v")
    xla = d["xla"]
    compared = [k for k in SIZE_FIELDS + PEAK_FIELDS + ("temp_size_in_bytes",) if k in xla]
    assert {"argument_size_in_bytes", "peak_memory_in_bytes", "temp_size_in_bytes"} <= set(compared)
    assert {k: d["ours"][k] for k in compared} == {k: xla[k] for k in compared}
    # every figure but the temporaries (libtpu's allocator's) from the dump
    filled = {n.split()[0] for n in d["notes"] if "is the compile's memory_analysis()" in n}
    assert filled == {"temp_size_in_bytes"}
    assert not [w for w in d["warnings"] if "memory_analysis() says" in w]
    assert d["live_at_peak"] and any(b["op_name"] for b in d["live_at_peak"])
    assert sum(b["size"] for b in d["live_at_peak"]) == xla["peak_memory_in_bytes"]


@needs_tpu
def test_the_verdict_for_a_v5e_and_a_v6e(tpu):
    for name, limit in (("mlp_v5e", 16911433728), ("train_step_donated_v6e", 33543694581)):
        v = tpu[name]["verdict"]
        assert v["fits"] and v["limit_bytes"] == limit      # XLA:TPU's usable HBM
        assert tpu[name]["assert_fits"] is None
    assert "fits: peak" in tpu["mlp_v5e"]["text"] and "on v5e" in tpu["mlp_v5e"]["text"]


@needs_tpu
def test_a_program_sharded_over_the_topologys_devices(tpu):
    d = tpu["sharded_v5e_2x2"]
    assert d["devices"] == 4
    live = {b["op_name"]: b for b in d["live_at_peak"] if b["kind"] == "parameter"}
    assert live["x"]["sharding"].startswith("P('data', None) over mesh data=4")
    assert live["x"]["shape"].startswith("f32[1024,1024]")          # 4096 / 4 rows
    assert "every figure is per device" in d["text"]


@needs_tpu
def test_a_program_that_does_not_fit_is_the_compiles_out_of_memory_report(tpu):
    d = tpu["oom_v5e"]
    assert d["xla"] is None and "RESOURCE_EXHAUSTED" in d["error"]
    assert d["kind"] == "oom"
    v = d["verdict"]
    assert not v["fits"] and v["peak_name"] == "memory_used_bytes"
    # the error's own figures (libtpu words them differently from one
    # version to the next): 19.00G needed, 15.75G available
    assert "19.00G" in d["error"] and "15.75G" in d["error"]
    assert d["ours"]["memory_used_bytes"] == 19 * (1 << 30)
    assert "does not fit v5e" in d["assert_fits"] and "ran out of memory" in d["assert_fits"]


@pytest.mark.skipif(not HAS_JAX, reason="needs jax (pip install -e '.[jax]')")
def test_without_libtpu_the_error_names_the_package():
    code = ("import sys; sys.modules['libtpu'] = None\n"
            "import jax.numpy as jnp\n"
            "from xlashape.errors import MissingDependencyError\n"
            "from xlashape.memory import lower_for_tpu\n"
            "try:\n"
            "    lower_for_tpu(lambda x: x + 1, jnp.zeros(3), topology='v5e:2x2')\n"
            "except MissingDependencyError as e:\n"
            "    print(isinstance(e, ImportError), e)\n")
    env = {k: v for k, v in os.environ.items() if k != "TPU_LIBRARY_PATH"}
    env["JAX_PLATFORMS"] = "cpu"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.strip()
    assert out.startswith("True "), out
    assert "libtpu" in out and "pip install 'jax[tpu]==" in out and "no TPU is needed" in out
