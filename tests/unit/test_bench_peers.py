"""The CTranslate2 peer of the inference benchmarks holds ctxmt's own weights: same scores, same greedy output.

This checks the benchmark's fairness (the peer runs the very model it is timed against), not speed.
Skips with a printed reason where ``ctranslate2`` is not installed (the ``bench`` extra).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "ctxmt_cli" / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    if importlib.util.find_spec("ctranslate2") is None:
        pytest.skip("ctranslate2 is not installed (pip install -e '.[bench]'): CTranslate2 peer not checked")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_util
        import peer_ct2
    finally:
        sys.path.pop(0)
    return bench_util, peer_ct2


@pytest.fixture(scope="module")
def models(bench):
    bu, peer_ct2 = bench
    dims = bu.Dims.of("tiny")
    model = bu.ctxmt_model(dims, seed=0).eval()
    return model, peer_ct2.CT2Peer(model, dims.vocab, dims.max_positions, threads=1), dims


def test_ct2_scores_equal_ctxmt_scores(bench, models):
    bu, _ = bench
    model, peer, dims = models
    pairs = bu.random_pairs(6, 11, dims.vocab, seed=1)
    with torch.no_grad():
        ours = model.target_logprobs(pairs).sum(1)                         # (B,)
    torch.testing.assert_close(peer.score(pairs), ours, atol=1e-3, rtol=1e-4)


def test_ct2_greedy_equals_ctxmt_greedy(bench, models):
    from ctxmt_cli.core.batch import Batch
    from ctxmt_cli.decode.search import greedy_search

    bu, _ = bench
    model, peer, dims = models
    src = bu.random_pairs(6, 11, dims.vocab, seed=2).src
    new = 8
    ours = greedy_search(model, Batch(src=src), max_len=new, min_len=new)   # new tokens, then </s>
    theirs = peer.greedy(Batch(src=src), new)                              # exactly new tokens
    assert [h.tokens for h in ours] == theirs.tolist()
