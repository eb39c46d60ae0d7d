"""What ``analyze-attention`` gives a bilingual HanoiT besides its source windows (ctxmt_cli/analysis/attention_run.py):
the target concatenation its recipe names, or one error line where the input cannot have it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ctxmt_cli.analysis.attention_run import AttentionRequest, target_concatenation
from ctxmt_cli.config import validate_recipe
from ctxmt_cli.data.store import MemorySplit
from ctxmt_cli.data.target_concat import ReferenceSide
from ctxmt_cli.errors import CtxmtError

FILES = AttentionRequest(checkpoint=Path("run/checkpoint_best.pt"), out=Path("out"), src=Path("a.txt"),
                         ref=Path("b.txt"))
SPLIT = MemorySplit([[([5, 6], [7, 8, 9]), ([10], [11])]])


def loaded(**model) -> SimpleNamespace:
    """What target_concatenation reads of a loaded checkpoint: its recipe."""
    return SimpleNamespace(recipe=validate_recipe({"model": {"family": "hanoit", **model}}))


def test_only_a_bilingual_model_gets_target_concatenations():
    assert target_concatenation(loaded(), FILES, SPLIT) is None
    assert target_concatenation(loaded(family="concat"), FILES, SPLIT) is None


def test_files_give_the_reference_to_a_model_reading_it_and_refuse_a_first_pass_reader():
    concat = target_concatenation(loaded(bilingual=True, target_context_from="reference"), FILES, SPLIT)
    assert isinstance(concat.side, ReferenceSide) and concat.side.sentence(0).tolist() == [7, 8, 9]
    with pytest.raises(CtxmtError, match="first-pass translations") as err:
        target_concatenation(loaded(bilingual=True), FILES, SPLIT)
    assert "`data` DIR `split` S" in str(err.value) and "\n" not in str(err.value)
