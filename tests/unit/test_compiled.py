"""``--compile`` (ctxmt_cli.models.compiled): decoder layers compiled with torch.compile decode as the eager model
does, and a compile that fails leaves the eager layers running, with one warning.

Compiling takes 20-60 s per kind of layer input on one thread even for the contract suite's tiny models, so the
default run compiles a plain decoder (sentence) and one with context attention (caching); a decoder reading a
forced target prefix (concat, also in the CLI's test, tests/integration/test_compile_cli.py) and the other families
and inputs run with ``-m slow``.
"""

from __future__ import annotations

import pytest
import torch

import ctxmt_cli.models.compiled as compiled
from ctxmt_cli.core.batch import Batch, Fold
from ctxmt_cli.decode.search import beam_search, greedy_search
from ctxmt_cli.models.compiled import compile_decoder
from tests.unit.test_contract import (  # noqa: F401  (plugins: the toy family joins this module too)
    BOS,
    BRK,
    TGT,
    current_only,
    make_model,
    pad,
    plugins,
    sample,
    target_rows,
)

pytestmark = pytest.mark.usefixtures("one_thread")

#: one variant per kind of decoder input (module docstring), then the other families and decoder inputs (slow)
DEFAULT = ("sentence-pre-norm", "caching-tokens")
SLOW = ("sentence-marian", "concat-cd", "concat-shift", "caching-grouping-softmax-gate", "mbe-decoder", "mbe-both",
        "hanoit-offline", "hanoit-target-context")
CASES = [*DEFAULT, *(pytest.param(variant, marks=pytest.mark.slow) for variant in SLOW)]


def decode(model) -> list[tuple[list[int], float]]:
    """Beam 2 and greedy over the contract sample, the target context forced where the model reads one: (tokens,
    score) of every row."""
    batch = sample(model)
    prefix = None
    if model.cfg.tgt_context_sentences > 0:
        prefix = pad([[BOS] + t[: len(t) - len(current_only(t))] for t in TGT])
    query = Batch(src=batch.src, tgt_prefix=prefix, src_next=batch.src_next, **target_rows(model))
    with torch.inference_mode():
        found = beam_search(model, query, beam=2, max_len=8, banned=[BRK]) + greedy_search(model, query, max_len=8,
                                                                                          banned=[BRK])
    return [(h.tokens, h.score) for h in found]


@pytest.mark.parametrize("variant", CASES)
def test_compiled_layers_decode_as_the_eager_ones(variant):
    model = make_model(variant, scale=0.5)                                 # peaked outputs: no near ties
    eager = decode(model)
    warnings: list[str] = []
    assert compile_decoder(model, warn=warnings.append) == len(model.decoder_layers) > 0
    torch._dynamo.reset()
    again = decode(model)
    assert not warnings, warnings                                          # it compiled: no fallback
    assert [tokens for tokens, _ in again] == [tokens for tokens, _ in eager]
    assert [score for _, score in again] == pytest.approx([score for _, score in eager], abs=1e-4)


def test_a_failed_compile_runs_the_eager_layers_with_one_warning(monkeypatch):
    def broken(forward, **_):
        def run(*args, **kwargs):
            raise RuntimeError("no C++ compiler found\nmore lines")
        return run

    monkeypatch.setattr(compiled.torch, "compile", broken)
    model = make_model("concat-cd", scale=0.5)
    eager = decode(model)
    warnings: list[str] = []
    compile_decoder(model, warn=warnings.append)
    assert decode(model) == eager                                          # the same numbers: eager ran
    assert warnings == ["torch.compile failed (RuntimeError: no C++ compiler found); the decoder runs without it"]
    assert decode(model) == eager and len(warnings) == 1                   # switched back for good, warned once


def test_a_layer_error_is_not_hidden_by_the_fallback():
    model = make_model("sentence-pre-norm")
    warnings: list[str] = []
    compile_decoder(model, warn=warnings.append)
    def fails(*args, **kwargs):
        raise ValueError("the layer's own error")

    forward = model.decoder_layers[0].forward
    forward.eager = forward.compiled = fails                               # fails compiled, then eager too
    with pytest.raises(ValueError, match="the layer's own error"):
        decode(model)
    assert len(warnings) == 1


def test_compiled_layers_read_every_key_not_the_blocks():
    """A Fold's block widths (Python ints the tracer would specialise on, one trace per chunk plan) never reach a
    compiled layer; other tuples and named tuples pass as they are."""
    fold = Fold(4, None, ((2, 7), (5, 3)))
    k = torch.zeros(1)
    cross, other = ((k, k), k, fold), Fold(2)
    plain = compiled.every_key((cross, 3, other))
    assert plain[0][2] == Fold(4, None, None) and isinstance(plain[0][2], Fold)
    assert plain[0][0][0] is k and plain[1] == 3 and plain[2] == other
    assert fold.blocks(5, 9) == [(0, 2, 7), (2, 5, 3)] and Fold().blocks(5, 9) == [(0, 5, 9)]
