"""A pytest plugin (``conftest.py`` loads it): with
``XLASHAPE_REQUIRE_EXTRAS=1`` (``.ci/run`` sets it), a test or module
skipped because one of the extras CI installs is missing -- jax, jaxlib,
libtpu, the notebook's Jupyter packages, matplotlib -- fails instead, so that
a green CI cannot hide that the JAX, TPU and notebook tests never ran.
Skips for anything CI does not install (Debian's chromium, a GPU corpus...)
stay skips.
"""

import os
import re

import pytest

#: a skip's reason that blames a missing extra: it names one of them and says it is missing
_EXTRA = re.compile(r"\b(jax|jaxlib|libtpu|nbclient|nbformat|ipykernel|matplotlib)\b")
_MISSING = re.compile(r"needs|not installed|not importable|could not import|no module named",
                      re.I)


def required() -> bool:
    return os.environ.get("XLASHAPE_REQUIRE_EXTRAS", "") not in ("", "0")


def blames_an_extra(reason: str) -> bool:
    """Whether a skip's ``reason`` is a missing extra's."""
    return bool(_EXTRA.search(reason) and _MISSING.search(reason))


def _reason(report) -> str:
    lr = report.longrepr
    reason = str(lr[2]) if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def _fail_if_blamed(report) -> None:
    if not (report.skipped and required()) or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    if blames_an_extra(reason):
        report.outcome = "failed"
        report.longrepr = (f"skipped for a missing extra where XLASHAPE_REQUIRE_EXTRAS=1 says "
                           f"the extras are installed: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_blamed(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_if_blamed(outcome.get_result())
