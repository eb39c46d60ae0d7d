"""The Python API: load a checkpoint, translate documents, score candidate translations, analyse attention.

::

    from ctxmt_cli import api

    model = api.load("run/checkpoint_best.pt", device="auto")
    [doc] = model.translate([["The cat sat.", "It purred."]], scores=True, nbest=2, beam=4)
    doc.translations, doc.logprobs, doc.sentences[0].nbest
    # the next sentences of the same document, given what is already translated
    [more] = model.translate([api.Document(src=[..., "New sentence."], tgt_context=doc.translations)])
    model.score([api.ScoreItem(["The cat sat."], ["Die Katze saß."], "It purred.",
                               ["Sie schnurrte.", "Er schnurrte."])])

A document is a list of source sentences, or a :class:`Document` that also gives the translations of its first
sentences (``tgt_context``): those are not translated again but are the target context of the next ones — forced
as the decoder prefix of a concatenation model, cached with their sources by a caching model, so translating a
document piece by piece gives what translating it at once gives. ``ctxmt translate`` is a thin layer over
:meth:`Model.translate_stream`; :meth:`Model.score` is the forced-decoding scorer of ``ctxmt contrastive``.
torch is imported by :func:`load`, not by ``import ctxmt_cli.api``. :func:`keep_freed_memory` gives a Python
program the C-heap setting every ``ctxmt`` command starts with (fewer page faults in CPU decoding;
:mod:`ctxmt_cli.heap`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.decode.records import Candidate, Document, DocumentTranslation, Given, SentenceTranslation
from ctxmt_cli.errors import CtxmtError, OptionError, named, option
from ctxmt_cli.heap import keep_freed_memory

__all__ = ["Candidate", "Document", "DocumentTranslation", "Model", "ScoreItem", "SentenceTranslation",
           "keep_freed_memory", "load"]

#: what :meth:`Model.translate` takes as a document
DocumentLike = Document | Sequence[str]
#: what runs the search (:func:`load`'s ``engine``): ctxmt's own, or CTranslate2 over an exported folder
ENGINES = ("torch", "ctranslate2")


@dataclass
class ScoreItem:
    """Candidates to score in one context: the context sentences (oldest first) on both sides, the current
    source sentence and the candidate translations of it."""

    src_context: list[str]
    tgt_context: list[str]
    src: str
    candidates: list[str]


def load(checkpoint: str | Path, device: str = "auto", *, first_pass: str | Path | None = None,
         repair: str | Path | None = None, engine: str = "torch", quantize: str | None = None,
         compile: bool = False) -> Model:
    """The model of a checkpoint, ready to translate (eval mode, on ``device``: ``auto`` = CUDA when present).

    ``first_pass``: a sentence-level checkpoint whose translations a bilingual HanoiT model reads as target
    context (refused for any other model). ``repair``: a DocRepair checkpoint that rewrites the translations.
    ``engine="ctranslate2"``: ``checkpoint`` is a folder ``ctxmt export ctranslate2`` wrote, translated by
    CTranslate2 with the same windows (:mod:`ctxmt_cli.export.ct2_engine`; translation only).
    ``quantize="int8"``: every linear layer of every model loaded (first pass and repairer too) in int8, on the
    CPU (:mod:`ctxmt_cli.models.quantize`). ``compile=True``: the translated model's decoder layers compiled with
    ``torch.compile`` (:mod:`ctxmt_cli.models.compiled`: faster steps after a compile on the first call; not with
    ``quantize``).
    """
    from ctxmt_cli.decode.bilingual import check_first_pass_model
    from ctxmt_cli.models.families import inputs_of

    path = Path(checkpoint)
    if engine != "torch" or (path / "ctxmt.json").is_file():     # an exported folder: refused with the fix
        return _load_exported(path, device, engine, first_pass, repair, quantize, compile)
    if compile and quantize is not None:
        raise OptionError("compile", None, f"not with {option('quantize')} (the int8 layers are not compiled): "
                          "choose one")
    load_model = _loader(device, quantize)
    loaded = load_model(path)
    model = Model(loaded, path)
    if compile:
        from ctxmt_cli.models.compiled import compile_decoder

        compile_decoder(loaded.model, warn=lambda line: model.warn(line))     # model.warn as set when it fails
    if first_pass is not None:
        inputs_of(loaded.recipe.model).check_first_pass([], [])        # a model that reads no first pass: refused
        model.first_pass_model = Model(load_model(Path(first_pass)), Path(first_pass))
        check_first_pass_model(model.first_pass_model.loaded, loaded, first_pass, path)
    if repair is not None:
        from ctxmt_cli.decode.repair import check_repair_pair, repair_group_size

        repairer = load_model(Path(repair))
        size = repair_group_size(repairer, Path(repair))
        check_repair_pair(loaded, repairer, path, Path(repair))
        model.repairer = (repairer, size)
    return model


def _loader(device: str, quantize: str | None) -> Callable[[Path], Any]:
    """``load_model`` on ``device``, each model quantized as asked; an int8 request off the CPU, or on a PyTorch
    without the path, is refused before anything loads."""
    from ctxmt_cli.device import resolve_device
    from ctxmt_cli.models.loading import load_model
    from ctxmt_cli.models.quantize import QUANTIZE, QuantizeUnavailable
    from ctxmt_cli.models.quantize import quantize as to_int8

    if quantize is None:
        return lambda path: load_model(path, device=device)
    if quantize not in QUANTIZE:
        raise OptionError("quantize", quantize, f"choose one of {', '.join(QUANTIZE)}")
    if resolve_device(device).type != "cpu":
        raise OptionError("quantize", quantize, f"int8 runs on the CPU only (its layers have no CUDA kernels): add "
                          f"{option('device')} cpu, or leave {option('quantize')} out")

    def load_int8(path: Path):
        loaded = load_model(path, device="cpu")
        try:
            to_int8(loaded.model, scheme=quantize)
        except QuantizeUnavailable as error:
            raise OptionError("quantize", quantize, f"{error}; leave {option('quantize')} out") from None
        return loaded

    return load_int8


def _load_exported(folder: Path, device: str, engine: str, first_pass, repair, quantize, compile: bool) -> Model:
    """:func:`load` of an exported CTranslate2 folder; the options only the torch engine has are refused."""
    if engine not in ENGINES:
        raise OptionError("engine", engine, f"choose one of {', '.join(ENGINES)}")
    if engine == "torch":
        raise CtxmtError(f"{folder} is a folder written by ctxmt export ctranslate2: translate it with "
                         f"{option('engine')} ctranslate2 (or give the checkpoint it was exported from)")
    if quantize is not None:
        raise OptionError("quantize", quantize, "an exported folder keeps the weight type it was exported with: "
                          "export the checkpoint again in int8 instead")
    for name, value in (("first_pass", first_pass), ("repair", repair), ("compile", compile or None)):
        if value is not None:
            raise OptionError(name, None, "the ctranslate2 engine translates with the exported model alone; leave "
                              f"it out or use {option('engine')} torch with the checkpoint")
    from ctxmt_cli.export.ct2_engine import load_exported

    loaded = load_exported(folder, device)
    model = Model(loaded, folder)
    model.engine = loaded.model
    return model


class Model:
    """A loaded checkpoint (:func:`load`): ``loaded`` holds the network, its recipe and tokenizer; ``warn`` takes
    each warning line (default: :func:`warnings.warn`). ``engine``: None for ctxmt's own search, else the exported
    model whose search translates (:class:`~ctxmt_cli.export.ct2_engine.CT2Model`)."""

    def __init__(self, loaded, checkpoint: Path):
        self.loaded, self.checkpoint = loaded, Path(checkpoint)
        self.engine = None
        self.first_pass_model: Model | None = None
        self.repairer: tuple[Any, int] | None = None
        self.warn: Callable[[str], None] = lambda line: warnings.warn(line, stacklevel=3)

    @property
    def family(self) -> str:
        """The model family (``sentence``, ``concat``, ``caching``, ``mbe``, ``hanoit``)."""
        return self.loaded.recipe.model.family

    @property
    def recipe(self):
        """The recipe the checkpoint was trained with (its ``decode`` section gives the default settings)."""
        return self.loaded.recipe

    def translate(
        self, documents: Sequence[DocumentLike], *, tgt_context: Sequence[Sequence[Given]] | None = None,
        scores: bool = False, beam: int | None = None, lenpen: float | None = None,
        nbest: int | None = None, target_mode: str | None = None, context: int | None = None,
        batch_docs: int | None = None, group_sentences: int | None = None, group_order: str | None = None,
        warmup_sentences: int | None = None, progress: Callable | None = None, stats=None,
        mode: str | None = None, target_context: Sequence[Sequence[Given]] | None = None,
    ) -> list[DocumentTranslation]:
        """Translate ``documents``; one :class:`DocumentTranslation` per document, of the sentences after its
        given target context.

        ``tgt_context[d]``: translations of document d's first sentences (text, or a :class:`Candidate`'s
        ``tokens`` to continue a document exactly; or give :class:`Document` objects). ``scores``: each
        sentence's log-probability (summed over its tokens and ``</s>``, given its context). The decoding
        settings, None meaning "not given: the recipe's" (its ``decode`` section, as
        :meth:`~ctxmt_cli.decode.settings.DecodeSettings.from_recipe`): ``beam``, ``lenpen``, ``nbest`` N (each
        sentence's N best translations, N <= beam; not given: the best alone), ``target_mode`` (``prefix`` or
        ``generate``; n-best lists, scores and given target context need ``prefix``), ``context`` K (K context
        sentences instead of the model's own), ``batch_docs`` (documents decoded in parallel), ``group_sentences``
        / ``group_order`` (how an mbe model groups a document: not given, the whole document in sentence order),
        ``warmup_sentences`` (pieces side by side, :mod:`ctxmt_cli.decode.pieces`). A value the recipe could not
        hold is refused in one line (``beam=0: give a beam size >= 1``). ``progress(stats)`` after every decoding
        step; ``stats``: a :class:`~ctxmt_cli.decode.settings.TranslationStats` to read afterwards. The names of
        earlier versions, ``mode`` (``target_mode``) and ``target_context`` (``tgt_context``), still work, with
        a FutureWarning.
        """
        from ctxmt_cli.decode.settings import DecodeSettings

        target_mode = _renamed("mode", mode, "target_mode", target_mode)
        tgt_context = _renamed("target_context", target_context, "tgt_context", tgt_context)
        settings = self._checked(DecodeSettings.from_recipe(
            self.loaded.recipe, beam=beam, lenpen=lenpen, nbest=nbest, target_mode=target_mode, context=context,
            batch_docs=batch_docs, group_sentences=group_sentences, group_order=group_order,
            warmup_sentences=warmup_sentences), scores=scores, listed=nbest is not None)
        return self._translate(_documents(documents, tgt_context), settings, scores=scores,
                               nbest=nbest is not None, batch_docs=batch_docs, progress=progress, stats=stats)

    def translate_stream(
        self, documents: Iterable[DocumentLike], *, scores: bool = False, beam: int | None = None,
        lenpen: float | None = None, nbest: int | None = None, target_mode: str | None = None,
        context: int | None = None, batch_docs: int | None = None, group_sentences: int | None = None,
        group_order: str | None = None, warmup_sentences: int | None = None,
        progress: Callable | None = None, stats=None, mode: str | None = None, tgt_context=None,
    ) -> Iterator[DocumentTranslation]:
        """:meth:`translate` (the same keyword arguments except ``tgt_context``) over documents that may still be
        arriving: each result is yielded as soon as its batch is done, a batch being the documents ready at
        that moment (at most ``batch_docs``); a list is translated ``batch_docs`` documents at a time. The
        settings are checked before the first document is read."""
        from ctxmt_cli.decode.settings import DecodeSettings
        from ctxmt_cli.decode.streaming import ready_chunks

        if tgt_context is not None:
            raise CtxmtError("translate_stream: give each document's target context as Document(tgt_context=...)")
        target_mode = _renamed("mode", mode, "target_mode", target_mode)
        settings = self._checked(DecodeSettings.from_recipe(
            self.loaded.recipe, beam=beam, lenpen=lenpen, nbest=nbest, target_mode=target_mode, context=context,
            batch_docs=batch_docs, group_sentences=group_sentences, group_order=group_order,
            warmup_sentences=warmup_sentences), scores=scores, listed=nbest is not None)
        for chunk in ready_chunks(documents, settings.batch_docs):
            yield from self._translate(_documents(chunk, None), settings, scores=scores, nbest=nbest is not None,
                                       batch_docs=batch_docs, progress=progress, stats=stats)

    def score(self, items: Sequence[ScoreItem], *, normalize: str = "none", context: int | None = None,
              span: str = "all", max_tokens: int = DEFAULT_MAX_TOKENS, pretokenized: bool = False) -> list[list[float]]:
        """Forced-decoding scores of every candidate of every item (higher = better), as ``ctxmt contrastive``
        computes them (an item may also be a :class:`~ctxmt_cli.evaluate.testsets.base.ContrastiveItem`, whose
        sentences may be token-id tuples): ``normalize="none"`` the summed log-probability of the candidate's
        tokens and ``</s>``, ``"mean"`` per token. ``context`` K: K context sentences instead of the model's own;
        ``span``: ``all`` or ``current`` (see :mod:`ctxmt_cli.evaluate.contrastive`). Scores are rounded to 6
        decimals."""
        from ctxmt_cli.evaluate.contrastive import score_testset
        from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet

        self._torch_only("score")
        for number, item in enumerate(items):
            for name in ("src_context", "tgt_context", "candidates"):
                if isinstance(getattr(item, name), str):          # not a list of one-character sentences
                    raise CtxmtError(f"item {number}: {name} is a string; give a list of sentences")
        rows = [item if isinstance(item, ContrastiveItem) else
                ContrastiveItem(src_context=list(item.src_context), src=item.src, tgt_context=list(item.tgt_context),
                                candidates=list(item.candidates)) for item in items]
        testset = TestSet(name="api", kind="jsonl", items=rows, pretokenized=pretokenized)
        return score_testset(self.loaded.model, self.loaded.tokenizer, testset, max_tokens=max_tokens,
                             normalize=normalize, span=span, context=context)

    def analyze(self, src: Sequence[Sequence[str]], ref: Sequence[Sequence[str]], *, context: int | None = None,
                max_sentences: int | None = None, max_tokens: int = DEFAULT_MAX_TOKENS) -> dict:
        """Attention statistics teacher-forced over aligned source and reference documents: what ``ctxmt
        analyze-attention --src --ref`` writes to ``analysis.json`` (entropy and current-sentence share per
        kind, layer and head, group usage, kept context shares), without files or figures."""
        from ctxmt_cli.analysis.attention_run import analyze_documents

        self._torch_only("analyze")
        result = analyze_documents(self.loaded, [list(d) for d in src], [list(d) for d in ref], context=context,
                                   max_sentences=max_sentences, max_tokens=max_tokens)
        return {**result, "checkpoint": str(self.checkpoint)}

    # ---- helpers ---------------------------------------------------------------------------------
    def _torch_only(self, what: str) -> None:
        if self.engine is not None:
            raise CtxmtError(f"Model.{what} runs ctxmt's own network: load the checkpoint ({self.checkpoint} is an "
                             "exported CTranslate2 folder, which only translates)")

    def _checked(self, settings, *, scores: bool, listed: bool):
        """The decoding ``settings`` of one call, refused before any document is read where they cannot work
        (``listed``: n-best lists were asked for)."""
        from ctxmt_cli.decode.settings import check_settings

        check_settings(settings, [], None)
        if (scores or listed) and settings.target_mode != "prefix":
            raise OptionError("target_mode", settings.target_mode, "scores and n-best lists need the prefix mode: "
                              "generate mode writes the context too, so a sentence has no log-probability of its own")
        if (scores or listed) and self.repairer is not None:
            raise OptionError("repair", None, "scores and n-best lists describe the first translation, which the "
                              "repair rewrites; leave out the repair or them")
        return settings

    def _translate(self, docs: list[Document], settings, *, scores: bool, nbest: bool, batch_docs: int | None,
                   progress: Callable | None, stats) -> list[DocumentTranslation]:
        """:meth:`translate` of ``docs`` with checked ``settings``; ``nbest``: keep each sentence's n-best list;
        ``batch_docs``: the caller's (None: each model's own), for the first-pass model."""
        from ctxmt_cli.decode.translator import decode_documents

        engine = None if self.engine is None else self.engine.search(scores or nbest)
        found = decode_documents(self.loaded.model, self.loaded.tokenizer, [d.src for d in docs], settings,
                                 given=[d.tgt_context for d in docs], first_pass=self._first_pass(docs, batch_docs),
                                 progress=progress, stats=stats, engine=engine)
        if self.repairer is not None:
            found = self._repair(docs, found)
        return [_result(doc, sentences, scores, nbest) for doc, sentences in zip(docs, found, strict=True)]

    def _first_pass(self, docs: list[Document], batch_docs: int | None) -> list[list[str]] | None:
        """Each document's first pass for a bilingual model (the given one, completed by the first-pass model);
        None for any other model."""
        from ctxmt_cli.models.families import inputs_of

        inputs = inputs_of(self.loaded.recipe.model)
        if not inputs.target_concat:
            if any(d.first_pass is not None for d in docs):
                inputs.check_first_pass([], [])                        # refused: the model reads none
            return None
        missing = [i for i, d in enumerate(docs) if len(d.first_pass or ()) < len(d.src)]
        if missing and self.first_pass_model is None:
            inputs.check_first_pass([d.src for d in docs], None)      # refused: no first-pass model
        firsts = [list(d.first_pass or []) for d in docs]
        if missing:                                                    # the given first pass is its prefix
            done = self.first_pass_model.translate(
                [Document(docs[i].src, tgt_context=firsts[i]) for i in missing], batch_docs=batch_docs)
            for i, result in zip(missing, done, strict=True):
                firsts[i] += result.translations
        return firsts

    def _repair(self, docs: list[Document], found: list[list]) -> list[list]:
        """DocRepair's second pass over whole documents (given and new translations); the new ones come back
        rewritten. A warning line when groups kept their first pass."""
        from ctxmt_cli.decode.repair import RepairStats, repair_documents

        repairer, size = self.repairer

        def as_text(given) -> str:                     # a given translation: text, or target token ids
            return given if isinstance(given, str) else self.loaded.tokenizer.decode_tgt(list(given))

        texts = [[as_text(t) for t in d.tgt_context] + [c[0].text if c else "" for c in sentences[len(d.tgt_context):]]
                 for d, sentences in zip(docs, found, strict=True)]
        stats = RepairStats()
        repaired = repair_documents(repairer, texts, group_size=size, stats=stats)
        kept = stats.fallbacks + stats.too_long
        if kept:
            self.warn(named(f"{option('repair')}: {kept} of {stats.groups + stats.too_long} groups kept their "
                            "first-pass "
                      f"translation ({stats.fallbacks} rewritten with a wrong or empty sentence, {stats.too_long} "
                      "too long for the repair model)"))
        out = []
        for d, new, sentences in zip(docs, repaired, found, strict=True):   # rewritten texts; no score describes them
            given = len(d.tgt_context)
            out.append([None] * given + [[Candidate(text, float("nan"), float("nan"))] if c else []
                                         for text, c in zip(new[given:], sentences[given:], strict=True)])
        return out


def _renamed(old: str, old_value, new: str, new_value):
    """The value of the keyword argument ``new``, given under its earlier name ``old`` (with a FutureWarning) or
    its own (not both)."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise OptionError(old, None, f"{old} is the earlier name of {new}: give {new} alone")
    warnings.warn(f"Model.translate({old}=...) is now {new}=...", FutureWarning, stacklevel=3)
    return old_value


