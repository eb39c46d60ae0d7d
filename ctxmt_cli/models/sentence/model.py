"""Sentence-level Transformer (Vaswani et al., 2017): the context-agnostic baseline.

Overrides no hook: it is the core :class:`EncoderDecoder` with plain sinusoidal
positions and windows of one sentence (every default of the core contract).
"""

from __future__ import annotations

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.models.sentence.config import SentenceConfig


class Sentence(EncoderDecoder):
    """Context-agnostic Transformer."""

    def __init__(self, cfg: SentenceConfig, vocab: VocabInfo):
        super().__init__(cfg, vocab)


#: tiny variants the contract suite checks (tests/unit/test_contract.py): name -> model-config overrides
VARIANTS: dict[str, dict] = {
    "pre-norm": {},
    "post-norm": {"normalize_before": False},
    # the architecture of an imported Marian / OPUS-MT model (`ctxmt import marian`)
    "marian": {"normalize_before": False, "activation": "swish", "scale_embeddings": False, "sinusoid": "marian",
               "output_bias": True},
}

#: A sentence-level model started from another (``train.init_from``) is that model.
EXACT_FROM_SENTENCE = frozenset(VARIANTS)
