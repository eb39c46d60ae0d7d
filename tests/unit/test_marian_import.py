"""``ctxmt import marian``: an imported tiny random MarianMTModel computes what transformers computes.

No network: every model is built here with transformers (:mod:`tests.unit.marian_fixture`). For each supported
configuration (activation, embedding scaling, final logits bias) the imported checkpoint must give transformers'
log-probabilities on a padded batch, its tokenization, and the same greedy and beam outputs as ``generate``.

How the searches are made comparable: ctxmt's ``lenpen`` and transformers' ``length_penalty`` are the same thing (the
summed log-probability divided by the number of generated tokens, ``</s>`` included, to that power), ``min_len=1``
is ``min_new_tokens=1`` and pad is banned on both sides (``bad_words_ids``, as OPUS-MT's generation config does).
ctxmt's ``max_len`` M counts the tokens before ``</s>``: ``max_new_tokens=M+1`` with ``forced_eos_token_id``. At
that limit the two differ by definition (transformers' forced ``</s>`` adds log-probability 0, ctxmt's its own),
so beam outputs are compared on the rows whose best hypothesis ends by itself before the limit (at least a third
of them); greedy outputs (where the limit changes no token) are compared on every row. With a length penalty the
two beam searches stop by different rules (see the test that says so).
"""

from __future__ import annotations

import json
import random

import pytest
import torch

from ctxmt_cli.convert.marian import import_marian
from ctxmt_cli.convert.marian_config import model_section
from ctxmt_cli.core.batch import Batch
from ctxmt_cli.data.batching import collate
from ctxmt_cli.decode.search import beam_search, greedy_search
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.loading import load_model
from tests.unit.marian_fixture import SRC_WORDS, TGT_WORDS, build_marian, sentence

pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")

#: every value of every option at least once: (activation, scale_embedding, final_logits_bias)
CONFIGS = [("swish", True, True), ("relu", False, True), ("gelu", True, False), ("swish", False, False)]
LIMIT = 30


class Pair:
    """A tiny Marian folder, its import, and both toolkits' views of it."""

    def __init__(self, root, activation, scale, bias):
        import numpy as np
        from transformers import MarianMTModel, MarianTokenizer

        self.folder = build_marian(root / "marian", activation=activation, scale=scale, bias=bias)
        self.ckpt = root / "imported.pt"
        import_marian(self.folder, self.ckpt)
        loaded = load_model(self.ckpt)
        self.model, self.tok = loaded.model, loaded.tokenizer
        self.hf = MarianMTModel.from_pretrained(self.folder).eval()
        self.hf_tok = MarianTokenizer.from_pretrained(self.folder)
        self.vocab = json.loads((self.folder / "vocab.json").read_text(encoding="utf-8"))
        pieces = {self.tok.piece(i): i for i in range(self.tok.tgt_vocab_size)}
        # Marian id -> ctxmt id (Marian's pad is ctxmt's decoder start, <s>)
        self.to_ctxmt = torch.tensor([pieces["<s>" if p == "<pad>" else p] for p, _ in
                                      sorted(self.vocab.items(), key=lambda kv: kv[1])])
        rng = random.Random(5)
        self.src = [sentence(rng, SRC_WORDS) for _ in range(16)] + ["ka lu XY!", "ze"]
        self.tgt = [sentence(rng, TGT_WORDS) for _ in range(len(self.src))]
        self.hf_batch = self.hf_tok(self.src, text_target=self.tgt, padding=True, return_tensors="pt")
        eos = self.tok.eos_id
        self.batch = collate([np.array(self.tok.encode_src(t) + [eos]) for t in self.src],
                             [np.array(self.tok.encode_tgt(t) + [eos]) for t in self.tgt],
                             self.tok.pad_id, self.tok.bos_id)

    def marian_ids(self, ids: list[int]) -> list[int]:
        back = {int(c): m for m, c in enumerate(self.to_ctxmt.tolist())}
        return [back[i] for i in ids]

    def generate(self, beam: int, lenpen: float) -> list[list[int]]:
        """transformers' outputs in Marian ids, without the start token, pad and the final </s>."""
        pad = self.vocab["<pad>"]
        out = self.hf.generate(input_ids=self.hf_batch["input_ids"], attention_mask=self.hf_batch["attention_mask"],
                               num_beams=beam, length_penalty=lenpen, max_new_tokens=LIMIT + 1, min_new_tokens=1,
                               do_sample=False, bad_words_ids=[[pad]], forced_eos_token_id=0, early_stopping=False)
        rows = [[int(t) for t in row[1:] if int(t) != pad] for row in out]
        return [row[:-1] if row and row[-1] == 0 else row for row in rows]


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"{c[0]}-scale{int(c[1])}-bias{int(c[2])}")
def pair(request, tmp_path_factory):
    return Pair(tmp_path_factory.mktemp("marian"), *request.param)


def test_tokenization_is_marians(pair):
    """Both sides segment exactly as MarianTokenizer does, in the shared table's ids (and decode to its text)."""
    want, pad = pair.hf_batch["input_ids"], pair.vocab["<pad>"]
    for row, text in enumerate(pair.src):
        ids = pair.marian_ids(pair.tok.encode_src(text)) + [0]
        assert ids == [int(t) for t in want[row] if int(t) != pad], text
    for row, text in enumerate(pair.tgt):
        ids = pair.tok.encode_tgt(text)
        assert pair.marian_ids(ids) + [0] == [int(t) for t in pair.hf_batch["labels"][row] if int(t) not in (-100, pad)]
        assert pair.tok.decode_tgt(ids) == pair.hf_tok.decode(pair.marian_ids(ids), skip_special_tokens=True)