def _documents(documents: Sequence[DocumentLike], target_context) -> list[Document]:
    """``documents`` as :class:`Document` objects, ``target_context[d]`` (when given) as document d's."""
    if isinstance(documents, (str, Document)):
        raise CtxmtError("translate takes a list of documents (each a list of sentences or a Document)")
    docs = []
    for d, doc in enumerate(documents):
        if isinstance(doc, str):
            raise CtxmtError(f"document {d + 1} is a string; give each document as a list of sentences")
        docs.append(doc if isinstance(doc, Document) else Document(src=list(doc)))
    if target_context is None:
        return docs
    if len(target_context) != len(docs):
        raise CtxmtError(f"tgt_context has {len(target_context)} entries for {len(docs)} documents; give one "
                         "list of translations per document")
    if any(doc.tgt_context for doc in docs):
        raise CtxmtError("give the target context once: in tgt_context or in Document.tgt_context")
    return [Document(doc.src, list(given), doc.doc_id, doc.first_pass)
            for doc, given in zip(docs, target_context, strict=True)]


def _result(doc: Document, found: list, scores: bool, nbest: bool) -> DocumentTranslation:
    """The translation record of one document from its sentences' n-best lists (after the given ones)."""
    sentences = []
    for candidates in found[len(doc.tgt_context):]:
        best = candidates[0] if candidates else None
        sentences.append(SentenceTranslation(text="" if best is None else best.text,
                                             logprob=best.logprob if scores and best is not None else None,
                                             nbest=list(candidates) if nbest else None))
    return DocumentTranslation(doc.doc_id, sentences)
