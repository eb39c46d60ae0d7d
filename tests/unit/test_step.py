"""One optimiser update (``train/step.py``) reads nothing back to the host, in fp32, bf16 and fp16.

What this can see on a CPU-only machine: every aten op the update dispatches, forward, backward, gradient
normalisation, clipping, grad scaler and Adam alike (a ``TorchDispatchMode`` sits below autograd). On a GPU an
update waits for the device when it dispatches ``aten::_local_scalar_dense`` (``.item()``, ``bool(t)``,
``float(t)``, ``int(t)``, ``if t:``) or an op whose output size depends on values (``nonzero``,
``masked_select``, boolean indexing...): those are counted here whatever the device (:data:`SYNC_OPS`).
What it cannot see: a device-to-host copy (``t.cpu()``, ``t.tolist()``, ``t.numpy()``) — on a CPU the
tensor is already on the host, so the copy is no op or dispatches nothing; and a sync inside a CUDA-only code
path (a kernel choice made on the device type). The trainer's own bookkeeping between log steps
(:class:`~ctxmt_cli.train.telemetry.TrainLog.add`) is counted too: it must only keep tensors.
"""

from __future__ import annotations

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.models.families import build_model
from ctxmt_cli.train.distributed import DistEnv
from ctxmt_cli.train.losses import LossLayout
from ctxmt_cli.train.op_count import OpCounter
from ctxmt_cli.train.step import LossSettings, Updater, make_scaler
from ctxmt_cli.train.telemetry import TrainLog
from tests.unit.test_trainer import two_batches
from tests.unit.train_fixtures import TINY


@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_an_update_never_syncs_with_the_host(amp):
    """A concat model with the context discount, clipping and accumulation over two micro-batches, Adam fused as
    on a GPU: zero host-synchronising ops in the second update (the first one creates Adam's state)."""
    cfg = validate_recipe({"model": {"family": "concat", **TINY, "cd": 0.3, "src_context_sentences": 1,
                                     "tgt_context_sentences": 1},
                           "train": {"clip_norm": 1.0, "amp": amp}})
    vocab = VocabInfo(src_size=50, tgt_size=50)
    torch.manual_seed(0)
    model = build_model(cfg.model, vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)     # make_optimizer's choice on CUDA
    updater = Updater(model, optimizer, make_scaler(amp, torch.device("cpu")), DistEnv(),
                      LossSettings.from_recipe(cfg, vocab, model), amp, cfg.train.clip_norm)
    log = TrainLog(cfg.train, DistEnv(), updater.scaler is not None, LossLayout(updater.loss.layout.terms))
    b1, b2, _ = two_batches()
    updater.update([b1, b2])
    with OpCounter() as ops:
        stats, norm = updater.update([b1, b2])
        log.add(2, stats, norm, 1e-3, 0)
    assert ops.total > 100                                                # the counter saw the update
    assert ops.syncs() == {}
    assert torch.isfinite(stats).all()


def test_the_counter_sees_a_sync():
    """The property above is not vacuous: ``.item()`` and ``bool()`` on a tensor are counted."""
    x = torch.ones(3)
    with OpCounter() as ops:
        x.sum().item()
        bool((x > 0).all())
        x[x > 0]
    assert ops.syncs()["aten::_local_scalar_dense"] == 2 and ops.syncs()["sync:aten::index[bool]"] == 1


def test_compile_covers_the_model_and_the_loss():
    """``train.compile`` compiles the whole training forward: dynamo traces model and fused loss (its custom
    autograd function included) as one graph, without a break that would leave the loss outside. The numbers
    of a compiled update are checked against eager ones in ``test_trainer.py`` (slow: inductor compiles)."""
    import torch._dynamo

    cfg = validate_recipe({"model": {"family": "concat", **TINY, "dropout": 0.0, "cd": 0.3,
                                     "src_context_sentences": 1, "tgt_context_sentences": 1}})
    vocab = VocabInfo(src_size=50, tgt_size=50)
    model = build_model(cfg.model, vocab)
    updater = Updater(model, torch.optim.SGD(model.parameters(), lr=1.0), None, DistEnv(),
                      LossSettings.from_recipe(cfg, vocab, model), "off", 0.0, compile=True)
    assert updater.forward is not updater._loss                           # the compiled function is what runs
    explained = torch._dynamo.explain(updater._loss)(two_batches()[0])
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_tokens_per_second_leave_out_validation_time(monkeypatch):
    """The first record after a validation counts only the updates' time: the clock restarts after validating and
    saving (before, the record after each validation divided its tokens by the validation's time too)."""
    import ctxmt_cli.train.telemetry as telemetry

    clock = iter([0.0, 10.0, 100.0, 110.0])
    monkeypatch.setattr(telemetry.time, "monotonic", lambda: next(clock))
    cfg = validate_recipe({"model": {"family": "sentence", **TINY}}).train
    records = []

    class Reporter:
        def train(self, record):
            records.append(record)

    log = TrainLog(cfg, DistEnv(), False, LossLayout())                  # clock 0
    stats = torch.tensor([50.0, 100.0, 50.0, 100.0, 50.0, 100.0])       # CORE_SUMS: 100 tokens an update
    log.add(1, stats, None, 1e-3, 0)
    log.flush(1, Reporter(), "runs")                                     # 10 s of training
    log.restart_clock()                                                  # validated until 100 s
    log.add(2, stats, None, 1e-3, 0)
    log.flush(2, Reporter(), "runs")                                     # 10 s of training
    assert [r["tokens_per_s"] for r in records] == [10.0, 10.0]
