"""Threads: every storage-touching LayoutArray method against release().

Worker threads run random operations on the current array while the main
thread keeps calling ``release()`` and replacing the array once it is gone.
The GIL is handed over every microsecond, so a release can land between any
two bytecodes of an operation, and while any kernel runs without the GIL.

What must hold: no crash (the run is a child process, so a crash fails the
test); an operation either completes with the right values (every array
holds ones, and every writer writes ones: a read of freed or foreign memory
would show something else) or raises ReleasedArrayError; release() either
frees or raises ShapeBufferError. Bounded: about 3 seconds per run; it
runs with the default kernel settings and again with the transposing copy
split between two threads (whose helper thread must also finish under the
caller's pin).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

STRESS = r"""
import random, sys, threading, time
import numpy as np
import xlashape as xs
from xlashape import LayoutArray

sys.setswitchinterval(1e-6)
if sys.argv[2] == "2":
    # the transposing copy splits every plane between two threads
    xs._core._kernel_settings(threads=2, thread_threshold=0)
TEXTS = ["f32[64,160]{1,0}", "f32[64,160]{0,1}", "f32[64,160]{1,0:T(8,128)}",
         "f32[64,160]{0,1:T(8,128)}", "f32[8,5,32]{2,1,0:T(2,*,8)}",
         "bf16[64,160]{1,0:T(8,128)(2,1)}", "s4[64,160]{1,0:T(8,128)E(4)}",
         "pred[64,160]{1,0:T(8,128)E(1)}", "pred[64,160]{0,1}"]
DURATION = float(sys.argv[1])

def make(text):
    la = LayoutArray(text)
    la.fill(1)
    return la

def ones(a):
    a = np.asarray(a)
    assert a.size and (a.astype(np.float32) == 1).all(), a

def set_from(dst, src):
    dst[...] = src
    return dst

def is_one(v):
    assert v == 1 and v is not None, v

class Box:
    la = None
    text = None

box = Box()

def op_list(la):
    n0 = la.shape[0]
    i = random.randrange(n0)
    idx = (i,) + (0,) * (la.ndim - 1)
    return [
        ("get scalar", lambda: is_one(la[idx])),
        ("get row", lambda: ones(la[i])),
        ("get slice", lambda: ones(la[1:7, ::3])),
        ("set scalar", lambda: la.__setitem__(idx, 1)),
        ("set scalar numpy", lambda: la.__setitem__(idx, np.float32(1))),
        ("set slice", lambda: la.__setitem__((slice(2, 9), Ellipsis), 1)),
        ("set slice array", lambda: la.__setitem__(slice(0, 3), np.ones((3,) + la.shape[1:], la.dtype))),
        ("set all", lambda: la.__setitem__(Ellipsis, np.ones(la.shape, la.dtype))),
        ("fill", lambda: la.fill(1)),
        ("to_numpy", lambda: ones(la.to_numpy())),
        ("to_numpy out", lambda: ones(la.to_numpy(out=np.empty(la.shape, la.dtype)))),
        # LayoutArray to LayoutArray (physical to physical: both pinned),
        # with this array as the destination and as the source
        ("set all from layoutarray", lambda: la.__setitem__(Ellipsis, LayoutArray.from_numpy(np.ones(la.shape, la.dtype)))),
        ("set other from this", lambda: ones(set_from(LayoutArray.from_numpy(np.zeros(la.shape, la.dtype)), la).to_numpy())),
        ("relayout", lambda: ones(la.relayout("{%s}" % ",".join(map(str, range(la.ndim)))).to_numpy())),
        ("copy", lambda: ones(la.copy().to_numpy())),
        ("iter", lambda: [ones(r) for r in la]),
        ("asarray", lambda: ones(np.asarray(la))),
        ("array copy", lambda: ones(la.__array__(copy=True))),
        ("memoryview", lambda: memoryview(la).release()),
        ("physical", lambda: bytes(la.physical)),
        ("physical_array", lambda: la.physical_array().sum()),
        ("frombuffer", lambda: ones(LayoutArray.frombuffer(la.physical, la.xla_shape).to_numpy())),
        ("reduce", lambda: la.__reduce__()),
        ("repr", lambda: repr(la)),
        ("len", lambda: len(la)),
        # numpy's protocols (ufuncs on the physical buffers, views, functions)
        ("mul", lambda: ones(np.asarray(la * np.ones((), la.dtype)))),
        ("imul", lambda: la.__imul__(np.ones((), la.dtype))),
        ("transpose view", lambda: ones(la.T.to_numpy())),
        ("sum", lambda: np.sum(la)),
        ("mask", lambda: ones(la[la > 0])),
        ("fancy", lambda: ones(la[[0, 1]])),
        ("fancy set", lambda: la.__setitem__([0, 1], 1)),
        ("astype", lambda: ones(la.astype(np.float32).to_numpy())),
        ("dlpack", lambda: ones(np.from_dlpack(la))),
    ]

counts = {"ok": 0, "released": 0, "refused": 0, "freed": 0, "expected": 0}
errors = []
stop = False

def worker(seed):
    random.seed(seed)
    while not stop:
        la = box.la
        name, op = random.choice(op_list(la))
        try:
            op()
            counts["ok"] += 1
        except xs.ReleasedArrayError:
            counts["released"] += 1
        except (xs.ShapeBufferError, xs.ShapeValueError) as e:
            # views that a layout cannot give (memoryview of a tiled or bf16
            # layout, physical_array of packed elements, copy=False)
            counts["expected"] += 1
            if not isinstance(e, (xs.ShapeBufferError,)) and "Unable to avoid copy" not in str(e):
                errors.append((name, repr(e)))
        except Exception as e:   # anything else is a bug
            errors.append((name, repr(e)))

random.seed(0)
box.text = random.choice(TEXTS)
box.la = make(box.text)
threads = [threading.Thread(target=worker, args=(s,)) for s in range(2)]
for t in threads:
    t.start()
deadline = time.monotonic() + DURATION
while time.monotonic() < deadline:
    time.sleep(random.random() * 2e-4)
    try:
        box.la.release()
        counts["freed"] += 1
        box.text = random.choice(TEXTS)
        box.la = make(box.text)
    except xs.ShapeBufferError:
        counts["refused"] += 1
stop = True
for t in threads:
    t.join()
print(counts)
print("errors", errors[:5])
assert not errors, errors
assert counts["freed"] > 10 and counts["ok"] > 100 and counts["released"] > 0, counts
print("PASS")
"""


@pytest.mark.parametrize("kernel_threads", ["1", "2"])
def test_every_method_against_release_in_threads(kernel_threads):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(STRESS), "3", kernel_threads],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode} (negative: killed by signal)\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}")
    assert proc.stdout.strip().endswith("PASS"), proc.stdout
