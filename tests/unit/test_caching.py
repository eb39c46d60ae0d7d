"""Caching family (Sequence Shortening for Context-Aware MT, 2023): every option, tested by properties of the
model, never by stored floats.

Shapes and masks, window splitting, padding invariance, context order (oldest -> newest),
window path == memory path, incremental decoding == forward, cached translation ==
recomputed translation (and no sentence encoded twice), gradient blocking, any K at
inference, rows without context, gradients of the learned parts, recipe checks, scoring.
"""

import random
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, Fold, VocabInfo
from ctxmt_cli.core.probe import Collect
from ctxmt_cli.data.batching import collate, pad_rows
from ctxmt_cli.decode.search import beam_search, greedy_search
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.translator import translate_documents
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive import score_testset
from ctxmt_cli.evaluate.testsets import ContrastiveItem, TestSet
from ctxmt_cli.models.caching.model import Caching
from ctxmt_cli.models.families import build_model
from tests.unit.biased_model import Biased
from tests.unit.tiny_text import sentence

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)
D = 32
TINY = {"preset": None, "d_model": D, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 2,
        "dropout": 0.0, "family": "caching", "src_context_sentences": 2, "grad_context_sentences": 1,
        "categorizer_hidden": 16}

#: every option of the family appears in at least one config
CONFIGS = {
    "tokens": {"repr": "tokens"},
    "tokens-current": {"repr": "tokens", "include_current": True, "integration": "parallel"},
    "tokens-parallel-gate": {"repr": "tokens", "integration": "parallel", "gate": True},
    "tokens-concat": {"repr": "tokens", "integration": "concat"},
    "multi-encoder": {"repr": "tokens", "integration": "concat", "encoder": "separate"},
    "sentence": {"repr": "sentence"},
    "sentence-no-current": {"repr": "sentence", "include_current": False, "gate": True},
    "max": {"repr": "pooling", "pooling": "max"},
    "avg-parallel": {"repr": "pooling", "pooling": "avg", "pool_size": 3, "integration": "parallel"},
    "linear-gate": {"repr": "pooling", "pooling": "linear", "gate": True},
    "grouping-softmax": {"repr": "grouping", "groups": 3, "normalizer": "softmax"},
    "grouping-sparsemax": {"repr": "grouping", "groups": 3, "normalizer": "sparsemax", "integration": "parallel",
                           "gate": True},
    "grouping-separate": {"repr": "grouping", "groups": 2, "normalizer": "softmax", "encoder": "separate"},
    "selecting": {"repr": "selecting", "groups": 3, "normalizer": "sparsemax"},
    "selecting-concat": {"repr": "selecting", "groups": 2, "normalizer": "softmax", "integration": "concat",
                         "include_current": False},
    "bare-tokens": {"repr": "tokens", "segment_embeddings": False, "context_positions": False},
    "bare-avg-concat": {"repr": "pooling", "pooling": "avg", "integration": "concat", "segment_embeddings": False,
                        "context_positions": False},
    "post-norm": {"repr": "grouping", "groups": 3, "normalizer": "softmax", "normalize_before": False},
}
NAMES = sorted(CONFIGS)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


def make_model(spec, vocab: VocabInfo = VOCAB, seed: int = 0, scale: float = 0.35, **over) -> Caching:
    """A tiny caching model with weights larger than the init (outputs vary), in eval mode."""
    spec = CONFIGS[spec] if isinstance(spec, str) else spec
    torch.manual_seed(seed)
    spec = {**spec, **over}
    if spec.get("encoder") == "separate" and spec.get("grad_context_sentences", 0) == 0:
        spec.setdefault("include_current", True)  # else the schema refuses: the context encoder would never train
    cfg = validate_recipe({"model": {**TINY, **spec}}).model
    model = build_model(cfg, vocab)
    assert isinstance(model, Caching)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, scale)
        model.src_embed.weight[vocab.pad].zero_()
        model.tgt_embed.weight[vocab.pad].zero_()
    return model.eval()


# ---- data -------------------------------------------------------------------------------------
C1, C2, S0 = [7, 8, 9], [10, 11], [12, 13, 14, 15]
D1, S1 = [16, 17, 18, 19, 20], [21, 22]
S2 = [23, 24, 25]
#: (context sentences oldest first, current sentence, target); row 2 has no context
ROWS = [([C1, C2], S0, [26, 27, 28, 29]), ([D1], S1, [30, 31]), ([], S2, [32, 33, 34, 35, 36])]


def window(context, current) -> list[int]:
    ids: list[int] = []
    for sent in context:
        ids += sent + [BRK]
    return ids + current + [EOS]


def make_batch(rows) -> Batch:
    sources = [np.asarray(window(c, s)) for c, s, _ in rows]
    return collate(sources, [np.asarray(t + [EOS]) for _, _, t in rows], PAD, BOS)


