"""Training speed of Mini-batch Embedding (Morishita et al. 2021) against the sentence-level model of the same dims.

Morishita et al. (2021) report that their MBE model trains at about half its baseline's speed. Here both
models train, in one process, on the same data, each through the real trainer
(:class:`ctxmt_cli.train.trainer.Trainer`: its epoch batch plan from the family's inputs (``plan_batches``), its
collation and its update with the learning-rate schedule and logging). The data (``--corpus``, prepared into a
temporary directory): ``synthetic``, the quickstart's corpus (7-token sentences, so z's extra encoder position
costs 1/8 of the encoder), or ``maruf-iwslt17``, real TED talks at real sentence lengths (about 24 tokens): the
IWSLT 2017 En→De documents of Maruf, Martins and Haffari (2019) (their public dev split, 8967 sentences in 93
talks, trains; ``../shared/data/maruf2019/IWSLT2017``, read with the ``maruf`` reader: a ``<d>`` line starts
each talk; an 8000-piece joint SentencePiece model). Without those files the run stops with the
reason. The ``sentence`` model takes
length-bucketed sentence batches; the ``mbe`` model (MBE Enc: z as an extra encoder position, gate on,
half of the training tokens in mixed-document groups, 1000 tokens per group as in the quickstart) takes
whole document groups. A third system, ``mbe-sentence-batches``, is the same MBE model updated on the
sentence model's very batches (every sentence its own group), so the figure splits into what the model
costs (the summary layer and the classifier) and what group batching costs (padding: a group's sentences
share a batch; their rows run in length-sorted chunks, ``Batch.chunks``, so the cost left is the chunks'
padding and their number).

Each system first runs :data:`WARMUP` updates, then every timed run is the same fixed run of updates
(``--quick``: 4, else 16) on batches spread evenly over its epoch plan sorted by mean target length (batches of
short and long sentences differ in tokens/s, and every system gets the same length quantiles), ``--repeats``
runs each; the systems take turns update by update (a shared machine's load drifts within a run); collation is
done beforehand (the trainer overlaps it with the previous update). The figure is real (non-padding) target
tokens per second of a run, the median over the runs.

    ctxmt benchmark mbe [--quick] [--preset small] [--threads 2] [--repeats 5] [--corpus synthetic]

Prints ``padding:`` lines (target and source padding shares of what the model computes, chunk by chunk, over the
whole epoch plan and over the timed batches), then ``ratio: train-PRESET-CORPUS mbe-sentence-batches/sentence``
(the model's cost), ``ratio: train-PRESET-CORPUS mbe/mbe-sentence-batches`` (group batching's cost) and last
``ratio: train-PRESET-CORPUS mbe/sentence = X.XX (target >= 0.90)``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
finally:
    sys.path.pop(0)

from ctxmt_cli.config import DEFAULT_MAX_TOKENS, validate_recipe  # noqa: E402
from ctxmt_cli.data.batching import GroupedBatch  # noqa: E402
from ctxmt_cli.errors import CtxmtError  # noqa: E402
from ctxmt_cli.heap import keep_freed_memory  # noqa: E402
from ctxmt_cli.train.distributed import DistEnv  # noqa: E402
from ctxmt_cli.train.trainer import Trainer  # noqa: E402

CORPORA = ("synthetic", "maruf-iwslt17")
#: Maruf et al. (2019)'s IWSLT 2017 En→De documents (public dev and test splits), outside the repository
MARUF = bu.shared_data("maruf2019", "IWSLT2017")
MARUF_VOCAB = 8000                # joint SentencePiece pieces for the real talks


@dataclass
class Settings(bu.Settings):
    """The peer benchmarks' settings and the corpus the models train on."""

    corpus: str = "synthetic"


