"""Document translation: several documents at once, with the settings of :mod:`ctxmt_cli.decode.settings`, in
the way the family declares (its inputs contract's ``translation()``: sentence by sentence in parallel slots, the
same with a first pass, slots with a document memory, or sentence groups), each run by its loop in
:mod:`ctxmt_cli.decode.loops`.

Target context:

* ``prefix`` (default): the model's own translations of the previous
  ``tgt_context_sentences`` sentences, each followed by ``<brk>``, are forced as the
  decoder prefix after ``<s>`` (one parallel pass in ``init_state``); ``<brk>``
  is banned so only the current sentence is generated.
* ``generate``: the whole target window is generated from ``<s>``, as Lupo et
  al.'s fork does, and what follows the last ``<brk>`` is kept. Unlike the fork
  we check the number of separators: when it is not the number of context
  sentences, that sentence is decoded again in prefix mode and counted in
  :attr:`TranslationStats.fallbacks`. The window is a function of the source
  (:func:`~ctxmt_cli.decode.steps.generate_context`), so a model without a
  document memory decodes the windows of all documents at once
  (:mod:`ctxmt_cli.decode.generated`).

Given target context (``given`` of :func:`decode_documents`, prefix mode): the first sentences of a document
may come with their translation (a gold prefix, or what an earlier call translated). They are not translated;
their given translations stand where the model's own would (the target context of the next sentences) and
a document-memory model still caches their source entries, so the next sentences are translated as if the
model had written the given translations itself. A model reading its sentence group (mbe) still decodes
them, its group summary reading their sources, and drops those outputs.

Every translated sentence comes back as its n-best list of :class:`Candidate` (best first): the text, the
summed log-probability of its tokens and ``</s>`` given its window and target context, and the beam score.

Another inference engine can run the search of each step (``engine`` of :func:`decode_documents`, a
:data:`StepSearch`): documents, windows, target-context forcing and fallbacks stay the ones here, and ``model``
then only needs the attributes the translator reads (``cfg``, through which its inputs contract is found, and
``vocab``).
The CTranslate2 engine (:mod:`ctxmt_cli.export.ct2_engine`) does this; without ``engine`` ctxmt's beam search runs.

An empty source line (or one that tokenizes to nothing) yields an empty output
and does not enter later windows: the models never saw empty sentences.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from ctxmt_cli.decode.encoded import encode_document, first_pass_per_document
from ctxmt_cli.decode.footprint import check_search_memory
from ctxmt_cli.decode.loops import DocumentCall, translate_call
from ctxmt_cli.decode.records import Candidate
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats, check_settings
from ctxmt_cli.decode.slots import Search, StepSearch
from ctxmt_cli.errors import OptionError
from ctxmt_cli.models.families import inputs_of


def _model_device(model) -> torch.device:
    param = next(model.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def _search(model, engine: StepSearch | None, s: DecodeSettings) -> Search:
    """Whose search runs (``engine``, or ctxmt's over ``model``) and where; a sampling generator when ``s`` asks."""
    if engine is not None:
        if s.sample_seed is not None:
            raise OptionError("sample_seed", s.sample_seed, "another engine's search does not sample; translate "
                              "with the torch engine")
        return Search(torch.device("cpu"), engine)
    device = _model_device(model)
    generator = None if s.sample_seed is None else torch.Generator(device).manual_seed(s.sample_seed)
    return Search(device, None, generator)


def decode_documents(
    model, tokenizer, documents: list[list[str]], settings: DecodeSettings, *, given: Sequence | None = None,
    first_pass: list[list] | None = None, progress: Callable[[TranslationStats], None] | None = None,
    stats: TranslationStats | None = None, engine: StepSearch | None = None,
) -> list[list[list[Candidate] | None]]:
    """Translate ``documents``; per input sentence its n-best list (best first; ``[]`` for an empty source line,
    None for a sentence whose translation ``given`` holds).

    ``given[d]``: translations of document d's first sentences (prefix mode): not translated, they are the
    target context of the next ones. ``first_pass``: a bilingual model's first pass of ``documents``
    (:mod:`ctxmt_cli.decode.bilingual`); ``progress(stats)`` after every step; ``stats``: counters to read
    afterwards (fallbacks…). ``engine``: another engine's search of each step (module docstring); None: ctxmt's
    beam search over ``model``.
    """
    given = check_settings(settings, documents, given)
    stats = stats if stats is not None else TranslationStats()
    started = time.perf_counter()
    inputs = inputs_of(model.cfg)
    s = settings.resolved(inputs)
    stats.settings = s
    search = _search(model, engine, s)
    firsts = first_pass_per_document(model, documents, first_pass)           # refused where it does not fit
    encoded = [encode_document(tokenizer, doc, s.max_window_tokens, stats, f, g)
               for doc, f, g in zip(documents, firsts, given, strict=True)]
    if engine is None:                       # another engine's search keeps its own memory
        check_search_memory(model, s, [ids for e in encoded for ids in e.ids], search.device)
    stats.documents += len(documents)
    # per sentence: None where the translation is given, its candidates once translated
    results: list[list] = [[None if i < len(g) else [] for i in range(len(doc))]
                           for doc, g in zip(documents, given, strict=True)]
    own = isinstance(model, torch.nn.Module)                                 # another engine's model has no modes
    was_training = own and model.training
    if own:
        model.eval()
    try:
        translate_call(DocumentCall(model=model, tokenizer=tokenizer, inputs=inputs, encoded=encoded,
                                    results=results, settings=s, searcher=search, stats=stats, progress=progress))
    finally:
        if own:
            model.train(was_training)
        stats.seconds += time.perf_counter() - started
    return results


def translate_documents(model, tokenizer, documents: list[list[str]], settings: DecodeSettings, *,
                        first_pass: list[list] | None = None,
                        progress: Callable[[TranslationStats], None] | None = None,
                        stats: TranslationStats | None = None) -> list[list[str]]:
    """Translate ``documents`` (lists of sentences) with ``settings``; one output string per input sentence, same
    nesting (``first_pass``, ``progress``, ``stats``: as :func:`decode_documents`, which also gives the n-best lists
    and log-probabilities and takes given target context)."""
    found = decode_documents(model, tokenizer, documents, settings, first_pass=first_pass, progress=progress,
                             stats=stats)
    return [[best[0].text if best else "" for best in doc] for doc in found]
