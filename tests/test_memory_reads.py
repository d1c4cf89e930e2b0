"""Each input file is opened once (issue 30): ``xlashape memory DUMP --html P
--json`` and ``xlashape memory diff A B --json`` read every file of their
inputs at most once, whatever views they print.

The commands run in a child process whose audit hook (``sys.addaudithook``)
records every ``open`` event; the test counts the opens of each file under
the input directories. Before the accounting core, a GPU dump's module text
was opened 3 times, its buffer assignment 4 times and its live ranges twice
for ``--html --json``; ``memory diff`` opened each side's module text and
buffer assignment 3 times.
"""

import collections
import json
import os
import subprocess
import sys

import pytest

import corpora

_CHILD = r"""
import json, os, sys
roots = [os.path.realpath(p) for p in json.loads(sys.argv[1])]
opened = []

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if any(path == r or path.startswith(r + os.sep) for r in roots):
            opened.append(path)

sys.addaudithook(hook)
from xlashape.cli import main
out = sys.stdout
sys.stdout = open(os.devnull, "w")
try:
    status = main(json.loads(sys.argv[2]))
except SystemExit as e:
    status = e.code
sys.stdout = out
print(json.dumps({"status": status, "opened": opened}))
"""


def _opens(roots, argv):
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([str(p) for p in roots]),
                        json.dumps([str(a) for a in argv])],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["status"] in (0, None), r.stderr
    return collections.Counter(got["opened"])


def _dumps():
    out = []
    for platform in corpora.PLATFORMS:
        progs = [p for p in corpora.programs(platform) if p.dump_file("-live-range.txt")]
        out.append(progs[0])
    # a TPU module whose values a conditional defines: its text is parsed
    # whole (the sharing rule splits values over the branches), still once
    out += [p for p in corpora.programs("tpu") if p.name == "cond_switch"]
    return out


@pytest.mark.parametrize("prog", _dumps(), ids=corpora.program_id)
def test_memory_html_json_opens_each_dump_file_once(prog, tmp_path):
    counts = _opens([prog.dump_dir], ["memory", str(prog.dump_dir), "--html",
                                      str(tmp_path / "p.html"), "--json"])
    # the files the analysis needs were read (so the hook sees the reads) ...
    names = {os.path.basename(p) for p in counts}
    for suffix in ("after_optimizations.txt", "-buffer-assignment.txt", "-live-range.txt"):
        assert any(n.endswith(suffix) for n in names), (suffix, names)
    # ... and none twice
    assert {p: n for p, n in counts.items() if n > 1} == {}


def test_memory_diff_json_opens_each_file_of_both_sides_once():
    # the same SGD step with and without donate_argnums (XLA:CPU dumps)
    a = corpora.DATA / "cpu_corpus" / "sgd_donated" / "dump"
    b = corpora.DATA / "diff_pairs" / "sgd_not_donated" / "dump"
    counts = _opens([a, b], ["memory", "diff", str(a), str(b), "--json"])
    assert any(str(a) in p for p in counts) and any(str(b) in p for p in counts)
    assert {p: n for p, n in counts.items() if n > 1} == {}


def test_the_hook_counts_repeated_opens(tmp_path):
    # the counting itself: a command that opens a file twice is seen doing so
    f = tmp_path / "x.hlo"
    f.write_text("HloModule m\nENTRY %e { ROOT %p = f32[2]{0} parameter(0) }\n")
    child = _CHILD.replace("from xlashape.cli import main",
                           "from xlashape.cli import main\nopen(sys.argv[3]).close()\n"
                           "open(sys.argv[3]).close()")
    r = subprocess.run([sys.executable, "-c", child, json.dumps([str(tmp_path)]),
                        json.dumps(["memory", str(f)]), str(f)],
                       capture_output=True, text=True, timeout=120)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert collections.Counter(got["opened"])[os.path.realpath(f)] >= 3


