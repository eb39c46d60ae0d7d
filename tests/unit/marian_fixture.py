"""Tiny random Hugging Face ``MarianMTModel`` folders, built offline: two SentencePiece models trained here on a few
hundred lines (each side its own words, as a real language pair), a ``vocab.json`` over both, and a model of a few
small layers whose weights are drawn wide enough that its outputs are peaked (the default init gives near-uniform
distributions, where greedy and beam search would be decided by float rounding). Shared by the unit and integration
tests of ``ctxmt import marian``."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

SRC_WORDS = "ka lu mi no re sa ti vo ze bra cle dri fu gol han jin kor lem mun pir".split()
TGT_WORDS = "the cat dog runs fast slow house tree river bank sky blue red green over under".split()


def sentence(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(2, 7)))


def train_spm(words: list[str], seed: int, size: int = 60) -> bytes:
    """A unigram SentencePiece model with Marian's ids (</s> 0, <unk> 1, no <s>), trained on 400 lines."""
    import sentencepiece as spm

    rng = random.Random(seed)
    text = "\n".join(sentence(rng, words) for _ in range(400))
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text.splitlines()), model_writer=model, vocab_size=size,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2, bos_id=-1,
                                   eos_id=0, unk_id=1, character_coverage=1.0)
    return model.getvalue()


def marian_vocab(src: bytes, tgt: bytes, extra: tuple[str, ...] = ()) -> dict:
    """``vocab.json`` as Marian's conversion writes it: </s> 0, <unk> 1, the pieces of both models, <pad> last."""
    import sentencepiece as spm

    pieces = ["</s>", "<unk>"]
    for proto in (src, tgt):
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                   if not (sp.is_control(i) or sp.is_unknown(i)) and sp.id_to_piece(i) not in pieces]
    pieces += [p for p in extra if p not in pieces]
    return {p: i for i, p in enumerate(pieces + ["<pad>"])}


def build_marian(folder: Path, *, activation: str = "swish", scale: bool = True, bias: bool = True,
                 d: int = 32, layers: int = 2, seed: int = 0, eos_boost: float = 4.0, vocab_json: dict | None = None,
                 **config) -> Path:
    """Save a tiny random MarianMTModel and its tokenizer to ``folder`` (save_pretrained); returns the folder."""
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    src, tgt = train_spm(SRC_WORDS, 1), train_spm(TGT_WORDS, 2)
    vocab = vocab_json or marian_vocab(src, tgt)
    scratch = folder / "_tok"
    scratch.mkdir(exist_ok=True)
    (scratch / "source.spm").write_bytes(src)
    (scratch / "target.spm").write_bytes(tgt)
    (scratch / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = MarianTokenizer(str(scratch / "source.spm"), str(scratch / "target.spm"), str(scratch / "vocab.json"),
                                source_lang="xx", target_lang="en")
    pad = vocab["<pad>"]
    settings = dict(vocab_size=len(vocab), d_model=d, encoder_layers=layers, decoder_layers=layers,
                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=2 * d, decoder_ffn_dim=2 * d,
                    max_position_embeddings=128, activation_function=activation, scale_embedding=scale,
                    pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
                    dropout=0.1, attention_dropout=0.0, activation_dropout=0.0)
    settings.update(config)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**settings)).eval()
    with torch.no_grad():                                  # peaked outputs (see the module docstring)
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3)
        model.model.shared.weight[pad].zero_()             # Marian's pad row: zeros (the decoder start)
        # sentences that end: the last decoder layer's output LayerNorm shifts every state towards </s>, so that
        # searches finish before their length limit (where Hugging Face's forced </s> and ctxmt's differ)
        eos = model.model.shared.weight[0]
        model.model.decoder.layers[-1].final_layer_norm.bias.add_(eos * (eos_boost / eos.dot(eos)))
        if bias:
            model.final_logits_bias.normal_(0.0, 1.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    for leftover in scratch.iterdir():
        leftover.unlink()
    scratch.rmdir()
    return folder


