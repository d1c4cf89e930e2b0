"""Copy the parts of a real XLA:GPU corpus that the tests need into ``tests/data/gpu_corpus``.

The source corpus (made on an NVIDIA H200 with jax/jaxlib 0.11.2 by compiling
each program with ``XLA_FLAGS="--xla_dump_to=... --xla_dump_hlo_as_text
--xla_dump_hlo_as_proto"``) has this layout::

    index.json                 programs (description, memory_analysis, formats), device, versions
    modules/NAME.hlo           compiled.as_text()
    dumps/NAME/...             every dump file XLA wrote for the program
    oom/NAME.txt, NAME.log.txt two programs that do not fit: exception text and XLA's log

This script writes, per program, ``<out>/<program>/`` with ``module.hlo``,
``memory_analysis.json`` (the program's entry of ``index.json`` plus the
device, the versions and the platform, in the layout of the CPU and TPU
corpora) and ``dump/`` holding only the final module's files
(``*after_optimizations.txt``, ``*-buffer-assignment.txt``,
``*-buffer-assignment-values.txt``, ``*-live-range.txt``,
``*-memory-usage-report.txt`` / ``.pb``, ``*after_optimizations.hlo.pb``);
``<out>/oom/`` (verbatim) and ``<out>/index.json`` (memory_analysis,
description and formats per program, the device with its ``bytes_limit``, the
versions, the OOM descriptions). A file over ``MAX_FILE`` bytes is not copied
and is listed as ``dump_dropped``. Nothing is edited; the copy stops if a file
holds an absolute path of a machine (the source's paths were already replaced
by same-length placeholders).

Usage::

    python tests/oracle/copy_gpu_corpus.py SOURCE_DIR [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "data", "gpu_corpus")
MAX_FILE = 900 * 1024
DUMP_SUFFIXES = (".txt", "-buffer-assignment.txt", "-buffer-assignment-values.txt",
                 "-live-range.txt", "-memory-usage-report.txt", "-memory-usage-report.pb",
                 ".hlo.pb")
FORBIDDEN = re.compile(rb"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/|/proc/|/dev/shm)")


def _check(path, data):
    m = FORBIDDEN.search(data)
    if m:
        raise SystemExit(f"{path}: holds a machine path: {data[max(0, m.start() - 60):m.end() + 60]!r}")


def _copy(src, dst):
    with open(src, "rb") as f:
        data = f.read()
    _check(src, data)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as f:
        f.write(data)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--out", default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    with open(os.path.join(a.source, "index.json")) as f:
        index = json.load(f)
    if os.path.isdir(a.out):
        for name in os.listdir(a.out):
            p = os.path.join(a.out, name)
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif name != "README.md":
                os.remove(p)
    os.makedirs(a.out, exist_ok=True)
    device = index["device"]
    versions = index["versions"]
    out_index = {"device": device, "versions": versions, "platform": "gpu",
                 "oom": index.get("oom", {}), "programs": {}}
    for name, prog in sorted(index["programs"].items()):
        dest = os.path.join(a.out, name)
        src_dump = os.path.join(a.source, "dumps", name)
        kept, dropped = [], []
        for fname in sorted(os.listdir(src_dump)):
            if not any(fname.endswith("after_optimizations" + s) for s in DUMP_SUFFIXES):
                continue
            path = os.path.join(src_dump, fname)
            if os.path.getsize(path) > MAX_FILE:
                dropped.append(fname)
                continue
            _copy(path, os.path.join(dest, "dump", fname))
            kept.append(fname)
        modules = {f.split(".")[0] for f in kept}
        if not kept or len(modules) != 1:
            raise SystemExit(f"{name}: expected the files of one module, got {kept}")
        _copy(os.path.join(a.source, "modules", name + ".hlo"), os.path.join(dest, "module.hlo"))
        module = kept[0].split(".")[1]
        info = {
            "program": name,
            "module": module,
            "platform": "gpu",
            "device_kind": device.get("kind"),
            "device": device,
            "description": prog["description"],
            "memory_analysis": prog["memory_analysis"],
            "input_formats": prog.get("input_formats"),
            "output_formats": prog.get("output_formats"),
            "compile_s": prog.get("compile_s"),
            "versions": versions,
            "dump_files": kept,
            "dump_dropped": dropped,
            "buffer_assignment_proto": None,
        }
        data = (json.dumps(info, indent=1, sort_keys=True) + "\n").encode()
        _check(name + "/memory_analysis.json", data)
        with open(os.path.join(dest, "memory_analysis.json"), "wb") as f:
            f.write(data)
        out_index["programs"][name] = {k: info[k] for k in (
            "description", "memory_analysis", "input_formats", "output_formats", "dump_files",
            "dump_dropped")}
        print(f"{name}: {len(kept)} dump files, dropped {dropped}")
    for fname in sorted(os.listdir(os.path.join(a.source, "oom"))):
        _copy(os.path.join(a.source, "oom", fname), os.path.join(a.out, "oom", fname))
    data = (json.dumps(out_index, indent=1, sort_keys=True) + "\n").encode()
    _check("index.json", data)
    with open(os.path.join(a.out, "index.json"), "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
