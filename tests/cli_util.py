"""Helpers shared by the tests of the ``xlashape`` command (``test_cli*.py``).

:func:`run` runs the command as ``xlashape.cli.main(argv)`` in this process,
with standard input, output and error replaced by UTF-8 byte streams that
refuse what a terminal could not encode (an unpaired surrogate written
unescaped fails the test), and ``SystemExit`` turned into the exit status.
That is the same code path as the installed command after its import, and
about a hundred times faster than a new interpreter per test; the entry
points themselves (``python -m xlashape``, the ``xlashape`` script) and
whatever needs its own environment are run in a subprocess
(:func:`run_subprocess`, or ``run(..., env=...)``).

Expected values come from the XLA docs (the shapes and tiled-layout pages'
figures) or from arithmetic written out in the tests, never from the code.
"""

import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

DATA = Path(__file__).parent / "data"

# The shape of the original XLA shapes documentation's dump example.
SEED_SHAPE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"

PADDED = "f32[8,1,1024]{1,2,0:T(8,128)}"
# physical order (major->minor) is dim0, dim2, dim1 = (8, 1024, 1); T(8,128) on
# (1024, 1) gives (128, 1, 8, 128): 8*128*1*8*128 slots of 4 bytes
PADDED_UNPADDED = 8 * 1 * 1024 * 4
PADDED_PADDED = 8 * 128 * 1 * 8 * 128 * 4


def _stream(data: bytes = b""):
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", newline="")


def _text(stream) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")


def run_in_process(*args, input=None):
    from xlashape.cli import main

    if isinstance(input, str):
        input = input.encode("utf-8")
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = _stream(input or b""), _stream(), _stream()
    try:
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = _text(sys.stdout), _text(sys.stderr)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def run_subprocess(*args, input=None, env=None, command=None):
    """``python -m xlashape ARGS`` (or ``command + ARGS``) in a new process."""
    full_env = dict(os.environ)
    full_env.pop("PYTHONPATH", None)
    if env:
        full_env.update(env)
    cmd = command or [sys.executable, "-m", "xlashape"]
    text = not isinstance(input, bytes)
    argv = [a if isinstance(a, (str, bytes)) else str(a) for a in args]
    r = subprocess.run([*cmd, *argv], input=input, capture_output=True, text=text,
                       env=full_env, timeout=120)
    if not text:
        r = SimpleNamespace(returncode=r.returncode, stdout=r.stdout.decode("utf-8"),
                            stderr=r.stderr.decode("utf-8"))
    return r


def run(*args, input=None, env=None):
    """The command's exit status, stdout and stderr; in this process unless
    ``env`` asks for a different environment."""
    if env is not None:
        return run_subprocess(*args, input=input, env=env)
    return run_in_process(*args, input=input)


def ok(*args, **kw):
    r = run(*args, **kw)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r


def fails(*args, **kw):
    """Exit status 2, one 'xlashape: error:' line first, no traceback."""
    r = run(*args, **kw)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines and lines[0].startswith("xlashape: error: "), r.stderr
    return r


def one_error_line(*args, **kw):
    """:func:`fails` with exactly one line on stderr and nothing on stdout."""
    r = fails(*args, **kw)
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stdout == ""
    return r


def field(text, key):
    """The value of the ``key   value`` line of a describe block."""
    for line in text.splitlines():
        if line.startswith(key + " "):
            return line[len(key):].strip()
    raise AssertionError(f"no {key!r} line in:\n{text}")


def section(text, title_start):
    """The indented lines under the line starting with title_start."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(title_start):
            out = []
            for x in lines[i + 1:]:
                if not x.startswith("  "):
                    break
                out.append(x[2:])
            return out
    raise AssertionError(f"no section {title_start!r} in:\n{text}")