def entry_len(cfg, n: int) -> int:
    """Length of the cache entry of a sentence of ``n`` tokens (``</s>`` included)."""
    return {"tokens": n, "sentence": 1, "pooling": -(-n // cfg.pool_size), "grouping": cfg.groups or 0,
            "selecting": cfg.groups or 0}[cfg.repr]


def entries(model, sentences) -> list[torch.Tensor]:
    """Cache entries of ``sentences`` as the translator computes them: each encoded as a current sentence."""
    # an (empty) memory selects the translation path, which always returns the new entry for the cache
    src = pad_rows([np.asarray(s + [EOS]) for s in sentences], PAD)
    enc = model.encode(Batch(src=src, memory=[[] for _ in sentences]))
    return [enc.entry.states[i][enc.entry.mask[i]] for i in range(len(sentences))]


def memory_batch(model, rows) -> Batch:
    """The current sentences of ``rows`` with Batch.memory = the entries of their context sentences."""
    context = [c for ctx, _, _ in rows for c in ctx]
    ents = entries(model, context) if context else []
    memory, i = [], 0
    for ctx, _, _ in rows:
        memory.append(ents[i:i + len(ctx)])
        i += len(ctx)
    base = make_batch(rows)
    src = pad_rows([np.asarray(s + [EOS]) for _, s, _ in rows], PAD)
    return Batch(src=src, tgt_in=base.tgt_in, tgt_out=base.tgt_out, memory=memory)


def embed(model, entry: torch.Tensor, slot: int) -> torch.Tensor:
    """Explicit slot + position embedding of one entry (the documented layout)."""
    if model.segment is not None:
        entry = entry + model.segment.weight[min(slot, model.segment.num_embeddings - 1)]
    if model.context_pos is not None:
        entry = entry + model.context_pos.weight[: entry.size(0)]
    return entry


def ce_loss(model, batch) -> torch.Tensor:
    logits = model(batch).logits
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD)


def close(a, b, atol=1e-5):
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-5)


# ---- 1. shapes and masks ----------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_masks(name):
    model, batch = make_model(name), make_batch(ROWS)
    cfg, b = model.cfg, len(ROWS)
    with torch.no_grad():
        logits = model(batch).logits
        enc = model.encode(batch)
    assert logits.shape == (b, batch.tgt_in.size(1), VOCAB.tgt_size)
    assert torch.isfinite(logits).all()
    cur_len = [len(s) + 1 for _, s, _ in ROWS]
    cur_mask = torch.arange(max(cur_len))[None, :] < torch.tensor(cur_len)[:, None]      # (B, L)
    own = [entry_len(cfg, n) for n in cur_len]
    wanted = [sum(entry_len(cfg, len(c) + 1) for c in ctx) + (own[r] if cfg.current_in_context else 0)
              for r, (ctx, _, _) in enumerate(ROWS)]
    context, cmask = enc.context.states, enc.context.mask
    assert context.shape == (b, max(1, max(wanted)), D) and cmask.shape == context.shape[:2]
    assert cmask.dtype == torch.bool
    for r, n in enumerate(wanted):
        real = n if n else (0 if cfg.integration == "concat" else 1)      # the zero "no context" entry
        assert cmask[r].sum() == real and cmask[r, :real].all()           # real entries first, padding right
    assert (context[~cmask] == 0).all()
    if cfg.current_in_context:
        entry, emask = enc.entry.states, enc.entry.mask
        assert entry.dim() == 3 and entry.size(0) == b and entry.size(2) == D and emask.shape == entry.shape[:2]
        assert emask.sum(1).tolist() == own
    else:                                     # training/scoring compute the own entry only when the context uses it
        assert enc.entry is None
        with torch.no_grad():
            assert [e.size(0) for e in entries(model, [s for _, s, _ in ROWS])] == own
    if cfg.integration == "concat":
        assert enc.states.shape == (b, context.size(1) + max(cur_len), D)
        assert torch.equal(enc.mask, torch.cat([cmask, cur_mask], dim=1))
    else:
        assert enc.states.shape == (b, max(cur_len), D)
        assert torch.equal(enc.mask, cur_mask)


def split_windows(src: torch.Tensor, vocab: VocabInfo) -> tuple[list[list[int]], list[int], list[int]]:
    """Plain-Python reference of ``split_sentences``: sentences closed by ``</s>``, their row and distance.

    ``c1 <brk> c2 <brk> s </s>`` gives ``[c1 </s>], [c2 </s>], [s </s>]`` with
    distances 2, 1, 0: a context sentence looks exactly as it did when it was current.
    """
    sentences, rows, dist = [], [], []
    for r, row in enumerate(src.tolist()):
        parts, cur = [], []
        for tok in row:
            if tok == vocab.pad:
                break
            if tok in (vocab.brk, vocab.eos):
                parts.append(cur + [vocab.eos])
                cur = []
            else:
                cur.append(tok)
        for i, part in enumerate(parts):
            sentences.append(part)
            rows.append(r)
            dist.append(len(parts) - 1 - i)
    return sentences, rows, dist


