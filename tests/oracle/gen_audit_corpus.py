"""Generate ``tests/data/audit_corpus``: programs whose donations, layout
copies and moves between memory spaces are known by construction, compiled
by the real XLA (issue 27: what XLA did with your buffers).

Each program below comes with its truth, written from the program itself
(``expect``, in ``truth.json``): which donated buffers XLA sees (jax drops a
donation it cannot pair with an output of as many elements, with a Python
warning, before XLA sees it), which of them an output reuses and why not
(``why``: ``size`` -- no output of that byte size; ``taken`` -- every output
of that size reused by another parameter; ``layout`` -- an output of another
layout, so of another padded size; ``padding`` -- an output of the same
elements and data bytes, padded differently), the copies a requested layout
makes (bytes computed from the shapes by hand, in the comments), the moves
to host memory and back, and the controls, which must show none of these.

The generator checks what jax and XLA say about it, independently of
xlashape: the donation warning jax prints, ``memory_analysis()``'s
``alias_size_in_bytes`` against the bytes of the donations the truth says
are reused, the input and output formats against the requested layouts.
It also records every ``copy-start`` of the compiled module's text with the
memory spaces of its destination and source (``text_moves``, read with a
regular expression of its own).

Variants (``--platform``): ``cpu`` with the installed jax (``cpu_jax010`` for
jax 0.10.x, ``cpu_jax012`` for 0.12.x) and ``tpu`` (XLA:TPU v5e in
compile-only mode: jax 0.12 with libtpu, see ``gen_tpu_corpus.py``)::

    python tests/oracle/gen_audit_corpus.py --platform cpu [--only NAME,...] [--out DIR]
    env PYTHONPATH=$LIBTPU JAX_PLATFORMS=cpu TPU_LIBRARY_PATH=$LIBTPU/libtpu/libtpu.so \\
        python tests/oracle/gen_audit_corpus.py --platform tpu

Each compile runs in its own child process, with
``compiler_options={"xla_dump_to": DIR, "xla_dump_hlo_as_proto": True,
"xla_dump_hlo_as_text": True}``. Per program, ``<out>/<variant>/<program>/``
holds ``truth.json`` (the truth, the warnings, ``memory_analysis()``, the
formats, ``text_moves``, the versions), ``module.hlo`` (``as_text()``) and
``dump/``: the module before and after optimizations as text and as
``.hlo.pb``, the buffer assignment, its values, the live ranges and the
memory-usage report. Machine paths are scrubbed as the other generators do
(the script's path becomes its name; ``site-packages`` prefixes are
dropped from text and blanked, same length, in protos); the run stops if any
is left.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SCRIPT = os.path.abspath(__file__)
SCRIPT_NAME = os.path.basename(SCRIPT)
DATA = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "data", "audit_corpus")
TPU_CHIP = "v5e:2x2"

KEEP = ("after_optimizations.txt", "after_optimizations.hlo.pb", "before_optimizations.txt",
        "before_optimizations.hlo.pb", "after_optimizations-buffer-assignment.txt",
        "after_optimizations-buffer-assignment-values.txt", "after_optimizations-live-range.txt",
        "after_optimizations-memory-usage-report.txt")
MAX_FILE = 256 * 1024

FORBIDDEN = re.compile(r"(/work/|/tmp/|/root/|/home/|/usr/|/opt/|/var/|/proc/|/dev/shm)")
FORBIDDEN_B = re.compile(FORBIDDEN.pattern.encode())

PROGRAMS = {}


def program(name, platforms, description):
    """Register ``builder(platform, device) -> (fn, args, jit kwargs, expect)``."""
    def register(builder):
        PROGRAMS[name] = dict(name=name, platforms=platforms, description=description,
                              builder=builder)
        return builder
    return register


def _sds(shape, dtype, dev):
    import jax
    return jax.ShapeDtypeStruct(shape, dtype, sharding=dev)


def _fmt(dev, major_to_minor, tiling=None):
    from jax.experimental.layout import Format, Layout
    return Format(Layout(major_to_minor=major_to_minor, tiling=tiling), dev)


def _donation(p, aliased, out=(), why=None, nbytes=None, index=()):
    d = {"parameter": p, "shape_index": list(index), "aliased": aliased}
    if aliased:
        d["output_index"] = list(out)
    else:
        d["why"] = why
    d["bytes"] = nbytes
    return d


# -- donations ------------------------------------------------------------------------------


@program("donate_aliased", ("cpu", "tpu"),
         "x * 2 with x donated: jax pairs x with the output of its type (input_output_alias)")
def _donate_aliased(platform, dev):
    import jax.numpy as jnp

    def donate_aliased(x):
        return x * 2

    # f32[64,128]: 64*128*4 = 32768 bytes, no padding in {1,0:T(8,128)} either
    return donate_aliased, (_sds((64, 128), jnp.float32, dev),), {"donate_argnums": 0}, {
        "donations": [_donation(0, True, (), nbytes=32768)],
        "layout_copies": [], "host_moves": []}


@program("donate_other_type", ("cpu", "tpu"),
         "f32 -> s32 with the f32 donated: jax leaves it to XLA (buffer_donor), which reuses "
         "it for the s32 output of the same byte size; the copy XLA adds keeps the layout")
def _donate_other_type(platform, dev):
    import jax.numpy as jnp

    def donate_other_type(x):
        return x.astype(jnp.int32)

    return donate_other_type, (_sds((64, 128), jnp.float32, dev),), {"donate_argnums": 0}, {
        "donations": [_donation(0, True, (), nbytes=32768)],
        "layout_copies": [], "host_moves": []}


@program("donate_no_output_of_that_size", ("cpu", "tpu"),
         "f32 -> bf16 with the f32 donated: as many elements (jax hands it to XLA), half the "
         "bytes: no output of 32768 bytes, the donation is not used")
def _donate_size(platform, dev):
    import jax.numpy as jnp

    def donate_no_output_of_that_size(x):
        return x.astype(jnp.bfloat16)

    return donate_no_output_of_that_size, (_sds((64, 128), jnp.float32, dev),), \
        {"donate_argnums": 0}, {
            "donations": [_donation(0, False, why="size", nbytes=32768)],
            "layout_copies": [], "host_moves": []}


@program("two_donors_one_output", ("cpu", "tpu"),
         "two donated buffers of 4096 bytes (f32[1024], bf16[2048]) and one output of 4096 "
         "bytes (s32[1024]; the other output, f32[2048], takes 8192): XLA gives the output to "
         "parameter 0, parameter 1's donation finds every output of its size taken")
def _two_donors(platform, dev):
    import jax.numpy as jnp

    def two_donors_one_output(a, b):
        return a.astype(jnp.int32), b.astype(jnp.float32)

    # jax pairs by element count: a (1024) with s32[1024], b (2048) with
    # f32[2048]: both buffer_donor. XLA pairs by bytes: a and b take 4096,
    # the outputs 4096 and 8192 (TPU: f32[1024]{0:T(1024)}, bf16[2048] and
    # s32[1024] are 4096 too, f32[2048] 8192): a gets output {0}, b nothing.
    args = (_sds((1024,), jnp.float32, dev), _sds((2048,), jnp.bfloat16, dev))
    return two_donors_one_output, args, {"donate_argnums": (0, 1)}, {
        "donations": [_donation(0, True, (0,), nbytes=4096),
                      _donation(1, False, why="taken", nbytes=4096)],
        "layout_copies": [], "host_moves": []}


@program("donate_padded_tpu", ("tpu",),
         "f32[1000,3] donated, f32[3000] returned: the same 12000 bytes of data, but XLA:TPU "
         "pads the parameter to 16384 bytes ({0,1:T(4,128)}) and the output to 12288 "
         "({0:T(1024)}): the donation is not used")
def _donate_padded(platform, dev):
    import jax.numpy as jnp

    def donate_padded_tpu(x):
        return (x * 2).reshape(3000)

    # f32[1000,3]{0,1:T(4,128)}: 3 rows -> 4, 1000 columns -> 1024: 4*1024*4 = 16384
    # f32[3000]{0:T(1024)}: 3000 -> 3072 elements: 12288
    return donate_padded_tpu, (_sds((1000, 3), jnp.float32, dev),), {"donate_argnums": 0}, {
        "donations": [_donation(0, False, why="padding", nbytes=16384)], "host_moves": []}


@program("donate_other_layout", ("cpu", "tpu"),
         "x donated, x @ w returned in a requested column-major layout: on CPU the same bytes "
         "(XLA reuses x, then copies the product into the output's layout); on TPU "
         "{0,1:T(8,128)} pads the output to 65536 bytes against x's 32768: not used")
def _donate_layout(platform, dev):
    import jax.numpy as jnp

    def donate_other_layout(x, w):
        return x @ w

    args = (_sds((64, 128), jnp.float32, dev), _sds((128, 128), jnp.float32, dev))
    if platform == "cpu":
        out = _fmt(dev, (1, 0))
        # the dot computes f32[64,128]{1,0}; the output is {0,1}: a copy of
        # 64*128*4 = 32768 bytes
        expect = {"donations": [_donation(0, True, (), nbytes=32768)],
                  "layout_copies": [{"made_by": "output {}", "bytes": 32768,
                                     "from_layout": "{1,0}", "to_layout": "{0,1}"}],
                  "host_moves": []}
    else:
        out = _fmt(dev, (1, 0), ((8, 128),))
        # f32[64,128]{0,1:T(8,128)}: 64 columns -> 128 lanes: 128*128*4 = 65536
        expect = {"donations": [_donation(0, False, why="layout", nbytes=32768)],
                  "host_moves": []}
    return donate_other_layout, args, {"donate_argnums": 0, "out_shardings": out}, expect


@program("donation_dropped_by_jax", ("cpu", "tpu"),
         "a + b with both donated: jax pairs a with the one output and drops b's donation "
         "with a warning, before XLA sees it: b is in no dump")
def _dropped(platform, dev):
    import jax.numpy as jnp

    def donation_dropped_by_jax(a, b):
        return a + b

    args = (_sds((64, 128), jnp.float32, dev), _sds((64, 128), jnp.float32, dev))
    return donation_dropped_by_jax, args, {"donate_argnums": (0, 1)}, {
        "donations": [_donation(0, True, (), nbytes=32768)], "dropped_by_jax": [1],
        "layout_copies": [], "host_moves": []}


# -- layouts ----------------------------------------------------------------------------------


@program("layout_in_2d", ("cpu", "tpu"),
         "an argument requested column-major: XLA copies it into the layout the program reads")
def _layout_in_2d(platform, dev):
    import jax.numpy as jnp

    if platform == "cpu":
        def layout_in_2d(a, w):
            return a @ w

        # f32[64,128]{0,1} -> {1,0} for the dot: 64*128*4 = 32768 bytes
        args = (_sds((64, 128), jnp.float32, dev), _sds((128, 256), jnp.float32, dev))
        return layout_in_2d, args, {"in_shardings": (_fmt(dev, (1, 0)), dev)}, {
            "layout_copies": [{"made_by": "parameter 0", "bytes": 32768, "from_layout": "{0,1}",
                               "to_layout": "{1,0}"}],
            "donations": [], "host_moves": []}

    def layout_in_2d(a):
        return a

    # f32[64,256]{0,1:T(8,128)} -> {1,0:T(8,128)}: no padding either way, 65536 bytes
    return layout_in_2d, (_sds((64, 256), jnp.float32, dev),), \
        {"in_shardings": _fmt(dev, (1, 0), ((8, 128),))}, {
            "layout_copies": [{"made_by": "parameter 0", "bytes": 65536,
                               "from_layout": "{0,1:T(8,128)}", "to_layout": "{1,0:T(8,128)}"}],
            "donations": [], "host_moves": []}


@program("layout_in_3d", ("cpu", "tpu"),
         "a 3-D argument requested with its first two dimensions swapped: XLA copies it")
def _layout_in_3d(platform, dev):
    import jax.numpy as jnp

    if platform == "cpu":
        def layout_in_3d(a, w):
            return jnp.einsum("bij,jk->bik", a, w)

        # major_to_minor (1,0,2) is minor_to_major {2,0,1}; f32[8,64,128]: 262144 bytes
        args = (_sds((8, 64, 128), jnp.float32, dev), _sds((128, 256), jnp.float32, dev))
        return layout_in_3d, args, {"in_shardings": (_fmt(dev, (1, 0, 2)), dev)}, {
            "layout_copies": [{"made_by": "parameter 0", "bytes": 262144,
                               "from_layout": "{2,0,1}", "to_layout": "{2,1,0}"}],
            "donations": [], "host_moves": []}

    def layout_in_3d(a):
        return a

    # f32[8,64,128]{2,0,1:T(8,128)} -> {2,1,0:T(8,128)}: 64 and 8 rows are whole
    # tiles, 128 lanes: 262144 bytes either way
    return layout_in_3d, (_sds((8, 64, 128), jnp.float32, dev),), \
        {"in_shardings": _fmt(dev, (1, 0, 2), ((8, 128),))}, {
            "layout_copies": [{"made_by": "parameter 0", "bytes": 262144,
                               "from_layout": "{2,0,1:T(8,128)}",
                               "to_layout": "{2,1,0:T(8,128)}"}],
            "donations": [], "host_moves": []}


@program("layout_out_2d", ("cpu", "tpu"),
         "the output requested column-major: XLA copies the result into it")
def _layout_out_2d(platform, dev):
    import jax.numpy as jnp

    if platform == "cpu":
        def layout_out_2d(a, w):
            return a @ w

        # f32[64,256]{1,0} -> {0,1}: 65536 bytes
        args = (_sds((64, 128), jnp.float32, dev), _sds((128, 256), jnp.float32, dev))
        return layout_out_2d, args, {"out_shardings": _fmt(dev, (1, 0))}, {
            "layout_copies": [{"made_by": "output {}", "bytes": 65536, "from_layout": "{1,0}",
                               "to_layout": "{0,1}"}],
            "donations": [], "host_moves": []}

    def layout_out_2d(a):
        return a

    # the copy's result, f32[64,256]{0,1:T(8,128)}: dimension 0 (64) is the
    # lanes, padded to 128: 256*128*4 = 131072 bytes
    return layout_out_2d, (_sds((64, 256), jnp.float32, dev),), \
        {"out_shardings": _fmt(dev, (1, 0), ((8, 128),))}, {
            "layout_copies": [{"made_by": "output {}", "bytes": 131072,
                               "from_layout": "{1,0:T(8,128)}", "to_layout": "{0,1:T(8,128)}"}],
            "donations": [], "host_moves": []}


@program("layout_out_3d", ("cpu", "tpu"),
         "a 3-D output requested with its first two dimensions swapped: XLA copies into it")
def _layout_out_3d(platform, dev):
    import jax.numpy as jnp

    if platform == "cpu":
        def layout_out_3d(a, w):
            return jnp.einsum("bij,jk->bik", a, w)

        # f32[8,64,256]{2,1,0} -> {2,0,1}: 8*64*256*4 = 524288 bytes
        args = (_sds((8, 64, 128), jnp.float32, dev), _sds((128, 256), jnp.float32, dev))
        return layout_out_3d, args, {"out_shardings": _fmt(dev, (1, 0, 2))}, {
            "layout_copies": [{"made_by": "output {}", "bytes": 524288,
                               "from_layout": "{2,1,0}", "to_layout": "{2,0,1}"}],
            "donations": [], "host_moves": []}

    def layout_out_3d(a):
        return a

    return layout_out_3d, (_sds((8, 64, 128), jnp.float32, dev),), \
        {"out_shardings": _fmt(dev, (1, 0, 2), ((8, 128),))}, {
            "layout_copies": [{"made_by": "output {}", "bytes": 262144,
                               "from_layout": "{2,1,0:T(8,128)}",
                               "to_layout": "{2,0,1:T(8,128)}"}],
            "donations": [], "host_moves": []}


@program("padded_param_relaid_tpu", ("tpu",),
         "s32[4096,1] requested row-major with (8,128) tiles (the size-1 dimension padded to "
         "128 lanes: 2 MiB for 16 KiB of data): XLA copies it into its default "
         "{0,1:T(1,128)} to compute, 16384 bytes")
def _padded_relaid(platform, dev):
    import jax.numpy as jnp

    def padded_param_relaid_tpu(ids):
        return ids + 1

    # {1,0:T(8,128)}: 4096 rows (512 tiles of 8) x 1 column -> 128 lanes: 2097152 bytes;
    # {0,1:T(1,128)}: 4096 -> 32 tiles of 128 lanes, 1 row: 16384 bytes
    return padded_param_relaid_tpu, (_sds((4096, 1), jnp.int32, dev),), \
        {"in_shardings": _fmt(dev, (0, 1), ((8, 128),))}, {
            "layout_copies": [{"made_by": "parameter 0", "bytes": 16384,
                               "from_layout": "{1,0:T(8,128)}",
                               "to_layout": "{0,1:T(1,128)}"}],
            "donations": [], "host_moves": []}


@program("host_offload_roundtrip_tpu", ("tpu",),
         "sin(x) moved to host memory (jax.device_put to jax.memory.Space.Host) and back: one "
         "copy-start/copy-done to S(5) and one back, 262144 bytes each")
def _offload(platform, dev):
    import jax
    import jax.numpy as jnp

    def host_offload_roundtrip_tpu(x):
        h = jax.device_put(jnp.sin(x), jax.memory.Space.Host)
        z = jnp.cos(x) * 3
        return z + jax.device_put(h, jax.memory.Space.Device)

    # f32[256,256]{1,0:T(8,128)}: 262144 bytes
    return host_offload_roundtrip_tpu, (_sds((256, 256), jnp.float32, dev),), {}, {
        "host_moves": [{"kind": "to-host", "bytes": 262144},
                       {"kind": "from-host", "bytes": 262144}],
        "donations": [], "layout_copies": []}


# -- controls: nothing to report --------------------------------------------------------------


@program("control_elementwise", ("cpu", "tpu"),
         "a * 2 + b, nothing donated, default layouts: nothing to report")
def _control_elementwise(platform, dev):
    import jax.numpy as jnp

    def control_elementwise(a, b):
        return a * 2 + b

    args = (_sds((64, 128), jnp.float32, dev), _sds((64, 128), jnp.float32, dev))
    return control_elementwise, args, {}, {"control": True}


@program("control_default_layout_requested", ("cpu", "tpu"),
         "an argument and the output requested in the default layout itself: no copy")
def _control_default(platform, dev):
    import jax.numpy as jnp

    def control_default_layout_requested(a):
        return a * 2

    fmt = _fmt(dev, (0, 1)) if platform == "cpu" else _fmt(dev, (0, 1), ((8, 128),))
    return control_default_layout_requested, (_sds((64, 128), jnp.float32, dev),), \
        {"in_shardings": fmt, "out_shardings": fmt}, {"control": True}


@program("control_returned_param", ("cpu",),
         "an argument returned as it is: XLA copies it into an output buffer of the same "
         "layout, which is no layout copy (on TPU the copy goes through VMEM: moves between "
         "memory spaces, so no control there)")
def _control_returned(platform, dev):
    import jax.numpy as jnp

    def control_returned_param(a, b):
        return a, b * 2

    args = (_sds((64, 128), jnp.float32, dev), _sds((64, 128), jnp.float32, dev))
    return control_returned_param, args, {}, {"control": True}


# -- child -------------------------------------------------------------------------------------

_COPY_START = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = \((.*)\) copy-start\(", re.M)


def _space(shape_text):
    m = re.search(r"S\((\d+)\)\}$", shape_text.strip())
    return int(m.group(1)) if m else 0


def text_moves(text):
    """Every copy-start of a module's text: its name and the memory spaces
    of its destination (the result tuple's first element) and source (the
    second), read with a regular expression (not xlashape's reader)."""
    out = []
    for m in _COPY_START.finditer(text):
        parts, depth, cur = [], 0, ""
        for ch in m.group(2):
            if ch in "{[(":
                depth += 1
            elif ch in "}])":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        if len(parts) >= 2:
            out.append({"instruction": m.group(1), "to_space": _space(parts[0]),
                        "from_space": _space(parts[1])})
    return out


def _versions():
    import importlib.metadata as md
    import jax
    import jaxlib
    v = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
         "python": ".".join(map(str, sys.version_info[:3]))}
    try:
        v["libtpu"] = md.version("libtpu")
    except md.PackageNotFoundError:
        pass
    return v


