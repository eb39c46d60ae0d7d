"""The hanoit recipe schema's bilingual options (Yang et al., §2.3-2.4): defaults, refusals, round trips."""

from __future__ import annotations

import pytest

from ctxmt_cli.config import HanoiTConfig, recipe_to_dict, validate_recipe
from ctxmt_cli.errors import CtxmtError


def hanoit(**model):
    return validate_recipe({"model": {"family": "hanoit", **model}})


def test_bilingual_defaults_are_filled_and_round_trip():
    recipe = hanoit(bilingual=True)
    m = recipe.model
    assert isinstance(m, HanoiTConfig)
    assert (m.target_context_from, m.first_pass_stream, m.share_encoder, m.gate, m.gate_scale, m.alpha) == \
        ("first_pass", "first-pass", True, "vector", 1.0, 0.5)
    assert validate_recipe(recipe_to_dict(recipe)) == recipe
    plain = hanoit()
    assert plain.model.alpha is None and validate_recipe(recipe_to_dict(plain)) == plain


def test_reference_target_context_names_no_stream():
    m = hanoit(bilingual=True, target_context_from="reference").model
    assert m.first_pass_stream is None
    with pytest.raises(CtxmtError, match="first_pass_stream names the stream"):
        hanoit(bilingual=True, target_context_from="reference", first_pass_stream="fp")


@pytest.mark.parametrize("option, value", [("alpha", 0.3), ("gate", "scalar"), ("gate_scale", 0.5),
                                           ("share_encoder", False), ("target_context_from", "reference"),
                                           ("first_pass_stream", "fp")])
def test_bilingual_options_are_refused_on_a_monolingual_model(option, value):
    with pytest.raises(CtxmtError, match=f"model: {option}: for the bilingual model only; set bilingual: true"):
        hanoit(**{option: value})


def test_bilingual_needs_context_sentences_and_bounded_values():
    with pytest.raises(CtxmtError, match="set one of them >= 1"):
        hanoit(bilingual=True, src_context_sentences=0, src_next_sentences=0)
    for option, value in (("gate_scale", 1.5), ("alpha", -0.1), ("gate", "matrix"), ("first_pass_stream", "a.b")):
        with pytest.raises(CtxmtError, match=option):
            hanoit(bilingual=True, **{option: value})
