"""Suite-wide settings: Hypothesis profiles for the property-based batteries.

``ci`` (the default): a fixed, derandomized example budget, so a run's cases are the same on every machine and
the suite stays bounded. ``slow``: more examples, random each run, for hunting (``pytest -m slow
--hypothesis-profile slow``). A test that needs its own budget sets ``@settings(max_examples=...)``.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("slow", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile("ci")