def child(name, platform, outdir):
    import warnings

    import jax

    prog = PROGRAMS[name]
    if platform == "tpu":
        from jax.experimental import topologies
        topo = topologies.get_topology_desc(topology_name=TPU_CHIP, platform="tpu")
        dev = jax.sharding.SingleDeviceSharding(topo.devices[0])
    else:
        dev = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    fn, args, kwargs, expect = prog["builder"](platform, dev)
    dump = os.path.join(outdir, "dump")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = jax.jit(fn, **kwargs).lower(*args).compile(compiler_options={
            "xla_dump_to": dump, "xla_dump_hlo_as_proto": True, "xla_dump_hlo_as_text": True})
    stats = compiled.memory_analysis()
    ma = {k: getattr(stats, k) for k in dir(stats)
          if not k.startswith("_") and isinstance(getattr(stats, k), int)
          and not isinstance(getattr(stats, k), bool)}
    text = compiled.as_text()
    info = {"program": name, "platform": platform, "description": prog["description"],
            "chip": TPU_CHIP if platform == "tpu" else None,
            "jit_kwargs": sorted(kwargs), "expect": expect,
            "jax_warnings": [str(w.message) for w in caught],
            "memory_analysis": ma,
            "input_formats": [str(f) for f in jax.tree.leaves(compiled.input_formats)],
            "output_formats": [str(f) for f in jax.tree.leaves(compiled.output_formats)],
            "text_moves": text_moves(text), "versions": _versions()}
    with open(os.path.join(outdir, "child_result.json"), "w") as f:
        json.dump(info, f, indent=1)
    with open(os.path.join(outdir, "module.hlo"), "w") as f:
        f.write(text)
    return 0


