"""``memory.analyze(lowered)``: a JAX lowered function compiled here with a
temporary dump, against that compile's own ``memory_analysis()``.

The thirteen programs of ``jax_programs.py`` (a train step with and without
donation, an RNN scan, remat over a scan, two programs sharded over 8 host
devices, bf16 attention, ShapeDtypeStruct-only convolutions, a static
argument, a donated KV cache, a loop with a sort, an int8 matmul, a cond) run
in one child process started with ``--xla_force_host_platform_device_count=8``
(jax reads it once, when it starts). For each, every size, temporary and
peak figure ``memory_analysis()`` reports -- the golden values, XLA's -- is
equal to xlashape's from the dump (none of them taken from
``memory_analysis()`` itself), the buffers live at the peak carry JAX op
paths and ``file:line``, and the temporary directory is gone.

Skipped without jax (``pip install -e '.[jax]'``); CI installs it.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

import jax_programs

HERE = os.path.dirname(os.path.abspath(__file__))
HAS_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="needs jax (pip install -e '.[jax]')")

#: what memory_analysis() calls the figures xlashape computes from a dump
SIZE_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "host_alias_size_in_bytes", "host_temp_size_in_bytes")
PEAK_FIELDS = ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
               "peak_unpadded_heap_bytes")
SHARDED = ("sharded_mlp_8", "sharded_train_8")


def _child_env(**extra):
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in sys.path if p])
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def programs():
    if not HAS_JAX:
        pytest.skip("needs jax (pip install -e '.[jax]')")
    r = subprocess.run([sys.executable, os.path.join(HERE, "jax_programs.py")],
                       capture_output=True, text=True, timeout=900, env=_child_env())
    assert r.returncode == 0, r.stderr[-4000:]
    got = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            got[d["name"]] = d
    assert sorted(got) == sorted(jax_programs.PROGRAMS), r.stderr[-4000:]
    return got


def test_there_are_at_least_ten_programs_of_every_kind_the_issue_names():
    names = set(jax_programs.PROGRAMS)
    assert len(names) >= 10
    for must in ("train_step_donated", "scan_rnn", "bf16_attention", "sds_conv") + SHARDED:
        assert must in names


@needs_jax
@pytest.mark.parametrize("name", sorted(jax_programs.PROGRAMS))
def test_every_figure_equals_that_compiles_memory_analysis(programs, name):
    d = programs[name]
    assert d["kind"] == "jax" and d["source"] == "jax" and d["buffer_assignment"]
    assert d["platform"] == "cpu"
    xla = d["xla"]
    compared = [k for k in SIZE_FIELDS + PEAK_FIELDS if k in xla]
    # jax 0.10.2 reports the sizes and peak_memory_in_bytes; newer ones all of them
    assert {"argument_size_in_bytes", "temp_size_in_bytes", "peak_memory_in_bytes"} <= set(compared)
    assert {k: d["ours"][k] for k in compared} == {k: xla[k] for k in compared}
    # ... computed from the dump, not copied from memory_analysis() (which
    # fills only what a dump cannot determine: on the CPU, where the module
    # has thread-local allocations, the two totals jax 0.11.2 and 0.12 count
    # differently from the same dump -- reported by jax 0.12, not by 0.10.2),
    # and no disagreement
    filled = [n for n in d["notes"] if "is the compile's memory_analysis()" in n]
    for n in filled:
        assert n.split()[0] in ("total_allocation_bytes", "indefinite_allocations"), n
        assert "thread-local allocations" in n, n
    assert not [w for w in d["warnings"] if "memory_analysis() says" in w]
    # a peak field null here is one the compile's memory_analysis() lacks too,
    # and its reason says so (jax 0.10.2: the two CPU totals)
    for k, why in d["peak_reasons"].items():
        assert k not in xla, k
        assert why.endswith("the compile's memory_analysis() does not report it either"), why
    # the compile's figures are kept beside
    assert d["memory_analysis"]["argument_size_in_bytes"] == xla["argument_size_in_bytes"]


@needs_jax
@pytest.mark.parametrize("name", sorted(jax_programs.PROGRAMS))
def test_live_at_the_peak_with_jax_op_paths_and_source_lines(programs, name):
    d = programs[name]
    live = d["live_at_peak"]
    assert live
    # the peak XLA reports (whole-program buffers on the CPU) is what is live at it
    fixed = sum(b["size"] for b in live if b["start"] is None)
    assert fixed == d["xla"]["peak_memory_in_bytes"]
    ops = [b["op_name"] for b in live if b["op_name"]]
    assert ops
    # an instruction's op path is JAX's (jit(<function>)/...), its source
    # line this test's program; a parameter's op path is the argument's name
    jitted = [b for b in live if (b["op_name"] or "").startswith("jit(")]
    params = [b for b in live if b["kind"] == "parameter"]
    assert params and all(b["op_name"] for b in params)
    if jitted:
        assert any((b["source"] or "").startswith("jax_programs.py:") or
                   "jax_programs.py:" in (b["source"] or "") for b in jitted)
    assert any(op.startswith("jit(") for op, _, _ in d["by_op_path"])


@needs_jax
@pytest.mark.parametrize("name", sorted(jax_programs.PROGRAMS))
def test_the_temporary_dump_is_gone_and_nothing_points_into_it(programs, name):
    d = programs[name]
    assert d["left_behind"] == []
    assert d["path"] is None
    assert "xlashape-jax-" not in json.dumps({k: v for k, v in d.items() if k != "text"})


@needs_jax
def test_donation_shows_as_aliased_bytes(programs):
    donated, copied = programs["train_step_donated"], programs["train_step"]
    params = (256 * 512 + 512 + 512 * 64) * 4
    assert donated["ours"]["alias_size_in_bytes"] == params
    assert copied["ours"]["alias_size_in_bytes"] == 0
    assert programs["kv_cache_donated"]["ours"]["alias_size_in_bytes"] == 8 * 1024 * 128 * 4


@needs_jax
@pytest.mark.parametrize("name", SHARDED)
def test_a_sharded_program_is_per_device_with_each_parameters_sharding(programs, name):
    d = programs[name]
    assert d["devices"] == 8
    assert d["device_kind"] == "cpu"
    # per-device shapes: the batch split 8 (or 4) ways
    live = {b["op_name"]: b for b in d["live_at_peak"] if b["kind"] == "parameter"}
    assert all(b["sharding"] for b in live.values())
    assert set(d["parameter_shardings"]) == {"0", "1", "2"}
    # as the program's author wrote them: jax's PartitionSpec and mesh
    if name == "sharded_mlp_8":
        assert live["x"]["shape"].startswith("f32[256,256]")        # 2048 / 8 rows
        assert live["x"]["sharding"] == "P('data', None) over mesh data=8"
        assert live["w1"]["sharding"] == "P() over mesh data=8"
        assert live["w1"]["shape"].startswith("f32[256,1024]")       # whole on each device
        assert d["xla"]["argument_size_in_bytes"] == (256 * 256 + 2 * 256 * 1024) * 4
    else:
        assert live["x"]["shape"].startswith("f32[64,512]")          # 256 / 4 rows
        assert live["x"]["sharding"] == "P('data', None) over mesh data=4 model=2"
        assert live["w1"]["shape"].startswith("f32[512,512]")        # 1024 / 2 columns
        assert live["w1"]["sharding"] == "P(None, 'model') over mesh data=4 model=2"
    text = d["text"]
    assert "8 devices" in text and "every figure is per device" in text
    assert "shape (per device), sharding" in text and "sharding=P('data', None)" in text


@needs_jax
def test_a_single_device_program_says_no_sharding(programs):
    d = programs["train_step_donated"]
    assert d["devices"] == 1 and d["parameter_shardings"] == {}
    assert all(b["sharding"] is None for b in d["live_at_peak"])
    assert "per device" not in d["text"]


# -- in this process: the reads, the views, the options ---------------------------------

_AUDIT = r"""
import json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
opened = []

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if "xlashape-jax-" in path:
            opened.append((stage, path))

