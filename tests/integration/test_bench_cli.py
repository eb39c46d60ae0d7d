"""`ctxmt benchmark train|score|decode|document|mbe`: the peer benchmarks and MBE vs sentence-level training run
end to end on tiny dims.

A smoke test of the output's shape only: benchmarks are not tests, so no timing value is asserted.
The torch peer always runs; the HF peer only where ``transformers`` is installed (else one note line).
``--device cpu`` prints the lines the benchmarks always printed (the CUDA run is a manual GPU check); a CUDA
device the machine lacks is one line.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from tests.integration.conftest import assert_user_error, run_cli

HAS_HF = importlib.util.find_spec("transformers") is not None
HAS_CT2 = importlib.util.find_spec("ctranslate2") is not None
RATIO = re.compile(r"^ratio: ([a-z0-9-]+) (ctxmt/torch|ctxmt/hf|ctxmt/ct2|ctxmt-int8/ctxmt|ctxmt/ctxmt-compiled"
                   r"|ctxmt-compiled/(?:torch|hf|ct2)) = \d+\.\d\d( \(rounds \d+\.\d\d-\d+\.\d\d\))?$")
MEMORY = re.compile(r"^memory: ([a-z0-9-]+) (ctxmt|torch|hf|ct2) = (\d+\.\d MB|n/a \(own allocator\))$")
MEMORY_RATIO = re.compile(r"^memory-ratio: ([a-z0-9-]+) (torch|hf)/ctxmt = \d+\.\d\d$")
INFERENCE = {"score", "decode"}                      # CTranslate2 is an inference engine: no training figure
def _cpu_has_bf16() -> bool:
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


# the bf16 training figure exists only on CPUs with bf16 instructions (its own figure, never mixed with fp32)
SCAT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scat"
FIGURES = {"train": ["train-tiny-equal", "train-tiny-synthetic"]
           + (["train-tiny-equal-bf16"] if _cpu_has_bf16() else [])
           + (["train-tiny-scat"] if SCAT.is_dir() else []),
           "score": ["score-tiny"], "decode": ["greedy-tiny", "beam4-tiny"]}
#: decode's int8 figures (CPU): ctxmt's int8 model against CTranslate2's int8, and against its own float32
INT8_FIGURES = ["greedy-int8-tiny", "beam4-int8-tiny"]

# peak memory of the timed figures but not of train's real-length passes; the bf16 figure shows ctxmt's own line
MEMORY_FIGURES = {name: [f for f in figures if name != "train" or "-equal" in f] for name, figures in FIGURES.items()}


def expected_ratios(name: str, peers: list[str]) -> set[tuple[str, str]]:
    """(figure, ``ours/peer``) of every ratio line benchmark ``name`` prints on the CPU."""
    pairs = {(figure, f"ctxmt/{peer}") for figure in FIGURES[name] for peer in peers}
    if name == "decode":
        pairs |= {(figure, pair) for figure in INT8_FIGURES
                  for pair in ["ctxmt-int8/ctxmt"] + (["ctxmt/ct2"] if HAS_CT2 else [])}
    return pairs


def _assert_memory_lines(lines: list[str], name: str, peers: list[str]) -> None:
    """A ``memory:`` line per implementation of every memory figure (CTranslate2: n/a, its own allocator), a
    ``memory-ratio:`` line per peer with a figure; formats only, no values."""
    memory = [line for line in lines if line.startswith("memory:")]
    ratios = [line for line in lines if line.startswith("memory-ratio:")]
    assert all(MEMORY.match(line) for line in memory), memory
    assert all(MEMORY_RATIO.match(line) for line in ratios), ratios
    shown = {(m.group(1), m.group(2)): m.group(3) for m in map(MEMORY.match, memory)}
    assert set(shown) == {(figure, impl) for figure in MEMORY_FIGURES[name]
                          for impl in ["ctxmt"] + ([] if figure.endswith("-bf16") else peers)}, memory
    assert all((value == "n/a (own allocator)") == (impl == "ct2") for (_, impl), value in shown.items()), memory
    assert {(m.group(1), m.group(2)) for m in map(MEMORY_RATIO.match, ratios)} == {
        (figure, peer) for figure in MEMORY_FIGURES[name] for peer in peers if peer != "ct2"}, ratios


#: train and decode run several implementations for tens of seconds: marked slow (``pytest -m slow``); score and
#: the default device keep the line format checked in every run
SLOW_SMOKE = {"train", "decode"}


@pytest.mark.parametrize("name, device", [pytest.param(name, ("--device", "cpu"), id=f"{name}-cpu",
                                                       marks=pytest.mark.slow if name in SLOW_SMOKE else ())
                                          for name in sorted(FIGURES)]
                         + [pytest.param("score", (), id="score-default")])
def test_peer_benchmark_prints_ratio_lines(name, device, capsys):
    """The same lines with ``--device cpu`` as with the default (auto: the CPU on a machine without CUDA)."""
    if not device and torch.cuda.is_available():
        pytest.skip("the default device is CUDA on this machine")
    result = run_cli("benchmark", name, "--preset", "tiny", "--quick", "--repeats", 1, "--threads", 1, *device)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    ratios = [line for line in lines if line.startswith("ratio:")]
    peers = ["torch"] + (["hf"] if HAS_HF else []) + (["ct2"] if HAS_CT2 and name in INFERENCE else [])
    assert all(RATIO.match(line) for line in ratios), ratios
    assert {(m.group(1), m.group(2)) for m in map(RATIO.match, ratios)} == expected_ratios(name, peers)
    assert lines[-len(ratios):] == ratios                                  # the ratio lines close the output
    _assert_memory_lines(lines[:-len(ratios)], name, peers)                # memory lines come before them
    if not HAS_HF:
        with capsys.disabled():
            print(f"\n{name}: HF peer not timed: transformers is not installed")
        assert "peer hf skipped: transformers is not installed" in result.stdout
    if name in INFERENCE and not HAS_CT2:
        with capsys.disabled():
            print(f"\n{name}: CTranslate2 peer not timed: ctranslate2 is not installed")
        assert "peer ct2 skipped: ctranslate2 is not installed" in result.stdout


def test_bad_preset_is_one_line():
    """A preset the benchmark cannot use fails with one line naming the presets, before any model is built."""
    assert_user_error(run_cli("benchmark", "train", "--preset", "nope"), "--preset nope", "tiny", "big")


@pytest.mark.slow
def test_document_benchmark_prints_its_ratio_lines():
    result = run_cli("benchmark", "document", "--preset", "tiny", "--quick", "--repeats", 1, "--threads", 1,
                     "--device", "cpu")
    assert result.exit_code == 0, result.output
    written, *ratios = result.stdout.splitlines()[-6:]
    assert re.match(r"^tokens written per sentence: sentence \d+\.\d, sentence-pieces \d+\.\d, s4to4-prefix "
                    r"\d+\.\d, s4to4-generate \d+\.\d$", written), written
    assert re.match(r"^ratio: document-tiny s4to4-prefix/sentence = \d+\.\d\d \(target <= 1\.6\)$", ratios[0]), ratios
    assert re.match(r"^ratio: document-tiny s4to4-generate/sentence = \d+\.\d\d \(target <= 2\)$", ratios[1]), ratios
    assert re.match(r"^ratio: document-tiny s4to4-prefix/sentence-pieces = \d+\.\d\d$", ratios[2]), ratios
    assert re.match(r"^ratio: document-tiny s4to4-generate/sentence-pieces = \d+\.\d\d$", ratios[3]), ratios
    assert re.match(r"^ratio: document-tiny sentence/sentence-pieces = \d+\.\d\d$", ratios[4]), ratios


def test_mbe_benchmark_prints_padding_and_ratio_lines():
    """MBE vs sentence-level training on the tiny synthetic corpus through the real trainer: formats only."""
    result = run_cli("benchmark", "mbe", "--preset", "tiny", "--quick", "--repeats", 1, "--threads", 1)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert re.match(r"^ratio: train-tiny-synthetic mbe-sentence-batches/sentence = \d+\.\d\d ", lines[-3]), lines[-3:]
    assert re.match(r"^ratio: train-tiny-synthetic mbe/mbe-sentence-batches = \d+\.\d\d ", lines[-2]), lines[-3:]
    assert re.match(r"^ratio: train-tiny-synthetic mbe/sentence = \d+\.\d\d \(target >= 0\.90\)$", lines[-1]), lines[-1]
    padding = re.compile(r"^padding: train-tiny-synthetic (sentence|mbe) target (\d+\.\d)% source (\d+\.\d)% over the "
                         r"epoch's \d+ batches \(\d+\.\d row chunks per batch\); target \d+\.\d% source \d+\.\d% in "
                         r"the timed batches$")
    shares = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in map(padding.match, lines[-5:-3]) if m}
    assert set(shares) == {"sentence", "mbe"}, lines[-5:-3]
    assert all(0 <= share < 100 for pair in shares.values() for share in pair)
    assert sum(line.startswith("train-tiny-synthetic\t") for line in lines) == 3   # three table rows, tab-separated


@pytest.mark.slow
def test_mbe_benchmark_on_real_talks():
    """--corpus maruf-iwslt17: the same lines on Maruf et al. (2019)'s IWSLT 2017 talks (skipped without them)."""
    from ctxmt_cli.cli.benchmark import _load_benchmark

    if _load_benchmark("mbe").missing_data("maruf-iwslt17"):
        pytest.skip("Maruf et al. 2019 IWSLT 2017 files not found (see ../shared/data/README.md)")
    result = run_cli("benchmark", "mbe", "--preset", "tiny", "--quick", "--repeats", 1, "--threads", 1,
                     "--corpus", "maruf-iwslt17")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert re.match(r"^ratio: train-tiny-maruf-iwslt17 mbe/sentence = \d+\.\d\d \(target >= 0\.90\)$", lines[-1])
    assert sum(line.startswith("padding: train-tiny-maruf-iwslt17 ") for line in lines) == 2


