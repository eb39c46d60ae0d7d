"""Contrastive evaluation by forced decoding (the core contract's ``forward``).

Each candidate is scored as the log-probability of its current sentence (``</s>``
included) given the source context, the source sentence and the gold target
context, through the model's own context mechanism: for a concatenation model
one teacher-forced pass over the window. Pairs from all items are length-bucketed
into token-budget batches (never one batch per item).

An item is correct when the true candidate's score is strictly better than every
contrastive one (ties lose, as ContraPro's evaluation script does).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from ctxmt_cli.data.batching import collate, token_batches
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.core.positions import current_sentence_mask


@dataclass
class ContrastiveItem:
    """One test item in the generic layout (``jsonl:PATH``)."""

    src_context: list[str]
    src: str
    tgt_context: list[str]
    candidates: list[str]
    correct: int = 0
    tags: dict = field(default_factory=dict)


def read_jsonl_items(path: str | Path) -> list[ContrastiveItem]:
    """Read the generic JSONL layout: one ``{"src_context", "src", "tgt_context", "candidates", "correct", "tags"}`` per line."""
    path = Path(path)
    if not path.is_file():
        raise CtxmtError(f"contrastive set not found: {path}")
    items = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                item = ContrastiveItem(**raw)
            except (json.JSONDecodeError, TypeError) as err:
                raise CtxmtError(f"{path}:{number}: not a contrastive item ({err}); see the jsonl layout in README") from None
            if len(item.candidates) < 2 or not 0 <= item.correct < len(item.candidates):
                raise CtxmtError(f"{path}:{number}: needs >= 2 candidates and 0 <= correct < len(candidates)")
            items.append(item)
    return items


def _window(encode, context: list[str], current: str, keep: int, brk: int, eos: int) -> np.ndarray:
    """Ids of the window: the last ``keep`` context sentences (oldest first), ``<brk>`` separators, current, ``</s>``."""
    parts: list[int] = []
    for sentence in (context[-keep:] if keep > 0 else []):
        parts += encode(sentence) + [brk]
    return np.asarray(parts + encode(current) + [eos], dtype=np.int64)


@torch.no_grad()
def score_items(
    model, tokenizer, items: list[ContrastiveItem], *, max_tokens: int = 4096, normalize: str = "mean",
    context: Optional[int] = None, progress: Optional[Callable[[int], None]] = None,
) -> list[list[float]]:
    """Score every candidate of every item; returns per-item lists of scores (higher = better).

    ``context`` overrides the number of context sentences on each side
    (default: the model's own window sizes).
    """
    # a side without context in the model stays without; otherwise ``context`` overrides the window
    keep = lambda side: side if context is None or side == 0 else context  # noqa: E731
    src_keep, tgt_keep = keep(model.cfg.src_context), keep(model.cfg.tgt_context)
    pad, bos, eos, brk = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.brk_id
    sources, targets, owners = [], [], []
    for i, item in enumerate(items):
        src = _window(tokenizer.encode_src, item.src_context, item.src, src_keep, brk, eos)
        for cand in item.candidates:
            sources.append(src)
            targets.append(_window(tokenizer.encode_tgt, item.tgt_context, cand, tgt_keep, brk, eos))
            owners.append(i)
    src_len = np.array([len(s) for s in sources])
    tgt_len = np.array([len(t) + 1 for t in targets])
    flat = np.zeros(len(sources))
    device = next(model.parameters()).device
    for batch_ids in token_batches(src_len, tgt_len, np.arange(len(sources)), max_tokens, shuffle=False):
        batch = collate([sources[j] for j in batch_ids], [targets[j] for j in batch_ids], pad, bos).to(device)
        logprobs = model(batch).logits.float().log_softmax(-1)                       # (B, T, V)
        token_lp = logprobs.gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)       # (B, T)
        current = current_sentence_mask(batch.tgt_out, brk) & (batch.tgt_out != pad)
        total = (token_lp * current).sum(1)
        if normalize == "mean":
            total = total / current.sum(1)
        flat[batch_ids] = total.cpu().numpy()
        if progress is not None:
            progress(len(batch_ids))
    per_item: list[list[float]] = [[] for _ in items]
    for j, owner in enumerate(owners):
        per_item[owner].append(float(flat[j]))
    return per_item


def decisions(items: list[ContrastiveItem], scores: list[list[float]]) -> list[bool]:
    """True where the correct candidate beats every contrastive one strictly."""
    out = []
    for item, row in zip(items, scores):
        best_other = max(s for k, s in enumerate(row) if k != item.correct)
        out.append(row[item.correct] > best_other)
    return out


def accuracy_by(items: list[ContrastiveItem], correct: list[bool], *keys: str) -> dict:
    """Nested accuracy table, e.g. keys ("phenomenon", "distance") → {phen: {dist: acc}}."""
    groups: dict = defaultdict(list)
    for item, ok in zip(items, correct):
        groups[tuple(str(item.tags.get(k)) for k in keys)].append(ok)
    table: dict = {}
    for key, oks in sorted(groups.items()):
        node = table
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = sum(oks) / len(oks)
    return table
