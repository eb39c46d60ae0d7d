"""A batch of server requests as one :meth:`ctxmt_cli.api.Model.translate` call, continuing each document.

Each request's document is given as its kept earlier sentences (:mod:`~ctxmt_cli.serve.documents`) followed by
the request's sentences, the kept sentences' translations as target token ids (``Document.tgt_context``): the
API then translates the new sentences exactly as if the document received so far had been translated at once
(prefix mode: the model's own earlier translations are forced as the target context). So a response equals the
last sentences of ``ctxmt translate --target-mode prefix`` on the document received so far, which for every
model that reads no next sentence is the whole document's translation, however the document was split into
requests. A model reading next sentences (hanoit offline) sees those of the same request only: a request's last
sentences are translated without the sentences that have not arrived yet.

A model reading target context translates each request's sentences with its first-pass model first (sentence
level, so a sentence's first pass does not depend on what else is translated) and keeps the first passes of the
earlier sentences it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxmt_cli.serve.documents import DocumentStore, KeepRule, Snapshot


@dataclass(frozen=True)
class TranslateRequest:
    """``POST /translate``'s body once checked: a document id, its next sentences, whether to add scores."""

    doc_id: str
    sentences: list[str]
    scores: bool = False


@dataclass
class TranslateResult:
    """The response to a :class:`TranslateRequest`. ``context``: new, evicted or continued
    (:mod:`~ctxmt_cli.serve.documents`); ``context_sentences``: the kept earlier sentences given as context."""

    doc_id: str
    translations: list[str]
    context: str
    context_sentences: int
    scores: list[float | None] | None = None

    def to_json(self) -> dict:
        """The JSON body: ``doc_id``, ``translations``, ``context``, ``context_sentences`` [, ``scores``]."""
        out = {"doc_id": self.doc_id, "translations": self.translations, "context": self.context,
               "context_sentences": self.context_sentences}
        if self.scores is not None:
            out["scores"] = self.scores
        return out


class RequestRefused(Exception):
    """A request the server does not translate, with its HTTP status and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def keep_rule(model, group_sentences: int | None, max_document_sentences: int | None) -> KeepRule:
    """What the server keeps per document for ``model`` (a :class:`ctxmt_cli.api.Model`): its context window,
    or for a model reading sentence groups (mbe) the unfinished group (``group_sentences``) or the whole document
    (at most ``max_document_sentences``, default 1024). Options a model does not read are refused."""
    from ctxmt_cli.models.families import inputs_of

    return KeepRule(**inputs_of(model.recipe.model).kept_sentences(group_sentences, max_document_sentences))


class Engine:
    """Translates batches of :class:`TranslateRequest` with ``model``, keeping documents in ``store``.

    ``beam``, ``lenpen``: the decoding settings (default the recipe's); ``group_sentences``: an mbe model's
    groups (consecutive sentences; None = one group per document)."""

    def __init__(self, model, store: DocumentStore, *, beam: int | None = None, lenpen: float | None = None,
                 group_sentences: int | None = None):
        self.model, self.store = model, store
        self.beam, self.lenpen, self.group_sentences = beam, lenpen, group_sentences
        if model.recipe.decode.target_mode != "prefix":
            model.warn("the recipe decodes with --target-mode generate; the server forces the model's own "
                       "translations as the target context (prefix), the mode in which a document can be continued")

    def translate(self, requests: list[TranslateRequest]) -> list[TranslateResult | Exception]:
        """Each request's result, or the exception that refused or failed it. One model call for the batch; when
        it fails, each request is tried alone so one bad request does not fail the others."""
        snapshots = [self.store.begin(r.doc_id) for r in requests]
        results: list = [self._refusal(r, s) for r, s in zip(requests, snapshots, strict=True)]    # None: to translate
        todo = [i for i, r in enumerate(results) if r is None]
        try:
            done = self._run([requests[i] for i in todo], [snapshots[i] for i in todo])
        except Exception as err:  # noqa: BLE001 - reported per request; the server keeps running
            if len(todo) == 1:
                done = [err]
            else:
                done = [self._alone(requests[i], snapshots[i]) for i in todo]
        for i, result in zip(todo, done, strict=True):
            results[i] = result
        for snapshot, result in zip(snapshots, results, strict=True):
            if isinstance(result, Exception):
                self.store.abandon(snapshot)
        return results

    def _alone(self, request: TranslateRequest, snapshot: Snapshot) -> TranslateResult | Exception:
        try:
            return self._run([request], [snapshot])[0]
        except Exception as err:  # noqa: BLE001
            return err

    def _refusal(self, request: TranslateRequest, snapshot: Snapshot) -> RequestRefused | None:
        """A request that would make a whole-document (mbe) document longer than the store keeps."""
        limit = self.store.rule.max_sentences
        if limit is not None and len(snapshot.src) + len(request.sentences) > limit:
            return RequestRefused(413, f"document {request.doc_id!r} would hold {len(snapshot.src)} + "
                                  f"{len(request.sentences)} sentences, more than --max-document-sentences {limit} "
                                  "(this model reads the whole document as one group); DELETE it and start anew, "
                                  "or serve with --group-sentences N")
        return None

    def _run(self, requests: list[TranslateRequest], snapshots: list[Snapshot]) -> list[TranslateResult]:
        """One model call for ``requests``; their documents' new sentences committed to the store."""
        from ctxmt_cli.api import Document

        firsts = self._first_passes(requests)
        docs = [Document(src=s.src + r.sentences, tgt_context=list(s.tgt), doc_id=r.doc_id,
                         first_pass=None if firsts is None else s.first_pass + f)
                for r, s, f in zip(requests, snapshots, firsts or [None] * len(requests), strict=True)]
        found = self.model.translate(docs, beam=self.beam, lenpen=self.lenpen, nbest=1, target_mode="prefix",
                                     batch_docs=len(docs), group_sentences=self.group_sentences)
        results = []
        for r, s, f, out in zip(requests, snapshots, firsts or [None] * len(requests), found, strict=True):
            kept = [i for i, sent in enumerate(out.sentences) if sent.nbest]    # empty sentences are not read
            self.store.commit(s, [r.sentences[i] for i in kept], [out.sentences[i].nbest[0].tokens for i in kept],
                              [] if f is None else [f[i] for i in kept])
            scores = [sent.nbest[0].logprob if sent.nbest else None for sent in out.sentences] if r.scores else None
            results.append(TranslateResult(r.doc_id, out.translations, s.status, len(s.src), scores))
        return results

    def _first_passes(self, requests: list[TranslateRequest]) -> list[list[str]] | None:
        """A bilingual model's first pass of each request's sentences (None for any other model)."""
        if self.model.first_pass_model is None:
            return None
        return [d.translations for d in self.model.first_pass_model.translate([list(r.sentences) for r in requests],
                                                                              batch_docs=len(requests))]