# ---- 2. window splitting ----------------------------------------------------------------------
def test_split_windows_sentences_rows_and_distances():
    rows = ROWS + [([[5, 6], [7], [8, 9, 10]], [11], [12])]
    sentences, row, dist = split_windows(make_batch(rows).src, VOCAB)
    assert sentences == [C1 + [EOS], C2 + [EOS], S0 + [EOS], D1 + [EOS], S1 + [EOS], S2 + [EOS],
                         [5, 6, EOS], [7, EOS], [8, 9, 10, EOS], [11, EOS]]
    assert row == [0, 0, 0, 1, 1, 2, 3, 3, 3, 3]
    assert dist == [2, 1, 0, 1, 0, 0, 3, 2, 1, 0]                         # oldest has the largest distance
    # every sentence looks as it did when it was current: closed by </s>, no <brk>, no padding
    assert all(s[-1] == EOS and BRK not in s and PAD not in s for s in sentences)
    one, r1, d1 = split_windows(torch.tensor([[5, 6, EOS, PAD, PAD]]), VOCAB)
    assert (one, r1, d1) == ([[5, 6, EOS]], [0], [0])                      # a row without context


def test_vectorised_split_agrees_with_split_windows():
    import ctxmt_cli.models.caching.model as caching

    split = getattr(caching, "split_sentences", None)                      # the tensor version encode() uses
    if split is None:
        pytest.skip("no vectorised splitter in this version of the family")
    src = make_batch(ROWS + [([[5, 6], [7], [8, 9, 10]], [11], [12])]).src
    sent, row, dist = split(src, VOCAB)
    sentences, rows, dists = split_windows(src, VOCAB)
    assert [[t for t in s if t != PAD] for s in sent.tolist()] == sentences
    assert row.tolist() == rows and dist.tolist() == dists


# ---- 4. context order ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tokens", "tokens-current", "grouping-softmax", "grouping-sparsemax",
                                  "multi-encoder", "sentence", "max"])


def test_context_memory_is_oldest_first(name):
    model = make_model(name)
    row = ROWS[0]
    with torch.no_grad():
        e1, e2 = entries(model, [C1, C2])
        enc = model.encode(make_batch([row]))
        parts = [embed(model, e1, 2), embed(model, e2, 1)]                 # oldest has the largest slot
        if model.cfg.current_in_context:
            parts.append(embed(model, enc.entry.states[0][enc.entry.mask[0]], 0))
        expected = torch.cat(parts)
        close(enc.context.states[0], expected)
        mem = model.encode(Batch(src=torch.tensor([S0 + [EOS]]), memory=[[e1, e2]]))
        close(mem.context.states[0], expected)
        swapped_mem = model.encode(Batch(src=torch.tensor([S0 + [EOS]]), memory=[[e2, e1]]))
        assert not torch.allclose(swapped_mem.context.states, mem.context.states)


@pytest.mark.parametrize("name", ["tokens", "grouping-softmax", "grouping-sparsemax", "tokens-concat"])
def test_swapping_context_sentences_changes_the_output(name):
    model = make_model(name)
    assert model.segment is not None
    with torch.no_grad():
        ordered = model(make_batch([ROWS[0]])).logits
        swapped = model(make_batch([([C2, C1], S0, ROWS[0][2])])).logits
    assert (ordered - swapped).abs().max() > 1e-3


# ---- 5. window path == memory path ------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_window_path_equals_memory_path(name):
    model = make_model(name)
    with torch.no_grad():
        win_batch, mem_batch = make_batch(ROWS), memory_batch(model, ROWS)
        win, mem = model.encode(win_batch), model.encode(mem_batch)
        shared = ("context", "entry") if model.cfg.current_in_context else ("context",)
        for key in shared:
            close(getattr(win, key).states, getattr(mem, key).states)
            assert torch.equal(getattr(win, key).mask, getattr(mem, key).mask)
        close(win.states, mem.states)
        assert torch.equal(win.mask, mem.mask)
        close(model(win_batch).logits, model(mem_batch).logits)


@pytest.mark.parametrize("name", ["tokens", "tokens-parallel-gate", "tokens-concat", "multi-encoder",
                                  "grouping-sparsemax", "linear-gate"])


def test_beam_one_equals_greedy_and_memory_path_beam_equals_window_path(name):
    model = make_model(name)
    win = Batch(src=make_batch(ROWS).src)
    greedy = greedy_search(model, win, max_len=8)
    beam1 = beam_search(model, win, beam=1, max_len=8)
    assert [h.tokens for h in beam1] == [h.tokens for h in greedy]
    assert [h.score for h in beam1] == pytest.approx([h.score for h in greedy], abs=1e-5)
    mem = memory_batch(model, ROWS)
    wide_win = beam_search(model, win, beam=3, max_len=8)                   # reorder_state moves the context
    wide_mem = beam_search(model, Batch(src=mem.src, memory=mem.memory), beam=3, max_len=8)
    assert [h.tokens for h in wide_win] == [h.tokens for h in wide_mem]
    assert len({tuple(h.tokens) for h in wide_win}) > 1                     # not a degenerate model


