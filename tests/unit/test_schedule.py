"""Inverse-sqrt schedule with linear warm-up: lr = lr_max · min(step/warmup, sqrt(warmup/step))."""

import math

import pytest
import torch

from ctxmt_cli.train.schedule import InverseSqrtSchedule, inverse_sqrt_lr


def test_linear_warmup_then_inverse_sqrt():
    lr, warm = 1e-3, 100
    assert inverse_sqrt_lr(1, lr, warm) == pytest.approx(lr / 100)
    assert inverse_sqrt_lr(50, lr, warm) == pytest.approx(lr / 2)
    assert inverse_sqrt_lr(100, lr, warm) == pytest.approx(lr)            # the peak
    assert inverse_sqrt_lr(400, lr, warm) == pytest.approx(lr / 2)
    assert inverse_sqrt_lr(10_000, lr, warm) == pytest.approx(lr / 10)


def test_formula_everywhere_and_monotone_around_the_peak():
    lr, warm = 7e-4, 40
    values = [inverse_sqrt_lr(s, lr, warm) for s in range(1, 400)]
    for step, value in enumerate(values, start=1):
        assert value == pytest.approx(lr * min(step / warm, math.sqrt(warm / step)))
    assert max(values) == pytest.approx(lr) and values.index(max(values)) == warm - 1
    assert all(a < b for a, b in zip(values[: warm - 1], values[1:warm], strict=True))
    assert all(a > b for a, b in zip(values[warm:], values[warm + 1:], strict=False))


def test_no_warmup_is_plain_inverse_sqrt():
    assert inverse_sqrt_lr(1, 1.0, 0) == 1.0
    assert inverse_sqrt_lr(4, 1.0, 0) == pytest.approx(0.5)


def test_steps_start_at_one():
    with pytest.raises(ValueError):
        inverse_sqrt_lr(0, 1.0, 10)


def test_schedule_writes_every_param_group():
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([{"params": [a]}, {"params": [b]}], lr=1.0)
    sched = InverseSqrtSchedule(opt, 2e-3, 10)
    assert sched.apply(5) == pytest.approx(1e-3)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([1e-3, 1e-3])
