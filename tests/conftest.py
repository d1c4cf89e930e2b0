"""Shared test configuration.

Hypothesis: no per-example deadline (the suite runs on busy CI machines and
some examples parse long strings on purpose); ``HYPOTHESIS_PROFILE=thorough``
runs more examples; under CI (``CI=true``) the examples are derandomized.
Shared strategies live in ``strategies.py``. With ``XLASHAPE_REQUIRE_EXTRAS=1``
(CI's), a test skipped for want of an extra CI installs fails
(``extras_guard.py``).
"""

import os
import warnings

# The suite runs on a host without accelerators; with libtpu installed (the
# tpu extra, for compiling for a TPU topology) jax would otherwise try to
# start a TPU runtime in every process that uses it, children included.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from hypothesis import HealthCheck, Phase, settings

# XLASHAPE_REQUIRE_EXTRAS=1 (.ci/run): a skip for a missing extra fails (extras_guard.py)
from extras_guard import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401

# No "explain" phase: it imports libcst, whose DeprecationWarning would turn a
# real failure report into an INTERNALERROR under filterwarnings=error.
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]

settings.register_profile(
    "default", deadline=None, phases=_PHASES, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "thorough", deadline=None, max_examples=1000, phases=_PHASES,
    suppress_health_check=[HealthCheck.too_slow])
# CI (CI=true) runs a fixed set of examples, so a submission's result does not
# depend on the draw; run locally (or with HYPOTHESIS_PROFILE=thorough) to explore.
settings.register_profile(
    "ci", deadline=None, phases=_PHASES, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow])
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "default"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))

# When a hypothesis test fails, its pytest plugin imports libcst to suggest a
# patch, and libcst's import emits a DeprecationWarning that filterwarnings=error
# turns into an INTERNALERROR hiding the real failure. Import it once here,
# with that warning silenced, so later imports are no-ops.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:  # libcst not installed: nothing to pre-import
        pass