def test_mbe_benchmark_skips_real_talks_it_cannot_find(monkeypatch, tmp_path, capsys):
    """Without the real files the run prints why it skips, and times nothing."""
    from ctxmt_cli.cli.benchmark import _load_benchmark

    module = _load_benchmark("mbe")
    monkeypatch.setattr(module, "MARUF", tmp_path)
    assert module.run(module.Settings("tiny", True, 1, 1, corpus="maruf-iwslt17")) == {}
    assert capsys.readouterr().out.startswith(f"skip: train-tiny-maruf-iwslt17: {tmp_path}/concatenated_en2de_dev_en")


@pytest.mark.parametrize("name, option, says", [("mbe", ("--corpus", "wiki"), "--corpus wiki: 'wiki' is not one of"),
                                                ("train", ("--corpus", "synthetic"), "train does not read --corpus")])
def test_benchmark_corpus_choices(name, option, says):
    """--corpus is mbe's, from its list; elsewhere it is refused, not ignored."""
    assert_user_error(run_cli("benchmark", name, "--preset", "tiny", *option), says)


@pytest.mark.parametrize("name, option", [("mbe", ("--beam", "4")), ("mbe", ("--docs", "2")),
                                          ("mbe", ("--out", "elsewhere")), ("train", ("--contexts", "1")),
                                          ("train", ("--beam", "1")), ("mbe", ("--device", "cpu")),
                                          ("decode", ("--log-format", "json")),
                                          ("context-scaling", ("--corpus", "synthetic"))])
