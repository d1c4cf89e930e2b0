"""The child process that runs fuzz cases (started by ``run.py``).

Reads one JSON case a line on stdin, runs it, writes one JSON result a line
on the original stdout. Anything the case prints (to fd 1 or 2) goes to
stderr, which ``run.py`` keeps in a log so a crash's last words (a
segfault's traceback, an AddressSanitizer report) are saved with it.

A case is Python text: ``setup`` (numpy data, shared by both sides),
``la_pre`` (making the LayoutArray / input; an xlashape error there means the
random layout is not a valid one: the case is skipped), ``la`` (the
operation on xlashape) and, for a differential case, ``np`` (the same
operation on numpy). Each side leaves its result in ``out`` (default: ``A``).
"""

from __future__ import annotations

import io
import json
import os
import resource
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oracle  # noqa: E402

_MISSING = object()


def _limit_memory():
    mb = int(os.environ.get("XLASHAPE_FUZZ_MEMORY_MB", "3072"))
    if mb <= 0 or "asan" in os.environ.get("LD_PRELOAD", ""):
        return  # AddressSanitizer reserves terabytes of address space
    try:
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    except (ValueError, OSError):
        pass


def _run(code_parts, ns):
    for part in code_parts:
        if part:
            exec(compile(part, "<case>", "exec"), ns)


def _side(setup, pre, code):
    """(outcome, value): outcome 'ok' | 'pre' (an error making the input) | 'exc'."""
    ns = {"__name__": "__case__"}
    try:
        _run([oracle.PRELUDE, setup], ns)
    except BaseException as e:  # noqa: BLE001
        return "setup", e
    try:
        _run([pre], ns)
    except BaseException as e:  # noqa: BLE001
        return "pre", e
    try:
        _run([code], ns)
    except BaseException as e:  # noqa: BLE001
        return "exc", e
    out = ns.get("out", _MISSING)
    if out is _MISSING:
        out = ns.get("A")
    return "ok", out


_PKG = None


def _from_xlashape(e):
    """Whether a frame of the exception's traceback is xlashape's (its Python
    modules, or its Cython sources, which Cython names relative to the build)."""
    global _PKG
    if _PKG is None:
        import xlashape
        _PKG = os.path.dirname(os.path.abspath(xlashape.__file__)) + os.sep
    tb = e.__traceback__
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if f.startswith(_PKG) or (not os.path.isabs(f) and f.replace("\\", "/").startswith("xlashape/")):
            return True
        tb = tb.tb_next
    return False


def _exc_name(e):
    return type(e).__name__


def _short(e):
    s = f"{_exc_name(e)}: {e}"
    return s if len(s) < 400 else s[:400] + "..."


def run_case(case):
    kind = case.get("kind", "diff")
    setup = case.get("setup", "")
    st, got = _side(setup, case.get("la_pre", ""), case.get("la", ""))
    if st == "setup":
        return {"status": "skip", "detail": "setup:" + _short(got)}
    if st == "pre":
        if oracle.is_oracle_failure(got):
            return {"status": "fail", "kind": "oracle", "detail": str(got).split()[0], "message": _short(got)}
        if oracle.is_family(got):
            return {"status": "skip", "detail": "invalid input: " + _short(got)}
        if isinstance(got, MemoryError):
            return {"status": "fail", "kind": "blowup", "detail": "MemoryError", "message": _short(got)}
        return {"status": "fail", "kind": "builtin", "detail": _exc_name(got) + "@pre",
                "message": _short(got), "traceback": _tb(got)}
    if st == "exc" and not oracle.is_family(got) and not oracle.is_oracle_failure(got) \
            and not _from_xlashape(got):
        # raised by numpy or Python on objects that are not xlashape's (e.g. on
        # the ndarray np.array(A) returned): not xlashape's to wrap
        st = "external"
    if st == "exc":
        if oracle.is_oracle_failure(got):
            return {"status": "fail", "kind": "oracle", "detail": str(got).split()[0], "message": _short(got)}
        if not oracle.is_family(got):
            if isinstance(got, MemoryError):
                return {"status": "fail", "kind": "blowup", "detail": "MemoryError", "message": _short(got)}
            if _exc_name(got) in case.get("allow", ()):
                return {"status": "ok"}
            return {"status": "fail", "kind": "builtin", "detail": _exc_name(got),
                    "message": _short(got), "traceback": _tb(got)}
    if kind != "diff":
        if st == "external":
            return {"status": "external", "detail": _exc_name(got)}
        if st == "exc":
            return {"status": "refused", "detail": _exc_name(got)}
        return {"status": "ok"}
    nst, want = _side(setup, "", case["np"])
    if nst == "setup":
        return {"status": "skip", "detail": "numpy setup: " + _short(want)}
    if nst != "ok":
        if st == "ok":
            if case.get("np_raise_ok"):
                return {"status": "ok"}
            return {"status": "fail", "kind": "missing-error", "detail": _exc_name(want),
                    "message": "numpy raises " + _short(want) + "; xlashape returned"}
        return {"status": "ok"}          # both raise (xlashape's is in the family)
    if st == "exc" and _exc_name(got) not in case.get("may_refuse", ()):
        # numpy has a result, xlashape an error (of its family): a refusal
        # numpy does not make, unless the operation may refuse (a tiled
        # layout has no strided view, ...)
        return {"status": "fail", "kind": "refused", "detail": _exc_name(got),
                "message": "numpy returns, xlashape raises " + _short(got)}
    if st in ("exc", "external"):
        return {"status": "refused" if st == "exc" else "external", "detail": _exc_name(got),
                "message": _short(got)}
    try:
        diff = oracle.compare(got, want)
    except BaseException as e:  # noqa: BLE001
        return {"status": "fail", "kind": "builtin", "detail": _exc_name(e) + "@compare",
                "message": _short(e), "traceback": _tb(e)}
    if diff:
        return {"status": "fail", "kind": "mismatch", "detail": diff,
                "message": f"xlashape: {_clip(got)}\nnumpy:    {_clip(want)}"}
    return {"status": "ok"}


def _clip(v):
    try:
        from xlashape._core import LayoutArray
        if isinstance(v, LayoutArray):
            v = v.to_numpy()
        if isinstance(v, (np_mod().ndarray, np_mod().generic)):
            s = f"{v!r} dtype={getattr(v, 'dtype', None)}"
        else:
            s = f"{v!r} ({type(v).__name__})"
    except Exception as e:  # noqa: BLE001
        s = f"<unprintable {type(v).__name__}: {e}>"
    return s if len(s) < 600 else s[:600] + "..."


def np_mod():
    import numpy
    return numpy


def _tb(e):
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])[-3000:]


def main():
    _limit_memory()
    import warnings
    warnings.simplefilter("ignore")  # numpy's overflow/invalid warnings, on both sides
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                   # prints from cases (and C code) go to the log
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    import numpy as np  # noqa: F401  (warm the imports outside the timed cases)
    import ml_dtypes  # noqa: F401
    import xlashape  # noqa: F401
    proto.write("ready\n")          # run.py waits for this before the first case
    for line in sys.stdin:
        case = json.loads(line)
        plant = case.get("plant")
        if plant:                   # the smoke test's planted bug
            exec(plant, {"__name__": "__plant__", "case": case})
        print(f"--- case {case.get('id')}", file=sys.stderr, flush=True)
        try:
            res = run_case(case)
        except BaseException as e:  # noqa: BLE001
            res = {"status": "fail", "kind": "harness", "detail": _exc_name(e), "message": _short(e),
                   "traceback": _tb(e)}
        proto.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
