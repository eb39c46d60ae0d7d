"""Contrastive scoring speed: ctxmt's scorer vs a plain forward pass over the same batches.

Scores Voita's deixis test set (2500 groups x 2 candidate groups of 4 sentences,
En->Ru) with a randomly initialised ``small`` s4to4 concatenation model on CPU
threads and prints candidate pairs per second for

* ctxmt       -- ``score_testset`` end to end (SentencePiece, windows, batching, forward, log-probs);
* forward     -- the peer: only ``model(batch)`` over pre-collated length-bucketed batches of the same rows
                 (no tokenisation, no log-softmax, nothing shared between candidates);
* per-example -- one batch per item, as contextual-mt's scorer does (timed on the first --per-example items).

and the ratios ctxmt / peer. Target: ctxmt >= 1.0x the plain forward pass.

    python -m ctxmt_cli.benchmarks.contrastive_speed [--data ../shared/data/voita_consistency] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from ctxmt_cli.config import DEFAULT_MAX_TOKENS, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.batching import BatchBudget, collate, token_batches
from ctxmt_cli.data.tokenize import Tokenizer, train_sentencepiece
from ctxmt_cli.evaluate.contrastive import _Encoder, candidate_rows, score_testset
from ctxmt_cli.evaluate.testsets import load_testsets
from ctxmt_cli.heap import keep_freed_memory
from ctxmt_cli.models.families import build_model

ROOT = Path(__file__).resolve().parents[2]


def build(testset, preset: str):
    """A joint SentencePiece model trained on the set's own text, and a random s4to4 model."""
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "text.txt"
        lines = {s for item in testset.items for s in item.src_context + [item.src] + item.candidates}
        lines |= {s for item in testset.items for ctx in (item.candidate_contexts or []) for s in ctx}
        corpus.write_text("\n".join(sorted(lines)) + "\n", encoding="utf-8")
        tok = Tokenizer(train_sentencepiece(corpus, Path(tmp) / "spm", 8000).read_bytes(), src_lang="en", tgt_lang="ru")
    cfg = validate_recipe({"model": {"family": "concat", "preset": preset, "src_context_sentences": 3,
                                     "tgt_context_sentences": 3, "shift": 10}}).model
    torch.manual_seed(0)
    model = build_model(cfg, VocabInfo(tok.src_vocab_size, tok.tgt_vocab_size, brk=tok.brk_id)).eval()
    return tok, model


def plain_batches(testset, tok, model, max_tokens: int):
    """The same rows as the scorer, collated into standard length-bucketed batches (one row per candidate)."""
    enc = _Encoder(tok, testset.pretokenized)
    rows = [r for item in testset.items for k in range(len(item.candidates))
            for r in candidate_rows(item, k, 3, 3, "all")]
    enc.prime("src", (s for r in rows for s in r[0]))
    enc.prime("tgt", (s for r in rows for s in r[1]))
    src = [enc.window("src", r[0]) for r in rows]
    tgt = [enc.window("tgt", r[1]) for r in rows]
    lens = np.array([len(s) for s in src]), np.array([len(t) + 1 for t in tgt])
    ids = token_batches(*lens, np.arange(len(rows)), budget=BatchBudget(max_tokens=max_tokens), shuffle=False)
    return [collate([src[j] for j in b], [tgt[j] for j in b], tok.pad_id, tok.bos_id) for b in ids], src, tgt


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "voita_consistency")
    parser.add_argument("--set", default="deixis_test")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument("--per-example", type=int, default=200, help="items timed for the one-batch-per-item peer")
    args = parser.parse_args()
    keep_freed_memory()                  # the heap setting every ctxmt command starts with (ctxmt_cli.heap)
    torch.set_num_threads(args.threads)
    testset = next(ts for ts in load_testsets("voita", args.data / f"{args.set}.json"))
    tok, model = build(testset, args.preset)
    pairs = sum(len(item.candidates) for item in testset.items)
    print(f"{args.set}: {len(testset.items)} groups, {pairs} candidate pairs; {args.preset} s4to4, "
          f"{model.num_parameters():,} parameters, {args.threads} threads")

    batches, src, tgt = plain_batches(testset, tok, model, args.max_tokens)
    with torch.inference_mode():
        model(batches[0])  # warm-up
        t_forward = timed(lambda: [model(b) for b in batches])
        n = min(args.per_example, len(testset.items))
        per_item = np.cumsum([0] + [len(item.candidates) for item in testset.items[:n]])
        t_example = timed(lambda: [model(collate(src[a:b], tgt[a:b], tok.pad_id, tok.bos_id))
                                   for a, b in zip(per_item[:-1], per_item[1:], strict=True)])
    t_ctxmt = timed(lambda: score_testset(model, tok, testset, max_tokens=args.max_tokens))

    rates = {"ctxmt": pairs / t_ctxmt, "forward": pairs / t_forward, "per-example": per_item[-1] / t_example}
    for name, rate in rates.items():
        print(f"{name:>12}: {rate:8.1f} pairs/s")
    print(f"ratio ctxmt / plain forward pass: {rates['ctxmt'] / rates['forward']:.2f}x (target >= 1.0)")
    print(f"ratio ctxmt / one batch per example: {rates['ctxmt'] / rates['per-example']:.2f}x")


if __name__ == "__main__":
    main()
