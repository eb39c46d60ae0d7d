"""The Mini-batch Embedding family (ctxmt_cli/models/mbe/model.py) and group batching (data/batching.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import BatchBudget, group_batches, sentence_groups
from ctxmt_cli.models.families import build_model, inputs_of
from ctxmt_cli.models.mbe.model import SentenceGroups

pytestmark = pytest.mark.usefixtures("one_thread")

PAD, EOS = 0, 3
VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"family": "mbe", "preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1,
        "decoder_layers": 1, "dropout": 0.0}


def make(**spec):
    torch.manual_seed(0)
    return build_model(validate_recipe({"model": {**TINY, **spec}}).model, VOCAB).eval()


def rows(*sentences, width=None) -> torch.Tensor:
    width = width or max(len(s) for s in sentences) + 1
    out = torch.full((len(sentences), width), PAD)
    for i, s in enumerate(sentences):
        out[i, : len(s) + 1] = torch.tensor(list(s) + [EOS])
    return out


def summary(model, src, groups):
    with torch.no_grad():
        embedded, _ = model.embed_source(src)
        return model.summarize(embedded, src != PAD, torch.tensor(groups))


def test_z_ignores_padding_and_is_not_zero_for_equal_lengths():
    model = make()
    a, b = [5, 6, 7], [8, 9, 10]                                            # equal lengths: the public code gets z = 0
    z, _ = summary(model, rows(a, b), [0, 0])
    z_padded, _ = summary(model, rows(a, b, width=12), [0, 0])
    torch.testing.assert_close(z, z_padded, atol=1e-6, rtol=1e-6)
    assert z.abs().sum() > 0
    alone, _ = summary(model, rows(a), [0])
    assert alone.abs().sum() > 0                                            # one sentence: z = its own v
    mean_of_two = (alone + summary(model, rows(b), [0])[0]) / 2
    torch.testing.assert_close(z, mean_of_two, atol=1e-6, rtol=1e-6)        # eq. 2: the mean of the v_i


@pytest.mark.parametrize("placement", ["encoder", "decoder", "both"])
def test_the_group_decides_what_a_row_reads(placement):
    model = make(placement=placement)
    src = rows([5, 6, 7], [11, 12, 13, 14])
    tgt = torch.tensor([[2, 20, 21], [2, 22, 23]])
    with torch.no_grad():
        together = model(Batch(src=src, tgt_in=tgt, extras=SentenceGroups(torch.tensor([0, 0])))).logits
        apart = model(Batch(src=src, tgt_in=tgt, extras=SentenceGroups(torch.tensor([0, 1])))).logits
    assert not torch.allclose(together[0], apart[0])                        # row 0 reads row 1 only when grouped


def test_gate_classifier_learns_both_labels():
    """Both labels reach the loss: on a toy where same- and mixed-document groups differ in their tokens the
    classifier goes past 95% and alpha separates. (W z is linear in a mean, so it can only tell groups apart
    by what their sentences' average shows; the public code never trains the mixed label at all.)"""
    model = make().train()
    rng = np.random.default_rng(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def batch():
        sents, groups, mixed = [], [], []
        for g in range(8):
            is_mixed = g % 2 == 1
            low, high = (20, 40) if is_mixed else (5, 20)
            sents += [rng.integers(low, high, rng.integers(3, 8)).tolist() for _ in range(3)]
            groups += [g] * 3
            mixed.append(is_mixed)
        return Batch(src=rows(*sents), extras=SentenceGroups(torch.tensor(groups), torch.tensor(mixed)))

    for _ in range(150):
        terms = model.encode(batch()).loss_terms
        optimizer.zero_grad()
        terms["classifier_loss"].sum.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        terms = model.encode(batch()).loss_terms
    mean = {k: float(t.sum / t.count) for k, t in terms.items()}
    assert mean["classifier_accuracy"] > 0.95
    assert mean["alpha_same"] > 0.8 and mean["alpha_mixed"] < 0.2


def test_classifier_loss_per_sentence_and_per_group_by_hand():
    logits = torch.tensor([[0.0, 2.0], [1.0, -1.0]])                        # group 0 says same, group 1 says mixed
    groups, mixed = torch.tensor([0, 0, 1]), torch.tensor([False, True])
    alpha = logits.softmax(-1)[:, 1]
    for kind, expected_count in (("per_sentence", 3), ("per_group", 2)):
        model = make(classifier_loss=kind, classifier_label_smoothing=0.0)
        terms = model.classifier_terms(logits, alpha, groups, mixed)
        logp = logits.log_softmax(-1)
        per_group = [-logp[0, 1], -logp[1, 0]]
        expected = (2 * per_group[0] + per_group[1]) if kind == "per_sentence" else sum(per_group)
        torch.testing.assert_close(terms["classifier_loss"].sum, expected)
        assert float(terms["classifier_loss"].count) == expected_count
        assert float(terms["classifier_accuracy"].sum) == 2.0
        torch.testing.assert_close(terms["alpha_mixed"].sum / terms["alpha_mixed"].count, alpha[1])


def test_without_gate_there_is_no_classifier_and_no_term():
    model = make(gate=False, mixed_groups=0.0)
    assert model.classifier is None and model.loss_term_names == () and inputs_of(model.cfg).mixed_share == 0.0
    assert model.encode(Batch(src=rows([5, 6]))).loss_terms == {}


# ---- groups --------------------------------------------------------------------------------------
DOCS = np.repeat(np.arange(6), [3, 5, 2, 8, 4, 6])                           # document of each of 28 sentences
SIZE = np.random.default_rng(1).integers(4, 20, size=len(DOCS))


def test_same_document_groups_never_mix_and_big_documents_are_split():
    groups = sentence_groups(DOCS, SIZE, np.arange(len(DOCS)), group_tokens=60, mixed_share=0.0,
                             rng=np.random.default_rng(0), shuffle=True)
    seen = np.concatenate([g for g, _ in groups])
    assert sorted(seen) == list(range(len(DOCS)))                           # every sentence exactly once
    for members, mixed in groups:
        assert not mixed and len(set(DOCS[members])) == 1
        assert len(members) == 1 or SIZE[members].max() * len(members) <= 60
    assert sum(len(set(DOCS[g])) for g, _ in groups) > len(set(DOCS))       # some document was split


def test_mixed_groups_hold_their_share_and_are_near_equal_length():
    groups = sentence_groups(DOCS, SIZE, np.arange(len(DOCS)), group_tokens=60, mixed_share=0.5,
                             rng=np.random.default_rng(0), shuffle=True)
    for members, mixed in groups:
        if mixed:
            assert len(set(DOCS[members])) > 1
            assert SIZE[members].max() - SIZE[members].min() <= 6


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
def test_mixed_groups_is_a_share_of_groups(share):
    """``mixed_groups`` counts groups, as the paper mixes "the two types of mini-batches at the same ratio": on
    many documents of mixed lengths (most shorter than a group), the mixed groups are that share of all groups
    within 0.05, though each mixed group is a full cut and most same-document groups are small."""
    rng = np.random.default_rng(5)
    docs = np.repeat(np.arange(400), rng.integers(1, 12, 400))
    size = rng.integers(4, 40, len(docs))
    groups = sentence_groups(docs, size, np.arange(len(docs)), group_tokens=300, mixed_share=share,
                             rng=np.random.default_rng(1), shuffle=True)
    assert sorted(np.concatenate([g for g, _ in groups]).tolist()) == list(range(len(docs)))
    mixed = sum(m for _, m in groups) / len(groups)
    assert abs(mixed - share) <= 0.05, mixed
    tokens = sum(size[g].sum() for g, m in groups if m) / size.sum()
    assert tokens > mixed                                                   # the token share is another number


def test_group_batches_keep_groups_whole_and_depend_on_seed_and_epoch_only():
    def plan(epoch: int):
        return group_batches(DOCS, SIZE, SIZE, np.arange(len(DOCS)), budget=BatchBudget(max_tokens=150),
                             group_tokens=60, mixed_share=0.5, seed=3, epoch=epoch)

    first, again, other = plan(1), plan(1), plan(2)
    assert [b.indices.tolist() for b in first] == [b.indices.tolist() for b in again]
    assert [b.indices.tolist() for b in first] != [b.indices.tolist() for b in other]
    assert sorted(np.concatenate([b.indices for b in first])) == list(range(len(DOCS)))
    for b in first:
        assert b.groups.max() + 1 == len(b.mixed)
        for g, mixed in enumerate(b.mixed):
            assert mixed == (len(set(DOCS[b.indices[b.groups == g]])) > 1)


def test_scoring_windows_become_groups_decoded_from_the_current_sentence():
    from ctxmt_cli.models.mbe.inputs import windows_as_groups

    src = torch.tensor([[5, 6, 4, 7, 4, 8, 9, EOS], [10, EOS, PAD, PAD, PAD, PAD, PAD, PAD]])
    batch = windows_as_groups(Batch(src=src, src_index=torch.tensor([0, 0, 1])), VOCAB)
    assert batch.src.tolist() == [[5, 6, EOS], [7, EOS, PAD], [8, 9, EOS], [10, EOS, PAD]]
    assert batch.extras.groups.tolist() == [0, 0, 0, 1]
    assert batch.src_index.tolist() == [2, 2, 3]                            # each target row: its current sentence


# ---- row chunks: a batch of whole groups runs chunk by chunk at each chunk's width ---------------------
def training_batches(prepared, save_dir, **model):
    """The tiny MBE recipe's trainer (small groups, half of the tokens in mixed groups) and its epoch-0 batches,
    collated as training collates them (with row chunks)."""
    from ctxmt_cli.train.distributed import DistEnv
    from ctxmt_cli.train.trainer import Trainer
    from tests.unit.train_fixtures import recipe

    spec = {"family": "mbe", "group_tokens": 48, "mixed_groups": 0.5, **model}
    trainer = Trainer(recipe(prepared, save_dir, spec), DistEnv(), False, False)
    return trainer, [trainer._collate([plan])[0] for plan in trainer._epoch_batches(0)]


def loss_of(model, batch, settings):
    """batch_loss on ``batch`` with the token losses the ``loss_terms`` hook received and every gradient."""
    from ctxmt_cli.train.step import batch_loss

    seen, hook = {}, model.loss_terms

    def record(b, token, output):
        seen["token"] = token.detach().clone()                              # (B, T)
        return hook(b, token, output)

    model.loss_terms = record
    try:
        model.zero_grad()
        objective, sums = batch_loss(model, batch, settings, "off", torch.device("cpu"))
        objective.backward()
    finally:
        del model.loss_terms
    return seen["token"], objective.detach(), sums, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("placement", ["encoder", "both"])
def test_chunked_batch_gives_the_losses_terms_and_gradients_of_one_padded_tensor(prepared, tmp_path, placement):
    """Training batches (gate on, same- and mixed-document groups): run chunk by chunk at each chunk's width,
    every token's loss, the classifier's terms and every gradient equal those of the one padded tensor."""
    from dataclasses import replace

    trainer, batches = training_batches(prepared, tmp_path, placement=placement)
    model = trainer.model.train()
    batch = next(b for b in batches if len(b.chunks) > 1 and b.extras.mixed.any() and not b.extras.mixed.all())
    computed = sum((b - a) * (s + t) for a, b, s, t in batch.chunks)
    assert computed < batch.src.numel() + batch.tgt_out.numel()             # chunk widths skip padding
    groups = batch.extras.groups
    assert {int(g) for a, b, *_ in batch.chunks[:1] for g in groups[a:b]} & {
        int(g) for a, b, *_ in batch.chunks[1:] for g in groups[a:b]}       # a group spans chunks
    chunked, whole = loss_of(model, batch, trainer.loss), loss_of(model, replace(batch, chunks=None), trainer.loss)
    torch.testing.assert_close(chunked[0], whole[0], atol=1e-5, rtol=1e-5)   # per-token losses (B, T)
    torch.testing.assert_close(chunked[1], whole[1], atol=1e-4, rtol=1e-5)   # objective
    torch.testing.assert_close(chunked[2], whole[2], atol=1e-4, rtol=1e-5)   # loss vector: terms included
    assert float(chunked[2][trainer.loss.layout.names.index("classifier_loss.count")]) == batch.src.size(0)
    for name, grad in whole[3].items():
        torch.testing.assert_close(chunked[3][name], grad, atol=1e-5, rtol=1e-4, msg=name)
    trainer.close()


def test_group_batches_count_computed_positions_and_cut_chunks_by_length():
    """The budget counts what the chunks compute (rows x widest per chunk), so a batch holds about as many
    real tokens as a length-bucketed sentence batch, and each chunk pads little."""
    from ctxmt_cli.data.batching import token_batches

    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(200), rng.integers(2, 12, 200))
    src, tgt = rng.integers(3, 30, len(docs)), rng.integers(3, 30, len(docs))
    size = np.maximum(src, tgt)
    batches = group_batches(docs, src, tgt, np.arange(len(docs)), budget=BatchBudget(max_tokens=600), group_tokens=120,
                            mixed_share=0.5, seed=2, epoch=1)
    real, computed = np.zeros(2), np.zeros(2)
    for b in batches:
        s = size[b.indices]
        assert b.ends[-1] == len(b.indices) and (np.diff((0, *b.ends)) > 0).all()   # chunks cover the rows
        spans = list(zip((0, *b.ends[:-1]), b.ends, strict=True))
        assert sum((e - a) * int(s[a:e].max()) for a, e in spans) <= 600 or len(b.mixed) == 1
        for side, lengths in enumerate((src[b.indices], tgt[b.indices])):
            real[side] += lengths.sum()
            computed[side] += sum((e - a) * int(lengths[a:e].max()) for a, e in spans)
    sentences = token_batches(src, tgt, np.arange(len(docs)), budget=BatchBudget(max_tokens=600), seed=2, epoch=1)
    bucketed = np.array([1 - sum(lengths[b].sum() for b in sentences)
                         / sum(len(b) * lengths[b].max() for b in sentences) for lengths in (src, tgt)])
    assert (1 - real / computed <= bucketed).all(), (1 - real / computed, bucketed)   # each side pads no more
    assert len(batches) <= 1.1 * len(sentences)                             # as many real tokens per batch


def test_chunk_plan_is_the_cheapest_cut():
    """chunk_plan minimises Σ rows x widest + overhead per chunk: equal to brute force over every cut."""
    from itertools import combinations

    from ctxmt_cli.data.batching import chunk_plan

    rng = np.random.default_rng(3)
    for _ in range(20):
        sizes = np.sort(rng.integers(1, 12, rng.integers(1, 15)))
        values = np.unique(sizes)
        ends, computed = chunk_plan(np.bincount(sizes), 5.0)
        best = None
        for k in range(len(values)):
            for cut in combinations(range(1, len(values)), k):              # chunk ends between distinct sizes
                bounds = [int((sizes <= values[c - 1]).sum()) for c in cut] + [len(sizes)]
                cost = sum((e - a) * int(sizes[e - 1]) for a, e in zip([0] + bounds[:-1], bounds, strict=True))
                best = min(best or (np.inf, 0), (cost + 5.0 * len(bounds), cost))
        assert computed + 5.0 * len(ends) == pytest.approx(best[0])
        assert ends[-1] == len(sizes)


def spread_toy_batch(rng, topics: int = 11, groups: int = 8):
    """Groups of 3 sentences: a same-document group's sentences all come from one topic (a narrow band of token
    ids), a mixed group's from three random topics; a sentence's marginal distribution is the same either way, so
    the expected mean of a group's sentence vectors is too: only their spread tells the two apart."""
    sents, group_of, mixed = [], [], []
    for g in range(groups):
        is_mixed = g % 2 == 1
        chosen = rng.integers(0, topics, 3) if is_mixed else np.repeat(rng.integers(0, topics), 3)
        sents += [(5 + 3 * t + rng.integers(0, 3, rng.integers(3, 7))).tolist() for t in chosen]
        group_of += [g] * 3
        mixed.append(is_mixed)
    return Batch(src=rows(*sents), extras=SentenceGroups(torch.tensor(group_of), torch.tensor(mixed)))


@pytest.mark.parametrize("classifier, separates", [("mean_spread", True), ("linear", False)])
def test_the_spread_classifier_separates_where_the_papers_cannot(classifier, separates):
    """On groups whose mean sentence vector is the same in expectation, eq. 5's linear classifier leaves alpha at
    the prior; the mean_spread classifier separates same- from mixed-document groups (alpha gap >= 0.5)."""
    torch.manual_seed(0)
    model = make(gate_classifier=classifier).train()
    rng = np.random.default_rng(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(200):
        terms = model.encode(spread_toy_batch(rng)).loss_terms
        optimizer.zero_grad()
        terms["classifier_loss"].sum.backward()
        optimizer.step()
    model.eval()
    sums = {k: 0.0 for k in ("alpha_same", "alpha_mixed")}
    with torch.no_grad():
        for _ in range(20):
            terms = model.encode(spread_toy_batch(rng)).loss_terms
            for k in sums:
                sums[k] += float(terms[k].sum / terms[k].count) / 20
    gap = sums["alpha_same"] - sums["alpha_mixed"]
    assert (gap >= 0.5) if separates else (abs(gap) < 0.2), sums


@pytest.mark.parametrize("placement", ["encoder", "decoder"])
def test_prefix_norm_cancels_the_gates_scale(placement):
    """With prefix_norm (the public code's LayerNorm over [z; tokens]) alpha's scale no longer reaches what the model
    reads: moving alpha (a random classifier, then a zero one: alpha = 0.5) leaves the encoder's states (z in the
    encoder) or the decoder's prefix (z in the decoder) as they were; without it they move."""
    src = rows([5, 6, 7], [11, 12, 13, 14], [8, 9])
    batch = Batch(src=src, extras=SentenceGroups(torch.tensor([0, 0, 1])))
    def read(enc):                                                        # where z sits
        return enc.states if placement == "encoder" else enc.prefix

    for norm, moves in ((True, False), (False, True)):
        model = make(placement=placement, prefix_norm=norm)
        with torch.no_grad():
            strong = torch.randn(model.classifier.weight.shape, generator=torch.Generator().manual_seed(1)) * 0.3
            model.classifier.weight.copy_(strong)                             # alpha about 0.8
            before = read(model.encode(batch))
            model.classifier.weight.zero_()                                   # alpha = 0.5 for every group
            after = read(model.encode(batch))
        assert (not torch.allclose(before, after, atol=1e-4)) == moves, (norm, placement)
