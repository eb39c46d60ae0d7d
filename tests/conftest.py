"""Suite-wide settings: Hypothesis profiles for the property-based batteries, and threads under xdist.

``ci`` (the default): a fixed, derandomized example budget, so a run's cases are the same on every machine and
the suite stays bounded. ``slow``: more examples, random each run, for hunting (``pytest -m slow
--hypothesis-profile slow``). A test that needs its own budget sets ``@settings(max_examples=...)``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Threads that wait at an OpenMP barrier sleep instead of spinning (read by libgomp when torch loads, here and in
# every ctxmt process a test starts). The suite runs more threads than cores (two workers, plus the processes and the
# recipes' own `train.threads`); a spinning waiter then holds the core its peer needs, and a tiny decoding step took
# 10x longer (a 22-sentence translate: 25 s against 2.1 s with passive waiting).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one intra-op thread per worker: two workers of two threads each on two cores double the CPU time
    import pytest
    import torch

    torch.set_num_threads(1)

    @pytest.fixture(autouse=True)
    def _one_thread_again():
        """A command run in-process may set its recipe's thread count (quickstart, train): the next test gets 1."""
        yield
        torch.set_num_threads(1)

settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("slow", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile("ci")
