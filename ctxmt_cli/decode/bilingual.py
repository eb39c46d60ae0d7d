"""Translating with a bilingual HanoiT (Yang et al., §2.3): a sentence-level first pass, then the model.

The bilingual model reads, beside each sentence's source window, its *target concatenation*: the target side of
the same context sentences, then the current source sentence (:mod:`ctxmt_cli.data.target_concat`). A new
document has no target side, so it is first translated sentence by sentence with another checkpoint
(:func:`first_pass_translations`; a sentence-level model, as the paper's first pass), and the bilingual model
then reads those translations as the context sentences' target side, the next sentences' included: the whole
first pass is known before the second starts. Each row is built by the training windows' rule over the first
pass's lengths (:func:`target_concat_row`), so a sentence's row holds what its training row would hold.

The translator carries each document's first pass with its source ids (:class:`DocumentIds`), so every path
that picks documents (slots, fallbacks) keeps the two together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Union

import torch

from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.data.windows import fit_window
from ctxmt_cli.errors import CtxmtError

#: a first-pass sentence: text (encoded with the bilingual model's tokenizer, target side) or ids used as they are
FirstPass = Union[str, Sequence[int]]


def reads_target_concat(model) -> bool:
    """Whether ``model`` is a bilingual model, reading a target concatenation beside its source window."""
    return bool(getattr(model.cfg, "bilingual", False))


def check_first_pass(model, documents: Sequence[Sequence[str]], first_pass: Optional[Sequence]) -> None:
    """A bilingual model needs a first pass of every sentence of ``documents``; any other model takes none."""
    if not reads_target_concat(model):
        if first_pass is not None:
            raise CtxmtError(f"--first-pass: this {model.cfg.family} model is not bilingual and reads no first pass; "
                             "leave it out (it is for a hanoit model with bilingual: true)")
        return
    if first_pass is None:
        raise CtxmtError("this bilingual hanoit model reads sentence-level translations of the context sentences: "
                         "give --first-pass SENTENCE_CKPT (a sentence-level checkpoint of the same language pair)")
    if [len(d) for d in first_pass] != [len(d) for d in documents]:
        raise CtxmtError("the first pass does not have the documents' shape (one translation per sentence); "
                         "translate the same documents with the first-pass checkpoint")


def first_pass_per_document(model, documents: Sequence[Sequence[str]], first_pass: Optional[Sequence]) -> list:
    """Each document's first pass (None for a model that is not bilingual), after :func:`check_first_pass`."""
    check_first_pass(model, documents, first_pass)
    return list(first_pass) if first_pass is not None else [None] * len(documents)


class DocumentIds(list):
    """A document's source sentence ids (the list the translator reads) and ``first_pass``: the target-language
    ids of each sentence's first-pass translation, for a bilingual model's target concatenation."""

    def __init__(self, sentences: Sequence[Sequence[int]], first_pass: Sequence[Sequence[int]]):
        super().__init__(sentences)
        self.first_pass = list(first_pass)


def first_pass_ids(tokenizer, sentences: Sequence[FirstPass], limit: int) -> list[list[int]]:
    """Target ids of first-pass sentences (text encoded on the target side, ids kept), each cut to ``limit``."""
    return [list(tokenizer.encode_tgt(s) if isinstance(s, str) and s.strip() else
                 ([] if isinstance(s, str) else s))[:limit] for s in sentences]


def target_concat_row(doc: DocumentIds, j: int, context: int, following: int, limit: int, brk: int,
                      eos: int) -> tuple[list[int], int]:
    """Sentence ``j``'s target concatenation and its next sentences: up to ``context`` previous and
    ``following`` next first-pass sentences (the training rule: the farthest dropped first while the row is
    over ``limit``), each + ``<brk>``, then source sentence ``j`` and ``</s>``."""
    targets = doc.first_pass
    before, after = targets[max(j - context, 0):j], targets[j + 1:j + 1 + following]
    c, m = fit_window([len(t) for t in before], [len(t) for t in after], context, following, limit - len(doc[j]) - 1)
    row: list[int] = []
    for sentence in list(targets[j - c:j]) + list(targets[j + 1:j + 1 + m]):
        row += list(sentence) + [brk]
    return row + list(doc[j]) + [eos], m


def add_target_concat(batch, sources: Sequence, j: int, plan, sp) -> None:
    """Set ``batch.tgt_concat`` (B, S2) and ``tgt_concat_next`` (B,) translating sentence ``j`` of each document,
    when the documents carry a first pass (:class:`DocumentIds`); otherwise leave the batch as it is."""
    if not sources or not isinstance(sources[0], DocumentIds):
        return
    rows = [target_concat_row(doc, j, plan.src_context_sentences, plan.src_next_sentences, plan.max_window_tokens,
                              sp.brk, sp.eos) for doc in sources]
    batch.tgt_concat = pad_rows([r for r, _ in rows], sp.pad)
    batch.tgt_concat_next = torch.tensor([m for _, m in rows], dtype=torch.long)


