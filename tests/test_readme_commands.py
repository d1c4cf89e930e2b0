"""The README's two first commands are what a newcomer and CI run; its
sessions (``$ xlashape ...`` and what follows) are what the commands print,
byte for byte."""

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


def test_ci_requires_the_extras_it_installs_before_running_the_suite():
    # with XLASHAPE_REQUIRE_EXTRAS=1 a skip for a missing extra fails (extras_guard.py)
    ci_lines = [line.strip() for line in CI.read_text().splitlines()]
    test_command = _first_commands()[1]
    assert "export XLASHAPE_REQUIRE_EXTRAS=1" in ci_lines
    assert ci_lines.index("export XLASHAPE_REQUIRE_EXTRAS=1") < ci_lines.index(test_command)
    assert "[test,plot,jax,tpu]" in test_command


def test_first_command_runs_the_shipped_example():
    assert _first_commands()[0].endswith("xlashape memory --example")


# -- the README's sessions, byte for byte ------------------------------------------------

#: the width the README's sessions were printed at (the command's own default
#: when its output goes to no terminal: shutil's 80 columns)
README_COLUMNS = "80"


def _code_blocks():
    """The lines of each fenced code block of the README."""
    blocks, current = [], None
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _sessions():
    """Each ``$ xlashape ...`` line of the README's code blocks, with the lines
    shown under it (up to the next ``$`` line, trailing blank lines left
    out) and the exit status a following ``$ echo $?`` shows (else 0)."""
    out = []
    for lines in _code_blocks():
        for i, line in enumerate(lines):
            if not line.startswith("$ xlashape "):
                continue
            j = i + 1
            while j < len(lines) and not lines[j].startswith("$ "):
                j += 1
            shown = lines[i + 1:j]
            while shown and not shown[-1]:
                shown.pop()
            status = 0
            if j + 1 < len(lines) and lines[j] == "$ echo $?":
                status = int(lines[j + 1])
            out.append((line[2:], shown, status))
    return out


def _run_as_shown(command: str):
    import os
    import shlex
    import subprocess
    import sys

    argv = shlex.split(command)
    assert argv[0] == "xlashape"
    env = dict(os.environ, COLUMNS=README_COLUMNS)
    r = subprocess.run([sys.executable, "-m", "xlashape", *argv[1:]], cwd=ROOT, env=env,
                       capture_output=True, text=True, encoding="utf-8", timeout=300)
    # a terminal shows the report, then the warnings printed after it
    return r.returncode, (r.stdout + r.stderr).splitlines()


def test_the_readme_has_memory_sessions():
    commands = [c for c, _, _ in _sessions()]
    assert any(c.startswith("xlashape memory --example") for c in commands)
    assert any(c.startswith("xlashape memory diff") and "--max-growth" in c for c in commands)
    assert any("oom" in c for c in commands if c.startswith("xlashape memory "))


@pytest.mark.parametrize("command,shown,status",
                         [pytest.param(*s, id=s[0][len("xlashape "):][:70]) for s in _sessions()])
def test_each_readme_session_is_what_the_command_prints(command, shown, status):
    code, lines = _run_as_shown(command)
    assert lines == shown
    assert code == status


# the bash block's examples stand for a dump or report of the user's: each
# comment is what the command prints on one of the test corpora's
COMMENTED = {
    "xlashape memory DUMP --device h100": "tests/data/gpu_corpus/dev_remat_scan/dump",
    "xlashape memory oom.txt --chip v5e": "tests/data/tpu_corpus/oom_temps/oom/tpu_driver.WARNING.txt",
}


@pytest.mark.parametrize("command", sorted(COMMENTED))
def test_the_commented_examples_print_their_comments(command):
    line = next(ln for ln in README.read_text().splitlines() if ln.startswith(command + " "))
    comment = line.split("#", 1)[1].strip()
    said = re.search(r'"(.*)"', comment)
    said = said.group(1) if said else comment
    placeholder = command.split()[2]
    code, lines = _run_as_shown(command.replace(placeholder, COMMENTED[command]))
    assert code == 0
    assert any(said in ln for ln in lines), (said, lines[-3:])
