"""Translation of sentence groups, for a family that summarises its group (``batch_scheme.groups``: MBE).

Such a model reads no neighbouring sentence: it reads one summary of the sentences it is translated
with. A document is one group (Morishita et al. 2021, Table 1: the whole document in one mini-batch),
or, with ``group_sentences`` = N, groups of N sentences: N consecutive ones (``consecutive``), or N
of the document's sentences after sorting them by length (``length``: what the public code's
length-bucketed decoding gives). Figure 4 of the paper varies N. Groups of several documents share
one beam search (``Batch.groups`` keeps each group's summary its own); outputs come back in
document order.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.decode.search import Hypothesis, beam_search
from ctxmt_cli.errors import CtxmtError

GROUP_ORDERS = ("consecutive", "length")


def document_groups(lengths: Sequence[int], group_sentences: Optional[int], order: str) -> list[list[int]]:
    """Sentence indices of each group of one document (lengths per sentence); None = the whole document."""
    if order not in GROUP_ORDERS:
        raise CtxmtError(f"--group-order {order!r}: choose consecutive or length")
    if group_sentences is not None and group_sentences < 1:
        raise CtxmtError(f"--group-sentences {group_sentences}: give a number of sentences >= 1 (or all)")
    idx = list(range(len(lengths)))
    if order == "length":
        idx.sort(key=lambda i: (lengths[i], i))
    n = len(idx) if group_sentences is None else group_sentences
    return [idx[i:i + n] for i in range(0, len(idx), max(n, 1))]


def translate_groups(model, docs: list[list[list[int]]], **options) -> list[list[list[int]]]:
    """Translate documents of token ids (document, sentence, ids) group by group; ids per sentence, same nesting
    (``options``: those of :func:`group_hypotheses`)."""
    return [[hyp.tokens for hyp in doc] for doc in group_hypotheses(model, docs, **options)]


def group_hypotheses(model, docs: list[list[list[int]]], *, eos: int, pad: int, banned: Sequence[int], beam: int,
                     lenpen: float, max_len: Callable[[int], int], device, group_sentences: Optional[int] = None,
                     group_order: str = "consecutive", max_sentences: int = 256, nbest: int = 1,
                     progress: Optional[Callable[[int], None]] = None) -> list[list[Hypothesis]]:
    """Translate documents of token ids (document, sentence, ids) group by group; the best hypothesis per
    sentence (with ``nbest`` - 1 alternatives), same nesting.

    Whole groups are packed into beam searches of at most ``max_sentences`` sentences (a bigger group
    alone); ``max_len(source length)`` bounds each output; ``progress(sentences done)`` after each search.
    """
    groups = [(d, members) for d, doc in enumerate(docs)
              for members in document_groups([len(s) for s in doc], group_sentences, group_order) if members]
    outs: list[list] = [[None for _ in doc] for doc in docs]
    packed: list[list[tuple[int, list[int]]]] = []
    for group in groups:
        if packed and sum(len(m) for _, m in packed[-1]) + len(group[1]) <= max_sentences:
            packed[-1].append(group)
        else:
            packed.append([group])
    for batch_groups in packed:
        rows = [(d, i, g) for g, (d, members) in enumerate(batch_groups) for i in members]
        src = pad_rows([docs[d][i] + [eos] for d, i, _ in rows], pad)
        batch = Batch(src=src, groups=torch.tensor([g for _, _, g in rows]))
        limit = torch.tensor([max_len(len(docs[d][i])) for d, i, _ in rows])
        with torch.no_grad():
            hyps = beam_search(model, batch.to(device), beam=beam, lenpen=lenpen, max_len=limit.to(device),
                               banned=banned, nbest=nbest)
        for (d, i, _), hyp in zip(rows, hyps):
            outs[d][i] = hyp
        if progress is not None:
            progress(len(rows))
    return outs
