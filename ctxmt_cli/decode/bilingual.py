"""Translating with a bilingual HanoiT (Yang et al., §2.3): a sentence-level first pass, then the model.

The bilingual model reads, beside each sentence's source window, its *target concatenation*: the target side of
the same context sentences, then the current source sentence (:mod:`ctxmt_cli.data.target_concat`). A new
document has no target side, so it is first translated sentence by sentence with another checkpoint
(:func:`first_pass_translations`; a sentence-level model, as the paper's first pass), and the bilingual model
then reads those translations as the context sentences' target side, the next sentences' included: the whole
first pass is known before the second starts. Each row is built by the training windows' rule over the first
pass's lengths (:func:`~ctxmt_cli.data.target_concat.target_concat_row`), so a sentence's row holds what its
training row would hold. The translator carries each document's first pass with its source ids
(:class:`~ctxmt_cli.decode.encoded.DocumentIds`), so every path that picks documents keeps the two together.

This module finds the first pass: translated here by a sentence-level checkpoint, or read from a prepared split's
first-pass stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.decode.translator import translate_documents
from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.models.families import inputs_of


def first_pass_translations(loaded, documents: list[list[str]], *, beam: int | None = None,
                            batch_docs: int | None = None) -> list[list[str]]:
    """``documents`` translated by the first-pass checkpoint ``loaded`` with its own recipe's settings and context."""

    settings = DecodeSettings.from_recipe(loaded.recipe, beam=beam, batch_docs=batch_docs)
    return translate_documents(loaded.model, loaded.tokenizer, documents, settings)


def check_first_pass_model(first, second, first_path, second_path) -> None:
    """The first-pass checkpoint must translate the bilingual model's language pair and need no first pass itself."""
    if inputs_of(first.model.cfg).target_concat:
        raise OptionError("first_pass", str(first_path), "it itself reads target context (it would need a first "
                          "pass); give a sentence-level checkpoint")

    def pair(loaded) -> tuple:
        return loaded.meta.get("src_lang"), loaded.meta.get("tgt_lang")

    if pair(first) != pair(second):
        raise OptionError("first_pass", str(first_path), f"it translates {pair(first)[0]} → {pair(first)[1]}, but "
                          f"{second_path} translates {pair(second)[0]} → {pair(second)[1]}; give a first-pass "
                          "checkpoint of the same language pair")


def stream_first_pass(prepared, split: str, name: str) -> list[list] | None:
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
                       first_pass=None, device: str = "cpu") -> list[list[list] | None]:
    """The first pass each loaded checkpoint reads when it translates ``split`` (``ctxmt evaluate``): None for a
    model that is not bilingual; for a bilingual one, ``sources`` translated by the ``first_pass`` checkpoint
    when given, else the split's first-pass stream (the model's ``first_pass_stream``, default ``first-pass``)."""
    from ctxmt_cli.config_base import FIRST_PASS_STREAM
    from ctxmt_cli.models.loading import load_model, torch_device

    bilingual = [inputs_of(loaded.model.cfg).target_concat for loaded in models]
    if not any(bilingual):
        if first_pass is not None:
            raise OptionError("first_pass", None, "no checkpoint reads target context (a hanoit model with "
                              "bilingual: true or context_side: target, a concat or caching model with bilingual: "
                              "true); leave it out")
        return [None] * len(models)
    if first_pass is not None:
        first = load_model(Path(first_pass), device=torch_device(device))
        for loaded, path, wanted in zip(models, checkpoints, bilingual, strict=True):
            if wanted:
                check_first_pass_model(first, loaded, first_pass, path)
        translated = first_pass_translations(first, sources)
        return [translated if wanted else None for wanted in bilingual]
    out = []
    for loaded, path, wanted in zip(models, checkpoints, bilingual, strict=True):
        name = getattr(loaded.recipe.model, "first_pass_stream", None) or FIRST_PASS_STREAM
        found = stream_first_pass(prepared, split, name) if wanted else None
        if wanted and found is None:
            raise CtxmtError(f"{path} is a bilingual model and split {split!r} of {prepared.dir} has no first-pass "
                             f"stream {name!r}: give {option('first_pass')} SENTENCE_CKPT, or write the stream with "
                             f"`ctxmt first-pass -c SENTENCE_CKPT --data {prepared.dir} --split {split} --name {name}`")
        out.append(found)
    return out
