"""The vocabulary of a prepared dataset: a seeded SentencePiece sample, or a model reused (--spm, --vocab-from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxmt_cli.data.prepare import PrepareSpec, SplitInput, prepare_corpus
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.errors import CtxmtError

WORDS = "the a cat dog sat ran here there on under big small red blue".split()


def write_pairs(directory: Path, name: str, n: int, seed: int = 0) -> SplitInput:
    """``n`` pairs of 3-8 words (the target: the source reversed and upper-cased), a blank line every 10."""
    import random

    rng = random.Random(seed)
    src = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]
    lines = {"en": [], "fr": []}
    for k, s in enumerate(src):
        lines["en"].append(s)
        lines["fr"].append(" ".join(reversed(s.split())).upper())
        if k % 10 == 9 and k + 1 < n:
            lines["en"].append("")
            lines["fr"].append("")
    for lang, text in lines.items():
        (directory / f"{name}.{lang}").write_text("\n".join(text) + "\n", encoding="utf-8")
    return SplitInput(directory / f"{name}.en", directory / f"{name}.fr")


def spec(tmp: Path, out: str, train: SplitInput, **kw) -> PrepareSpec:
    return PrepareSpec(fmt="text", splits={"train": train}, src_lang="en", tgt_lang="fr", out=tmp / out,
                       vocab_size=kw.pop("vocab_size", 60), workers=1, **kw)


def test_the_sample_is_seeded_and_bounded(tmp_path):
    train = write_pairs(tmp_path, "train", 600)
    a = prepare_corpus(spec(tmp_path, "a", train, spm_sample=100))
    b = prepare_corpus(spec(tmp_path, "b", train, spm_sample=100))
    assert 50 < a["vocabulary"]["sampled_pairs"] < 160                  # about the sample asked for
    assert a["vocabulary"] == b["vocabulary"] and a["tokenizer_fingerprint"] == b["tokenizer_fingerprint"]
    assert a["splits"]["train"]["sentences"] == 600                     # the sample only trains the model
    whole = prepare_corpus(spec(tmp_path, "c", train))
    assert whole["vocabulary"]["sampled_pairs"] == 600


def test_vocab_from_and_spm_share_one_vocabulary(tmp_path):
    first = prepare_corpus(spec(tmp_path, "first", write_pairs(tmp_path, "one", 300)))
    other = write_pairs(tmp_path, "two", 200, seed=1)
    from_dir = prepare_corpus(spec(tmp_path, "from_dir", other, vocab_from=tmp_path / "first"))
    from_model = prepare_corpus(spec(tmp_path, "from_model", other, spm=tmp_path / "first" / "spm.model"))
    for meta in (from_dir, from_model):
        assert meta["tokenizer_fingerprint"] == first["tokenizer_fingerprint"]
        assert meta["vocab_size"] == first["vocab_size"]
    assert from_dir["vocabulary"]["reused"] == str((tmp_path / "first").resolve())
    assert from_model["vocabulary"]["option"] == "--spm"
    data = PreparedData(tmp_path / "from_dir")
    assert data.tokenizer.fingerprint() == first["tokenizer_fingerprint"]   # checked against meta on load
    assert json.loads((tmp_path / "from_dir/meta.json").read_text())["splits"]["train"]["sentences"] == 200


def test_reuse_errors_are_one_line(tmp_path):
    train = write_pairs(tmp_path, "t", 50)
    with pytest.raises(CtxmtError, match="not both"):
        prepare_corpus(spec(tmp_path, "x", train, spm=tmp_path / "m", vocab_from=tmp_path))
    with pytest.raises(CtxmtError, match="`spm`: SentencePiece model not found"):
        prepare_corpus(spec(tmp_path, "x", train, spm=tmp_path / "missing.model"))
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(CtxmtError, match="is not a SentencePiece model"):
        prepare_corpus(spec(tmp_path, "x", train, spm=junk))
    with pytest.raises(CtxmtError, match="is not a prepared dataset"):
        prepare_corpus(spec(tmp_path, "x", train, vocab_from=tmp_path))
    prepare_corpus(spec(tmp_path, "plain", train))
    with pytest.raises(CtxmtError, match="prepared without `moses`.*drop `moses`"):
        prepare_corpus(spec(tmp_path, "x", train, vocab_from=tmp_path / "plain", moses=True))
    assert not (tmp_path / "x").exists()
