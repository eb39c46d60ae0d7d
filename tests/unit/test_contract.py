"""The core contract, checked on every family and every variant in ``FAMILIES``.

A family joins by its line in the family catalog (``ctxmt_cli.family_catalog``) and the ``VARIANTS`` dict of its
model module (tiny config overrides); every test here then runs on it, with ids like ``caching-grouping``. A
family kept outside the package joins as a plugin does (``add_family``, :data:`PLUGINS`: the toy family of
tests/toy_family/). The contract is written in ``ctxmt_cli/core/model.py``'s docstring and docs/architecture.md.
"""

from __future__ import annotations

import importlib
import random
from dataclasses import replace

import numpy as np
import pytest
import torch
import yaml

from ctxmt_cli.analysis.attention import AttentionStats
from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.core.probe import Collect
from ctxmt_cli.data.batching import collate
from ctxmt_cli.decode import start as start_module
from ctxmt_cli.decode.search import beam_search, greedy_search
from ctxmt_cli.evaluate.contrastive import score_contexts, score_rows, score_testset
from ctxmt_cli.evaluate.testsets import ContrastiveItem, TestSet
from ctxmt_cli.models.families import (
    FAMILIES,
    add_family,
    build_model,
    inputs_of,
    remove_family,
    resolve_model_config,
)
from ctxmt_cli.models.hanoit.bilingual import TargetConcatRows
from ctxmt_cli.models.loading import load_model
from ctxmt_cli.outputs import torch_save
from ctxmt_cli.train.checkpoint import model_payload
from ctxmt_cli.train.step import LossSettings, batch_loss
from tests.toy_family.config import PrevSrcConfig
from tests.toy_family.model import PrevSrc
from tests.unit.biased_model import Biased
from tests.unit.tiny_text import sentence

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
        "dropout": 0.0}
#: what the prepared data's meta.json would give ``resolve`` (concat: shift: auto)
META = {"mean_sentence_length": {"src": 6.4, "tgt": 7.6}}
#: families kept outside the package (name -> config and model class), joined with ``add_family`` while this module
#: runs, as a plugin joins: every test here runs on them too
PLUGINS = {"prevsrc": (PrevSrcConfig, PrevSrc)}


@pytest.fixture(scope="module", autouse=True)
def plugins():
    for config, model in PLUGINS.values():
        add_family(config, model)
    yield
    for name in PLUGINS:
        remove_family(name)


def model_module(family: str):
    """The module of a family's model class: it lists the family's ``VARIANTS`` and ``EXACT_FROM_SENTENCE``."""
    model = PLUGINS[family][1] if family in PLUGINS else FAMILIES[family].model
    return importlib.import_module(model.__module__)


VARIANTS = {f"{family}-{name}": (family, spec) for family in [*FAMILIES, *PLUGINS]
            for name, spec in model_module(family).VARIANTS.items()}
IDS = sorted(VARIANTS)


def test_every_family_declares_variants():
    assert set(PLUGINS) <= set(FAMILIES)
    for family in FAMILIES:
        assert model_module(family).VARIANTS, f"{family} has no contract variants"


def recipe_of(variant: str, extra: dict | None = None):
    family, spec = VARIANTS[variant]
    recipe = validate_recipe({"model": {**TINY, "family": family, **spec, **(extra or {})}})
    return recipe.model_copy(update={"model": resolve_model_config(recipe.model, META)})


def make_model(variant: str, vocab: VocabInfo = VOCAB, seed: int = 0, scale: float | None = None,
               extra: dict | None = None):
    """The variant's model (eval mode); ``scale``: redraw matrices with this std (peaked, varied outputs); ``extra``:
    more model fields (an imported architecture)."""
    torch.manual_seed(seed)
    model = build_model(recipe_of(variant, extra).model, vocab).eval()
    if scale is not None:
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, scale)
    return model


def pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


#: source windows with 2, 0 and 1 context sentences; target windows with as many context sentences. For a model
#: that reads next sentences, up to its number of a row's context sentences are next ones (``next_counts``)
SRC = [[7, 8, BRK, 9, 10, 11, BRK, 12, 13, EOS], [14, 15, 16, EOS], [17, BRK, 18, 19, 20, 21, 22, EOS]]
TGT = [[23, 24, BRK, 25, BRK, 26, 27, 28, EOS], [29, 30, EOS], [31, 32, 33, BRK, 34, EOS]]


