"""Scoring speed: sentence pairs scored per second, ctxmt vs its peers in the same run.

64 source/target pairs of 25 tokens each (random tokens, 16k joint vocabulary, one batch). ctxmt runs
the contrastive scorer's real path (``ctxmt_cli.evaluate.contrastive._score_rows``: length-bucketed
batches, source windows encoded once, forward, per-token log-probabilities, summed over the scored
sentence); the peers run a forward pass, log-softmax and a gather of the target tokens. Every pair has
its own source, so ctxmt's source sharing saves nothing here: the figure is the raw scoring cost.
One timed run = all 64 pairs. ``--preset tiny`` is the smoke-test path. On ``--device cuda`` the peers'
batch is put on the GPU once; ctxmt's scorer takes token-id arrays, so its timed run includes its own
collation and copy to the device (its real path). Peak memory: one more, untimed run of each implementation
(tensor storage beyond what was live before; see ``bench_util.peak_memory``; the CTranslate2 peer's own
allocator is invisible to it: no figure).

    ctxmt benchmark score [--quick] [--preset small] [--threads 2] [--repeats 5] [--device auto]

Prints ``memory: score-PRESET IMPL = X.X MB`` and ``memory-ratio: score-PRESET PEER/ctxmt = X.XX`` (above 1 =
ctxmt uses less), then closes with ``ratio: score-PRESET ctxmt/PEER = X.XX`` (ratio of the median pairs/s).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# the sibling helpers, importable only while this directory is on the path: left there, its train.py /
# score.py / decode.py would shadow any other module of those names in the same process
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
    from peers import make_peers
finally:
    sys.path.pop(0)

from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS  # noqa: E402
from ctxmt_cli.evaluate.contrastive import _EncodedRows, _score_rows  # noqa: E402

Settings = bu.Settings
PAIRS, LENGTH = 64, 25
MAX_TOKENS = DEFAULT_MAX_TOKENS  # the scorer's default token budget: all 64 pairs fit one batch


def ctxmt_scorer(model, batch):
    """A callable scoring ``batch``'s pairs (on the CPU: they become token-id arrays) through ctxmt's contrastive
    scoring path (no tokenisation)."""
    ids = SimpleNamespace(pad_id=bu.PAD, bos_id=bu.BOS, brk_id=bu.BRK)   # the scorer only reads these ids
    rows = len(batch.src)
    # one sentence per row, all of it scored; no next sentences, no target concatenation
    encoded = _EncodedRows(sources=[row.numpy() for row in batch.src], targets=[row.numpy() for row in batch.tgt_out],
                           scored=np.ones(rows, dtype=np.int64), following=np.zeros(rows, dtype=np.int64), concat=None)
    model.eval()

    def score():
        return _score_rows(model, ids, encoded, max_tokens=MAX_TOKENS, progress=None, kept=None)

    return score


def run(settings: Settings) -> dict[str, list[float]]:
    """Time every implementation on the 64 pairs, then its peak memory; print the table, the memory lines and the
    ratio lines; pairs/s per implementation."""
    import torch

    settings = bu.check(settings)
    dims, device = bu.Dims.of(settings.preset), settings.device
    pairs = bu.random_pairs(PAIRS, LENGTH, dims.vocab, settings.seed)
    with bu.torch_threads(settings.threads):
        model = bu.ctxmt_model(dims, settings.seed, device)
        score = ctxmt_scorer(model, pairs)
        # no_grad: what score_testset wraps around _score_rows
        runs = {"ctxmt": lambda: torch.no_grad()(score)()}
        batch = pairs.to(device)                       # the peers' input, on the device once
        for peer in make_peers(dims, settings.seed, inference_of=model, threads=settings.threads, device=device):
            runs[peer.name] = lambda peer=peer: peer.score(batch)
        repeats = settings.timed_repeats() * 3         # one run is a fraction of a second: more runs, steadier median
        print(f"score {settings.preset}: {dims.describe()}; {PAIRS} pairs x {LENGTH} tokens; "
              f"{settings.threads} torch threads; {repeats} timed runs each after one warm-up{bu.device_note(device)}")
        result = bu.rates(bu.time_round_robin(runs, repeats, device=device), PAIRS)
        memory = bu.peak_memory(runs, device)
    figure = f"score-{settings.preset}"
    table = bu.new_table("scoring: sentence pairs/s", "pairs/s")
    bu.add_rows(table, figure, result)
    bu.print_report(table, bu.memory_lines(figure, memory) + bu.ratio_lines(figure, result))
    return result


if __name__ == "__main__":
    bu.main(run, __doc__)
