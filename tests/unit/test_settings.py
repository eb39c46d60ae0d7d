"""Decoding settings (ctxmt_cli.decode.settings): built by keyword, None = the recipe's value, a value given kept as
it is and refused by check_settings in one line."""

from __future__ import annotations

from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.decode.settings import DecodeSettings, check_settings
from ctxmt_cli.errors import OptionError

S2TO2 = {"family": "concat", "preset": "tiny", "src_context_sentences": 2, "tgt_context_sentences": 2}


def test_settings_are_built_by_keyword():
    with pytest.raises(TypeError):
        DecodeSettings(2, 2)                            # which is the source context, which the target's?
    assert DecodeSettings(src_context_sentences=2).tgt_context_sentences == 0


decode_sections = st.fixed_dictionaries({
    "beam": st.integers(1, 1024), "lenpen": st.floats(0.0, 5.0), "batch_docs": st.integers(1, 512),
    "target_mode": st.sampled_from(["prefix", "generate"]), "warmup_sentences": st.none() | st.integers(0, 64),
})


@settings(max_examples=40, deadline=None)
@given(decode=decode_sections, window=st.integers(8, 4096))
def test_what_is_not_given_is_the_recipes(decode, window):
    recipe = validate_recipe({"model": S2TO2, "decode": decode, "data": {"max_window_tokens": window}})
    s = DecodeSettings.from_recipe(recipe)
    assert {name: getattr(s, name) for name in decode} == decode
    assert (s.max_window_tokens, s.src_context_sentences, s.tgt_context_sentences) == (window, 2, 2)
    assert (s.max_len_a, s.max_len_b) == (recipe.decode.max_len_a, recipe.decode.max_len_b)
    defaults = DecodeSettings()
    assert (s.nbest, s.group_order, s.group_sentences) == (defaults.nbest, defaults.group_order, None)
    assert check_settings(s, [["a"]], None) == [()]


@settings(max_examples=40, deadline=None)
@given(decode=decode_sections, chosen=decode_sections)
def test_what_is_given_is_kept_as_it_is(decode, chosen):
    recipe = validate_recipe({"model": S2TO2, "decode": decode})
    s = DecodeSettings.from_recipe(recipe, **chosen)
    assert {name: getattr(s, name) for name in chosen if chosen[name] is not None} == \
        {name: value for name, value in chosen.items() if value is not None}


@pytest.mark.parametrize("name, value, message", [
    ("beam", 0, "beam=0: give a beam size >= 1"),
    ("batch_docs", 0, "batch_docs=0: give 1 or more documents decoded in parallel"),
    ("nbest", 0, "nbest=0: an n-best list holds at most"),
    ("lenpen", float("nan"), "lenpen=nan: "),
])
def test_zero_is_a_value_not_the_recipes(name, value, message):
    """``beam=0`` was read as "not given" (``beam or the recipe's``): the call decoded with the recipe's beam and
    check_settings' own refusal was never reached."""
    s = DecodeSettings.from_recipe(validate_recipe({"model": S2TO2}), **{name: value})
    assert getattr(s, name) == value or value != value          # nan is not equal to itself
    with pytest.raises(OptionError) as refused:
        check_settings(s, [["a"]], None)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_context_resizes_the_windows_and_every_field_is_named():
    recipe = validate_recipe({"model": S2TO2})
    s = DecodeSettings.from_recipe(recipe, context=4)
    assert (s.src_context_sentences, s.tgt_context_sentences) == (4, 4)
    assert DecodeSettings.from_recipe(recipe, context=0).src_context_sentences == 0
    assert all(f.kw_only for f in fields(DecodeSettings))