# -- the op paths read in the same pass as the entry --------------------------------

import re  # noqa: E402

from xlashape.hlo_module import TextBlocks  # noqa: E402
from xlashape.live_range import LocationScanner  # noqa: E402

_LINE = re.compile(r'\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*metadata=\{([^{}]*)\}')
_STR = r'"((?:[^"\\]|\\.)*)"'


def _reference_locations(text):
    """Op path and file:line per instruction, read the plain way: every line,
    the metadata's fields by their own patterns, the tables by line."""
    files, locs, frames, out = {}, {}, {}, {}
    table = None
    for line in text.splitlines():
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            table = s
            continue
        if table and not s:
            table = None
            continue
        if table:
            key, _, rest = s.partition(" ")
            if table == "FileNames":
                files[int(key)] = _c_unescape(rest.strip('"'))
            elif table == "FileLocations":
                f = re.search(r"file_name_id=(\d+)", rest)
                ln = re.search(r"\bline=(\d+)", rest)
                locs[int(key)] = (int(f.group(1)) if f else 0, int(ln.group(1)) if ln else 0)
            elif table == "StackFrames":
                f = re.search(r"file_location_id=(\d+)", rest)
                frames[int(key)] = int(f.group(1)) if f else 0
            continue
        m = _LINE.match(line)
        if not m:
            continue
        meta = m.group(2)

        def field(key, pattern):
            got = re.search(r"(?:^|\s)" + key + "=" + pattern, meta)
            if got is None:
                return None
            return _c_unescape(got.group(1))

        op = field("op_name", _STR)
        src = field("source_file", _STR)
        line_no = field("source_line", r"(\d+)")
        frame = field("stack_frame_id", r"(\d+)")
        if src is not None:
            out[m.group(1)] = (op, src + (f":{line_no}" if line_no else ""))
        elif frame is not None:
            out[m.group(1)] = (op, ("frame", int(frame)))
        elif op is not None:
            out[m.group(1)] = (op, None)
    for name, (op, src) in out.items():
        if isinstance(src, tuple):
            loc = locs.get(frames.get(src[1], -1))
            out[name] = (op, f"{files[loc[0]]}:{loc[1]}" if loc and loc[0] in files else None)
    return out


def _c_unescape(text):
    """A quoted value of XLA's text (absl::CEscape: \\' \\" \\\\ and octal
    escapes of bytes) as Python's own escape decoder reads it."""
    import codecs
    return codecs.escape_decode(text.encode("utf-8"))[0].decode("utf-8", "backslashreplace")


@pytest.mark.parametrize("prog", [p for p in corpora.programs() if p.module_hlo.exists()],
                         ids=corpora.program_id)
def test_locations_read_in_blocks_equal_a_plain_reading(prog):
    import io
    text = prog.module_hlo.read_text()
    expected = _reference_locations(text)
    for block_size in (64, 4096, 1 << 20):     # blocks that cut tables and lines anywhere
        scanner = LocationScanner()
        for block in TextBlocks(io.StringIO(text), block=block_size).blocks():
            scanner.feed_block(block)
        got = {k: (v.op_name, v.source) for k, v in scanner.result().items()}
        assert got == expected


def test_a_scanner_that_keeps_the_last_instructions_keeps_those_read_last():
    # keep=N: the locations of the last N instructions read (the entry's, which
    # XLA prints last), the oldest leaving first, one read again moving last
    def line(k, name=None):
        return (f'  %{name or f"i{k}"} = f32[] add(a, b), metadata={{op_name="op{k}" '
                f'source_file="m.py" source_line={k}}}')

    scanner = LocationScanner(keep=3)
    scanner.feed_block("\n".join(line(k) for k in range(10)))
    scanner.feed_line(line(42, "i7"))
    got = scanner.result()
    assert list(got) == ["i8", "i9", "i7"]
    assert (got["i7"].op_name, got["i7"].source) == ("op42", "m.py:42")
