"""Model details beyond the contract suite (test_contract.py): persistent and segment encodings, tied embeddings,
scoring."""

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.core.logits import log_partition, slice_width
from ctxmt_cli.core.positions import sinusoid, window_layout
from ctxmt_cli.models.families import FAMILIES, build_model

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)

VARIANTS = {
    "sentence": {"family": "sentence"},
    "concat": {"family": "concat"},
    "shift": {"family": "concat", "shift": 7},
    "per-window": {"family": "concat", "shift": "per-window"},
    "onehot-persistent": {"family": "concat", "shift": 3, "segment": "onehot", "persistent": True},
    "sinusoidal": {"family": "concat", "segment": "sinusoidal"},
    "learned-pse": {"family": "concat", "segment": "learned", "pse": {"d_se": 4}, "persistent": True},
    "sinusoidal-persistent": {"family": "concat", "segment": "sinusoidal", "persistent": True},
    "learned-persistent": {"family": "concat", "segment": "learned", "persistent": True},
    "post-norm": {"family": "concat", "shift": 2, "normalize_before": False},
}


def make_model(spec: dict, seed: int = 0):
    torch.manual_seed(seed)
    tiny = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2}
    cfg = validate_recipe({"model": {**tiny, **spec}}).model
    return build_model(cfg, VOCAB).eval()


def sample():
    src = torch.tensor([[7, 8, BRK, 9, 10, BRK, 11, EOS], [7, 9, BRK, 12, EOS, PAD, PAD, PAD]])
    tgt = torch.tensor([[BOS, 13, 14, BRK, 15, BRK, 16, 17, EOS], [BOS, 18, BRK, 19, 20, 21, EOS, PAD, PAD]])
    return Batch(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:])


def test_families_dict_is_plain():
    assert set(FAMILIES) >= {"sentence", "concat"}


@pytest.mark.parametrize("name", ["onehot-persistent", "learned-pse", "sinusoidal-persistent", "learned-persistent"])
def test_persistent_encodings_reach_every_layer(name):
    model, batch = make_model(VARIANTS[name]), sample()
    seen = {}
    for side, layers in (("enc", model.encoder_layers), ("dec", model.decoder_layers)):
        for i, layer in enumerate(layers):
            layer.register_forward_pre_hook(lambda m, args, key=(side, i): seen.__setitem__(key, args[0]))
            layer.register_forward_hook(lambda m, args, out, key=(side, i): seen.__setitem__(key + ("out",), out[0]))
    model(batch)
    src_pos, src_seg, _ = window_layout(batch.src, BRK, model.source_shift(batch.src))
    tgt_pos, tgt_seg, _ = window_layout(batch.tgt_in, BRK, model.target_shift(model.source_shift(batch.src)))
    pe = {"enc": model.src_pos(src_pos, src_seg), "dec": model.tgt_pos(tgt_pos, tgt_seg)}
    kept = {"enc": model.src_pos.persisted(src_pos, src_seg, pe["enc"]),
            "dec": model.tgt_pos.persisted(tgt_pos, tgt_seg, pe["dec"])}
    sentence_only = model.cfg.pse is None and model.cfg.shift is None              # Lupo et al. 2023, §2.2
    tokens = {"enc": sinusoid(src_pos, 32), "dec": sinusoid(tgt_pos, 32)}
    for side, layers in (("enc", model.encoder_layers), ("dec", model.decoder_layers)):
        expected = pe[side] - tokens[side] if sentence_only else pe[side]  # the segment embedding alone, or all
        torch.testing.assert_close(kept[side], expected, atol=1e-5, rtol=1e-5)
        for i in range(1, len(layers)):
            added = seen[(side, i)] - seen[(side, i - 1, "out")]
            torch.testing.assert_close(added, expected, atol=1e-5, rtol=1e-5)


def test_non_persistent_encodings_only_at_the_input():
    model, batch = make_model(VARIANTS["sinusoidal"]), sample()
    seen = {}
    model.encoder_layers[1].register_forward_pre_hook(lambda m, a: seen.__setitem__("in", a[0]))
    model.encoder_layers[0].register_forward_hook(lambda m, a, out: seen.__setitem__("out", out[0]))
    model(batch)
    assert torch.equal(seen["in"], seen["out"])


@pytest.mark.parametrize("name", ["learned-pse", "learned"])
def test_learned_sentence_encodings_receive_gradients(name):
    spec = VARIANTS.get(name, {"family": "concat", "segment": "learned"})
    model, batch = make_model(spec), sample()
    model.train()
    logits = model(batch).logits
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD).backward()
    for pos in (model.src_pos, model.tgt_pos):
        grad = pos.table.weight.grad
        assert grad is not None and grad[1:4].abs().sum(-1).gt(0).all()  # segments 1..3 used, all trained


