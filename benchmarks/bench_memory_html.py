"""The memory viewer page (``xlashape memory --html``) of a large module:
100,000 allocations, 100,000 buffers live at the peak, a schedule of 200,000
positions (a synthetic model: the page is a reporter over it, so the time is
the page's own). Median of 3 wall-clock runs of ``reporters.html.render_html``.

    python benchmarks/bench_memory_html.py
"""

import statistics
import time
from array import array

from xlashape.memory import Allocation, ModuleMemory
from xlashape.memory import PeakAnalysis, PeakBuffer
from xlashape.reporters.html import render_html


def module(n_alloc=100_000, n_pos=200_000):
    m = ModuleMemory("jit_big", "hlo")
    sizes = [(i * 7919) % (64 << 10) + 1 for i in range(n_alloc)]
    m._allocations = [Allocation("temp", s, s - s // 8, 0, "f32[8]{0}", [f"v.{i}"])
                      for i, s in enumerate(sizes)]
    m.allocation_count = n_alloc
    pa = PeakAnalysis("gpu")
    pa.heap = {0: {"padded": array("q", ((i * 31) % 1000 for i in range(n_pos))),
                   "unpadded": array("q", ((i * 29) % 900 for i in range(n_pos)))}}
    pa.schedule = [f"fusion.{i}" for i in range(n_pos)]
    pa.peak_time, pa.peak_memory_space, pa.peak_instruction = 5, 0, "fusion.5"
    pa.live_at_peak = [PeakBuffer(f"v.{i}", f"v.{i}", i, 0, s, s, 0, 1, 9, "temporary",
                                  "f32[8]{0}", "jit(f)/x", None) for i, s in enumerate(sizes)]
    m.peak = pa
    return m


def main():
    m = module()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        text = render_html([m])
        times.append(time.perf_counter() - t)
    print(f"render_html: 100,000 allocations, 100,000 live at the peak, 200,000 positions: "
          f"median {statistics.median(times):.2f} s (target < 5 s), page {len(text) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