TARGET = 0.90                     # issue: MBE trains at >= 0.9x the sentence-level model's target tokens/s
WARMUP = 2                        # updates before the timed runs (allocator, oneDNN kernels)
GROUP_TOKENS = 1000               # the quickstart's MBE recipe: a synthetic document fits in one group, a talk
#                                   takes a few (3000, the paper's, would leave 4096-token batches one group each)
DOCS = {"tiny": 60}               # synthetic documents; 2000 (the quickstart's corpus) unless listed
SYNTHETIC_SEED = 1                # the quickstart's corpus
MAX_TOKENS = {"tiny": 384}        # padded tokens per batch; the recipe's default unless listed
NEVER = 10 ** 9                   # no validation, log line or stop inside the benchmark
#: the benchmarked recipe of each family beyond the preset (sentence: none): MBE Enc with the gate
FAMILY_OPTIONS = {"mbe": {"placement": "encoder", "gate": True, "mixed_groups": 0.5, "group_tokens": GROUP_TOKENS}}


def recipe(family: str, preset: str, data: Path, save_dir: Path, threads: int):
    """A recipe of ``family`` with the preset's dims on ``data`` (MBE Enc with the gate for ``mbe``)."""
    model = {"family": family, "preset": preset}
    model.update(FAMILY_OPTIONS.get(family, {}))
    train = {"save_dir": str(save_dir), "max_steps": NEVER, "valid_every": NEVER, "log_every": NEVER,
             "threads": threads, "patience": 0, "average_checkpoints": 0}
    return validate_recipe({"data": {"path": str(data), "max_tokens": MAX_TOKENS.get(preset, DEFAULT_MAX_TOKENS)},
                            "model": model, "train": train}, "mbe benchmark")


def timed_updates(settings: Settings) -> int:
    """Updates per timed run: 1 on the smoke-test path (tiny), 4 with --quick, 16 otherwise."""
    return 1 if settings.preset == "tiny" else 4 if settings.quick else 16


def spans(item) -> tuple[object, list[tuple[int, int]]]:
    """The rows of a planned batch and the row ranges the model runs as one tensor each (its chunks)."""
    if isinstance(item, GroupedBatch):
        return item.indices, list(zip((0, *item.ends[:-1]), item.ends, strict=True))
    return item, [(0, len(item))]


def padding(trainer: Trainer, plan: list) -> tuple[float, float]:
    """(target, source) padding shares of what the model computes for ``plan``: rows x longest row per side,
    chunk by chunk (``Batch.chunks``; a sentence batch is one chunk)."""
    ds, real, padded = trainer.train_ds, [0, 0], [0, 0]
    for item in plan:
        rows, ranges = spans(item)
        for side, lengths in enumerate((ds.tgt_len[rows], ds.src_len[rows])):
            real[side] += int(lengths.sum())
            padded[side] += sum((b - a) * int(lengths[a:b].max()) for a, b in ranges)
    return 1 - real[0] / padded[0], 1 - real[1] / padded[1]