# -- parent ------------------------------------------------------------------------------------


def _site_prefixes():
    import sysconfig
    out = {os.path.dirname(SCRIPT) + "/"}
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            out.update({p + "/", os.path.realpath(p) + "/"})
    return sorted(out, key=len, reverse=True)


def scrub_text(text, where):
    text = text.replace(SCRIPT, SCRIPT_NAME)
    text = re.sub(r"/[^\s\"'<>]*?/site-packages/", "", text)
    m = FORBIDDEN.search(text)
    if m:
        raise SystemExit(f"{where}: a machine path is left: {text[max(0, m.start() - 60):m.end() + 60]!r}")
    return text


def scrub_bytes(data, where):
    for prefix in _site_prefixes():
        b = prefix.encode()
        data = data.replace(b, b"_" * len(b))
    m = FORBIDDEN_B.search(data)
    if m:
        raise SystemExit(f"{where}: a machine path is left: {data[max(0, m.start() - 60):m.end() + 60]!r}")
    return data


def _check(info):
    """What jax and XLA say, against the truth (independently of xlashape)."""
    name, expect, ma = info["program"], info["expect"], info["memory_analysis"]
    problems = []
    dropped = expect.get("dropped_by_jax", [])
    warned = any("donated buffers were not usable" in w for w in info["jax_warnings"])
    if bool(dropped) != warned:
        problems.append(f"jax's donation warning: expected {bool(dropped)}, got "
                        f"{info['jax_warnings']}")
    donations = expect.get("donations", [])
    aliased = sum(d["bytes"] for d in donations if d["aliased"])
    if "donations" in expect and ma.get("alias_size_in_bytes") != aliased:
        problems.append(f"alias_size_in_bytes {ma.get('alias_size_in_bytes')}, the truth's "
                        f"reused donations take {aliased}")
    if expect.get("control") and info["text_moves"]:
        problems.append(f"a control moves buffers between memory spaces: {info['text_moves']}")
    host = [m for m in info["text_moves"] if 5 in (m["from_space"], m["to_space"])]
    if "host_moves" in expect and len(host) != len(expect["host_moves"]):
        problems.append(f"{len(host)} copy-starts to or from S(5) in the text, the truth has "
                        f"{len(expect['host_moves'])}")
    if problems:
        raise SystemExit(f"{name} ({info['platform']}): " + "; ".join(problems))


