"""Parallel encoding: any number of workers writes the same bytes; memory does not grow with the corpus."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from ctxmt_cli.data.prepare import PrepareSpec, prepare_corpus
from tests.unit.test_vocabulary import write_pairs


def test_workers_change_nothing_in_the_output(tmp_path):
    train = write_pairs(tmp_path, "train", 9000)                 # three chunks of 4096 pairs
    outs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        prepare_corpus(PrepareSpec(fmt="text", splits={"train": train}, src_lang="en", tgt_lang="fr", out=out,
                                   vocab_size=60, workers=workers, max_sentence_tokens=6))
        outs[workers] = {p.name: p.read_bytes() for p in sorted(out.glob("train.*"))}
    assert outs[1] == outs[2] and len(outs[1]) == 5


def _peak(tmp: Path, name: str, n: int, model: Path) -> int:
    train = write_pairs(tmp, name, n)
    spec = PrepareSpec(fmt="text", splits={"train": train}, src_lang="en", tgt_lang="fr", out=tmp / f"p{name}",
                       workers=1, spm=model)
    tracemalloc.start()
    try:
        prepare_corpus(spec)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_corpus(tmp_path):
    """Reading is streamed and the arrays go to disk as they fill: 4× the pairs, about the same peak."""
    first = tmp_path / "first"
    prepare_corpus(PrepareSpec(fmt="text", splits={"train": write_pairs(tmp_path, "v", 300)}, src_lang="en",
                               tgt_lang="fr", out=first, vocab_size=60, workers=1))
    small = _peak(tmp_path, "small", 10_000, first / "spm.model")
    large = _peak(tmp_path, "large", 40_000, first / "spm.model")
    assert large < 1.25 * small, f"peak {small / 2**20:.2f} MiB for 10k pairs, {large / 2**20:.2f} MiB for 40k"
