"""Suite-wide settings: Hypothesis profiles for the property-based batteries.

``ci`` (the default): a fixed, derandomized example budget, so a run's cases are the same on every machine and
the suite stays bounded. ``slow``: more examples, random each run, for hunting (``pytest -m slow
--hypothesis-profile slow``). A test that needs its own budget sets ``@settings(max_examples=...)``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one intra-op thread per worker: two workers of two threads each on two cores double the CPU time
    import torch

    torch.set_num_threads(1)

settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("slow", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile("ci")
