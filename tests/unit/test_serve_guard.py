"""The connection limits of ``ctxmt serve`` (:mod:`ctxmt_cli.serve.guard`) are bounded numbers; the timeouts and
the cap themselves are exercised over real connections in tests/integration/test_serve_safety.py."""

from __future__ import annotations

import pytest

from ctxmt_cli.serve.guard import ConnectionLimits


@pytest.mark.parametrize("fields", [{"header_timeout": 0}, {"body_timeout": float("inf")},
                                    {"header_timeout": float("nan")}, {"body_timeout": 3601},
                                    {"max_connections": 0}, {"max_connections": 10**7}])
def test_limits_out_of_bounds_are_refused(fields):
    with pytest.raises(ValueError):
        ConnectionLimits(**fields)


def test_the_defaults_hold_a_slow_link_and_a_busy_server():
    limits = ConnectionLimits()
    assert (limits.header_timeout, limits.body_timeout, limits.max_connections) == (10.0, 60.0, 256)