def first_pass_translations(loaded, documents: list[list[str]], *, beam: Optional[int] = None,
                            batch_docs: Optional[int] = None) -> list[list[str]]:
    """``documents`` translated by the first-pass checkpoint ``loaded`` with its own recipe's settings and context."""
    from ctxmt_cli.decode.translator import translate_documents
    from ctxmt_cli.models import context_sentences

    dec, cfg = loaded.recipe.decode, loaded.recipe.model
    src_context, tgt_context = context_sentences(cfg)
    return translate_documents(
        loaded.model, loaded.tokenizer, documents, src_context_sentences=src_context,
        tgt_context_sentences=tgt_context, beam=beam or dec.beam, lenpen=dec.lenpen, max_len_a=dec.max_len_a,
        max_len_b=dec.max_len_b, target_context=dec.target_context, batch_docs=batch_docs or dec.batch_docs,
        max_window_tokens=loaded.recipe.data.max_window_tokens)


def check_first_pass_model(first, second, first_path, second_path) -> None:
    """The first-pass checkpoint must translate the bilingual model's language pair and need no first pass itself."""
    if reads_target_concat(first.model):
        raise CtxmtError(f"--first-pass {first_path} is itself a bilingual model (it would need a first pass); "
                         "give a sentence-level checkpoint")
    pair = lambda loaded: (loaded.meta.get("src_lang"), loaded.meta.get("tgt_lang"))  # noqa: E731
    if pair(first) != pair(second):
        raise CtxmtError(f"--first-pass {first_path} translates {pair(first)[0]} → {pair(first)[1]}, but "
                         f"{second_path} translates {pair(second)[0]} → {pair(second)[1]}; give a first-pass "
                         "checkpoint of the same language pair")


def stream_first_pass(prepared, split: str, name: str) -> Optional[list[list]]:
    """The first-pass stream ``name`` of a prepared ``split`` as documents of target ids, or None when the split
    has no finished stream of that name (one in the source language is refused)."""
    if name not in prepared.streams(split):
        return None
    stream = prepared.stream(split, name)
    if stream.side != "tgt":
        raise CtxmtError(f"first-pass stream {name!r} of split {split!r} is in the source language (a "
                         "back-translation); a bilingual model reads a translation of the source side")
    return [[stream.sentence(i).tolist() for i in range(a, b)] for a, b in stream.documents()]


def split_first_passes(models: Sequence, checkpoints: Sequence, prepared, split: str, sources: list[list[str]],
                       first_pass=None, device: str = "cpu") -> list[Optional[list[list]]]:
    """The first pass each loaded checkpoint reads when it translates ``split`` (``ctxmt evaluate``): None for a
    model that is not bilingual; for a bilingual one, ``sources`` translated by the ``first_pass`` checkpoint
    when given, else the split's first-pass stream (the model's ``first_pass_stream``, default ``first-pass``)."""
    from ctxmt_cli.config_hanoit import FIRST_PASS_STREAM
    from ctxmt_cli.models.loading import load_model, torch_device

    bilingual = [reads_target_concat(loaded.model) for loaded in models]
    if not any(bilingual):
        if first_pass is not None:
            raise CtxmtError("--first-pass: no checkpoint is a bilingual hanoit model (bilingual: true); leave it out")
        return [None] * len(models)
    if first_pass is not None:
        first = load_model(Path(first_pass), device=torch_device(device))
        for loaded, path, wanted in zip(models, checkpoints, bilingual):
            if wanted:
                check_first_pass_model(first, loaded, first_pass, path)
        translated = first_pass_translations(first, sources)
        return [translated if wanted else None for wanted in bilingual]
    out = []
    for loaded, path, wanted in zip(models, checkpoints, bilingual):
        name = getattr(loaded.recipe.model, "first_pass_stream", None) or FIRST_PASS_STREAM
        found = stream_first_pass(prepared, split, name) if wanted else None
        if wanted and found is None:
            raise CtxmtError(f"{path} is a bilingual model and split {split!r} of {prepared.dir} has no first-pass "
                             f"stream {name!r}: give --first-pass SENTENCE_CKPT, or write the stream with `ctxmt "
                             f"first-pass -c SENTENCE_CKPT --data {prepared.dir} --split {split} --name {name}`")
        out.append(found)
    return out