def current_only(row: list[int]) -> list[int]:
    return row[max((i for i, t in enumerate(row) if t == BRK), default=-1) + 1:]


def next_counts(model, rows=(0, 1, 2)):
    """``Batch.src_next`` of ``rows``: none for a model without next context, else up to its own number of each
    row's context sentences (row 0: 1 previous + 1 next, row 2: next only, with one next sentence)."""
    n = model.cfg.src_next_sentences
    return torch.tensor([min(n, SRC[r].count(BRK)) for r in rows]) if n else None


def target_rows(model, rows=(0, 1, 2)) -> dict:
    """The target concatenations of ``rows`` (``Batch.extras``) for a model reading one (bilingual HanoiT): each
    row's target context sentences (TGT's, as many as SRC's), then its current *source* sentence, with the source
    window's next counts; nothing for any other model."""
    if not inputs_of(model.cfg).target_concat:
        return {}
    concat = [TGT[r][: len(TGT[r]) - len(current_only(TGT[r]))] + current_only(SRC[r]) for r in rows]
    following = next_counts(model, rows)
    return {"extras": TargetConcatRows(pad(concat), torch.zeros(len(rows), dtype=torch.long)
                                       if following is None else following)}


def sample(model, rows=(0, 1, 2)) -> Batch:
    """Teacher-forcing batch of ``rows``; target windows keep their context only where the model has it."""
    tgt = [TGT[r] if model.cfg.tgt_context_sentences > 0 else current_only(TGT[r]) for r in rows]
    full = pad([[BOS] + t for t in tgt])
    return Batch(src=pad([SRC[r] for r in rows]), tgt_in=full[:, :-1], tgt_out=full[:, 1:],
                 src_next=next_counts(model, rows), **target_rows(model, rows))


def n_target_sentences(batch: Batch) -> torch.Tensor:
    return (batch.tgt_out == BRK).sum(1) + 1                                # (B,)


def real_positions(batch: Batch):
    return [(r, t) for r in range(batch.tgt_out.size(0)) for t in range(batch.tgt_out.size(1))
            if batch.tgt_out[r, t] != PAD]


