"""Model families. Adding one: a config class in config.py, a module here, one line in FAMILIES."""

from __future__ import annotations

from ctxmt_cli.core.model import EncoderDecoder, VocabInfo
from ctxmt_cli.models.caching import Caching
from ctxmt_cli.models.concat import Concat
from ctxmt_cli.models.sentence import Sentence

FAMILIES: dict[str, type[EncoderDecoder]] = {
    "sentence": Sentence,
    "concat": Concat,
    "caching": Caching,
}


def build_model(cfg, vocab: VocabInfo) -> EncoderDecoder:
    """Instantiate the family named by ``cfg.family`` (``cfg`` already resolved)."""
    return FAMILIES[cfg.family](cfg, vocab)


def resolve_model_config(cfg, meta: dict):
    """Fill data-dependent values (e.g. ``shift: auto``) from the prepared data's meta.json."""
    return FAMILIES[cfg.family].resolve(cfg, meta)
