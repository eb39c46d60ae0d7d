"""Source-side token noise (``data.input_noise``, Voita et al. 2019's DocRepair): the share replaced, specials
kept, the draw from the seed alone; training batches noised, validation batches clean."""

from __future__ import annotations

import numpy as np
import torch

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.noise import first_regular_id, replace_tokens

VOCAB = VocabInfo(src_size=1000, tgt_size=1000)


def test_the_share_of_regular_tokens_is_replaced_and_specials_are_kept():
    rng = np.random.default_rng(0)
    src = torch.from_numpy(rng.integers(first_regular_id(VOCAB), 1000, (200, 60)))
    src[:, 20] = VOCAB.brk
    src[:, 50] = VOCAB.eos
    src[:, 51:] = VOCAB.pad
    noisy = replace_tokens(src, 0.1, VOCAB, np.random.default_rng(1))
    specials = src < first_regular_id(VOCAB)
    assert torch.equal(noisy[specials], src[specials])                         # layout unchanged
    changed = (noisy != src)[~specials].float().mean().item()
    assert 0.09 < changed < 0.105                                              # 0.1, less the draws of itself
    assert int(noisy.min()) >= 0 and int(noisy[~specials].min()) >= first_regular_id(VOCAB)
    assert torch.equal(noisy, replace_tokens(src, 0.1, VOCAB, np.random.default_rng(1)))
    assert not torch.equal(noisy, replace_tokens(src, 0.1, VOCAB, np.random.default_rng(2)))
    assert torch.equal(replace_tokens(src, 0.0, VOCAB, np.random.default_rng(1)), src)


def test_training_batches_are_noised_from_the_seed_and_validation_stays_clean(prepared, tmp_path):
    from ctxmt_cli.train.distributed import DistEnv
    from ctxmt_cli.train.trainer import Trainer
    from tests.unit.train_fixtures import recipe

    def trainer(noise: float, name: str) -> Trainer:
        spec = recipe(prepared, tmp_path / name, {"family": "sentence"})
        spec.data.input_noise = noise
        return Trainer(spec, DistEnv(), False, False)

    clean, noisy = trainer(0.0, "clean"), trainer(0.3, "noisy")
    plan = clean._epoch_batches(0)[:2]
    plain = clean._collate(plan, 0, 0)
    first, again, later = noisy._collate(plan, 0, 0), noisy._collate(plan, 0, 0), noisy._collate(plan, 0, 4)
    for a, b, c, d in zip(plain, first, again, later, strict=True):
        assert torch.equal(b.src, c.src) and not torch.equal(a.src, b.src)      # seeded, and noised
        assert not torch.equal(b.src, d.src)                                    # another position, another draw
        assert torch.equal(a.tgt_out, b.tgt_out) and torch.equal(a.src == 0, b.src == 0)
    for v, w in zip(clean.validator.batches, noisy.validator.batches, strict=True):
        assert torch.equal(v.src, w.src)
    clean.close()
    noisy.close()
