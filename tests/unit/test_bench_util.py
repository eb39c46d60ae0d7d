"""The peer benchmarks' device plumbing: settings resolve ``--device``, timing synchronises it, every implementation
and its tensors live on it.

No GPU here: the plumbing is checked on the CPU (where synchronising is a no-op) and on PyTorch's ``meta`` device,
where an operation that mixes a tensor made on the CPU with one on the model's device fails. That is what a
forgotten ``device=`` does on CUDA.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from ctxmt_cli.device import resolve_device
from ctxmt_cli.errors import CtxmtError

BENCHMARKS = Path(__file__).resolve().parents[2] / "ctxmt_cli" / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_util
        import peers
    finally:
        sys.path.pop(0)
    return bench_util, peers


def test_check_resolves_the_device(bench):
    bu, _ = bench
    assert bu.check(bu.Settings("tiny", device="auto")).device == str(resolve_device("auto"))
    assert bu.check(bu.Settings("tiny", device="cpu")).device == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_check_refuses_a_missing_cuda_device(bench):
    bu, _ = bench
    with pytest.raises(CtxmtError, match="device='cuda:1': CUDA is not available on this machine"):
        bu.check(bu.Settings("tiny", device="cuda:1"))


def test_cpu_timing_calls_each_run_after_one_warmup(bench):
    """Round-robin on the CPU: the warm-up (or its stand-in) once, then ``repeats`` timed calls of each run."""
    bu, _ = bench
    calls = {"a": 0, "b": 0, "b-warm": 0}

    def counter(name):
        return lambda: calls.__setitem__(name, calls[name] + 1)

    seconds = bu.time_round_robin({"a": counter("a"), "b": counter("b")}, 3, {"b": counter("b-warm")}, device="cpu")
    assert calls == {"a": 4, "b": 3, "b-warm": 1}
    assert {name: len(values) for name, values in seconds.items()} == {"a": 3, "b": 3}
    assert all(s >= 0 for values in seconds.values() for s in values)


def test_cpu_header_lines_are_unchanged(bench):
    """On the CPU the device part of a header line is empty (the lines read as before) and nothing is synchronised."""
    bu, _ = bench
    assert bu.device_note("cpu") == "" and bu.synchronize("cpu") is None
    assert not bu.is_cuda("cpu") and bu.is_cuda("cuda:0")


def test_models_and_torch_peer_live_on_the_device(bench):
    """ctxmt's model, the torch peer and every tensor its search makes sit on the benchmark's device."""
    bu, peers = bench
    from ctxmt_cli.core.batch import Batch

    dims = bu.Dims.of("tiny")
    model = bu.ctxmt_model(dims, 0, "meta")
    peer = peers.TorchPeer(dims, 0, "meta")
    assert {p.device.type for p in [*model.parameters(), *peer.parameters()]} == {"meta"}
    batch = bu.random_pairs(3, 6, dims.vocab, seed=1).to("meta")
    assert peer.beam(Batch(src=batch.src), 2, 4).shape == (3, 4)        # a CPU tensor in the search would fail here
    assert peer.score(batch).shape == (3,)
    peer.train_step(batch)                                               # Adam's state is made beside the weights


def test_ct2_peer_is_left_out_off_the_cpu_and_cuda(bench):
    """The CTranslate2 peer runs on the CPU or CUDA: on another device it is left out with one printed line."""
    bu, peers = bench
    dims = bu.Dims.of("tiny")
    said: list[str] = []
    made = peers.make_peers(dims, 0, say=said.append, inference_of=bu.ctxmt_model(dims, 0, "meta"), device="meta")
    assert "ct2" not in {peer.name for peer in made}
    assert [line for line in said if "ct2" in line] == [
        "note: ct2 peer skipped on meta (the benchmark's CTranslate2 peer runs on the CPU or CUDA)"]


def test_shared_data_beside_the_checkout_or_from_the_environment(bench, monkeypatch, tmp_path):
    """An installed ctxmt has no ../shared beside it: CTXMT_SHARED_DATA names the folder instead."""
    bench_util = bench[0]
    monkeypatch.delenv(bench_util.SHARED_DATA_ENV, raising=False)
    assert bench_util.shared_data("scat") == BENCHMARKS.parents[1].parent / "shared" / "data" / "scat"
    monkeypatch.setenv(bench_util.SHARED_DATA_ENV, str(tmp_path))
    assert bench_util.shared_data("maruf2019", "IWSLT2017") == tmp_path / "maruf2019" / "IWSLT2017"


def test_given_repeats_win_over_quick(bench):
    """``--quick`` times 3 rounds and the default 5; an explicit ``--repeats`` is what runs, quick or not."""
    bu, _ = bench
    assert bu.Settings("tiny", quick=True).timed_repeats() == 3
    assert bu.Settings("tiny").timed_repeats() == 5
    assert bu.Settings("tiny", quick=True, repeats=15).timed_repeats() == 15
    with pytest.raises(CtxmtError, match="--repeats"):
        bu.check(bu.Settings("tiny", repeats=0))


def test_ratio_lines_give_the_range_over_rounds(bench):
    """The ratio of medians, then the lowest and highest ratio of one round's pair of runs."""
    bu, _ = bench
    per_impl = {"ctxmt": [10.0, 12.0, 9.0], "hf": [5.0, 10.0, 6.0]}    # rounds: 2.0, 1.2, 1.5
    expected = "ratio: train-tiny-equal ctxmt/hf = 1.67 (rounds 1.20-2.00)"
    assert bu.ratio_lines("train-tiny-equal", per_impl) == [expected]
    assert bu.ratio_lines("x", {"ctxmt": [4.0], "torch": [2.0]}) == ["ratio: x ctxmt/torch = 2.00"]


def test_the_profilers_notes_stay_out_of_the_output_and_the_rest_gets_through(capfd):
    """kineto writes `USDT: ... profiler_start` lines to file descriptor 2 around every profiled call: a benchmark's
    memory figure comes without them, and anything else written to stderr meanwhile still reaches it."""
    import os

    import torch

    from ctxmt_cli.benchmarks.bench_util import cpu_operation_memory, without_profiler_notes

    assert cpu_operation_memory(lambda: torch.ones(1000) + 1) > 0
    with without_profiler_notes():
        os.write(2, b"USDT: profiler_start\nkept line\n")
    err = capfd.readouterr().err
    assert "USDT" not in err and "kept line" in err
