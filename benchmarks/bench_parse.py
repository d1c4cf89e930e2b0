"""Shape-text parsing speed: shapes per second on a realistic mix of TPU-dump shapes.

Measures, each as the median of several repeats:

* ``parse_shape`` with its cache cold (every call parses) and warm (every
  call is a cache hit, the usual case when a dump repeats the same shapes);
* the same cold parse with the fast path switched off (the full lexer +
  recursive-descent parser alone, which is what every parse cost before the
  fast path existed), and the single shape of the brief,
  ``bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}``, both ways in µs;
* ``parse_shape_prefix`` on whole instruction lines, the way an HLO module
  reader pulls result shapes out (cold and warm);
* XLA's own C++ parser through jaxlib (``xla_client.hlo.Shape(text)``), when
  jaxlib is importable, as a reference point, with the ratio.

Run::

    python benchmarks/bench_parse.py            # xlashape only
    PYTHONPATH=. /work/jaxenv/bin/python benchmarks/bench_parse.py   # with the XLA column
"""

from __future__ import annotations

import argparse
import statistics
import time

from xlashape import hlo_text
from xlashape.hlo_text import parse_shape, parse_shape_prefix

# The kind of shapes a TPU HLO dump is made of: tiled bf16/f32 activations and
# weights (often in VMEM, S(1)), sub-byte weights, scalars with their own tile,
# tuples with tokens, dynamic shapes, and plain default layouts.
MIX = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}",
    "f32[1024,1024]{1,0:T(8,128)}",
    "f32[8,128]{1,0:T(8,128)}",
    "s8[128,512]{1,0:T(8,128)(4,1)}",
    "s4[256,1024]{1,0:T(8,128)(8,1)E(4)}",
    "pred[128]{0:T(1024)}",
    "s32[]{:T(128)}",
    "f32[]{:T(256)}",
    "u32[]{:T(128)S(1)}",
    "bf16[1,2048]{1,0:T(2,128)(2,1)S(5)}",
    "f32[<=4096,128]{1,0:T(8,128)}",
    "s32[?,784]{1,0}",
    "f32[16,512,128]{2,1,0}",
    "f32[2,3]",
    "(s32[]{:T(128)}, bf16[16,512]{1,0:T(8,128)(2,1)}, token[])",
    "(f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)}, u8[0]{0}, s32[4]{0:T(128)}, token[], "
    "/*index=5*/f32[<=8,128]{1,0})",
]

# The shape whose uncached parse time the parser work was measured on.
ONE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}"

LINES = [
    f"  %fusion.{i} = {shape} fusion({shape} %param.{i}), kind=kLoop, calls=%fused_computation.{i}"
    for i, shape in enumerate(MIX)
]


def _median_rate(fn, items, repeats: int, setup=None) -> float:
    rates = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        rates.append(len(items) / (time.perf_counter() - t0))
    return statistics.median(rates)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="shapes per repeat (default 2000)")
    ap.add_argument("--repeats", type=int, default=7, help="repeats; the median is shown (default 7)")
    args = ap.parse_args(argv)

    n, repeats = args.n, args.repeats
    texts = (MIX * (n // len(MIX) + 1))[:n]
    lines = (LINES * (n // len(LINES) + 1))[:n]
    starts = [line.index("=") + 2 for line in lines]
    prefix_items = list(zip(lines, starts))

    clear = hlo_text._parse_shape_cached.cache_clear
    uncached = hlo_text._parse_shape_cached.__wrapped__
    rows = []
    cold = _median_rate(uncached, texts, repeats)
    rows.append(("parse_shape, no cache (every call parses)", cold))
    hlo_text._USE_FAST_PATH = False
    try:
        full = _median_rate(uncached, texts, repeats)
        one_full = _median_rate(uncached, [ONE] * (n // 4), repeats)
    finally:
        hlo_text._USE_FAST_PATH = True
    rows.append(("parse_shape, no cache, fast path off (full parser only)", full))
    one_fast = _median_rate(uncached, [ONE] * (n // 4), repeats)
    for t in MIX:
        parse_shape(t)
    warm = _median_rate(parse_shape, texts, repeats)
    rows.append(("parse_shape, warm cache", warm))
    prefix_cold = _median_rate(lambda it: parse_shape_prefix(*it), prefix_items, repeats, setup=clear)
    rows.append((f"parse_shape_prefix on lines, cache cleared per repeat ({len(MIX)} distinct)",
                 prefix_cold))
    for it in prefix_items:
        parse_shape_prefix(*it)
    prefix_warm = _median_rate(lambda it: parse_shape_prefix(*it), prefix_items, repeats)
    rows.append(("parse_shape_prefix on instruction lines, warm cache", prefix_warm))

    xla_rate = None
    try:
        from jax._src.lib import xla_client

        xla_parse = xla_client.hlo.Shape
        xla_rate = _median_rate(xla_parse, texts, repeats)
    except Exception:  # jaxlib absent: no reference column
        pass

    print(f"shape parsing: {n} shapes per repeat from a mix of {len(MIX)} TPU-dump shapes, "
          f"median of {repeats} repeats")
    width = max(len(r[0]) for r in rows) + 2
    header = f"{'what':<{width}}{'shapes/s':>12}"
    if xla_rate:
        header += f"{'vs XLA C++':>12}"
    print(header)
    print("-" * len(header))
    for name, rate in rows:
        line = f"{name:<{width}}{rate:>12,.0f}"
        if xla_rate:
            line += f"{rate / xla_rate:>11.2f}x"
        print(line)
    if xla_rate:
        print(f"{'XLA ParseShape via jaxlib (C++, incl. Python binding)':<{width}}{xla_rate:>12,.0f}"
              f"{1.0:>11.2f}x")
    else:
        print("(jaxlib not importable: no XLA reference column)")
    print(f"uncached parse of {ONE}: {1e6 / one_fast:.1f} us "
          f"(full parser only: {1e6 / one_full:.1f} us, {one_fast / one_full:.1f}x); "
          f"whole mix: {cold / full:.1f}x")


if __name__ == "__main__":
    main()
