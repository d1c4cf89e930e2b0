"""Shared test configuration.

Hypothesis: no per-example deadline (the suite runs on busy CI machines and
some examples parse long strings on purpose); ``HYPOTHESIS_PROFILE=thorough``
runs ten times more examples. Shared strategies live in ``strategies.py``.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "thorough", deadline=None, max_examples=1000,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
