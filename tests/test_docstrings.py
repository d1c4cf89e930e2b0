"""Every docstring example in the package runs and prints what it says."""

import doctest
import importlib

import pytest

MODULES = [
    "xlashape",
    "xlashape.errors",
    "xlashape.safe_text",
    "xlashape.primitive_types",
    "xlashape.layout",
    "xlashape.shape",
    "xlashape.hlo_text",
    "xlashape.shape_util",
    "xlashape.layout_util",
    "xlashape.index_util",
    "xlashape.tiling",
    "xlashape.index_maps",
    "xlashape.tpu",
    "xlashape.hlo_module",
    "xlashape.hlo_model",
    "xlashape.hlo_reader",
    "xlashape.hlo_blocks",
    "xlashape.hlo_calls",
    "xlashape.hlo_syntax",
    "xlashape.hlo_warnings",
    "xlashape._files",
    "xlashape.xla_dump",
    "xlashape.oom_report",
    "xlashape.memory",
    "xlashape.render",
    "xlashape.cli",
    "xlashape.cli._common",
    "xlashape.cli._shape_arg",
    "xlashape.cli._sizes",
    "xlashape.cli._output",
    "xlashape._core",
    "xlashape._numpy_api",
    "xlashape.views",
    "xlashape.cute",
    "xlashape.jax_bridge",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_readme_python_examples():
    """The README's ``>>>`` examples print what the README says they print."""
    import pathlib

    readme = pathlib.Path(__file__).resolve().parent.parent / "README.md"
    if not readme.exists():  # an installed package tested without its checkout
        pytest.skip("README.md is not next to the tests")
    result = doctest.testfile(str(readme), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 10
    assert result.failed == 0, f"{result.failed} README example(s) failed"