def spread(trainer: Trainer, plan: list, timed: int) -> tuple[list, list]:
    """(warm-up batches, timed batches) of ``plan``: the timed ones at evenly spaced quantiles of the batches'
    mean target length, the warm-up ones the first others."""
    lengths = trainer.train_ds.tgt_len
    order = sorted(range(len(plan)), key=lambda i: float(lengths[spans(plan[i])[0]].mean()))
    picked = [order[(2 * k + 1) * len(order) // (2 * timed)] for k in range(timed)]
    others = [i for i in range(len(plan)) if i not in set(picked)]
    return [plan[i] for i in others[:WARMUP]], [plan[i] for i in picked]


class System:
    """One model in its trainer, with the collated batches of its warm-up and of its timed run."""

    def __init__(self, trainer: Trainer, plan: list, timed: int):
        self.trainer, self.epoch_size = trainer, len(plan)
        warm, self.timed_plan = spread(trainer, plan, timed)
        self.warm = [trainer._collate([item]) for item in warm]              # one micro-batch per update
        self.timed = [trainer._collate([item]) for item in self.timed_plan]
        self.tokens = sum(int((b.tgt_out != trainer.vocab.pad).sum()) for micro in self.timed for b in micro)
        self.chunks = sum(len(spans(item)[1]) for item in plan) / len(plan)  # row chunks per batch
        self.done = 0                                                      # timed updates run so far

    def warm_up(self) -> None:
        """The warm-up updates."""
        for micro in self.warm:
            self.trainer._update(micro, 1, self.epoch_size)

    def next_update(self) -> None:
        """The trainer's update (schedule, step, bookkeeping) on the next batch of the timed run (cyclic)."""
        self.trainer._update(self.timed[self.done % len(self.timed)], 1, self.epoch_size)
        self.done += 1


def missing_data(corpus: str) -> str | None:
    """Why ``corpus`` cannot run here (its files are absent), or None."""
    if corpus == "synthetic":
        return None
    missing = [f"concatenated_en2de_{split}_{lang}.txt" for split in ("dev", "test") for lang in ("en", "de")
               if not (MARUF / f"concatenated_en2de_{split}_{lang}.txt").is_file()]
    if not missing:
        return None
    return (f"{MARUF}/{missing[0]} not found (Maruf et al. 2019's IWSLT 2017 files belong in "
            f"../shared/data/maruf2019/IWSLT2017 beside the repository, or set {bu.SHARED_DATA_ENV})")


def prepare(corpus: str, preset: str, data: Path) -> None:
    """Prepare ``corpus`` into ``data``: the quickstart's synthetic corpus, or Maruf et al. (2019)'s talks."""
    if corpus == "synthetic":
        from ctxmt_cli.data.pipeline import prepare_synthetic

        prepare_synthetic(data, seed=SYNTHETIC_SEED, docs=DOCS.get(preset, 2000), vocab_size=400)
        return
    from ctxmt_cli.data.prepare import PrepareSpec, SplitInput, prepare_corpus

    files = {split: SplitInput(*(MARUF / f"concatenated_en2de_{split}_{lang}.txt" for lang in ("en", "de")))
             for split in ("dev", "test")}
    prepare_corpus(PrepareSpec(fmt="maruf", splits={"train": files["dev"], "valid": files["test"]},
                               src_lang="en", tgt_lang="de", out=data, vocab_size=MARUF_VOCAB))


def build(settings: Settings, root: Path) -> tuple[dict[str, System], dict[str, tuple]]:
    """The three systems, and the padding shares (epoch plan, timed batches) of each batching."""
    data, timed = root / "data", timed_updates(settings)
    prepare(settings.corpus, settings.preset, data)
    trainers = {family: Trainer(recipe(family, settings.preset, data, root / family, settings.threads), DistEnv(),
                                resume=False, show_progress=False) for family in ("sentence", "mbe")}
    plans = {family: trainer._epoch_batches(0) for family, trainer in trainers.items()}
    if min(len(p) for p in plans.values()) < WARMUP + timed:
        raise RuntimeError(f"the benchmark's corpus gives fewer than {WARMUP + timed} batches per epoch")
    systems = {"sentence": System(trainers["sentence"], plans["sentence"], timed),
               "mbe": System(trainers["mbe"], plans["mbe"], timed),
               "mbe-sentence-batches": System(trainers["mbe"], plans["sentence"], timed)}
    shares = {name: (padding(trainers[name], plans[name]), padding(trainers[name], systems[name].timed_plan))
              for name in ("sentence", "mbe")}
    return systems, shares


def report_lines(figure: str, rates: dict[str, list[float]], shares: dict[str, tuple], epoch: dict,
                 chunks: dict[str, float]) -> list[str]:
    """The padding lines, then the ratio lines (the headline last)."""
    lines = [f"padding: {figure} {name} target {plan[0]:.1%} source {plan[1]:.1%} over the epoch's {epoch[name]} "
             f"batches ({chunks[name]:.1f} row chunks per batch); target {timed[0]:.1%} source {timed[1]:.1%} in the "
             "timed batches" for name, (plan, timed) in shares.items()]
    median = {name: statistics.median(values) for name, values in rates.items()}
    return lines + [
        f"ratio: {figure} mbe-sentence-batches/sentence = "
        f"{median['mbe-sentence-batches'] / median['sentence']:.2f} (the model: summary layer, gate)",
        f"ratio: {figure} mbe/mbe-sentence-batches = {median['mbe'] / median['mbe-sentence-batches']:.2f} "
        "(group batching)",
        f"ratio: {figure} mbe/sentence = {median['mbe'] / median['sentence']:.2f} (target >= {TARGET:.2f})"]


def run(settings: Settings) -> dict[str, list[float]]:
    """Time the three systems, print the table, the padding lines and the ratio lines; target tokens/s each."""
    bu.check(settings)
    if settings.corpus not in CORPORA:
        raise CtxmtError(f"--corpus {settings.corpus!r}: choose one of {', '.join(CORPORA)}")
    figure = f"train-{settings.preset}-{settings.corpus}"
    reason = missing_data(settings.corpus)
    if reason is not None:
        print(f"skip: {figure}: {reason}")
        return {}
    with tempfile.TemporaryDirectory(prefix="ctxmt-bench-mbe-") as tmp, bu.torch_threads(settings.threads):
        systems, shares = build(settings, Path(tmp))
        epoch = {name: systems[name].epoch_size for name in shares}
        data = "synthetic benchmark" if settings.corpus == "synthetic" else "Maruf et al. 2019 IWSLT17 En-De talks"
        print(f"mbe {settings.preset}: {bu.Dims.of(settings.preset).describe().rsplit(' vocab', 1)[0]}, {data} "
              f"(joint vocab {systems['sentence'].trainer.vocab.src_size}), fp32, {settings.threads} torch "
              f"threads; {len(systems['sentence'].timed)} timed updates per run ("
              + ", ".join(f"{n} {s.tokens} target tokens" for n, s in systems.items())
              + f") after {WARMUP} warm-up updates, {settings.timed_repeats()} runs each, "
              "round-robin per update")
        updates = len(systems["sentence"].timed)
        # round-robin per update, not per run: a shared machine's load changes within a run, so every
        # system's k-th update runs right after the others' (a run = the sum of its `updates` updates)
        steps = {n: s.next_update for n, s in systems.items()}
        warm_ups = {n: s.warm_up for n, s in systems.items()}
        seconds = bu.time_round_robin(steps, settings.timed_repeats() * updates, warm_ups)
        for trainer in {id(s.trainer): s.trainer for s in systems.values()}.values():
            trainer.close()
    rates = {name: [systems[name].tokens / sum(values[i:i + updates]) for i in range(0, len(values), updates)]
             for name, values in seconds.items()}
    table = bu.new_table("training: real target tokens/s, sentence-level vs MBE (same dims, same data)", "tok/s")
    bu.add_rows(table, figure, rates)
    bu.print_report(table, report_lines(figure, rates, shares, epoch, {n: systems[n].chunks for n in shares}))
    return rates


def main() -> None:
    """``python -m ctxmt_cli.benchmarks.mbe [--quick] [--preset P] [--threads N] [--repeats N] [--corpus C]``."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    for flag, kind in (("preset", str), ("threads", int), ("repeats", int), ("corpus", str)):
        parser.add_argument(f"--{flag}", type=kind, default=getattr(Settings, flag))
    args = parser.parse_args()
    keep_freed_memory()                  # the heap setting every ctxmt command starts with (ctxmt_cli.heap)
    run(Settings(args.preset, args.quick, args.threads, args.repeats, corpus=args.corpus))


if __name__ == "__main__":
    main()
