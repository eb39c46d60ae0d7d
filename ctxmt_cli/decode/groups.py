"""Translation in sentence groups, the ``groups`` way a family may declare (mbe: Morishita et al. 2021).

Such a model reads no neighbouring sentence: it reads one summary of the sentences it is translated
with. A document is one group (Morishita et al. 2021, Table 1: the whole document in one mini-batch),
or, with ``group_sentences`` = N, groups of N sentences: N consecutive ones (``consecutive``), or N
of the document's sentences after sorting them by length (``length``: what the public code's
length-bucketed decoding gives). Figure 4 of the paper varies N. Groups of several documents share
one beam search: the family's :meth:`~ctxmt_cli.models.inputs.Inputs.grouped` hook lays out the rows of each
search in their groups (mbe's ``SentenceGroups`` keeps each group's summary its own); outputs come back in
document order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.errors import OptionError

GROUP_ORDERS = ("consecutive", "length")
#: one batched beam search: (batch, each row's longest output (B,)) -> the best hypothesis of every row
Search = Callable[[Batch, torch.Tensor], list]


def document_groups(lengths: Sequence[int], group_sentences: int | None, order: str) -> list[list[int]]:
    """Sentence indices of each group of one document (lengths per sentence); None = the whole document."""
    if order not in GROUP_ORDERS:
        raise OptionError("group_order", order, "choose consecutive or length")
    if group_sentences is not None and group_sentences < 1:
        raise OptionError("group_sentences", group_sentences, "give a number of sentences >= 1 (or all)")
    idx = list(range(len(lengths)))
    if order == "length":
        idx.sort(key=lambda i: (lengths[i], i))
    n = len(idx) if group_sentences is None else group_sentences
    return [idx[i:i + n] for i in range(0, len(idx), max(n, 1))]


def _packed(docs: list[list[list[int]]], group_sentences: int | None, order: str,
            max_sentences: int) -> list[list[tuple[int, list[int]]]]:
    """Whole groups (document, its sentence indices) packed into searches of at most ``max_sentences`` sentences
    (a bigger group alone)."""
    groups = [(d, members) for d, doc in enumerate(docs)
              for members in document_groups([len(s) for s in doc], group_sentences, order) if members]
    packed: list[list[tuple[int, list[int]]]] = []
    for group in groups:
        if packed and sum(len(m) for _, m in packed[-1]) + len(group[1]) <= max_sentences:
            packed[-1].append(group)
        else:
            packed.append([group])
    return packed


def group_hypotheses(search: Search, docs: list[list[list[int]]], vocab: VocabInfo, max_len: Callable[[int], int],
                     *, inputs, group_sentences: int | None = None, group_order: str = "consecutive",
                     max_sentences: int = 256, progress: Callable[[int], None] | None = None) -> list[list]:
    """Translate documents of token ids (document, sentence, ids) group by group with ``search``; the best
    hypothesis per sentence, same nesting. ``inputs``: the family's inputs contract, whose
    :meth:`~ctxmt_cli.models.inputs.Inputs.grouped` puts each search's rows in their groups; ``max_len(source
    length)`` bounds each output; ``progress(sentences done)`` after each search."""
    outs: list[list] = [[None for _ in doc] for doc in docs]
    for batch_groups in _packed(docs, group_sentences, group_order, max_sentences):
        rows = [(d, i, g) for g, (d, members) in enumerate(batch_groups) for i in members]
        src = pad_rows([docs[d][i] + [vocab.eos] for d, i, _ in rows], vocab.pad)        # (B, S)
        batch = inputs.grouped(Batch(src=src), torch.tensor([g for _, _, g in rows]))   # groups: (B,)
        limit = torch.tensor([max_len(len(docs[d][i])) for d, i, _ in rows])            # (B,)
        with torch.no_grad():
            hyps = search(batch, limit)
        for (d, i, _), hyp in zip(rows, hyps, strict=True):
            outs[d][i] = hyp
        if progress is not None:
            progress(len(rows))
    return outs
