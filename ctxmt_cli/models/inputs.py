"""The inputs contract: how a family reads its data, next to the model contract of :mod:`ctxmt_cli.core.model`.

The model contract says what a family computes from a :class:`~ctxmt_cli.core.batch.Batch`; this one says how
the batches are made: which windows a sentence gets (previous and next sentences, a target concatenation),
how documents are translated (window by window in parallel slots, or in sentence groups), what a scoring
batch and a served document keep. Training, translation, evaluation, contrastive scoring, analysis and the
server ask these methods and never which family they run. :class:`Inputs` is the plain Transformer's
answer to each; a family overrides what it reads differently, in ``models/<family>/inputs.py``, and names
its class in :data:`~ctxmt_cli.models.families.FAMILIES`.

A family does not translate documents itself: it *declares* how a document is translated
(:meth:`Inputs.translation`, one of :data:`TRANSLATIONS`), and the decoder, which sits above this layer, runs the
loop of that name (:mod:`ctxmt_cli.decode.loops`), calling this contract's hooks where a step or a group needs the
family's rows (:meth:`Inputs.step_rows`, :meth:`Inputs.grouped`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import BatchBudget, GroupedBatch, token_batches, window_batch
from ctxmt_cli.data.windows import WindowDataset, WindowSpec
from ctxmt_cli.errors import CtxmtError, OptionError, option

#: how a family translates a document (:meth:`Inputs.translation`), each run by the decoder's loop of that name
Translation = Literal["slots", "memory", "groups", "first_pass"]
TRANSLATIONS: tuple[str, ...] = get_args(Translation)


class Inputs:
    """The plain Transformer's inputs: windows of the sentences the recipe section ``cfg`` names (its
    ``src_context_sentences``, ``tgt_context_sentences`` and ``src_next_sentences``, 0 where a family reads none),
    one sentence per row, translation in parallel slots."""

    #: the row also carries a target concatenation (the context's target side beside the source window)
    target_concat = False

    def __init__(self, cfg):
        self.cfg = cfg

    # ---- context ---------------------------------------------------------------------------------
    def context(self, context: int | None = None) -> tuple[int, int]:
        """(source, target) previous sentences to decode with: the model's own, or ``context`` = K on each side
        that has context (Lupo et al. 2022, Figure 4: a model tested with other window sizes than it was trained
        on). A concatenation model then reads windows of K+1 sentences, an sNto1 model grows its source side
        only, a caching model caches K sentences. A model that reads no context refuses K > 0."""
        own = (self.cfg.src_context_sentences, self.cfg.tgt_context_sentences)
        if context is None:
            return own
        if context < 0:
            raise OptionError("context", context, "give a number of context sentences >= 0")
        if context > 0 and not self._reads_context():
            raise OptionError("context", context, f"this {self.cfg.family} model reads no context, so there is no "
                              "window to resize; leave it out (or give 0), or use a context-aware checkpoint")
        return (context if own[0] else 0, context if own[1] else 0)

    def _reads_context(self) -> bool:
        cfg = self.cfg
        return (cfg.src_context_sentences, cfg.tgt_context_sentences) != (0, 0) or bool(cfg.src_next_sentences)

    def next_sentences(self, wanted: int | None = None) -> int:
        """Next source sentences in each window: ``wanted``, or the model's own when None; a model trained without
        next sentences refuses more than 0."""
        own = self.cfg.src_next_sentences
        if wanted is None:
            return own
        if wanted < 0:
            raise OptionError("src_next_sentences", wanted, "give a number of next sentences >= 0")
        if wanted > 0 and not own:
            raise OptionError("src_next_sentences", wanted, f"this {self.cfg.family} model reads no next sentences; "
                              "give 0, or use a checkpoint trained with next-sentence context")
        return wanted

    def resized_next(self, context: int) -> int:
        """Next source sentences when ``--context`` K resizes the windows (:meth:`context`): K sets every direction
        the model reads, so an offline model (1 previous + 1 next) with K = 2 reads 2 previous and 2 next
        sentences, with K = 0 the current sentence alone; a model reading no next sentences gets 0."""
        return context if self.cfg.src_next_sentences else 0

    # ---- training and validation windows ---------------------------------------------------------
    def window_spec(self, recipe, role: str) -> WindowSpec:
        """How the windows of a ``role`` ("train" or "valid") split are cut."""
        cfg = self.cfg
        return WindowSpec(cfg.src_context_sentences, cfg.tgt_context_sentences, recipe.data.max_window_tokens,
                          "previous", recipe.train.seed, cfg.src_next_sentences)

    def windows(self, data, split: str, recipe, vocab: VocabInfo, role: str) -> WindowDataset:
        """The windows of ``split`` of the prepared ``data`` for training (``role`` "train") or validation."""
        return WindowDataset(data.split(split), self.window_spec(recipe, role), vocab.brk, vocab.eos)

    # ---- batches ---------------------------------------------------------------------------------
    def plan_batches(self, dataset: WindowDataset, indices: np.ndarray, *, budget: BatchBudget, seed: int = 1,
                     epoch: int = 0, shuffle: bool = True, mixed: bool = True) -> list:
        """Micro-batches of ``dataset``'s windows ``indices`` (training, validation, analysis), each collated by
        :meth:`collate`: length-bucketed rows within the ``budget`` (the recipe's: :meth:`BatchBudget.of`),
        shuffled from ``(seed, epoch)`` alone. ``mixed``: a family that trains on groups mixing documents may add
        them (False for analysis, which reads real documents)."""
        return token_batches(dataset.src_len, dataset.tgt_len, indices, budget=budget, seed=seed, epoch=epoch,
                             shuffle=shuffle)

    def collate(self, dataset: WindowDataset, plan, vocab: VocabInfo, chunked: bool = False) -> Batch:
        """The batch of one ``plan`` of :meth:`plan_batches` (``chunked``: its row chunks, where it has any, each at
        its own width); a family adds its own fields to ``Batch.extras`` here."""
        batch = window_batch(dataset, plan, vocab.pad, vocab.bos, chunked)
        return self.grouped(batch, plan.groups, plan.mixed) if isinstance(plan, GroupedBatch) else batch

    def grouped(self, batch: Batch, groups, mixed=None) -> Batch:
        """``batch`` with its rows in sentence groups (``groups`` (B,): the group of each row; ``mixed`` (G,):
        whether each group mixes documents; None when translating), for a family that reads its group: training
        and validation batches of groups, and each search of the ``groups`` translation; rows read alone here (as
        it is)."""
        return batch

    # ---- translation -----------------------------------------------------------------------------
    def check_first_pass(self, documents: Sequence[Sequence[str]], first_pass: Sequence | None) -> None:
        """A model reading target context (:attr:`target_concat`) needs a first pass (sentence-level translations)
        of every sentence of ``documents``; any other model refuses one."""
        if not self.target_concat:
            if first_pass is not None:
                raise OptionError("first_pass", None, f"this {self.cfg.family} model reads no target context and so "
                                  "no first pass; leave it out (it is for a model reading target context: hanoit "
                                  "with bilingual: true or context_side: target, concat or caching with bilingual: "
                                  "true)")
            return
        if first_pass is None:
            raise CtxmtError(f"this {self.cfg.family} model reads sentence-level translations of the context "
                             f"sentences: give {option('first_pass')} SENTENCE_CKPT (a sentence-level checkpoint of "
                             "the same language pair)")
        if [len(d) for d in first_pass] != [len(d) for d in documents]:
            raise CtxmtError("the first pass does not have the documents' shape (one translation per sentence); "
                             "translate the same documents with the first-pass checkpoint")

    def check_groups(self, group_sentences: None | int | str, group_order: str = "consecutive") -> None:
        """Sentence-group options (``group_sentences``: a size, or the option's text) are for a model that reads
        its group; this one refuses them."""
        if group_sentences is not None or group_order != "consecutive":
            option, value = (("group_sentences", group_sentences) if group_sentences is not None
                             else ("group_order", group_order))
            raise OptionError(option, value, f"this {self.cfg.family} model does not read sentence groups (only a "
                              "family like mbe does); leave it out")

    def translation(self) -> Translation:
        """How a document is translated: ``slots``, sentence by sentence in parallel slots, each source window
        re-encoded; ``first_pass``, the same for a model reading target context (:attr:`target_concat`), each
        step's rows also reading the document's first pass (:meth:`step_rows`). The other ways a family may
        declare: ``memory``, slots with a per-document memory (each sentence encoded once, its
        ``EncoderOut.entry`` read by the next ones as ``Batch.memory``); ``groups``, group by group, the rows of
        each group laid out by :meth:`grouped`."""
        return "first_pass" if self.target_concat else "slots"

    def step_rows(self, batch: Batch, sources: Sequence, j, plan, vocab: VocabInfo) -> None:
        """Complete the batch translating sentence ``j`` (one index, or one per row) of each document of
        ``sources`` (nothing to add)."""

    def kept_sentences(self, group_sentences: int | None, max_document_sentences: int | None) -> dict:
        """What a server keeps of a document between requests (the fields of its keep rule): the context window;
        the options of a model reading sentence groups are refused."""
        for name, value in (("group_sentences", group_sentences), ("max_document_sentences", max_document_sentences)):
            if value is not None:
                raise OptionError(name, value, f"this {self.cfg.family} model does not read sentence groups (only a "
                                  "family like mbe does), so the server keeps only its context window; leave it out")
        return {"window": max(self.context())}

    # ---- contrastive scoring ---------------------------------------------------------------------
    def scoring_context(self, context: int | None, longest_item_context: int) -> tuple[int, int]:
        """(source, target) context sentences of a test item's scored rows: those the model translates with."""
        return self.context(context)

    def scoring_batch(self, batch: Batch, vocab: VocabInfo, target_concat: Sequence | None = None) -> Batch:
        """A scoring batch of source windows as the model reads it (as it is); ``target_concat``: each source row's
        target context beside the source, given only to a model with :attr:`target_concat`."""
        return batch