# ---- 7. cached translation == recomputed translation ------------------------------------------
def tok_vocab(tok) -> VocabInfo:
    return VocabInfo(src_size=tok.src_vocab_size, tgt_size=tok.tgt_vocab_size, brk=tok.brk_id)


def tok_model(tok, name, brk_bias=0.0, **over):
    return Biased(make_model(name, tok_vocab(tok), **over), eos=3.0, brk=brk_bias)


def documents(seed=1, sizes=(4, 1, 3, 2)):
    rng = random.Random(seed)
    docs = [[sentence(rng) for _ in range(n)] for n in sizes]
    docs[0][1] = ""                                                         # an empty line inside a document
    docs.append([])                                                         # an empty document
    return docs


def translate(model, tok, docs, cache, **kw):
    """Translate with the test's settings (``kw``: settings to change, or ``stats``)."""
    args = {"src_context_sentences": 2, "tgt_context_sentences": 0, "beam": 2, "max_len_b": 5, "lenpen": 0.6}
    call = {k: kw.pop(k) for k in ("stats", "progress") if k in kw}
    return translate_documents(model, tok, docs, DecodeSettings(cache=cache, **{**args, **kw}), **call)


@pytest.mark.parametrize("name", ["tokens", "tokens-concat", "multi-encoder", "grouping-sparsemax", "linear-gate",
                                  "selecting-concat", "sentence"])


def test_cached_translation_equals_recomputed_context(tokenizer, name):
    model, docs = tok_model(tokenizer, name), documents()
    cached = translate(model, tokenizer, docs, cache=True)
    fresh = translate(model, tokenizer, docs, cache=False)
    assert cached == fresh
    assert [len(d) for d in cached] == [len(d) for d in docs] and cached[0][1] == ""
    assert len({line for d in cached for line in d if line}) > 2            # outputs vary
    assert cached != translate(model, tokenizer, docs, cache=True, src_context_sentences=0)  # and depend on the context
    # a small window budget drops the oldest context sentences on both paths alike
    small = {"max_window_tokens": 14}
    assert translate(model, tokenizer, docs, True, **small) == translate(model, tokenizer, docs, False, **small)


@pytest.mark.parametrize("name, encoders", [("tokens", ("main",)), ("grouping-softmax", ("main",)),
                                            ("multi-encoder", ("main", "context"))])


def test_no_sentence_is_encoded_twice_with_the_cache(tokenizer, monkeypatch, name, encoders):
    model, docs = tok_model(tokenizer, name), documents()
    inner, seen = model.inner, []
    original = inner.encode_source

    def spy(src, probe=None, layers=None, norm=None):
        kind = "main" if layers is None else "context"
        seen.extend((kind, tuple(t for t in row if t != PAD)) for row in src.tolist())
        return original(src, probe, layers=layers, norm=norm)

    monkeypatch.setattr(inner, "encode_source", spy)
    stats = TranslationStats()
    # whole documents (one slot): each sentence is encoded once; cut into pieces (decode/pieces.py), a piece's
    # context sentences are encoded again for its memory, and nothing else is
    translate(model, tokenizer, docs, cache=True, stats=stats, batch_docs=1)
    sentences = Counter(tuple(tokenizer.encode_src(s) + [tokenizer.eos_id]) for d in docs for s in d if s.strip())
    assert stats.sentences == sum(sentences.values())
    for kind in encoders:                                                   # each sentence once per encoder
        assert Counter(s for k, s in seen if k == kind) == sentences
    assert {k for k, _ in seen} == set(encoders)
    seen.clear()
    translate(model, tokenizer, docs, cache=True, batch_docs=64)
    for kind in encoders:
        again = Counter(s for k, s in seen if k == kind) - sentences
        assert set(again) <= set(sentences) and sum(again.values()) <= 2 * sum(sentences.values())
    seen.clear()
    translate(model, tokenizer, docs, cache=False)
    assert max(Counter(seen).values()) > 1                                  # the windows re-encode the context


@pytest.mark.parametrize("name", ["tokens", "multi-encoder"])
def test_generate_mode_fallback_with_the_cache_equals_recompute(tokenizer, name):
    """A stray <brk> makes generate mode re-decode in prefix mode: the retry must see the same cached context."""
    model, docs = tok_model(tokenizer, name, brk_bias=6.0), documents()
    s_cached, s_fresh = TranslationStats(), TranslationStats()
    cached = translate(model, tokenizer, docs, cache=True, target_mode="generate", stats=s_cached)
    fresh = translate(model, tokenizer, docs, cache=False, target_mode="generate", stats=s_fresh)
    assert s_cached.fallbacks == s_fresh.fallbacks > 0
    assert cached == fresh


