"""The hanoit recipe schema's bilingual options (Yang et al., §2.3-2.4): defaults, refusals, round trips."""

from __future__ import annotations

import pytest

from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.hanoit.config import HanoiTConfig


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
                                           ("share_encoder", False)])
@pytest.mark.parametrize("side", ["source", "target"])
def test_bilingual_options_are_refused_on_a_one_stream_model(option, value, side):
    with pytest.raises(CtxmtError, match=f"model: {option}: for the bilingual model only; set bilingual: true"):
        hanoit(context_side=side, **{option: value})


@pytest.mark.parametrize("option, value", [("target_context_from", "reference"), ("first_pass_stream", "fp")])
def test_target_context_options_are_refused_on_a_source_context_model(option, value):
    with pytest.raises(CtxmtError, match=f"model: {option}: for a model reading target context; set bilingual: "
                                         "true or context_side: target"):
        hanoit(**{option: value})


def test_a_target_context_model_reads_where_its_context_comes_from_and_round_trips():
    """context_side: target (§3.5's target mono-lingual context): the first pass by default, or the reference; the
    bilingual model's other options stay unset; both sides at once is the bilingual model."""
    recipe = hanoit(context_side="target")
    m = recipe.model
    assert (m.target_context_from, m.first_pass_stream, m.share_encoder, m.gate, m.gate_scale, m.alpha) == \
        ("first_pass", "first-pass", None, None, None, None)
    assert m.reads_target_context and validate_recipe(recipe_to_dict(recipe)) == recipe
    assert hanoit(context_side="target", target_context_from="reference").model.first_pass_stream is None
    with pytest.raises(CtxmtError, match="bilingual: true reads both sides: set one of them"):
        hanoit(context_side="target", bilingual=True)
    with pytest.raises(CtxmtError, match="context_side: target reads the target side .* set one of them >= 1"):
        hanoit(context_side="target", src_context_sentences=0, src_next_sentences=0)


def test_bilingual_needs_context_sentences_and_bounded_values():
    with pytest.raises(CtxmtError, match="set one of them >= 1"):
        hanoit(bilingual=True, src_context_sentences=0, src_next_sentences=0)
    for option, value in (("gate_scale", 1.5), ("alpha", -0.1), ("gate", "matrix"), ("first_pass_stream", "a.b")):
        with pytest.raises(CtxmtError, match=option):
            hanoit(bilingual=True, **{option: value})