def test_log_probabilities_equal_transformers_on_a_padded_batch(pair):
    with torch.no_grad():
        ours = pair.model(pair.batch).logits.float().log_softmax(-1)                    # (B, T, V')
        theirs = pair.hf(**pair.hf_batch).logits.log_softmax(-1)                         # (B, T, V)
    real = pair.batch.tgt_out != pair.tok.pad_id                                          # (B, T)
    assert bool((pair.hf_batch["attention_mask"] == 0).any())                             # rows are padded
    torch.testing.assert_close(ours[..., pair.to_ctxmt][real], theirs[:, :ours.size(1)][real], atol=1e-4, rtol=1e-4)
    # the ids Marian lacks (pad, <brk>) have probability 0: the distribution over Marian's ids is whole
    total = ours[..., pair.to_ctxmt].exp().sum(-1)[real]
    torch.testing.assert_close(total, torch.ones_like(total), atol=1e-5, rtol=0)


def test_greedy_equals_generate(pair):
    hyps = greedy_search(pair.model, Batch(src=pair.batch.src), max_len=LIMIT, min_len=1)
    assert [pair.marian_ids(h.tokens) for h in hyps] == pair.generate(1, 1.0)


def normalised_score(pair, row: int, tokens: list[int], lenpen: float) -> float:
    """ctxmt's score of the ctxmt ids ``tokens`` for source row ``row``: Σ log p (</s> included) / (len + 1)^lenpen."""
    src = pair.batch.src[row:row + 1]
    tgt_in = torch.tensor([[pair.tok.bos_id] + tokens])
    tgt_out = torch.tensor([tokens + [pair.tok.eos_id]])
    with torch.no_grad():
        total = pair.model.target_logprobs(Batch(src=src, tgt_in=tgt_in, tgt_out=tgt_out)).sum().item()
    return total / (len(tokens) + 1) ** lenpen


def test_beam_equals_generate_with_no_length_penalty(pair):
    """lenpen 0: a hypothesis' score only falls as it grows, so both searches stop exactly when nothing can beat
    their best; same candidates, same best."""
    hyps = beam_search(pair.model, Batch(src=pair.batch.src), beam=4, lenpen=0.0, max_len=LIMIT, min_len=1)
    theirs = pair.generate(4, 0.0)
    natural = [i for i, row in enumerate(theirs) if len(row) < LIMIT]
    assert len(natural) >= len(theirs) // 3, [len(r) for r in theirs]
    assert [pair.marian_ids(hyps[i].tokens) for i in natural] == [theirs[i] for i in natural]


@pytest.mark.parametrize("beam, lenpen", [(4, 1.0), (5, 0.6)])
def test_beam_with_a_length_penalty_differs_only_by_the_stopping_rule(pair, beam, lenpen):
    """lenpen > 0: a longer hypothesis may still overtake, and each toolkit stops on its own rule (ctxmt: no live
    hypothesis beats the best finished one at its current length; transformers: none beats the worst of the beam's
    finished ones, so it searches longer). Most rows agree; where they differ, transformers found a longer
    hypothesis that ctxmt's own model scores higher: the models agree, only the search went on."""
    hyps = beam_search(pair.model, Batch(src=pair.batch.src), beam=beam, lenpen=lenpen, max_len=LIMIT, min_len=1)
    theirs = pair.generate(beam, lenpen)
    natural = [i for i, row in enumerate(theirs) if len(row) < LIMIT]
    same = [i for i in natural if pair.marian_ids(hyps[i].tokens) == theirs[i]]
    assert len(same) >= len(theirs) // 3, (len(same), len(natural))
    for i in set(natural) - set(same):
        longer = pair.to_ctxmt[theirs[i]].tolist()
        assert len(longer) > len(hyps[i].tokens)
        assert normalised_score(pair, i, longer, lenpen) >= hyps[i].score - 1e-5


BASE = {"model_type": "marian", "d_model": 16, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
        "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "encoder_layers": 1, "decoder_layers": 1, "vocab_size": 50,
        "pad_token_id": 49, "decoder_start_token_id": 49, "eos_token_id": 0, "max_position_embeddings": 64,
        "activation_function": "swish", "scale_embedding": True}


@pytest.mark.parametrize("key, value", [
    ("share_encoder_decoder_embeddings", False), ("tie_word_embeddings", False), ("normalize_before", True),
    ("normalize_embedding", True), ("add_final_layer_norm", True), ("static_position_embeddings", False),
    ("activation_function", "gelu_new"), ("decoder_vocab_size", 60), ("decoder_attention_heads", 2),
    ("decoder_ffn_dim", 64), ("decoder_start_token_id", 0), ("model_type", "bart"), ("d_model", 18),
    ("encoder_layers", 0), ("dropout", 1.5),
])
def test_unsupported_configurations_are_one_line_naming_field_and_value(key, value, tmp_path):
    with pytest.raises(CtxmtError) as err:
        model_section({**BASE, key: value}, tmp_path / "config.json")
    text = str(err.value)
    assert "\n" not in text and key in text and json.dumps(value) in text, text


def test_supported_configuration_maps_every_option(tmp_path):
    section = model_section({**BASE, "activation_function": "silu", "scale_embedding": False,
                             "normalize_before": False, "static_position_embeddings": True}, tmp_path / "config.json")
    assert (section["activation"], section["scale_embeddings"], section["sinusoid"], section["output_bias"]) == \
        ("swish", False, "marian", True)
    assert (section["normalize_before"], section["share_embeddings"], section["d_model"]) == (False, "all", 16)