@pytest.mark.parametrize("cache", [True, False])
def test_translation_builds_no_autograd_graph(tokenizer, monkeypatch, cache):
    """Decoding needs no gradient: no encoder pass of a translation may record an autograd graph
    (it would keep every activation alive and inflate the operation memory the benchmark measures)."""
    model, docs = tok_model(tokenizer, "grouping-sparsemax"), documents(sizes=(3, 2))
    inner, tracked = model.inner, []
    original = inner.encode_source

    def spy(src, probe=None, layers=None, norm=None):
        out = original(src, probe, layers=layers, norm=norm)
        tracked.append(out.states.requires_grad)
        return out

    monkeypatch.setattr(inner, "encode_source", spy)
    translate(model, tokenizer, docs, cache=cache)
    assert tracked and not any(tracked)


# ---- 8. gradient blocking ---------------------------------------------------------------------
FAR, NEAR, CUR, TGT = [30, 31, 32], [33, 34], [35, 36, 37], [5, 6, 7, 8]


def encoder_grads(model, batch, loss_fn) -> dict:
    model.zero_grad(set_to_none=True)
    loss_fn(model, batch).backward()
    prefixes = ("encoder_layers", "context_layers", "encoder_norm", "context_norm", "src_embed")
    return {n: p.grad.clone() for n, p in model.named_parameters() if n.startswith(prefixes) and p.grad is not None}


def context_loss(model, batch):
    """A loss on the context memory only: its encoder gradient comes from the context sentences' entries alone."""
    context = model.encode(batch).context.states
    weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(5))
    return (context * weights).sum()


@pytest.mark.parametrize("name", ["tokens", "grouping-softmax", "max", "multi-encoder"])
def test_far_context_sentences_give_the_encoder_no_gradient(name):
    spec = {**CONFIGS[name], "include_current": False}
    blocked, open_ = make_model(spec).train(), make_model(spec, grad_context_sentences=2).train()
    base = make_batch([([FAR, NEAR], CUR, TGT)])
    far = make_batch([([[38, 39, 30], NEAR], CUR, TGT)])                  # same lengths, other far sentence
    near = make_batch([([FAR, [38, 39]], CUR, TGT)])                       # same lengths, other near sentence
    g_base, g_far, g_near = (encoder_grads(blocked, b, context_loss) for b in (base, far, near))
    assert g_base and set(g_base) == set(g_far)
    for n in g_base:
        torch.testing.assert_close(g_base[n], g_far[n], atol=0, rtol=0)   # the far sentence adds nothing
    assert any(not torch.allclose(g_base[n], g_near[n]) for n in g_base)  # the near one does
    o_base, o_far = encoder_grads(open_, base, context_loss), encoder_grads(open_, far, context_loss)
    assert any(not torch.allclose(o_base[n], o_far[n]) for n in o_base)   # control: N = 2 lets it through


@pytest.mark.parametrize("grad_n, far_gets, near_gets", [(0, False, False), (1, False, True), (2, True, True)])
@pytest.mark.parametrize("name", ["tokens", "grouping-sparsemax", "multi-encoder"])
def test_gradient_reaches_source_embeddings_of_the_nearest_sentences_only(name, grad_n, far_gets, near_gets):
    model = make_model(name, share_embeddings="none", grad_context_sentences=grad_n).train()
    ce_loss(model, make_batch([([FAR, NEAR], CUR, TGT)])).backward()
    grad = model.src_embed.weight.grad.abs().sum(1)                         # (V,)
    assert (grad[FAR] > 0).all() if far_gets else (grad[FAR] == 0).all()
    assert (grad[NEAR] > 0).all() if near_gets else (grad[NEAR] == 0).all()
    assert (grad[CUR] > 0).all()                                            # the current sentence always


@pytest.mark.parametrize("name", ["tokens", "grouping-softmax", "multi-encoder"])
def test_blocked_sentences_are_encoded_without_autograd(name, monkeypatch):
    model = make_model(name).train()                                        # grad_context_sentences = 1
    calls, original = [], model.encode_source

    def spy(src, probe=None, layers=None, norm=None):
        out = original(src, probe, layers=layers, norm=norm)
        calls.append(([tuple(t for t in row if t != PAD) for row in src.tolist()], out.states.requires_grad))
        return out

    monkeypatch.setattr(model, "encode_source", spy)
    ce_loss(model, make_batch([([FAR, NEAR], CUR, TGT)])).backward()
    grad_of = {}
    for rows, requires in calls:
        for row in rows:
            grad_of.setdefault(row, set()).add(requires)
    assert grad_of[tuple(FAR + [EOS])] == {False}
    assert grad_of[tuple(NEAR + [EOS])] == {True}
    assert grad_of[tuple(CUR + [EOS])] == {True}
    with torch.no_grad():                                                   # inference: nothing needs autograd
        calls.clear()
        model(make_batch([([FAR, NEAR], CUR, TGT)]))
        assert not any(requires for _, requires in calls)


@pytest.mark.parametrize("name", ["grouping-softmax", "selecting-concat", "linear-gate"])
def test_shortener_learns_from_blocked_sentences(name):
    model = make_model(name, include_current=False, grad_context_sentences=0).train()
    ce_loss(model, make_batch([([FAR, NEAR], CUR, TGT)])).backward()
    for n, p in model.shortener.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, n


