"""ctxmt_cli.memory and the estimates that use it: a beam search's least footprint (decode/footprint.py), a model's
least parameter count (models/families.py) and sacrebleu's arrays (evaluate/significance.py)."""

from __future__ import annotations

import pytest
import torch

from ctxmt_cli import memory as M
from ctxmt_cli.config import FAMILY_CONFIGS, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.footprint import SearchShape, check_search_memory, search_shape
from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.significance import paired_test
from ctxmt_cli.models.families import build_model, least_parameters

VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 3}


def test_the_host_has_a_known_amount_free():
    free = M.available_bytes()
    assert free is None or 0 < free


@pytest.mark.parametrize("text,expected", [("8G", 8 * 2**30), ("512M", 512 * 2**20), ("1024", 1024),
                                           ("1.5 GiB", 3 * 2**29), (" 2t ", 2 * 2**40)])
def test_the_limit_variable_caps_what_is_planned_with(monkeypatch, text, expected):
    monkeypatch.setenv(M.LIMIT_VARIABLE, text)
    assert M.available_bytes() == min(expected, M._host_free() or expected)


def test_a_limit_that_is_no_size_is_one_line(monkeypatch):
    monkeypatch.setenv(M.LIMIT_VARIABLE, "lots")
    with pytest.raises(CtxmtError, match=r"^CTXMT_MEMORY_LIMIT='lots': not a memory size; .*\(e\.g\. "
                                         r"CTXMT_MEMORY_LIMIT=8G\)"):
        M.available_bytes()


def test_check_fits_names_what_to_lower(monkeypatch):
    monkeypatch.setenv(M.LIMIT_VARIABLE, "1M")
    M.check_fits(2**20, "a thing", "`x`")                               # exactly what is free: fits
    with pytest.raises(CtxmtError, match=r"^a thing needs about 2\.0 MiB, more than the 1\.0 MiB free in host "
                                         r"memory \(CTXMT_MEMORY_LIMIT\); lower `x`$"):
        M.check_fits(2**21, "a thing", "`x`")


def test_the_search_estimate_grows_with_every_size():
    base = SearchShape(rows=4, beam=4, src_tokens=50, tgt_tokens=60, layers=6, width=512, vocab=8000)
    n = base.bytes_needed()
    # the self-attention cache alone: 16 hypotheses x 6 layers x (keys, values) x 60 x 512 x 4 bytes, twice
    assert n > 2 * 16 * 6 * 2 * 60 * 512 * 4
    for field in ("rows", "beam", "src_tokens", "tgt_tokens", "layers", "width", "vocab"):
        bigger = SearchShape(**{**base.__dict__, field: getattr(base, field) * 2})
        assert bigger.bytes_needed() > n, field
    huge = SearchShape(**{**base.__dict__, "rows": 64, "beam": 1024})
    assert huge.bytes_needed() > 100 * 2**30                             # the machine-killing case of issue 35


def _model(family: str = "concat"):
    torch.manual_seed(0)
    return build_model(validate_recipe({"model": {**TINY, "family": family}}).model, VOCAB).eval()


def test_search_shape_reads_the_model_the_settings_and_the_longest_sentence():
    model = _model()
    settings = DecodeSettings(src_context_sentences=3, tgt_context_sentences=3, beam=5, max_len_a=1.0, max_len_b=4,
                              batch_docs=2)
    shape = search_shape(model, settings, [[7] * 10, [8] * 3, [9] * 6])
    assert (shape.rows, shape.beam, shape.layers, shape.width, shape.vocab) == (2, 5, 3, 32, 40)
    assert shape.tgt_tokens == 1 + 3 * 15 + 15 and shape.src_tokens == 4 * 11
    sampled = search_shape(model, DecodeSettings(beam=5, sample_seed=1), [[7]])
    assert sampled.beam == 1


def test_a_search_that_cannot_fit_is_refused_naming_beam_and_batch_docs(monkeypatch):
    model = _model()
    monkeypatch.setenv(M.LIMIT_VARIABLE, "1M")
    settings = DecodeSettings(src_context_sentences=3, tgt_context_sentences=3, beam=1024, batch_docs=64)
    with pytest.raises(CtxmtError, match=r"^a beam search of 3 rows x beam 1024 .* lower `beam` \(now 1024\) or "
                                         r"`batch_docs` \(now 64\)$"):
        check_search_memory(model, settings, [[7] * 20] * 3, torch.device("cpu"))
    check_search_memory(model, DecodeSettings(beam=1), [[7] * 5], torch.device("cpu"))   # small: fits
    check_search_memory(model, settings, [], torch.device("cpu"))                      # nothing to translate


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_the_least_parameter_count_is_a_lower_bound_of_every_family(family):
    model = _model(family)
    least = least_parameters(model.cfg, VOCAB)
    assert least <= model.num_parameters() < 3 * least


def test_a_model_too_large_for_memory_is_refused_before_it_is_built(monkeypatch):
    monkeypatch.setenv(M.LIMIT_VARIABLE, "1M")
    cfg = validate_recipe({"model": {**TINY, "family": "sentence", "d_model": 512, "ffn_dim": 2048, "heads": 8}}).model
    with pytest.raises(CtxmtError, match=r"^a model of d_model 512, ffn_dim 2048, 2\+3 layers needs about .* lower "
                                         r"model\.d_model, model\.ffn_dim or the layers$"):
        build_model(cfg, VOCAB)


def test_a_significance_test_too_large_for_memory_is_refused(monkeypatch):
    monkeypatch.setenv(M.LIMIT_VARIABLE, "1M")
    refs = ["a b c"] * 100
    with pytest.raises(CtxmtError, match=r"^paired bootstrap resampling with 1,000,000 samples of 100 sentences "
                                         r"needs about .* lower `samples`$"):
        paired_test([("a", refs), ("b", refs)], refs, dict, samples=1_000_000)