@pytest.mark.parametrize("name", ["learned-pse", "learned-persistent"])
def test_learned_segment_table_is_one_standard_normal_table(name):
    """As the authors' code (Lupo et al. 2023): one table for encoder and decoder, nn.Embedding's N(0, 1)."""
    model = make_model(VARIANTS[name])
    assert model.src_pos.table is model.tgt_pos.table
    names = [n for n, _ in model.named_parameters() if "table" in n]
    assert len(names) == 1                                                  # counted (and trained) once
    rows = model.src_pos.table.weight[1:].detach()                          # (max_segments, d_se or d_model)
    assert 0.7 < rows.std().item() < 1.3


@pytest.mark.parametrize("name", ["onehot-persistent", "sinusoidal", "learned-pse"])
def test_decoder_start_token_takes_the_current_sentence_segment(name):
    """The start token <s> of a window's target gets segment k = 1 (the authors' code), its position stays 0."""
    model, batch = make_model(VARIANTS[name]), sample()
    seen = {}
    model.decoder_layers[0].register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0]))
    model(batch)
    bos = model.tgt_embed(batch.tgt_in[:, :1]) * model.scale                # (B, 1, C)
    positions, seg, _ = window_layout(batch.tgt_in, BRK, model.target_shift(model.source_shift(batch.src)))
    assert (seg[:, 0] > 1).all()                                            # laid out in the oldest sentence
    current = model.tgt_pos(positions[:, :1], torch.ones_like(seg[:, :1]))  # (B, 1, C): position 0, k = 1
    torch.testing.assert_close(seen["x"][:, :1], bos + current, atol=1e-5, rtol=1e-5)
    oldest = model.src_pos(positions[:, :1], seg[:, :1])                    # what it used to get
    assert not torch.allclose(seen["x"][:, :1], bos + oldest)


def test_shift_changes_positions_but_not_a_sentence_level_window():
    batch = Batch(src=torch.tensor([[7, 8, EOS]]), tgt_in=torch.tensor([[BOS, 9, 10]]),
                  tgt_out=torch.tensor([[9, 10, EOS]]))
    plain, shifted = make_model({"family": "concat"}), make_model({"family": "concat", "shift": 9})
    torch.testing.assert_close(plain(batch).logits, shifted(batch).logits)  # one sentence: nothing to shift
    windowed = sample()
    assert not torch.allclose(plain(windowed).logits, shifted(windowed).logits)


def test_tied_embeddings_with_joint_vocabulary():
    model = make_model({"family": "sentence"})
    assert model.output.weight is model.tgt_embed.weight is model.src_embed.weight


@pytest.mark.parametrize("name", ["sentence", "concat", "learned-pse"])
@pytest.mark.parametrize("rows,width", [(3, 7), (1000, 1000)])
def test_target_logprobs_equal_log_softmax_of_forward_and_zero_off_the_mask(name, rows, width, monkeypatch):
    from ctxmt_cli.core import logits as core_logits
    from ctxmt_cli.core import model as core_model

    monkeypatch.setattr(core_model, "SCORE_ROWS", rows)                  # row blocks of 3, vocabulary slices of 7
    monkeypatch.setattr(core_logits, "SCORE_MIN_WIDTH", width)
    monkeypatch.setattr(core_logits, "SCORE_SLICE_BYTES", 0)                # slices of SCORE_MIN_WIDTH columns
    model, batch = make_model(VARIANTS[name]), sample()
    with torch.no_grad():
        full = model(batch).logits.log_softmax(-1).gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)  # (B, T)
        where = batch.tgt_out != PAD
        where[0, :3] = False                                                # e.g. target context left out
        got = model.target_logprobs(batch, where)
    torch.testing.assert_close(got[where], full[where], atol=1e-5, rtol=1e-5)
    assert bool((got[~where] == 0).all())
    torch.testing.assert_close(model.target_logprobs(batch), full, atol=1e-5, rtol=1e-5)
    nothing = torch.zeros_like(where)
    assert bool((model.target_logprobs(batch, nothing) == 0).all())       # no position scored: zeros, no error


def test_slices_on_the_cpu_whole_vocabulary_on_a_gpu():
    """CPU: slices that keep a block's logits in cache; GPU: one projection (launches, not cache, cost there)."""
    assert slice_width(2048, 16000) < 16000 and slice_width(4, 16000) == 16000
    assert slice_width(2048, 16000, torch.device("cuda")) == 16000
    assert slice_width(2048, 16000, torch.device("cpu")) == slice_width(2048, 16000)


@pytest.mark.parametrize("width", [1, 5, 16, 64])
def test_log_partition_equals_logsumexp_whatever_the_slices(width):
    torch.manual_seed(0)
    states, weight = torch.randn(9, 8), torch.randn(64, 8) * 3             # (N, C), (V, C): large logits
    weight[40] *= 20                                                        # the running max jumps in a late slice
    expected = torch.logsumexp(states @ weight.t(), dim=1)                  # (N,)
    torch.testing.assert_close(log_partition(states, weight, width), expected, atol=1e-5, rtol=1e-5)
