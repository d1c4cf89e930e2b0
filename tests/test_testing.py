"""``xlashape.testing.assert_fits``: a test fails when a program stops fitting
or its peak grows, and the failure names what is live at the peak.

Golden values: XLA's ``peak_memory_in_bytes`` recorded with the GPU corpus
(an H200's XLA:GPU, whose peak is device memory's: the one the verdict
judges), the libtpu out-of-memory report of ``data/oom_report.txt`` (its own
"Used 18.94G of 15.75G"), and a JAX program's ``memory_analysis()``.
"""

import importlib.util

import pytest

import corpora
from xlashape.errors import ShapeTypeError, ShapeValueError, XlaShapeError
from xlashape.memory import EXAMPLE_DUMP, analyze
from xlashape.testing import assert_fits

HAS_JAX = importlib.util.find_spec("jax") is not None


def _gpu_program():
    for p in corpora.programs("gpu"):
        if p.dump_file("-live-range.txt") and p.memory_analysis.get("peak_memory_in_bytes"):
            return p
    pytest.skip("no GPU dump with live ranges")  # pragma: no cover


def test_a_limit_at_xlas_peak_passes_and_one_byte_less_fails():
    prog = _gpu_program()
    peak = prog.memory_analysis["peak_memory_in_bytes"]
    result = assert_fits(prog.dump_dir, limit=peak)
    assert result.modules[0].peak.figures["peak_memory_in_bytes"] == peak
    with pytest.raises(AssertionError) as info:
        assert_fits(result, limit=peak - 1)
    message = str(info.value)
    first = message.splitlines()[0]
    assert first.startswith(f"{prog.module} does not fit limit {peak - 1}: peak_memory_in_bytes ")
    assert f"({peak:,} bytes)" in first and "1B too much" in first
    # the largest buffers live at the peak, largest first, with their op paths
    m = result.modules[0]
    top = sorted(m.peak.live_at_peak, key=lambda b: -b.size)[:5]
    lines = message.splitlines()[2:]
    assert len(lines) == len(top)
    for line, b in zip(lines, top):
        assert (b.op_name or b.instruction) in line and b.shape in line


def test_a_budget_and_a_device_on_the_shipped_tpu_example():
    result = assert_fits(EXAMPLE_DUMP, device="v5e", max_peak="5M")   # 4.38M of device memory
    assert result.modules[0].platform == "tpu"
    with pytest.raises(AssertionError) as info:
        assert_fits(result, max_peak="4M", top=2)
    message = str(info.value)
    assert "does not fit max_peak 4M: device_memory_peak_bytes 4.38M" in message
    lines = message.splitlines()
    assert lines[1].startswith("largest of the ") and len(lines) == 4
    assert "jit(conv_layer)/conv_general_dilated" in message     # the 8.00M VMEM temporary
    # a module is accepted as well as an analysis; a TPU program is not
    # judged against a GPU
    assert assert_fits(result.modules[0], device="v5e") is result.modules[0]
    with pytest.raises(ShapeValueError, match="h100 is a GPU"):
        assert_fits(result, device="h100")


def test_an_out_of_memory_report_always_fails_with_its_allocations():
    with pytest.raises(AssertionError) as info:
        assert_fits(corpora.DATA / "oom_report.txt", device="v5p")   # fits a v5p's 95G
    message = str(info.value)
    assert "memory_used_bytes 18.94G" in message
    assert "the compile ran out of memory" in message
    assert "allocations the out-of-memory report lists" in message


def test_without_a_device_limit_or_budget_it_asks_for_one():
    with pytest.raises(ShapeValueError, match="give device="):
        assert_fits(corpora.DATA / "tpu_module.hlo")


@pytest.mark.parametrize("kwargs, error", [
    ({"device": "v5e", "limit": "1G"}, ShapeValueError),
    ({"limit": "a lot"}, ShapeValueError),
    ({"limit": 0}, ShapeValueError),
    ({"limit": True}, ShapeTypeError),
    ({"max_peak": 1.5}, ShapeTypeError),
    ({"device": "abacus"}, ShapeValueError),
    ({"device": "v5e", "top": -1}, ShapeValueError),
])
def test_bad_arguments_raise_the_family(kwargs, error):
    with pytest.raises(error) as info:
        assert_fits(EXAMPLE_DUMP, **kwargs)
    assert isinstance(info.value, XlaShapeError)


@pytest.mark.skipif(not HAS_JAX, reason="needs jax (pip install -e '.[jax]')")
def test_a_jax_program_fits_an_h100_and_not_a_budget_under_its_peak():
    import jax
    import jax.numpy as jnp

    def step(w, x):
        return w - 0.1 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)

    lowered = jax.jit(step, donate_argnums=0).lower(
        jax.ShapeDtypeStruct((1024, 1024), jnp.float32), jax.ShapeDtypeStruct((256, 1024), jnp.float32))
    stats = lowered.compile().memory_analysis()
    result = assert_fits(lowered, limit="1G")
    (m,) = result.modules
    assert m.argument_size_in_bytes == stats.argument_size_in_bytes
    with pytest.raises(AssertionError) as info:
        assert_fits(result, max_peak=stats.argument_size_in_bytes)   # the temporaries come on top
    assert "jit(step)/" in str(info.value) and "test_testing.py:" in str(info.value)
    # a CPU compile names no accelerator to judge against by default, and an
    # XLA:CPU compile is not judged against a GPU unless forced (its fusions
    # and schedule are not XLA:GPU's), as xlashape memory --device refuses it
    with pytest.raises(ShapeValueError, match="compiled for cpu"):
        assert_fits(result)
    with pytest.raises(ShapeValueError, match="h100 is a GPU and jit_step was compiled for CPU"):
        assert_fits(result, device="h100")
    assert assert_fits(result, device="h100", force_device=True) is result
    with pytest.raises(ShapeValueError, match="force_device=True"):
        analyze(lowered, device="h100")
    forced = analyze(lowered, device="h100", force_device=True).modules[0].verdict
    assert forced.platform_mismatch and forced.fits