def shortener_grads(model, batch) -> dict:
    model.zero_grad(set_to_none=True)
    context_loss(model, batch).backward()
    return {n: p.grad.clone() for n, p in model.shortener.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", ["grouping-softmax", "selecting", "linear-gate"])
def test_shortening_learns_from_the_nearest_sentences_only(name):
    """The paper's code (sec. 5.2): gradient into the shortening from the nearest N context sentences, none into the
    encoder; beyond N the entry is detached. ``shortening_grad_context_sentences: null`` lets every sentence in."""
    spec = {**CONFIGS[name], "include_current": False, "grad_context_sentences": 0}
    near_only, every = make_model(spec, shortening_grad_context_sentences=1).train(), make_model(spec).train()
    base = make_batch([([FAR, NEAR], CUR, TGT)])
    far = make_batch([([[38, 39, 30], NEAR], CUR, TGT)])                  # same lengths, other far sentence
    near = make_batch([([FAR, [38, 39]], CUR, TGT)])                       # same lengths, other near sentence
    g_base, g_far, g_near = (shortener_grads(near_only, b) for b in (base, far, near))
    assert g_base and set(g_base) == set(g_far)
    for n in g_base:
        torch.testing.assert_close(g_base[n], g_far[n], atol=0, rtol=0)   # the far sentence adds nothing
    assert any(not torch.allclose(g_base[n], g_near[n]) for n in g_base)  # the near one does
    assert not encoder_grads(near_only, base, context_loss)                 # and the encoder learns from neither
    o_base, o_far = shortener_grads(every, base), shortener_grads(every, far)
    assert any(not torch.allclose(o_base[n], o_far[n]) for n in o_base)   # control: null lets it through


@pytest.mark.parametrize("name", ["grouping-softmax", "max"])
def test_entries_beyond_the_shortening_horizon_are_computed_without_autograd(name, monkeypatch):
    model = make_model(name, include_current=False, grad_context_sentences=0,
                       shortening_grad_context_sentences=1).train()
    calls, original = [], model.shortener.forward

    def spy(states, mask):
        out = original(states, mask)
        calls.append((states.size(0), out[0].requires_grad))
        return out

    monkeypatch.setattr(model.shortener, "forward", spy)
    context_loss(model, make_batch([([FAR, NEAR], CUR, TGT)]))
    assert sorted(calls) == [(1, False), (1, True)]                         # the far entry detached, the near one not


@pytest.mark.parametrize("name", ["grouping-softmax", "avg-parallel"])
def test_eq2_has_no_dropout_unless_asked(name):
    """Eq. 2, G = LayerNorm(G~ + Attn(G~, H, H)), has no dropout on the attention branch (nor has the paper's code):
    ``shortening_dropout`` defaults to 0 whatever the model's dropout."""
    states, mask = torch.randn(2, 5, D), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    plain = make_model(name, dropout=0.3).train()
    torch.testing.assert_close(plain.shortener(states, mask)[0], plain.shortener(states, mask)[0], atol=0, rtol=0)
    noisy = make_model(name, dropout=0.3, shortening_dropout=0.5).train()
    assert not torch.equal(noisy.shortener(states, mask)[0], noisy.shortener(states, mask)[0])


# ---- 9. any K at inference --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tokens", "grouping-sparsemax", "tokens-concat", "multi-encoder"])
def test_a_model_for_one_context_sentence_accepts_three(name):
    model = make_model(name, src_context_sentences=1, grad_context_sentences=0)
    c3 = [[5, 6], C1, C2]
    row = (c3, S0, [26, 27])
    with torch.no_grad():
        logits = model(make_batch([row])).logits
        enc = model.encode(make_batch([row]))
        ents = entries(model, c3)
        # slots clamp to the trained range
        parts = [embed(model, e, slot) for e, slot in zip(ents, (3, 2, 1), strict=True)]
        if model.cfg.current_in_context:
            parts.append(embed(model, enc.entry.states[0][enc.entry.mask[0]], 0))
        close(enc.context.states[0], torch.cat(parts))
        mem = model.encode(Batch(src=torch.tensor([S0 + [EOS]]), memory=[ents]))
        close(mem.context.states, enc.context.states)
    assert torch.isfinite(logits).all()
    assert model.segment.num_embeddings == 2
    with torch.no_grad():                                                   # the older sentences are used
        newest = model(make_batch([([C2], S0, [26, 27])])).logits
    assert (newest - logits).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["tokens", "grouping-sparsemax", "multi-encoder"])
def test_translation_with_more_context_than_trained_cache_equals_recompute(tokenizer, name):
    model = tok_model(tokenizer, name, src_context_sentences=1, grad_context_sentences=0)
    docs = documents(sizes=(5, 3))
    cached = translate(model, tokenizer, docs, cache=True, src_context_sentences=3)
    assert cached == translate(model, tokenizer, docs, cache=False, src_context_sentences=3)