stage = "analyze"
sys.addaudithook(hook)
import jax_programs
import xlashape.memory as memory
from xlashape.reporters.jsondoc import memory_document
lowered = jax_programs.PROGRAMS["scan_rnn"][1]()
result = memory.analyze(lowered, prefer=sys.argv[2])
stage = "views"
text, page = str(result), result._repr_html_()
doc = "".join(memory_document(result.modules))
dirs = {p[:p.index("xlashape-jax-")] + p[p.index("xlashape-jax-"):].split(os.sep)[0]
        for _, p in opened}
gone = [d for d in dirs if os.path.exists(d)]
print(json.dumps({"opened": opened, "dirs": len(dirs), "gone": not gone, "text": len(text), "page": len(page),
                  "doc": json.loads(doc)["modules"][0]["peak"]["peak_memory_in_bytes"],
                  "xla": lowered.compile().memory_analysis().peak_memory_in_bytes}))
"""


@needs_jax
@pytest.mark.parametrize("prefer", ["text", "proto"])
def test_each_dump_file_is_read_once_and_never_after_the_analysis(prefer):
    r = subprocess.run([sys.executable, "-c", _AUDIT, HERE, prefer], capture_output=True,
                       text=True, timeout=600, env=_child_env())
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    paths = [p for stage, p in got["opened"]]
    names = {os.path.basename(p) for p in paths}
    if prefer == "text":
        for suffix in ("after_optimizations.txt", "-buffer-assignment.txt", "-live-range.txt"):
            assert any(n.endswith(suffix) for n in names), (suffix, names)
    else:
        assert any(n.endswith("after_optimizations.hlo.pb") for n in names), names
        assert not any(n.endswith("after_optimizations.txt") for n in names), names
    assert len(paths) == len(set(paths)), paths                      # each once
    assert [p for stage, p in got["opened"] if stage == "views"] == []   # none by the views
    assert got["dirs"] == 1 and got["gone"]                        # one directory, now gone
    assert got["doc"] == got["xla"] and got["text"] and got["page"]


@needs_jax
def test_a_fresh_directory_each_call_so_a_cached_compile_never_hides_the_dump():
    import jax
    import jax.numpy as jnp

    from xlashape.memory import analyze

    lowered = jax.jit(lambda x: jnp.cumsum(x * 2.0)).lower(jnp.zeros((1000,), jnp.float32))
    first = analyze(lowered).modules[0]
    second = analyze(lowered).modules[0]      # the same lowered object, analysed again
    assert first.buffer_assignment and second.buffer_assignment
    assert first.peak.figures == second.peak.figures
    assert [a.size_in_bytes for a in first.allocations] == \
        [a.size_in_bytes for a in second.allocations]


@needs_jax
def test_compiler_options_and_the_proto_route():
    import jax
    import jax.numpy as jnp

    from xlashape.errors import XlaShapeError
    from xlashape.memory import EXAMPLE_DUMP, analyze

    f = jax.jit(lambda x, y: jnp.tanh(x @ y))
    lowered = f.lower(jax.ShapeDtypeStruct((64, 128), jnp.float32),
                      jax.ShapeDtypeStruct((128, 32), jnp.float32))
    stats = lowered.compile().memory_analysis()
    text = analyze(lowered).modules[0]
    proto = analyze(lowered, prefer="proto").modules[0]
    assert proto.from_proto and not text.from_proto
    for m in (text, proto):
        assert m.argument_size_in_bytes == stats.argument_size_in_bytes
        assert m.peak.figures["peak_memory_in_bytes"] == stats.peak_memory_in_bytes
    # options of the user's go to the compile, with the dump's
    opt = analyze(lowered, compiler_options={"xla_embed_ir_in_executable": False}).modules[0]
    assert opt.temp_size_in_bytes == stats.temp_size_in_bytes
    with pytest.raises(XlaShapeError, match="compiler_options go with a JAX lowered"):
        analyze(EXAMPLE_DUMP, compiler_options={})
    with pytest.raises(TypeError, match="compiler_options"):
        analyze(lowered, compiler_options=["xla_dump_to"])


@needs_jax
def test_a_compiled_object_still_works_and_says_what_a_lowered_one_adds():
    import jax
    import jax.numpy as jnp

    from xlashape.memory import analyze

    compiled = jax.jit(lambda x: x @ x.T).lower(jnp.zeros((16, 64), jnp.float32)).compile()
    (m,) = analyze(compiled).modules
    assert m.source == "jax" and not m.buffer_assignment and m.peak is None
    assert m.argument_size_in_bytes == compiled.memory_analysis().argument_size_in_bytes
    assert any("analyze the lowered function" in n for n in m.notes)
    assert "a JAX compiled object" in str(m)


@needs_jax
def test_a_compile_error_that_is_not_out_of_memory_is_jaxs_own_and_leaves_nothing():
    import glob
    import tempfile

    import jax
    import jax.numpy as jnp

    from xlashape.memory import analyze

    lowered = jax.jit(lambda x: x + 1).lower(jnp.zeros((4,), jnp.float32))
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "xlashape-jax-*")))
    with pytest.raises(Exception) as info:
        analyze(lowered, compiler_options={"xla_no_such_option_xlashape": True})
    assert "xla_no_such_option_xlashape" in str(info.value)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "xlashape-jax-*"))) == before


def test_importing_the_package_and_its_memory_api_imports_no_jax():
    code = ("import sys, xlashape, xlashape.memory as m, xlashape.testing; "
            "a = m.analyze(m.EXAMPLE_DUMP); str(a); a._repr_html_(); "
            "print('jax' in sys.modules, 'jaxlib' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


_CACHED = r"""
import json, sys, tempfile
import jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
import xlashape.memory as memory
f = lambda x: jnp.sort(x) * 2
jax.jit(f).lower(jnp.zeros((1000,))).compile()            # now in the persistent cache
(m,) = memory.analyze(jax.jit(f).lower(jnp.zeros((1000,)))).modules
print(json.dumps({"ba": m.buffer_assignment, "warnings": m.warnings, "temp": m.temp_size_in_bytes,
                  "xla": m.memory_analysis["temp_size_in_bytes"]}))
"""


@needs_jax
def test_a_compile_the_persistent_cache_answers_says_why_there_is_no_peak(tmp_path):
    # jax's persistent compilation cache leaves the dump options out of its
    # key: a compile it has seen runs none of XLA's passes, and XLA writes the
    # module but no buffer assignment
    r = subprocess.run([sys.executable, "-c", _CACHED, str(tmp_path)], capture_output=True,
                       text=True, timeout=600, env=_child_env())
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["ba"] is False and got["temp"] == got["xla"]
    (said,) = [w for w in got["warnings"] if "persistent compilation cache" in w]
    assert f"jax_compilation_cache_dir is {tmp_path}" in said
