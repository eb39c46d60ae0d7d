"""The recipe schema of the ``sentence`` family (Vaswani et al. 2017). No torch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ctxmt_cli.config_base import ModelBase


class SentenceConfig(ModelBase):
    """Sentence-level Transformer (Vaswani et al., 2017): no context."""

    family: Literal["sentence"] = Field("sentence", description="the family this section configures")

