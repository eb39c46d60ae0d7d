"""DocRepair's second pass: groups of first-pass sentences rewritten by a (tiny, real) model, in document order."""

from __future__ import annotations

import random

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.docrepair import join_group
from ctxmt_cli.decode.repair import RepairStats, repair_documents, repair_group_size, split_groups
from ctxmt_cli.decode.search import beam_search
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.loading import LoadedModel
from tests.unit.biased_model import Biased
from tests.unit.tiny_text import sentence

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


class WordEach(Biased):
    """Writes one sentence per input sentence: a word first, then ``<brk>`` while sentences are due, then the last
    sentence's words and ``</s>`` (decoding only; the words are the real model's choice)."""

    def decode_step(self, tokens, state):
        logits, state = self.inner.decode_step(tokens, state)
        logits, v = self._bias(logits), self.vocab                        # (B, V)
        start = (tokens == v.bos) | (tokens == v.brk)                     # (B,) a sentence begins: a word first
        due = ~start & (state.sent_idx < state.n_sent - 1)                # (B,) its word is written: <brk> next
        logits[start, v.brk] = logits[start, v.eos] = float("-inf")
        logits[due] = float("-inf")
        logits[due, v.brk] = 0.0
        logits[~start & ~due, v.brk] = float("-inf")
        return logits, state


def repair_model(tokenizer, brk_rule: str, max_window_tokens: int = 1024) -> LoadedModel:
    """A tiny sentence-level model; ``words`` writes one sentence per input sentence, ``ban`` never a ``<brk>``."""
    torch.manual_seed(0)
    recipe = validate_recipe({"model": {"family": "sentence", **TINY}, "data": {"max_window_tokens": max_window_tokens},
                              "decode": {"beam": 2, "max_len_b": 4}})
    vocab = VocabInfo.of(tokenizer)
    model = build_model(recipe.model, vocab)
    with torch.no_grad():                                                   # varied outputs, not one repeated token
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    biased = (WordEach(model, eos=2.0) if brk_rule == "words" else Biased(model, eos=2.0, brk_rule=brk_rule)).eval()
    return LoadedModel(biased, recipe, tokenizer, vocab, {"docrepair": {"group_size": 4}})


def documents(sizes=(6, 1, 4, 9)):
    rng = random.Random(3)
    return [[sentence(rng) for _ in range(n)] for n in sizes]


def alone(loaded, lines: list[str]) -> list[str]:
    """The repair of one group decoded on its own: its text cut at <brk>."""
    tok, sp = loaded.tokenizer, VocabInfo.of(loaded.tokenizer)
    src = join_group([tok.encode_src(s) for s in lines], sp.brk) + [sp.eos]
    batch = Batch(src=torch.tensor([src]), tgt_prefix=torch.tensor([[sp.bos]]),
                  tgt_sentences=torch.tensor([len(lines)]))
    limit = int(loaded.recipe.decode.max_len_a * (len(src) - 1) + loaded.recipe.decode.max_len_b)
    hyp = beam_search(loaded.model, batch, beam=2, lenpen=loaded.recipe.decode.lenpen, max_len=limit, banned=())[0]
    return [tok.decode_tgt(part) for part in split_groups(hyp.tokens, sp.brk)]


def test_each_group_is_rewritten_as_if_alone_in_document_order(tokenizer):
    loaded, docs = repair_model(tokenizer, "words"), documents()
    stats = RepairStats()
    out = repair_documents(loaded, docs, group_size=4, batch_groups=3, stats=stats)
    assert [len(d) for d in out] == [len(d) for d in docs]
    assert (stats.groups, stats.fallbacks, stats.too_long) == (2 + 1 + 1 + 3, 0, 0)
    for doc, rewritten in zip(docs, out, strict=True):
        for start in range(0, len(doc), 4):                                 # disjoint groups, short tail
            assert rewritten[start:start + 4] == alone(loaded, doc[start:start + 4])


def test_a_rewrite_with_the_wrong_sentence_count_keeps_the_first_pass(tokenizer):
    loaded, docs = repair_model(tokenizer, "ban"), documents((6, 1))
    stats = RepairStats()
    out = repair_documents(loaded, docs, group_size=4, stats=stats)
    assert out[0] == docs[0]                                                # groups of 4 and 2: no <brk> ever
    assert out[1] == alone(loaded, docs[1])                                 # a group of one needs none
    assert (stats.groups, stats.fallbacks) == (3, 2)


def test_a_rewrite_with_an_empty_sentence_keeps_the_first_pass(tokenizer):
    """``script`` writes its separators first: the count is right but the first sentences are empty, which
    would print as blank lines, i.e. as document boundaries."""
    loaded, docs = repair_model(tokenizer, "script"), documents((5,))
    stats = RepairStats()
    out = repair_documents(loaded, docs, group_size=4, stats=stats)
    assert out[0][:4] == docs[0][:4] and out[0][4] == alone(loaded, docs[0][4:])[0]
    assert (stats.groups, stats.fallbacks) == (2, 1) and all(line.strip() for line in out[0])


def test_empty_lines_stay_empty_and_take_no_place_in_a_group(tokenizer):
    loaded, docs = repair_model(tokenizer, "words"), documents((6,))
    with_blank = [docs[0][:2] + [""] + docs[0][2:]]
    out = repair_documents(loaded, with_blank, group_size=4)[0]
    assert out[2] == ""
    assert out[:2] + out[3:] == repair_documents(loaded, docs, group_size=4)[0]


def test_groups_longer_than_the_model_reads_keep_the_first_pass(tokenizer):
    loaded, docs = repair_model(tokenizer, "words", max_window_tokens=12), documents((8,))
    stats = RepairStats()
    out = repair_documents(loaded, docs, group_size=4, stats=stats)
    assert stats.too_long == 2 and out == docs


def test_a_checkpoint_of_another_corpus_is_not_a_repair_model(tokenizer):
    loaded = repair_model(tokenizer, "words")
    assert repair_group_size(loaded, "r.pt") == 4
    loaded.meta = {}
    with pytest.raises(CtxmtError, match="not a DocRepair model"):
        repair_group_size(loaded, "r.pt")


def test_split_groups_cuts_at_every_separator():
    assert split_groups([5, 4, 6, 7, 4, 8], brk=4) == [[5], [6, 7], [8]]
    assert split_groups([4], brk=4) == [[], []]
    assert split_groups([], brk=4) == [[]]