# ---- incremental decoding = full forward ---------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_incremental_equals_forward(variant):
    model = make_model(variant)
    batch = sample(model)
    with torch.no_grad():
        full = model(batch).logits                                          # (B, T, V)
        state = model.init_state(model.encode(batch), Batch(src=batch.src, tgt_sentences=n_target_sentences(batch)))
        token, steps = state.pending, []
        for t in range(full.size(1)):
            logits, state = model.decode_step(token, state)
            steps.append(logits)
            token = batch.tgt_in[:, t + 1] if t + 1 < batch.tgt_in.size(1) else token
    stepped = torch.stack(steps, 1)                                         # (B, T, V)
    for r, t in real_positions(batch):
        torch.testing.assert_close(stepped[r, t], full[r, t], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", IDS)
def test_forced_prefix_equals_forward(variant):
    """init_state forces prefixes of different lengths in one pass; the next step equals the forward pass."""
    model = make_model(variant)
    batch = sample(model)
    lengths = (batch.tgt_out != PAD).sum(1).tolist()
    cut = [min(c, n) for c, n in zip((6, 2, 4), lengths, strict=True)]                   # prefix lengths per row
    prefix = pad([batch.tgt_in[r, :c].tolist() for r, c in enumerate(cut)])
    with torch.no_grad():
        full = model(batch).logits
        state = model.init_state(model.encode(batch), Batch(src=batch.src, tgt_prefix=prefix,
                                                            tgt_sentences=n_target_sentences(batch)))
        logits, _ = model.decode_step(state.pending, state)
    for r, c in enumerate(cut):
        torch.testing.assert_close(logits[r], full[r, c - 1], atol=1e-5, rtol=1e-5)


# ---- padding and batch composition ---------------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_padding_and_batch_composition_change_nothing(variant):
    model = make_model(variant)
    together = sample(model)
    with torch.no_grad():
        both = model(together).logits
        reordered = model(sample(model, (2, 0, 1))).logits
        alone = [model(sample(model, (r,))).logits[0] for r in range(3)]    # no padding at all
    for r, t in real_positions(together):
        torch.testing.assert_close(both[r, t], alone[r][t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(reordered[(r + 1) % 3, t], alone[r][t], atol=1e-5, rtol=1e-5)


# ---- attention probe -----------------------------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_attention_probe_sees_distributions_and_changes_nothing(variant):
    """Each layer reports each kind once; every real query's map is a distribution over its real (and, causal,
    past) keys; the current-sentence masks lie inside the masks; the probed pass gives the same logits."""
    model = make_model(variant)
    batch, probe = sample(model), Collect()
    with torch.no_grad():
        plain = model(batch).logits
        probed = model(batch, probe=probe).logits
    torch.testing.assert_close(probed, plain, atol=1e-5, rtol=1e-5)
    layers = {"encoder_self": model.cfg.encoder_layers, "decoder_self": model.cfg.decoder_layers,
              "cross": model.cfg.decoder_layers}
    for kind, n in layers.items():
        assert [v.layer for v in probe.views[kind]] == list(range(n)), kind
    for kind, views in probe.views.items():
        for v in views:
            w = v.weights                                                   # (B, H, Tq, Tk)
            if kind == "assignment" and model.cfg.repr == "selecting":     # each group: a distribution over tokens
                w = w.transpose(-1, -2)                                     # (B, 1, K, L)
                v = replace(v, query_mask=v.key_mask, key_mask=v.query_mask, query_current=v.key_current,
                            key_current=v.query_current)
            real = v.query_mask[:, None, :].expand(w.shape[:3])
            torch.testing.assert_close(w.sum(-1)[real], torch.ones(int(real.sum())), atol=1e-5, rtol=0)
            w = w * real[..., None]                                         # padded queries' rows are never read
            assert (w.masked_select(~v.key_mask[:, None, None, :]) == 0).all(), kind
            if v.causal:
                assert (w.triu(1) == 0).all(), kind
            assert not (v.query_current & ~v.query_mask).any() and not (v.key_current & ~v.key_mask).any()


@pytest.mark.parametrize("variant", IDS)
def test_attention_statistics_ignore_padding_and_batch_composition(variant):
    """Per-sentence entropy and share sums of a window are the same in a padded batch and alone."""
    model = make_model(variant)
    tgt = [TGT[r] if model.cfg.tgt_context_sentences > 0 else current_only(TGT[r]) for r in range(3)]

    def windows(rows):                                                      # as the data pipeline collates them
        batch = collate([np.asarray(SRC[r]) for r in rows], [np.asarray(tgt[r]) for r in rows], PAD, BOS,
                        src_next=next_counts(model, rows))
        return replace(batch, **target_rows(model, rows))

    together, alone = AttentionStats(), AttentionStats()
    with torch.no_grad():
        together.rows = [0, 1, 2]
        model(windows([0, 1, 2]), probe=together)
        for r in range(3):
            alone.rows = [r]
            model(windows([r]), probe=alone)
    for r in range(3):
        torch.testing.assert_close(torch.tensor(together.sentences[r]), torch.tensor(alone.sentences[r]),
                                   atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("variant", IDS)
def test_group_packing_changes_nothing(variant):
    """Rows that share a group (the family's ``Inputs.grouped``: a family that summarises its group reads all of
    them) give the same outputs whatever else shares the batch, in whatever order and padding; incremental
    decoding too."""
    model = make_model(variant)
    inputs = inputs_of(model.cfg)

    def grouped(rows, groups):
        return inputs.grouped(sample(model, rows), torch.tensor(groups))

    with torch.no_grad():
        packed = model(grouped((0, 1, 2), [0, 0, 1])).logits                # two groups in one batch
        apart = [model(grouped((0, 1), [0, 0])).logits, model(grouped((2,), [0])).logits]
        shuffled = model(grouped((2, 0, 1), [1, 0, 0])).logits
        batch = grouped((0, 1, 2), [0, 0, 1])
        state = model.init_state(model.encode(batch), Batch(src=batch.src, extras=batch.extras,
                                                            tgt_sentences=n_target_sentences(batch)))
        first, _ = model.decode_step(state.pending, state)
    expected = {0: apart[0][0], 1: apart[0][1], 2: apart[1][0]}
    for r, t in real_positions(batch):
        torch.testing.assert_close(packed[r, t], expected[r][t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(shuffled[(r + 1) % 3, t], expected[r][t], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(first, packed[:, 0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", IDS)
def test_row_chunks_change_nothing(variant):
    """A batch cut into row chunks (``Batch.chunks``), each run at its own width in one forward pass, gives the
    logits of the one padded tensor at every real position, and the same training loss vector and gradients."""
    model = make_model(variant)
    whole = inputs_of(model.cfg).grouped(sample(model), torch.tensor([0, 0, 1]))
    def width(t, a: int, b: int) -> int:                                  # the widest real row of rows a:b
        return int((t[a:b] != PAD).sum(1).max())

    chunks = tuple((a, b, width(whole.src, a, b), width(whole.tgt_out, a, b)) for a, b in ((0, 1), (1, 3)))
    chunked = replace(whole, chunks=chunks)
    assert sum((b - a) * t for a, b, _, t in chunks) < whole.tgt_out.numel()     # padding is really skipped
    settings = LossSettings.from_recipe(recipe_of(variant), VOCAB, model)
    results = []
    for batch in (whole, chunked):
        with torch.no_grad():
            logits = model(batch).logits                                     # (B, T, V)
        model.zero_grad()
        objective, sums = batch_loss(model, batch, settings, "off", torch.device("cpu"))
        objective.backward()
        results.append((logits, sums, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (logits, sums, grads), (c_logits, c_sums, c_grads) = results
    for r, t in real_positions(whole):
        torch.testing.assert_close(c_logits[r, t], logits[r, t], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c_sums, sums, atol=1e-5, rtol=1e-5)
    assert c_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(c_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


# ---- beam 1 = greedy ------------------------------------------------------------------------------
def beam_one_and_greedy(inner) -> tuple[list, list]:
    """Beam search of width 1 and greedy search of ``inner`` (with a bias toward ``</s>``, so outputs end) over
    the sample rows, the target context forced as a prefix where the model reads one."""
    model = Biased(inner, eos=2.0).eval()
    batch = sample(inner)
    prefix = None
    if model.cfg.tgt_context_sentences > 0:                                 # target context forced as a prefix
        prefix = pad([[BOS] + t[: len(t) - len(current_only(t))] for t in TGT])
    query = Batch(src=batch.src, tgt_prefix=prefix, src_next=batch.src_next, **target_rows(inner))
    with torch.no_grad():
        return (beam_search(model, query, beam=1, max_len=10, banned=[BRK]),
                greedy_search(model, query, max_len=10, banned=[BRK]))


@pytest.mark.parametrize("variant", IDS)
def test_beam_one_equals_greedy(variant):
    beam, greedy = beam_one_and_greedy(make_model(variant, scale=0.35))
    assert [h.tokens for h in beam] == [h.tokens for h in greedy]
    assert [h.score for h in beam] == pytest.approx([h.score for h in greedy], abs=1e-5)


# ---- a search started in chunks = one start -------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_search_started_in_chunks_finds_what_one_start_finds(variant, monkeypatch):
    """Rows encoded and their prefixes forced chunk by chunk at their own widths, the states joined
    (:mod:`ctxmt_cli.decode.start`), give the beam search of one start over the padded batch."""
    inner = make_model(variant, scale=0.35)
    model, batch = Biased(inner, eos=2.0).eval(), sample(inner)
    prefix = None
    if model.cfg.tgt_context_sentences > 0:
        prefix = pad([[BOS] + t[: len(t) - len(current_only(t))] for t in TGT])
    query = Batch(src=batch.src, tgt_prefix=prefix, src_next=batch.src_next, **target_rows(inner))
    found = []
    for cost in (10 ** 9, 0):                                               # one chunk; as many as there are widths
        monkeypatch.setattr(start_module, "CHUNK_COST", cost)
        found.append(beam_search(model, query, beam=3, max_len=10, banned=[BRK]))
    assert [h.tokens for h in found[1]] == [h.tokens for h in found[0]]
    assert [h.score for h in found[1]] == pytest.approx([h.score for h in found[0]], abs=1e-5)


# ---- batched scoring = one item at a time --------------------------------------------------------
def toy_set(n_items: int = 5, seed: int = 3) -> TestSet:
    rng = random.Random(seed)
    items = []
    for i in range(n_items):
        k = i % 3                                                           # 0, 1 or 2 context sentences
        cands = [sentence(rng) for _ in range(2)]
        items.append(ContrastiveItem([sentence(rng) for _ in range(k)], sentence(rng),
                                     [sentence(rng) for _ in range(k)], cands))
    return TestSet(name="toy", kind="jsonl", items=items)


def tok_vocab(tok) -> VocabInfo:
    return VocabInfo(src_size=tok.src_vocab_size, tgt_size=tok.tgt_vocab_size, brk=tok.brk_id)


@pytest.mark.parametrize("variant", IDS)
def test_batched_scores_equal_one_by_one(variant, tokenizer):
    model, ts = make_model(variant, tok_vocab(tokenizer)), toy_set()
    batched = score_testset(model, tokenizer, ts, normalize="none", max_tokens=4096)
    tight = score_testset(model, tokenizer, ts, normalize="none", max_tokens=16)   # about one row per batch
    for i, item in enumerate(ts.items):
        alone = score_testset(model, tokenizer, TestSet(name="one", kind="jsonl", items=[item]), normalize="none")
        assert batched[i] == pytest.approx(alone[0], abs=2e-5)
        assert tight[i] == pytest.approx(alone[0], abs=2e-5)
    if model.cfg.src_next_sentences:                                        # rows whose context holds next sentences
        rows = [(it.src_context + [it.src], [it.candidates[0]], 1,
                 min(model.cfg.src_next_sentences, len(it.src_context))) for it in ts.items]
        together = score_rows(model, tokenizer, rows)[0]
        for r, row in enumerate(rows):
            assert together[r] == pytest.approx(score_rows(model, tokenizer, [row])[0][0], abs=2e-5)


@pytest.mark.parametrize("variant", IDS)
def test_scoring_without_context_drops_every_items_context(variant, tokenizer):
    """The context gain's second run (context 0, scored in the same pass as the first): every family scores each
    candidate as if its item had no source or target context at all."""
    model, ts = make_model(variant, tok_vocab(tokenizer)), toy_set()
    bare = TestSet(name="bare", kind="jsonl", items=[ContrastiveItem([], it.src, [], it.candidates) for it in ts.items])
    own, without = score_contexts(model, tokenizer, ts, contexts=(None, 0), normalize="none")
    alone = score_testset(model, tokenizer, ts, normalize="none")
    np.testing.assert_allclose(np.concatenate(own), np.concatenate(alone), atol=2e-5)
    np.testing.assert_allclose(np.concatenate(without), np.concatenate(score_testset(model, tokenizer, bare,
                                                                                     normalize="none")), atol=2e-5)


# ---- gradients -------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_gradients_reach_every_trained_parameter(variant):
    recipe = recipe_of(variant)
    model = make_model(variant).train()
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    settings = LossSettings.from_recipe(recipe, VOCAB, model)
    objective, sums = batch_loss(model, sample(model), settings, "off", torch.device("cpu"))
    objective.backward()
    assert torch.isfinite(sums).all()
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, f"{name} gets no gradient"
    torch.optim.Adam(p for p in model.parameters() if p.requires_grad).step()
    for name, value in frozen.items():
        assert torch.equal(dict(model.named_parameters())[name], value), f"frozen {name} changed"


@pytest.mark.parametrize("variant", IDS)
def test_loss_terms_are_the_declared_ones(variant):
    recipe, model = recipe_of(variant), make_model(variant)
    settings = LossSettings.from_recipe(recipe, VOCAB, model)
    with torch.no_grad():
        _, sums = batch_loss(model, sample(model), settings, "off", torch.device("cpu"))
    metrics = settings.layout.metrics(sums)
    assert set(model.loss_term_names) <= set(metrics)
    assert metrics["tokens"] == float((sample(model).tgt_out != PAD).sum())


# ---- save -> load -----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_save_load_gives_identical_outputs(variant, tokenizer, tmp_path):
    vocab = tok_vocab(tokenizer)
    model = make_model(variant, vocab, scale=0.2)
    path = torch_save(model_payload(recipe_to_dict(recipe_of(variant)), tokenizer, vocab, META, model),
                       tmp_path / "model.pt")
    loaded = load_model(path).model
    assert type(loaded) is type(model)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    batch = sample(model)
    batch.src.clamp_(max=vocab.src_size - 1)
    with torch.no_grad():
        assert torch.equal(model(batch).logits, loaded(batch).logits)
        query = Batch(src=batch.src, src_next=batch.src_next, **target_rows(model))
        assert [h.tokens for h in beam_search(model, query, beam=2, max_len=6)] == \
            [h.tokens for h in beam_search(loaded, query, beam=2, max_len=6)]


# ---- the resolved recipe round-trips ------------------------------------------------------------
@pytest.mark.parametrize("variant", IDS)
def test_resolved_recipe_round_trips(variant):
    recipe = recipe_of(variant)
    again = validate_recipe(yaml.safe_load(yaml.safe_dump(recipe_to_dict(recipe))))
    assert again == recipe
    assert resolve_model_config(again.model, META) == recipe.model          # resolving twice changes nothing
    assert build_model(again.model, VOCAB).num_parameters() == build_model(recipe.model, VOCAB).num_parameters()


# ---- update 0 of a run started from a sentence-level model (train.init_from) ----------------------------------
def kl_per_token(p_log: torch.Tensor, q_log: torch.Tensor) -> float:
    """Mean KL(p || q) over the positions of two (B, T, V) log-distributions."""
    return (p_log.exp() * (p_log - q_log)).sum(-1).mean().item()


#: the architecture `ctxmt import marian` gives an OPUS-MT model (swish, scaled embeddings as their configs set them,
#: Marian's sinusoids, an output bias)
IMPORTED = {"normalize_before": False, "activation": "swish", "scale_embeddings": True, "sinusoid": "marian",
            "output_bias": True}


#: variants whose fresh additions move an imported (post-norm, swish) start further than the KL bound allows: the
#: additions are sized for ctxmt's pre-norm default; found by this test, left for a follow-up (strict: a fix shows)
IMPORTED_FAR = {"caching-pooling-linear", "concat-persistent-learned"}


@pytest.mark.parametrize("start", ["trained", "imported"])
@pytest.mark.parametrize("variant", IDS)
def test_start_from_sentence_model(variant, start, request):
    """What each family declares (``EXACT_FROM_SENTENCE`` in its model module) holds at update 0 on a one-sentence
    window: its exact variants give the sentence model's logits; the others start closer to the sentence model
    than a fresh model of the variant is (KL below 3/4 of the fresh model's), and not on it (the declaration is
    not loose). ``imported``: the sentence model has an imported Marian model's architecture and output bias (pad
    and ``<brk>`` muted, as ``ctxmt import marian`` writes them), and the family takes it from the checkpoint."""
    from ctxmt_cli.convert.marian_vocab import MUTED_BIAS
    from ctxmt_cli.train.init_from import ARCHITECTURE, load_matching

    if start == "imported" and variant in IMPORTED_FAR:
        request.applymarker(pytest.mark.xfail(strict=True, reason="fresh additions too large for a post-norm start"))
    family, name = VARIANTS[variant][0], variant.split("-", 1)[1]
    extra = IMPORTED if start == "imported" else None
    started, fresh = make_model(variant, seed=1, extra=extra), make_model(variant, seed=1, extra=extra)
    arch = {key: getattr(started.cfg, key) for key in ARCHITECTURE}
    torch.manual_seed(0)
    sentence_model = build_model(validate_recipe({"model": {**TINY, "family": "sentence", **arch}}).model, VOCAB)
    with torch.no_grad():                                    # peaked outputs, far from a fresh model's
        for p in sentence_model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3)
        if start == "imported":
            sentence_model.output.bias.normal_(0.0, 1.0)[[VOCAB.pad, VOCAB.brk]] = MUTED_BIAS
    loaded, new, _ = load_matching(started, sentence_model.state_dict(), "sentence.pt")
    assert loaded == len(sentence_model.state_dict())
    with torch.no_grad():
        reference = sentence_model.eval()(sample(sentence_model, rows=(1,))).logits.log_softmax(-1)   # (1, T, V)
        start = started(sample(started, rows=(1,))).logits.log_softmax(-1)
        scratch = fresh(sample(fresh, rows=(1,))).logits.log_softmax(-1)
    exact = model_module(family).EXACT_FROM_SENTENCE
    if name in exact:
        torch.testing.assert_close(start, reference, atol=1e-5, rtol=1e-5)
        return
    distance, baseline = kl_per_token(reference, start), kl_per_token(reference, scratch)
    assert 1e-6 < distance < 0.75 * baseline, (distance, baseline, new)
