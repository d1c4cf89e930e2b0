"""The README's two first commands are what a newcomer and CI run."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"

if not README.exists() or not CI.exists():  # pragma: no cover - outside a checkout
    pytest.skip("README.md and .ci/run are not next to the tests", allow_module_level=True)


def _first_commands():
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert block, "the README has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_two_commands_each_make_their_own_environment():
    commands = _first_commands()
    assert len(commands) == 2
    for command in commands:
        # a distribution's Python refuses pip outside a virtual environment
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install")


def test_ci_runs_the_readme_test_command_word_for_word():
    test_command = _first_commands()[1]
    assert test_command.endswith("python -m pytest")
    ci_lines = [line.strip() for line in CI.read_text().splitlines()]
    assert test_command in ci_lines


def test_first_command_runs_the_shipped_example():
    assert _first_commands()[0].endswith("xlashape memory --example")
