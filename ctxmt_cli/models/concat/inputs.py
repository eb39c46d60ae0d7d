"""The ``concat`` family's inputs (Lupo et al. 2022, 2023): the plain windows, except that the training windows
may draw their context at random from the document (``context_order: random``; Morishita et al. 2021, footnote 3:
for corpora whose in-document order is lost). Validation, translation and scoring keep the previous sentences,
as Morishita et al. validate and test on the original order. Overrides :meth:`Inputs.window_spec`."""

from __future__ import annotations

from dataclasses import replace

from ctxmt_cli.data.windows import WindowSpec
from ctxmt_cli.models.inputs import Inputs


class ConcatInputs(Inputs):
    """Previous-sentence windows; random context sentences in training where the recipe asks for them."""

    def window_spec(self, recipe, role: str) -> WindowSpec:
        spec = super().window_spec(recipe, role)
        return replace(spec, context_order=self.cfg.context_order) if role == "train" else spec
