"""Model families. Adding one: a config class in config.py, a module here, one line in FAMILIES."""

from __future__ import annotations

from typing import Optional

from ctxmt_cli.core.model import EncoderDecoder, VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.caching import Caching
from ctxmt_cli.models.concat import Concat
from ctxmt_cli.models.hanoit import HanoiT
from ctxmt_cli.models.mbe import Mbe
from ctxmt_cli.models.sentence import Sentence

FAMILIES: dict[str, type[EncoderDecoder]] = {
    "sentence": Sentence,
    "concat": Concat,
    "caching": Caching,
    "mbe": Mbe,
    "hanoit": HanoiT,
}


def build_model(cfg, vocab: VocabInfo) -> EncoderDecoder:
    """Instantiate the family named by ``cfg.family`` (``cfg`` already resolved)."""
    return FAMILIES[cfg.family](cfg, vocab)


def resolve_model_config(cfg, meta: dict):
    """Fill data-dependent values (e.g. ``shift: auto``) from the prepared data's meta.json."""
    return FAMILIES[cfg.family].resolve(cfg, meta)


def context_sentences(cfg, context: Optional[int] = None) -> tuple[int, int]:
    """(source, target) context sentences to decode with: the model config's own, or ``context`` = K on each
    side that has context (Lupo et al. 2022, Figure 4: a model tested with other window sizes than it was
    trained on). A concatenation model then reads windows of K+1 sentences (K = 3: s4to4), an sNto1 model
    grows its source side only, a caching model caches K sentences. A model that reads no context refuses K > 0.
    A model that also reads next sentences takes K for them too (:func:`next_sentences`).
    """
    own = (cfg.src_context_sentences, cfg.tgt_context_sentences)
    if context is None:
        return own
    if context < 0:
        raise CtxmtError(f"--context {context}: give a number of context sentences >= 0")
    if context > 0 and own == (0, 0) and not cfg.src_next_sentences:
        raise CtxmtError(f"--context {context}: this {cfg.family} model reads no context, so there is no window "
                         "to resize; leave --context out (or give 0), or use a context-aware checkpoint")
    return (context if own[0] else 0, context if own[1] else 0)


def next_sentences(cfg, context: Optional[int] = None) -> int:
    """Next source sentences to decode with: the model config's own, or ``context`` = K when the model reads
    next sentences at all. K sets every direction the model reads, as it sets both sides in
    :func:`context_sentences`: an offline model (1 previous + 1 next, Yang et al.'s HanoiT) with K = 2 reads 2
    previous and 2 next sentences, with K = 0 the current sentence alone; a model without next context gets 0.
    """
    context_sentences(cfg, context)                 # the same refusals
    own = cfg.src_next_sentences
    return own if context is None else (context if own else 0)