# ---- 10. rows without context -----------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_rows_without_context(name):
    model = make_model(name)
    first = [([], S0, [26, 27, 28]), ([], S2, [30])]
    with torch.no_grad():
        logits = model(make_batch(first)).logits
        enc = model.encode(make_batch(first))
        mixed = model(make_batch(ROWS)).logits
    assert torch.isfinite(logits).all() and torch.isfinite(mixed).all()
    cmask, context = enc.context.mask, enc.context.states
    if model.cfg.current_in_context:                                        # its own entry is the whole context
        assert cmask.sum(1).tolist() == [entry_len(model.cfg, len(s) + 1) for _, s, _ in first]
    elif model.cfg.integration == "concat":                                 # the zero entry is masked
        assert context.shape[1] == 1 and not cmask.any() and (context == 0).all()
        assert not enc.mask[:, 0].any() and enc.mask[:, 1:].sum(1).tolist() == [len(s) + 1 for _, s, _ in first]
    else:                                                                   # one zero entry, attended to
        assert context.shape[1] == 1 and cmask.all() and (context == 0).all()


# ---- 11. learned components get gradients -----------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_gets_a_gradient(name):
    model = make_model(name, scale=0.15, grad_context_sentences=2).train()
    ce_loss(model, make_batch(ROWS)).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing
    if model.segment is not None:                                           # slots 1, 2 (and 0 for the own entry)
        used = [0, 1, 2] if model.cfg.current_in_context else [1, 2]
        assert (model.segment.weight.grad[used].abs().sum(1) > 0).all()
    if model.context_pos is not None:
        first = 1 if model.cfg.repr == "sentence" else 2                   # one-vector entries use position 0 only
        assert (model.context_pos.weight.grad[:first].abs().sum(1) > 0).all()
    for layer in model.decoder_layers:
        if model.cfg.integration == "concat":
            assert layer.context is None
        else:
            assert layer.context.attn.q_proj.weight.grad.abs().sum() > 0
            assert (layer.context.gate is not None) == model.cfg.gate
    assert (model.context_layers is not None) == (model.cfg.encoder == "separate")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["grouping-sparsemax", "selecting", "max", "tokens-concat", "sentence-no-current"])
def test_mixed_precision_forward_and_backward_stay_finite(name, dtype):
    model = make_model(name).train()
    with torch.autocast("cpu", dtype=dtype):
        logits = model(make_batch(ROWS)).logits
    assert torch.isfinite(logits).all()
    F.cross_entropy(logits.float().flatten(0, 1), make_batch(ROWS).tgt_out.flatten(), ignore_index=PAD).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("name", ["tokens", "tokens-parallel-gate", "grouping-sparsemax", "tokens-concat"])
def test_context_attention_weights_skip_padding(name):
    model, batch = make_model(name), make_batch(ROWS)
    probe = Collect()
    with torch.no_grad():
        model(batch, probe=probe)
        cmask = model.encode(batch).context.mask
    if model.cfg.integration == "concat":                                   # the context is cross-attention memory
        assert "context" not in probe.maps
        return
    for w in probe.maps["context"]:                                         # per layer (B, H, T, Mc)
        assert w.shape == (len(ROWS), 4, batch.tgt_in.size(1), cmask.size(1))
        close(w.sum(-1), torch.ones(w.shape[:-1]))
        assert (w.masked_select(~cmask[:, None, None, :]) == 0).all()


# ---- 12. bad recipes --------------------------------------------------------------------------
@pytest.mark.parametrize("spec, key", [
    ({"repr": "grouping"}, "groups"),
    ({"repr": "selecting", "normalizer": "softmax"}, "groups"),
    ({"repr": "tokens", "groups": 4}, "groups"),
    ({"repr": "grouping", "groups": 0}, "groups"),
    ({"repr": "pooling"}, "pooling"),
    ({"repr": "sentence", "pooling": "max"}, "pooling"),
    ({"repr": "pooling", "pooling": "median"}, "pooling"),
    ({"repr": "pooling", "pooling": "avg", "pool_size": 0}, "pool_size"),
    ({"integration": "concat", "gate": True}, "gate"),
    ({"src_context_sentences": 1, "grad_context_sentences": 2}, "grad_context_sentences"),
    ({"encoder": "both"}, "encoder"),
    ({"encoder": "separate", "integration": "concat", "grad_context_sentences": 0},
     "grad_context_sentences"),
    ({"repr": "tokens", "shortening_grad_context_sentences": 1}, "shortening_grad_context_sentences"),
    ({"repr": "sentence", "shortening_grad_context_sentences": 0}, "shortening_grad_context_sentences"),
    ({"repr": "pooling", "pooling": "avg", "src_context_sentences": 1, "shortening_grad_context_sentences": 2},
     "shortening_grad_context_sentences"),
    ({"repr": "grouping", "groups": 2, "src_context_sentences": 2, "grad_context_sentences": 2,
      "shortening_grad_context_sentences": 1}, "grad_context_sentences"),
    ({"repr": "tokens", "shortening_dropout": 0.1}, "shortening_dropout"),
    ({"repr": "grouping", "groups": 2, "shortening_dropout": 1.0}, "shortening_dropout"),
    ({"repr": "grouping", "groups": 3, "normalizer": "entmax"}, "normalizer"),
    ({"grup": 3}, "groups"),                                                # misspelt: did you mean
])


