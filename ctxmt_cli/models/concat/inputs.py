"""The ``concat`` family's inputs (Lupo et al. 2022, 2023): the plain windows, except that the training windows
may draw their context at random from the document (``context_order: random``; Morishita et al. 2021, footnote 3:
for corpora whose in-document order is lost). Validation, translation and scoring keep the previous sentences,
as Morishita et al. validate and test on the original order. A bilingual sKto1 window (``bilingual: true``, Yang
et al.'s bilingual ECT baseline) holds the target side of its context sentences too
(:mod:`ctxmt_cli.models.bilingual_windows`).

Overrides :meth:`Inputs.window_spec`; the bilingual window's methods come from
:class:`~ctxmt_cli.models.bilingual_windows.BilingualWindowInputs`.
"""

from __future__ import annotations

from dataclasses import replace

from ctxmt_cli.data.windows import WindowSpec
from ctxmt_cli.models.bilingual_windows import BilingualWindowInputs


class ConcatInputs(BilingualWindowInputs):
    """Previous-sentence windows; random context sentences in training where the recipe asks for them; a
    bilingual model's windows with the target side of their context first."""

    def window_spec(self, recipe, role: str) -> WindowSpec:
        spec = super().window_spec(recipe, role)
        return replace(spec, context_order=self.cfg.context_order) if role == "train" else spec
