"""DocRepair's second pass (Voita, Sennrich & Titov 2019): first-pass translations rewritten in groups.

The first pass (any checkpoint, usually a sentence-level one) translates every sentence; each document's
translations are cut into the groups the repair corpus was built with (:func:`~ctxmt_cli.data.docrepair.group_bounds`
with stride = group size: disjoint groups of 4 consecutive sentences, the document's last 1-3 sentences one
shorter group, so every sentence is repaired exactly once), each group joined by ``<brk>`` and rewritten by
the repair model in one batched beam search over many groups, and the output cut at ``<brk>`` back into
sentences, in document order.

Empty lines stay empty and take no place in a group (as in the first pass). A group whose rewrite does not
hold one non-empty sentence per input sentence (a wrong number of ``<brk>``, or an empty sentence, which would
read as a document boundary in the output), or that is longer than the repair model reads, keeps its
first-pass sentences; :class:`RepairStats` counts both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.data.docrepair import group_bounds, join_group
from ctxmt_cli.decode.search import beam_search
from ctxmt_cli.errors import OptionError


@dataclass
class RepairStats:
    """Counters of one :func:`repair_documents` call."""

    groups: int = 0               # groups rewritten by the repair model
    fallbacks: int = 0            # rewrites with a wrong sentence count or an empty sentence: first pass kept
    too_long: int = 0             # groups longer than the repair model reads: first pass kept


def repair_group_size(loaded, path: Path) -> int:
    """The group size a repair checkpoint was trained with; a checkpoint of another corpus is refused."""
    info = loaded.meta.get("docrepair")
    if not isinstance(info, dict) or "group_size" not in info:
        raise OptionError("repair", str(path), "not a DocRepair model: it was not trained on a corpus written by "
                          "`ctxmt prepare docrepair`; give the repair model's checkpoint")
    return int(info["group_size"])


def check_repair_pair(first, repair, first_path: Path, repair_path: Path) -> None:
    """The repair model must read the language the first-pass model writes."""
    writes, reads = first.meta.get("tgt_lang"), repair.meta.get("src_lang")
    if writes != reads:
        raise OptionError("repair", str(repair_path), f"it repairs {reads!r} text, but {first_path} translates into "
                          f"{writes!r}; give the repair model trained for this first-pass model's target language")


def split_groups(tokens: Sequence[int], brk: int) -> list[list[int]]:
    """A generated group cut at ``<brk>``: one id list per sentence."""
    parts: list[list[int]] = [[]]
    for t in tokens:
        if t == brk:
            parts.append([])
        else:
            parts[-1].append(int(t))
    return parts


def _rows(tokenizer, documents, group_size: int, limit: int, sp: VocabInfo, stats: RepairStats):
    """(document, its line numbers, source ids with ``</s>``) of every group that fits the model."""
    rows = []
    for d, doc in enumerate(documents):
        kept = [i for i, line in enumerate(doc) if line.strip()]
        ids = [tokenizer.encode_src(doc[i]) for i in kept]
        for a, b in group_bounds(len(kept), group_size):
            src = join_group(ids[a:b], sp.brk) + [sp.eos]
            if len(src) > limit:
                stats.too_long += 1
                continue
            rows.append((d, kept[a:b], src))
    return rows


def repair_documents(loaded, documents: list[list[str]], *, group_size: int, beam: int | None = None,
                     batch_groups: int = 64, stats: RepairStats | None = None) -> list[list[str]]:
    """Rewrite first-pass ``documents`` (lists of translated sentences) with the repair model ``loaded``;
    one output per input sentence, same nesting. Decoding settings come from the repair model's recipe
    (``beam`` overrides its beam)."""
    stats = stats if stats is not None else RepairStats()
    model, tok, recipe = loaded.model, loaded.tokenizer, loaded.recipe
    dec, sp = recipe.decode, VocabInfo.of(tok)
    limit = min(recipe.data.max_window_tokens, recipe.model.max_positions)
    rows = _rows(tok, documents, group_size, limit, sp, stats)
    out = [list(doc) for doc in documents]
    device = next(model.parameters()).device
    order = sorted(range(len(rows)), key=lambda r: -len(rows[r][2]))       # similar lengths share a batch
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(order), batch_groups):
            chunk = [rows[r] for r in order[start:start + batch_groups]]
            batch = Batch(src=pad_rows([src for _, _, src in chunk], sp.pad),                    # (B, S)
                          tgt_prefix=torch.full((len(chunk), 1), sp.bos, dtype=torch.long),   # (B, 1)
                          tgt_sentences=torch.tensor([len(lines) for _, lines, _ in chunk], dtype=torch.long))
            max_len = torch.tensor([min(int(dec.max_len_a * (len(src) - 1) + dec.max_len_b), limit - 2)
                                    for _, _, src in chunk], dtype=torch.long)                # (B,)
            hyps = beam_search(model, batch.to(device), beam=beam or dec.beam, lenpen=dec.lenpen,
                               max_len=max_len.to(device), banned=())
            for (d, lines, _), hyp in zip(chunk, hyps, strict=True):
                texts = [tok.decode_tgt(part) for part in split_groups(hyp.tokens, sp.brk)]
                stats.groups += 1
                if len(texts) != len(lines) or not all(t.strip() for t in texts):
                    stats.fallbacks += 1
                    continue
                for line, text in zip(lines, texts, strict=True):
                    out[d][line] = text
    finally:
        model.train(was_training)
    return out
