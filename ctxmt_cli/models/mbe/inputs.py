"""The ``mbe`` family's inputs (Morishita et al. 2021): a sentence reads the summary of its group, not its
neighbours. Documents are translated group by group (it declares ``groups``, which the decoder runs,
:mod:`ctxmt_cli.decode.groups`; :meth:`grouped` lays out each search's rows), a scored test item's context
sentences join its group, and a server keeps a document's unfinished group (or the whole document).
Overrides :meth:`Inputs.plan_batches` (whole groups, mixed ones for the gate), :meth:`Inputs.grouped` (the
groups into ``Batch.extras``, :class:`~ctxmt_cli.models.mbe.model.SentenceGroups`), :meth:`Inputs.check_groups`,
:meth:`Inputs.translation`, :meth:`Inputs.kept_sentences`,
:meth:`Inputs.scoring_context` and :meth:`Inputs.scoring_batch`."""

from __future__ import annotations

import numpy as np
import torch

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import BatchBudget, group_batches, pad_rows
from ctxmt_cli.errors import OptionError
from ctxmt_cli.models.inputs import Inputs, Translation
from ctxmt_cli.models.mbe.model import SentenceGroups

#: a document the server keeps whole holds at most this many sentences unless the server is told otherwise
DOCUMENT_SENTENCES = 1024


class MbeInputs(Inputs):
    """Sentence groups: one document (or ``group_sentences`` of it) per group."""

    @property
    def mixed_share(self) -> float:
        """The share of training groups that mix documents: for the gate's classifier (1:1 by default)."""
        return self.cfg.mixed_groups if self.cfg.gate else 0.0

    def plan_batches(self, dataset, indices: np.ndarray, *, budget: BatchBudget, seed: int = 1, epoch: int = 0,
                     shuffle: bool = True, mixed: bool = True) -> list:
        """Whole groups of one document's sentences, several per batch, each within ``group_tokens`` padded tokens;
        with the gate, mixed-document groups too (:func:`~ctxmt_cli.data.batching.group_batches`). The budget
        counts each row's longer side: a group's chunks are as wide as their longest row on either side."""
        if budget.side != "longer":
            raise OptionError("max_tokens_of", budget.side, "an mbe model's batches of whole groups count each row's "
                              "longer side; leave data.max_tokens_of at longer")
        return group_batches(np.asarray(dataset.split.doc_index), dataset.src_len, dataset.tgt_len, indices,
                             budget=budget, group_tokens=self.cfg.group_tokens,
                             mixed_share=self.mixed_share if mixed else 0.0, seed=seed, epoch=epoch, shuffle=shuffle)

    def grouped(self, batch: Batch, groups, mixed=None) -> Batch:
        """The groups and mixed-document labels into ``Batch.extras``."""
        batch.extras = SentenceGroups(torch.as_tensor(groups), None if mixed is None else torch.as_tensor(mixed))
        return batch

    def check_groups(self, group_sentences: None | int | str, group_order: str = "consecutive") -> None:
        """Any group size and order is read (checked where the groups are cut)."""

    def translation(self) -> Translation:
        """``groups``: every document group by group."""
        return "groups"

    def kept_sentences(self, group_sentences: int | None, max_document_sentences: int | None) -> dict:
        """The unfinished group of ``group_sentences`` consecutive sentences, or the whole document."""
        if group_sentences is not None:
            return {"group": group_sentences}
        return {"max_sentences": DOCUMENT_SENTENCES if max_document_sentences is None else max_document_sentences}

    def scoring_context(self, context: int | None, longest_item_context: int) -> tuple[int, int]:
        """Every context sentence of an item joins its group (source side), unless ``context`` says how many."""
        src, tgt = self.context(context)
        return (longest_item_context, tgt) if context is None else (src, tgt)

    def scoring_batch(self, batch: Batch, vocab: VocabInfo, target_concat=None) -> Batch:
        """Each source window becomes one group of sentences."""
        return windows_as_groups(batch, vocab)


def windows_as_groups(batch: Batch, vocab: VocabInfo) -> Batch:
    """A scoring batch whose source windows ``c1 <brk> c2 <brk> s </s>`` become groups of sentences (each closed by
    ``</s>``, as when translated): every target row is decoded from its window's last sentence, which reads the
    summary of the whole window."""
    sentences, groups, last = [], [], []
    for g, row in enumerate(batch.src.tolist()):
        ids = [t for t in row if t != vocab.pad][:-1]                                   # drop the final </s>
        cuts = [i for i, t in enumerate(ids) if t == vocab.brk]
        for start, end in zip([0] + [c + 1 for c in cuts], cuts + [len(ids)], strict=True):
            sentences.append(np.asarray(ids[start:end] + [vocab.eos], dtype=np.int64))
            groups.append(g)
        last.append(len(sentences) - 1)
    index = torch.arange(batch.src.size(0)) if batch.src_index is None else batch.src_index
    batch.src, batch.extras = pad_rows(sentences, vocab.pad), SentenceGroups(torch.tensor(groups))
    batch.src_index = torch.tensor(last)[index]
    return batch
