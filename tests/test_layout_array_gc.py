"""LayoutArray storage under the garbage collector and past interpreter exit.

Reference cycles are common in ordinary code: an exception kept in a local
(frame -> exception -> traceback -> frame), objects that point at each other,
test frameworks' bookkeeping. The collector clears the objects of a cycle in
whatever order it finds them, so everything that a buffer release or a
deallocation reads must survive being cleared first. And a DLPack consumer
may release its tensor after the interpreter has shut down.

Repros that crashed (or corrupted the interpreter's memory) run in a child
process, so a crash fails the test instead of killing the run.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xlashape as xs
from xlashape import LayoutArray


def run_child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter; fail (with its output) unless it exits 0."""
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode} (negative: killed by signal)\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


# -- the exporter behind `physical` ------------------------------------------------
# `la.physical` is a memoryview of an internal exporter object that holds the
# LayoutArray. The collector used to clear the exporter's reference (setting it
# to None) before the memoryview in the same cycle released its buffer; the
# release then decremented a counter at None's address plus an offset, inside
# CPython's own data (its table of type slots): a silently corrupted
# interpreter, which crashed later, e.g. when the next class was created.

def test_physical_memoryview_in_a_reference_cycle():
    out = run_child("""
        import gc
        from xlashape import LayoutArray

        def keep_the_error(la):
            mv = la.physical
            try:
                la.release()            # refused: mv is alive
            except BufferError as e:
                err = e                 # frame -> err -> traceback -> frame

        class Holder:
            pass

        for i in range(200):
            la = LayoutArray("f32[64]{0:T(8)}")
            keep_the_error(la)
            gc.collect()
            assert la.exports == 0, la.exports     # the export was given back
            la.release()
            # the cycle holds the only reference to the array
            la = LayoutArray("f32[64]{0}")
            h = Holder()
            h.h = h
            h.views = [la.physical, la.physical_array(), memoryview(la), la.T]
            del h, la
            gc.collect()
            # new classes read the slot table that the bug wrote into
            type("Fresh%d" % i, (Holder,), {"__len__": lambda s: 0, "__iter__": None})
        print("ok")
    """)
    assert out.stdout.split() == ["ok"] and out.stderr == ""


def test_the_exporter_type_refuses_none():
    # reachable as type(la.physical.obj); None used to be accepted and read as
    # a LayoutArray (memory beyond the None object)
    out = run_child("""
        from xlashape import LayoutArray
        exporter = type(LayoutArray("f32[2]").physical.obj)
        for bad in (None, 0, "f32[2]"):
            try:
                exporter(bad)
            except TypeError:
                print("TypeError")
    """)
    assert out.stdout.split() == ["TypeError"] * 3


# -- a LayoutArray that wraps a buffer, in a cycle -----------------------------------
# The collector's clear of a LayoutArray used to drop the wrapped buffer's object
# without releasing the buffer: the exporter kept counting an export nobody held.

def test_wrapped_buffer_released_when_a_cycle_is_collected():
    la = LayoutArray.from_numpy(np.arange(8, dtype=np.float32))
    p = la.physical
    v = LayoutArray.frombuffer(p, la.xla_shape)
    cycle = [v]
    cycle.append(cycle)
    del v, cycle
    gc.collect()
    p.release()                 # was: BufferError, memoryview has 1 exported buffer
    assert la.exports == 0
    la.release()                # was: refused forever

    b = bytearray(32)
    w = LayoutArray.frombuffer(b, "u8[32]{0}")
    cycle = [w]
    cycle.append(cycle)
    del w, cycle
    gc.collect()
    b.extend(b"x")              # was: BufferError, existing exports
    assert len(b) == 33


def test_views_in_a_cycle_with_their_base():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    la = LayoutArray.from_numpy(x, "f32[4,6]{1,0:T(2,2)}")
    t = la.T
    assert t.base is la and la.exports == 1
    r = la.reshape(2, 2, 6)
    assert r.base is la and np.array_equal(np.asarray(r), x.reshape(2, 2, 6))
    tt = t.T
    assert tt.base is t and np.array_equal(np.asarray(tt), x)
    cycle = [t, r, tt]
    cycle.append(cycle)
    del t, r, tt, cycle
    gc.collect()
    assert la.exports == 0
    la.release()


def test_unpickled_array_in_a_cycle_frees_cleanly():
    # an unpickled LayoutArray wraps a bytearray nobody else holds; clearing
    # the cycle deallocated that bytearray with its buffer still exported
    # (CPython prints "SystemError: deallocated bytearray object has exported
    # buffers")
    out = run_child("""
        import gc, pickle
        import numpy as np
        from xlashape import LayoutArray
        la = LayoutArray.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4),
                                    "f32[3,4]{0,1:T(2,2)}")
        for i in range(20):
            r = pickle.loads(pickle.dumps(la))
            cycle = [r, r.T, r.T.T, r.reshape(12)]
            cycle.append(cycle)
            del r, cycle
            gc.collect()
        print("ok")
    """)
    assert out.stdout.split() == ["ok"] and out.stderr == ""


# -- DLPack: the consumer's deleter after the interpreter is gone ----------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses glibc's __cxa_atexit")
@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_deleter_after_interpreter_exit(versioned):
    # A consumer that keeps the tensor in a C++ object destroyed at process exit
    # calls the deleter after Python has finalized. Taking the GIL then crashed
    # (SIGSEGV); the deleter now leaves the reference behind, as numpy's does.
    # Simulated by registering the deleter with the C library's exit handlers.
    out = run_child(f"""
        import ctypes
        from xlashape import LayoutArray
        versioned = {versioned}
        la = LayoutArray("f32[4]{{0}}")
        cap = la.__dlpack__(max_version=(1, 1) if versioned else None)
        api = ctypes.pythonapi
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
        name = b"dltensor_versioned" if versioned else b"dltensor"
        m = api.PyCapsule_GetPointer(cap, name)
        # dlpack.h: DLManagedTensorVersioned {{version (2 x u32), manager_ctx,
        # deleter, ...}}; DLManagedTensor {{DLTensor (48 bytes), manager_ctx, deleter}}
        deleter = ctypes.c_void_p.from_address(m + (16 if versioned else 56)).value
        api.PyCapsule_SetName(cap, b"used_" + name)      # the consumer took it
        libc = ctypes.CDLL(None)
        libc.__cxa_atexit.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        assert libc.__cxa_atexit(deleter, m, None) == 0
        print("registered", la.exports)
    """)
    assert out.stdout.split() == ["registered", "1"] and out.stderr == ""


def test_dlpack_deleter_while_running_gives_the_export_back():
    la = LayoutArray.from_numpy(np.arange(6, dtype=np.float32), "f32[6]{0}")
    a = np.from_dlpack(la)
    b = np.from_dlpack(la.T)
    assert la.exports == 2
    with pytest.raises(xs.ShapeBufferError):
        la.release()
    del a, b
    gc.collect()
    assert la.exports == 0
    la.release()
