"""Sentence-level Transformer (Vaswani et al., 2017): the context-agnostic baseline.

Overrides nothing: it is the core :class:`EncoderDecoder` with plain sinusoidal
positions and windows of one sentence.
"""

from __future__ import annotations

from ctxmt_cli.config import SentenceConfig
from ctxmt_cli.core.model import EncoderDecoder, VocabInfo


class Sentence(EncoderDecoder):
    """Context-agnostic Transformer."""

    context_aware = False

    def __init__(self, cfg: SentenceConfig, vocab: VocabInfo):
        super().__init__(cfg, vocab)

    @staticmethod
    def resolve(cfg: SentenceConfig, meta: dict) -> SentenceConfig:
        """Nothing to resolve from the prepared data."""
        return cfg
