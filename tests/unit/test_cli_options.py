"""ctxmt_cli.cli.options: each enumerated option offers exactly the values the code that reads it accepts."""

from __future__ import annotations

from typing import get_args

import pytest

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


def _numeric_options() -> list[tuple[str, object]]:
    """(command path, parameter) of every int or float option and argument of every ctxmt command."""
    import typer

    from ctxmt_cli.cli import app

    found = []

    def walk(command, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())
        for param in getattr(command, "params", []):
            kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
            if kind in (int, float):
                found.append((path, param))

    walk(typer.main.get_command(app), "")
    return found


def test_every_numeric_option_is_bounded_on_both_sides():
    """A number without an upper bound is a typo away from a machine out of memory (--beam 1e9) or a loop that
    never ends (--docs 2^65); a float without one also takes inf, and nan slips past a lower bound alone."""
    options = _numeric_options()
    assert len(options) > 50 and {"translate", "evaluate", "quickstart", "serve"} <= {p for p, _ in options}
    unbounded = [f"{path} {max(p.opts, key=len)}" for path, p in options if p.min is None or p.max is None]
    assert not unbounded, unbounded


def test_an_option_that_sets_a_recipe_field_has_the_fields_bounds():
    from ctxmt_cli.config import DataConfig, DecodeConfig, TrainConfig
    from ctxmt_cli.config_base import MAX_CONTEXT

    fields = {"beam": (DecodeConfig, "beam"), "lenpen": (DecodeConfig, "lenpen"), "nbest": (DecodeConfig, "beam"),
              "batch_docs": (DecodeConfig, "batch_docs"), "max_batch_docs": (DecodeConfig, "batch_docs"),
              "max_tokens": (DataConfig, "max_tokens"), "seed": (TrainConfig, "seed"),
              "threads": (TrainConfig, "threads"), "updates": (TrainConfig, "max_steps")}
    checked = 0
    for path, param in _numeric_options():
        if param.name in fields:
            assert {"min": param.min, "max": param.max} == O.field_bounds(*fields[param.name]), (path, param.name)
            checked += 1
        if param.name == "context":
            assert (param.min, param.max) == (0, MAX_CONTEXT), path
    assert checked > 15


def test_field_bounds_reads_inclusive_and_strict_bounds():
    from ctxmt_cli.config import DecodeConfig, TrainConfig

    assert O.field_bounds(DecodeConfig, "beam") == {"min": 1, "max": 1024}
    assert O.field_bounds(TrainConfig, "seed") == {"min": 0, "max": 2**32 - 1}
    with pytest.raises(TypeError, match="strict bound on a float"):     # lr > 0: typer has no open interval
        O.field_bounds(TrainConfig, "lr")
