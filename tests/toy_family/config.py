"""The ``prevsrc`` family's recipe section. No torch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ctxmt_cli.config_base import ModelBase


class PrevSrcConfig(ModelBase):
    """Previous source sentences, the current target sentence only."""

    family: Literal["prevsrc"] = Field("prevsrc", description="the family this section configures")
    src_context_sentences: int = Field(1, ge=0, le=64, description="previous source sentences in the window")