def generate(name, platform, out):
    dest = os.path.join(out, name)
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    if platform == "tpu":
        env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    with tempfile.TemporaryDirectory() as work:
        cmd = [sys.executable, SCRIPT, "--child", name, "--platform", platform,
               "--child-dir", work]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"{name}: child exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
        with open(os.path.join(work, "child_result.json")) as f:
            info = json.load(f)
        _check(info)
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.makedirs(os.path.join(dest, "dump"))
        kept = []
        for path in sorted(glob.glob(os.path.join(work, "dump", "*"))):
            base = os.path.basename(path)
            if not base.endswith(KEEP) or not base.startswith("module_"):
                continue
            if os.path.getsize(path) > MAX_FILE:
                raise SystemExit(f"{name}: {base} is over {MAX_FILE} bytes")
            with open(path, "rb") as f:
                data = f.read()
            if base.endswith(".pb"):
                data = scrub_bytes(data, base)
                mode = "wb"
            else:
                data = scrub_text(data.decode("utf-8"), base)
                mode = "w"
            with open(os.path.join(dest, "dump", base), mode) as f:
                f.write(data)
            kept.append(base)
        with open(os.path.join(work, "module.hlo")) as f:
            text = scrub_text(f.read(), "module.hlo")
        with open(os.path.join(dest, "module.hlo"), "w") as f:
            f.write(text)
        info["dump_files"] = kept
        with open(os.path.join(dest, "truth.json"), "w") as f:
            f.write(scrub_text(json.dumps(info, indent=1, sort_keys=True), "truth.json") + "\n")
    return info


def _variant(platform):
    if platform == "tpu":
        return "tpu_v5e"
    import importlib.metadata as md
    major, minor = md.version("jax").split(".")[:2]
    return f"cpu_jax{int(major):01d}{int(minor):02d}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", choices=("cpu", "tpu"), required=True)
    ap.add_argument("--out", help="default: tests/data/audit_corpus/<variant>")
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child, a.platform, a.child_dir)
    names = [n for n, p in PROGRAMS.items() if a.platform in p["platforms"]]
    if a.list:
        for n in names:
            print(f"{n:34} {PROGRAMS[n]['description']}")
        return 0
    if a.only:
        unknown = [n for n in a.only.split(",") if n not in names]
        if unknown:
            ap.error(f"not a {a.platform} program: {', '.join(unknown)}")
        names = a.only.split(",")
    out = a.out or os.path.join(DATA, _variant(a.platform))
    os.makedirs(out, exist_ok=True)
    for name in names:
        info = generate(name, a.platform, out)
        print(f"{name}: ok ({len(info['dump_files'])} files, alias "
              f"{info['memory_analysis'].get('alias_size_in_bytes')}, "
              f"{len(info['text_moves'])} copy-starts)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