def test_bad_recipe_combinations_are_rejected(spec, key):
    with pytest.raises(CtxmtError) as err:
        validate_recipe({"model": {"family": "caching", **spec}}, "r.yaml")
    message = str(err.value)
    assert message.startswith("r.yaml: ") and "model" in message and key in message and "\n" not in message


# ---- 13. contrastive scoring through the core contract ----------------------------------------
def forward_logprob(model, tok, src_sents, cand) -> float:
    """Reference: one unbatched forward pass over the source window, log-prob of the candidate."""
    src = sum(([*tok.encode_src(s), tok.brk_id] for s in src_sents[:-1]), []) + tok.encode_src(src_sents[-1])
    src.append(tok.eos_id)
    batch = collate([np.asarray(src)], [np.asarray(tok.encode_tgt(cand) + [tok.eos_id])], tok.pad_id, tok.bos_id)
    with torch.no_grad():
        lp = model(batch).logits.log_softmax(-1)[0].gather(-1, batch.tgt_out[0].unsqueeze(-1)).squeeze(-1)
    return float(lp.sum())


@pytest.mark.parametrize("name", ["tokens", "multi-encoder", "grouping-sparsemax", "avg-parallel"])
def test_contrastive_scores_equal_an_unbatched_forward_pass(tokenizer, name):
    model = make_model(name, tok_vocab(tokenizer))
    rng = random.Random(3)
    items = []
    for _ in range(8):
        k = rng.randint(0, 3)
        cands = [sentence(rng) for _ in range(rng.randint(2, 3))]
        src_context, src = [sentence(rng) for _ in range(k)], sentence(rng)
        tgt_context = [sentence(rng) for _ in range(k)]
        items.append(ContrastiveItem(src_context, src, tgt_context, cands, tags={"distance": k}))
    ts = TestSet(name="toy", kind="jsonl", items=items)
    scores = score_testset(model, tokenizer, ts, normalize="none", max_tokens=120)
    keep = model.cfg.src_context_sentences
    for item, row in zip(items, scores, strict=True):
        src = item.src_context[len(item.src_context) - keep:] + [item.src]
        for k, cand in enumerate(item.candidates):
            assert row[k] == pytest.approx(forward_logprob(model, tokenizer, src, cand), abs=1e-4)


# ---- 14. context state in the search ----------------------------------------------------------
def test_context_state_is_shared_by_beams_and_gathered_when_permuted():
    model, batch = make_model("tokens"), make_batch(ROWS)
    b = len(ROWS)
    with torch.no_grad():
        state = model.init_state(model.encode(batch), batch)
        logits, _ = model.decode_step(state.pending, state)                  # (B, V)
        beams = state.index_select(torch.arange(b).repeat_interleave(3))
        assert beams.context.k[0] is state.context.k[0]                      # beams share the rows: no copy
        assert beams.context.for_rows()[3] == Fold(3)
        beam_logits, _ = model.decode_step(beams.pending, beams)
        close(beam_logits, logits.repeat_interleave(3, dim=0))
        perm = torch.tensor([2, 0, 1])[:b] if b == 3 else torch.randperm(b)
        permuted = state.index_select(perm)
        assert permuted.context.for_rows()[3] == Fold()                         # permuted rows: gathered per row
        perm_logits, _ = model.decode_step(permuted.pending, permuted)
        close(perm_logits, logits[perm])
        dropped = beams.index_select(torch.arange(3, 3 * b))                 # the first document leaves the search
        assert dropped.context.k[0] is beams.context.k[0]                    # its rows stay, an empty slot: no copy
        assert dropped.context.for_rows()[3].slots.tolist() == list(range(3, 3 * b))
        drop_logits, _ = model.decode_step(dropped.pending, dropped)
        close(drop_logits, logits[1:].repeat_interleave(3, dim=0))


@pytest.mark.parametrize("cache", [True, False])
def test_given_translations_still_fill_the_document_cache(tokenizer, cache):
    from ctxmt_cli.decode.translator import decode_documents

    model, docs = tok_model(tokenizer, "tokens"), documents()
    settings = DecodeSettings(src_context_sentences=2, beam=2, max_len_b=5, cache=cache)
    whole = decode_documents(model, tokenizer, docs, settings)
    given = [[list(c[0].tokens) if c else "" for c in d[:2]] for d in whole]
    continued = decode_documents(model, tokenizer, docs, settings, given=given)
    # the cached sources of given sentences: the same translations (scores to float32 rounding: the two calls
    # batch different rows, and a matmul's summation order follows its row count)
    def kept(out):
        return [[[(c.tokens, pytest.approx(c.logprob, abs=1e-5)) for c in s] for s in d[2:]] for d in out]
    assert kept(continued) == kept(whole)
    assert sum(len(d) > 2 for d in docs) and [d[:2] for d in continued] == [[None] * min(len(d), 2) for d in docs]
