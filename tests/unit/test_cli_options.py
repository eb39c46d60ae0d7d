"""ctxmt_cli.cli.options: each enumerated option offers exactly the values the code that reads it accepts."""

from __future__ import annotations

from typing import get_args

from ctxmt_cli.cli import options as O


def test_choices_equal_their_owners():
    from ctxmt_cli.api import ENGINES
    from ctxmt_cli.cli.benchmark import BENCHMARKS, _load_benchmark
    from ctxmt_cli.cli.docrepair import DERIVED_FORMATS
    from ctxmt_cli.config_base import PRESETS
    from ctxmt_cli.data.pipeline import FORMATS
    from ctxmt_cli.evaluate.bleu import TOKENIZERS
    from ctxmt_cli.evaluate.testsets import READERS
    from ctxmt_cli.export.ct2_export import QUANTIZATIONS
    from ctxmt_cli.logs import LOG_FORMATS

    assert get_args(O.PrepareFormat) == (*FORMATS, *DERIVED_FORMATS)
    assert set(get_args(O.Tokenize)) == set(TOKENIZERS)
    assert O.CONTRASTIVE_KINDS == tuple(READERS)
    assert get_args(O.Preset) == tuple(PRESETS)
    assert get_args(O.BenchCorpus) == _load_benchmark("mbe").CORPORA
    assert get_args(O.LogFormatName) == LOG_FORMATS
    assert get_args(O.Quantization) == QUANTIZATIONS
    assert get_args(O.Engine) == ENGINES
    assert all(_load_benchmark(name) for name in BENCHMARKS)                     # every name has its script
