"""Training speed on real length distributions, where padding waste counts (part of ``train``).

Sentence lengths come from real text, tokenised with a SentencePiece model trained on it: SCAT's
En->Fr training examples (``../shared/data/scat``, markers stripped) and the synthetic benchmark.
Token ids are random (only the lengths matter for the cost). Every implementation trains on the same
sentences, one pass in its own batching:

* ctxmt: its trainer's batching (:func:`ctxmt_cli.data.batching.token_batches`: length-bucketed, a
  token budget on the padded batch size);
* peers: what their default training loops do: shuffled sentences, a fixed number of sentences per
  batch (the one giving ~4096 target tokens at the mean length), padded to the longest row.

Both batchings are made over a pool of 4000 sentences (training sets are far larger: a pool of a few
hundred sentences gives two or three batches, which no batching can fill without padding); one timed
run trains on the leading batches of each shuffled batch list up to about ``timed_tokens`` real target
tokens (:func:`leading`). The figure is real (non-padding) target tokens per second of that run.
"""

from __future__ import annotations

import random
import re
import tempfile
from pathlib import Path

import bench_util as bu  # a sibling: train.py puts this folder on the path
import numpy as np

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.data.batching import BatchBudget, collate, token_batches
from ctxmt_cli.data.tokenize import Tokenizer, train_sentencepiece

SCAT = bu.shared_data("scat")
MARKERS = re.compile(r"</?p>|<hon>|<hoff>")
BUDGET = 4096


def scat_pairs(limit: int) -> list[tuple[str, str]]:
    """SCAT training examples (current sentences), markers stripped; empty when ../shared/data is absent."""
    en, fr = SCAT / "highlighted.train.en", SCAT / "highlighted.train.fr"
    if not en.is_file():
        return []
    pairs = zip(en.read_text(encoding="utf-8").splitlines(), fr.read_text(encoding="utf-8").splitlines(), strict=False)
    return [(MARKERS.sub("", s).strip(), MARKERS.sub("", t).strip()) for s, t in list(pairs)[:limit]]


def synthetic_pairs(limit: int) -> list[tuple[str, str]]:
    """Sentence pairs of the synthetic benchmark's training documents."""
    from ctxmt_cli.synthetic.documents import make_corpus
    from ctxmt_cli.synthetic.lexicon import build_lexicon

    docs = make_corpus(build_lexicon(1), 1, 400)["train"]
    return [(s, t) for doc in docs for s, t, *_ in doc][:limit]


def lengths(pairs: list[tuple[str, str]], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Source/target token counts (+ ``</s>``) with a SentencePiece model trained on the pairs themselves."""
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "text.txt"
        text.write_text("\n".join(x for pair in pairs for x in pair) + "\n", encoding="utf-8")
        tok = Tokenizer(train_sentencepiece(text, Path(tmp) / "spm", 8000).read_bytes())
    src = np.array([min(len(ids), max_len - 1) + 1 for ids in tok.encode_batch([s for s, _ in pairs], "src")])
    tgt = np.array([min(len(ids), max_len - 1) + 1 for ids in tok.encode_batch([t for _, t in pairs], "tgt")])
    return src, tgt


def random_rows(lens: np.ndarray, vocab: int, seed: int) -> list[np.ndarray]:
    """Random token rows of the given lengths, each ending in ``</s>`` (id 3); ids avoid the specials."""
    rng = np.random.default_rng(seed)
    rows = [rng.integers(5, vocab, size=n) for n in lens]
    for row in rows:
        row[-1] = 3
    return rows


def ctxmt_batches(src: list, tgt: list, src_len, tgt_len, seed: int) -> list[Batch]:
    """ctxmt's trainer batching: length-bucketed, token budget on the padded size."""
    ids = token_batches(src_len, tgt_len + 1, np.arange(len(src)), budget=BatchBudget(max_tokens=BUDGET), seed=seed)
    return [collate([src[j] for j in b], [tgt[j] for j in b], 0, 2) for b in ids]


def shuffled_batches(src: list, tgt: list, tgt_len, seed: int) -> list[Batch]:
    """The peers' default: shuffled, fixed sentences per batch (~BUDGET target tokens at the mean length)."""
    per_batch = max(1, int(BUDGET / float(np.mean(tgt_len))))
    order = list(range(len(src)))
    random.Random(seed).shuffle(order)
    chunks = [order[i:i + per_batch] for i in range(0, len(order), per_batch)]
    return [collate([src[j] for j in c], [tgt[j] for j in c], 0, 2) for c in chunks]


POOL = 4000                   # sentences batched per corpus


def timed_tokens(preset: str, quick: bool) -> int:
    """Real target tokens per timed run: one batch or so quick, ~10 otherwise; tiny is the smoke test."""
    return 600 if preset == "tiny" else (4_000 if quick else 40_000)


def leading(batches: list[Batch], tokens: int) -> list[Batch]:
    """The first batches of a shuffled batch list holding at least ``tokens`` real target tokens."""
    out, seen = [], 0
    for batch in batches:
        if seen >= tokens:
            break
        out.append(batch)
        seen += int((batch.tgt_out != 0).sum())
    return out


def corpora() -> dict[str, list[tuple[str, str]]]:
    """name -> sentence pairs (SCAT only where ../shared/data is present)."""
    out = {"synthetic": synthetic_pairs(POOL)}
    scat = scat_pairs(POOL)
    if scat:
        out["scat"] = scat
    else:
        print(f"train-*-scat not timed: {SCAT} not found (no ../shared/data; set {bu.SHARED_DATA_ENV})")
    return out


def padding_share(batches: list[Batch], side: str = "tgt") -> float:
    """Share of padding in the target (or ``src``) side of ``batches`` (what the batching wastes)."""
    rows = [b.src if side == "src" else b.tgt_out for b in batches]
    return 1.0 - sum(int((r != 0).sum()) for r in rows) / sum(r.numel() for r in rows)


def pass_over(step, batches: list[Batch]) -> None:
    """One training pass: ``step(batch)`` for every batch."""
    for batch in batches:
        step(batch)


def real_tokens(batches: list[Batch]) -> int:
    return int(sum(int((b.tgt_out != 0).sum()) for b in batches))

