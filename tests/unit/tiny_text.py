"""Tiny artificial text and a SentencePiece tokenizer trained on it, shared by the decoding and scoring tests."""

from __future__ import annotations

import random

import pytest

from ctxmt_cli.data.tokenize import Tokenizer, train_sentencepiece

WORDS = "ka lu mi no re sa ti vo ze bra cle dri fu gol han jin kor lem mun pir".split()


def sentence(rng: random.Random) -> str:
    """2-6 random words."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    """A real joint SentencePiece model (vocabulary 60) trained on 400 tiny sentences."""
    tmp = tmp_path_factory.mktemp("spm")
    rng = random.Random(0)
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(sentence(rng) for _ in range(400)) + "\n", encoding="utf-8")
    return Tokenizer(train_sentencepiece(corpus, tmp / "spm", vocab_size=60).read_bytes())
