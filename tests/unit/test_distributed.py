"""DDP on CPU (gloo, 2 processes): one update equals a single process on the same global batch."""

import json
import os
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.batching import collate
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.train.distributed import (
    DistEnv,
    all_reduce_sum,
    any_rank,
    gather_objects,
    setup_distributed,
    teardown_distributed,
    unwrap,
    wrap_model,
)
from ctxmt_cli.train.step import LossSettings, Updater
from ctxmt_cli.train.trainer import train
from tests.unit.train_fixtures import TINY, assert_same_weights, recipe, weights

VOCAB = VocabInfo(src_size=50, tgt_size=50)
CFG = {"model": {"family": "concat", **TINY, "dropout": 0.0, "cd": 0.3, "src_context_sentences": 1,
                 "tgt_context_sentences": 1}, "train": {"label_smoothing": 0.1}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dist_env(rank: int, world: int, port: int) -> None:
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


def micro_batches():
    """Four micro-batches of different sizes (so per-rank normalisers differ)."""
    rng = np.random.default_rng(0)

    def sentences(n: int) -> list:
        """``n`` random windows: two runs of random pieces, closed by ids 4 and 3."""
        return [np.concatenate([rng.integers(5, 50, rng.integers(2, 7)), [4], rng.integers(5, 50, rng.integers(2, 7)),
                                [3]]) for _ in range(n)]

    return [collate(sentences(n), sentences(n), 0, 2) for n in (2, 5, 3, 4)]


def one_update(env: DistEnv, batches) -> dict:
    """One SGD(lr=1) update: the weight change is exactly the normalised, clipped gradient."""
    cfg = validate_recipe(CFG)
    torch.manual_seed(0)
    net = build_model(cfg.model, VOCAB)
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    updater = Updater(wrap_model(net, env), opt, None, env, LossSettings.from_recipe(cfg, VOCAB, net), "off", 1.0)
    stats, _ = updater.update(batches)
    return {"stats": stats, **{k: v.detach().clone() for k, v in unwrap(updater.model).state_dict().items()}}


def _grad_worker(rank: int, world: int, port: int, out: str) -> None:
    dist_env(rank, world, port)
    env = setup_distributed()
    try:
        mine = micro_batches()[2 * rank: 2 * rank + 2]                    # update_freq 2 on each rank
        result = one_update(env, mine)
        assert all_reduce_sum(torch.ones(1), env).item() == world
        assert any_rank(rank == 1, env) is True
        assert gather_objects(rank, env) == [0, 1]
        if rank == 0:
            torch.save(result, out)
    finally:
        teardown_distributed(env)


def _train_worker(rank: int, world: int, port: int, data: str, save_dir: str) -> None:
    dist_env(rank, world, port)
    train(recipe(data, save_dir, **DDP_TRAIN), show_progress=False)


# Adam's first step is lr·sign(g); a large eps keeps float noise on gradients that are zero in exact
# arithmetic (attention key biases) from becoming ±lr steps, so weights compare at 1e-6.
DDP_TRAIN = dict(max_steps=3, valid_every=3, log_every=1, adam_eps=1e-4, clip_norm=1.0, lr=1e-3, warmup_steps=2)


def test_single_process_without_torchrun(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    env = setup_distributed()
    assert (env.world, env.rank, env.is_main, env.distributed) == (1, 0, True, False)
    t = torch.ones(2)
    assert all_reduce_sum(t, env) is t and gather_objects("x", env) == ["x"] and any_rank(False, env) is False
    model = torch.nn.Linear(2, 2)
    assert wrap_model(model, env) is model and unwrap(model) is model


def test_bad_environment_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(CtxmtError, match="WORLD_SIZE='two' is not an integer"):
        setup_distributed()


def test_ddp_update_equals_single_process_global_batch(tmp_path):
    out = tmp_path / "ddp.pt"
    mp.spawn(_grad_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=True)
    single = one_update(DistEnv(), micro_batches())                        # all four micro-batches at once
    torch.testing.assert_close(ddp.pop("stats"), single.pop("stats"), rtol=1e-6, atol=1e-4)
    assert_same_weights(ddp, single, atol=1e-6)


def test_ddp_training_equals_single_process_accumulation(prepared, tmp_path):
    """world 2 × update_freq 1 sees batches (0,1), (2,3), … exactly like 1 process × update_freq 2."""
    mp.spawn(_train_worker, args=(2, free_port(), str(prepared), str(tmp_path / "ddp")), nprocs=2, join=True)
    single = train(recipe(prepared, tmp_path / "single", update_freq=2, **DDP_TRAIN), show_progress=False)
    assert_same_weights(weights(tmp_path / "ddp" / "checkpoint_last.pt"), weights(single.last), atol=1e-6)
    ddp_ck = torch.load(tmp_path / "ddp" / "checkpoint_last.pt", weights_only=True)
    assert ddp_ck["world_size"] == 2 and len(ddp_ck["rng"]) == 2
    valid = ddp_ck["state"]["history"][-1]["window_loss"]
    assert valid == pytest.approx(single.history[-1]["window_loss"], abs=1e-5)
    lines = [json.loads(x) for x in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2, 3]  # rank 0 alone writes logs


# ---- Mini-batch Embedding: whole groups per rank --------------------------------------------------------
# small groups, so documents are split into several groups, and half of the tokens in mixed-document groups
MBE_MODEL = {"family": "mbe", "group_tokens": 48, "mixed_groups": 0.5}


def _mbe_train(env: DistEnv, data: str, save_dir: str, plan_out: str, **train_cfg):
    """Train the tiny MBE recipe as ``train`` does, first writing this rank's epoch-0 plan (rows, group, mixed)."""
    from ctxmt_cli.train.trainer import Trainer

    trainer = Trainer(recipe(data, save_dir, MBE_MODEL, **DDP_TRAIN, **train_cfg), env, False, False)
    try:
        plan = [[b.indices.tolist(), b.groups.tolist(), b.mixed.tolist()] for b in trainer._epoch_batches(0)]
        with open(plan_out, "w") as f:
            json.dump(plan, f)
        return trainer.run()
    finally:
        trainer.close()


def _mbe_worker(rank: int, world: int, port: int, data: str, save_dir: str, plans: str) -> None:
    dist_env(rank, world, port)
    env = setup_distributed()
    try:
        _mbe_train(env, data, save_dir, f"{plans}/plan{rank}.json")
    finally:
        teardown_distributed(env)


def _groups(plan: list) -> list[frozenset]:
    """The sentence set of every group of every batch of a recorded plan."""
    return [frozenset(np.asarray(rows)[np.asarray(group) == g].tolist()) for rows, group, _ in plan for g in set(group)]


def test_ddp_mbe_keeps_every_group_on_one_rank_and_equals_single_process_accumulation(prepared, tmp_path):
    """world 2: each rank takes whole batches of whole groups of the global plan; the weights, the validation
    and the classifier's terms equal 1 process × update_freq 2."""
    mp.spawn(_mbe_worker, args=(2, free_port(), str(prepared), str(tmp_path / "ddp"), str(tmp_path)),
             nprocs=2, join=True)
    single = _mbe_train(DistEnv(), str(prepared), str(tmp_path / "single"), str(tmp_path / "single.json"),
                        update_freq=2)
    whole = json.loads((tmp_path / "single.json").read_text())
    ranks = [json.loads((tmp_path / f"plan{r}.json").read_text()) for r in (0, 1)]
    usable = len(whole) - len(whole) % 2
    assert ranks == [whole[0:usable:2], whole[1:usable:2]]                # the global plan, whole batches each
    on_rank = [frozenset().union(*_groups(plan)) for plan in ranks]
    assert not on_rank[0] & on_rank[1]                                     # no sentence (so no group) on two ranks
    assert set(_groups(ranks[0]) + _groups(ranks[1])) <= set(_groups(whole))
    assert any(any(mixed) for plan in ranks for *_, mixed in plan[:3])      # the updates saw mixed groups
    assert_same_weights(weights(tmp_path / "ddp" / "checkpoint_last.pt"), weights(single.last), atol=1e-6)
    valid = torch.load(tmp_path / "ddp" / "checkpoint_last.pt", weights_only=True)["state"]["history"][-1]
    for key in ("window_loss", "classifier_loss", "classifier_accuracy", "alpha_same", "alpha_mixed"):
        assert valid[key] == pytest.approx(single.history[-1][key], abs=1e-5), key


def _mbe_one_update(env: DistEnv, batches, mbe_recipe, vocab) -> dict:
    """One SGD(lr=1) update of the tiny MBE model (training mode) on ``batches``: stats and weights after it."""
    torch.manual_seed(0)
    net = build_model(mbe_recipe.model, vocab).train()
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    loss = LossSettings.from_recipe(mbe_recipe, vocab, net)
    updater = Updater(wrap_model(net, env), opt, None, env, loss, "off", 1.0)
    stats, _ = updater.update(batches)
    return {"stats": stats, **{k: v.detach().clone() for k, v in unwrap(updater.model).state_dict().items()}}


def _mbe_chunk_worker(rank: int, world: int, port: int, saved: str, out: str) -> None:
    dist_env(rank, world, port)
    env = setup_distributed()
    try:
        data = torch.load(saved, weights_only=False)
        result = _mbe_one_update(env, [data["batches"][rank]], data["recipe"], data["vocab"])
        if rank == 0:
            torch.save(result, out)
    finally:
        teardown_distributed(env)


def test_ddp_mbe_chunked_batches_equal_single_process_padded_batches(prepared, tmp_path):
    """world 2, one chunked batch of whole groups per rank (gate on, mixed groups): one forward per micro-batch
    runs every chunk, and the update equals one process accumulating the same batches as one padded tensor each."""
    from dataclasses import replace

    from ctxmt_cli.train.trainer import Trainer

    trainer = Trainer(recipe(prepared, tmp_path / "plan", MBE_MODEL, **DDP_TRAIN), DistEnv(), False, False)
    batches = [trainer._collate([plan])[0] for plan in trainer._epoch_batches(0)]
    trainer.close()
    two = [b for b in batches if len(b.chunks) > 1][:2]
    assert len(two) == 2 and any(b.extras.mixed.any() for b in two)
    saved = tmp_path / "batches.pt"
    torch.save({"batches": two, "recipe": trainer.recipe, "vocab": trainer.vocab}, saved)
    mp.spawn(_mbe_chunk_worker, args=(2, free_port(), str(saved), str(tmp_path / "ddp.pt")), nprocs=2, join=True)
    ddp = torch.load(tmp_path / "ddp.pt", weights_only=False)
    single = _mbe_one_update(DistEnv(), [replace(b, chunks=None) for b in two], trainer.recipe, trainer.vocab)
    torch.testing.assert_close(ddp.pop("stats"), single.pop("stats"), atol=1e-4, rtol=1e-5)
    assert_same_weights(ddp, single, atol=1e-6)