def test_benchmarks_refuse_options_they_ignore(name, option):
    """An option a benchmark does not read is refused with one line, not silently ignored, even when it is given
    its default value."""
    text = assert_user_error(run_cli("benchmark", name, *option), f"benchmark {name} does not read {option[0]} ")
    assert "it takes --" in text and "--preset" in text.partition("it takes")[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
@pytest.mark.parametrize("name", ["train", "score", "decode", "document"])
def test_benchmark_on_a_missing_cuda_device_is_one_line(name):
    """--device cuda where there is none: one line naming the way out, before any model is built."""
    assert_user_error(run_cli("benchmark", name, "--preset", "tiny", "--quick", "--device", "cuda"),
                      "--device cuda: CUDA is not available on this machine", "--device auto or cpu")


def test_train_count_ops_prints_one_line_per_figure():
    """``--count-ops``: one ``ops:`` line per precision of the preset, ctxmt's count and the plain peer's."""
    result = run_cli("benchmark", "train", "--count-ops", "--preset", "tiny")
    assert result.exit_code == 0, result.output
    ops = [line for line in result.stdout.splitlines() if line.startswith("ops:")]
    assert [re.match(r"^ops: (train-tiny-(fp32|bf16)) ctxmt \d+ plain \d+$", line).group(1) for line in ops] == [
        "train-tiny-fp32", "train-tiny-bf16"], ops


def test_train_batch_tokens_prints_speed_mfu_and_ratio_lines():
    """``--batch-tokens``: tokens/s with MFU (n/a on a CPU: no stated peak) per implementation and precision, the
    FLOPs per target token, ratio lines against the plain peer; real sentence lengths (Europarl where present)."""
    result = run_cli("benchmark", "train", "--batch-tokens", 300, "--preset", "tiny", "--repeats", 1, "--threads", 1,
                     "--device", "cpu")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    speed = [re.match(r"^speed: train-tiny-b300-(fp32|bf16) (ctxmt|torch) = \d+\.\d tok/s, MFU = n/a ", line)
             for line in lines if line.startswith("speed:")]
    assert speed and all(speed) and {m.group(1, 2) for m in speed} >= {("fp32", "ctxmt"), ("fp32", "torch")}
    assert any(re.match(r"^flops: train-tiny-b300 = [\d.e+]+ per target token$", line) for line in lines), lines
    assert any(RATIO.match(line) and "train-tiny-b300-fp32 ctxmt/torch" in line for line in lines), lines


@pytest.mark.parametrize("args, says", [(("train", "--count-ops", "--batch-tokens", "100"), "give one"),
                                        (("score", "--count-ops"), "benchmark score does not read --count-ops"),
                                        (("decode", "--batch-tokens", "100"), "does not read --batch-tokens"),
                                        (("score", "--compile"), "benchmark score does not read --compile")])
def test_train_only_options_are_refused_elsewhere(args, says):
    """``--count-ops`` and ``--batch-tokens`` are train's, and two different runs of it: one line otherwise."""
    assert_user_error(run_cli("benchmark", *args, "--preset", "tiny"), says)


@pytest.mark.slow
def test_decode_times_the_compiled_decoder_against_the_same_peers():
    """``decode --compile``: the compiled decoder's first calls are printed, not timed, and it gets ratio lines
    against ctxmt's eager search and every peer."""
    result = run_cli("benchmark", "decode", "--compile", "--preset", "tiny", "--quick", "--repeats", 1, "--threads", 1,
                     "--device", "cpu")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[1:3] for line in lines if line.startswith("compile:")] == [
        ["greedy", "ctxmt-compiled"], ["beam4", "ctxmt-compiled"]]
    pairs = {(m.group(1), m.group(2)) for m in map(RATIO.match, lines) if m}
    peers = ["torch"] + (["hf"] if HAS_HF else []) + (["ct2"] if HAS_CT2 else [])
    for figure in FIGURES["decode"]:
        assert (figure, "ctxmt/ctxmt-compiled") in pairs
        assert {(figure, f"ctxmt-compiled/{peer}") for peer in peers} <= pairs
