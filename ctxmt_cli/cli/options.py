"""Options several ``ctxmt`` commands share, declared once, and the fixed value sets of the others.

``--device`` and ``--log-format`` are ``Annotated`` types a command takes as ``device: Device = "auto"`` and
``log_format: LogFormat = None``. Every option with a fixed set of values is a ``Literal``: ``--help`` lists
the values and the parser refuses any other as one line, exit 2. The sets are written out here (importing
their owners would slow ``--help``); a unit test keeps each equal to the module that reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from ctxmt_cli.cli.errors import check_device
from ctxmt_cli.config import DataConfig, DecodeConfig, TrainConfig
from ctxmt_cli.config_base import MAX_BATCH_TOKENS, MAX_CONTEXT, MAX_COUNT, MAX_POSITIONS, MAX_VOCAB


def field_bounds(section: type, name: str) -> dict:
    """Typer's ``min``/``max`` for an option that sets recipe field ``name`` of ``section``: the field's bounds,
    declared once in the schema (a strict bound of an integer field becomes the next integer inside)."""
    bounds = {}
    for item in section.model_fields[name].metadata:
        for key, attr, step in (("min", "ge", 0), ("min", "gt", 1), ("max", "le", 0), ("max", "lt", -1)):
            value = getattr(item, attr, None)
            if value is None:
                continue
            if step and not isinstance(value, int):
                raise TypeError(f"{section.__name__}.{name}: a strict bound on a float has no typer equivalent")
            bounds[key] = value + step
    return bounds


# The bounds of every numeric option. One that sets a recipe field takes the field's (field_bounds); the others are
# declared here, each far above real use and low enough that a typo (1e9, a few extra zeros) is one line, not a
# machine out of memory or a loop that never ends.
BEAM = field_bounds(DecodeConfig, "beam")
LENPEN = field_bounds(DecodeConfig, "lenpen")
BATCH_DOCS = field_bounds(DecodeConfig, "batch_docs")
WARMUP = field_bounds(DecodeConfig, "warmup_sentences")
MAX_TOKENS = field_bounds(DataConfig, "max_tokens")
SEED = field_bounds(TrainConfig, "seed")
THREADS = field_bounds(TrainConfig, "threads")
UPDATES = field_bounds(TrainConfig, "max_steps")
#: ``--context K``: K context sentences, as a family's ``src_context_sentences``
CONTEXT = {"min": 0, "max": MAX_CONTEXT}
#: a count of documents, sentences, windows or trials a command reads or runs
COUNT = {"min": 1, "max": MAX_COUNT}
#: sentences of one group (docrepair, mbe), tokens of one sentence or window
SENTENCES = {"min": 1, "max": MAX_POSITIONS}
#: ``prepare synthetic --docs`` / ``quickstart --docs``: the generator's minimum to a million documents (~7 million
#: sentence pairs, far beyond what a smoke test or a tutorial needs)
SYNTHETIC_DOCS = {"min": 41, "max": 1_000_000}
#: bootstrap resamples and approximate-randomisation trials (sacrebleu's defaults: 1,000 and 10,000)
SAMPLES = {"min": 1, "max": 1_000_000}
#: SentencePiece pieces per model
VOCAB = {"min": 8, "max": MAX_VOCAB}
#: tokens of a benchmark's training batch
BATCH_TOKENS = {"min": 1, "max": MAX_BATCH_TOKENS}
#: processes or CPU threads
WORKERS = {"min": 0, "max": 4096}
#: tokens of one sentence (``prepare --max-sentence-tokens``)
SENTENCE_TOKENS = {"min": 4, "max": MAX_POSITIONS}
#: milliseconds a server's batch waits (a minute at most: a longer wait is no batching but a stalled server)
WAIT_MS = {"min": 0.0, "max": 60_000.0}

Device = Annotated[str, typer.Option(
    "--device", metavar="[auto|cpu|cuda|cuda:N]", callback=check_device,
    help="where the model runs: auto (CUDA when present, else the CPU), cpu, cuda or cuda:N")]

LogFormatName = Literal["plain", "rich", "json"]
LogFormat = Annotated[LogFormatName | None, typer.Option(
    "--log-format", show_default=False,
    help="progress as rich (a live bar), plain (one line per report: done/total, elapsed, ETA; train: also loss, "
         "tok/s, lr) or json (the same, one object per line) [default: rich on a terminal, plain otherwise]")]

# ``ctxmt prepare``'s options for real-size corpora (fields of ctxmt_cli.data.prepare.PrepareSpec)
SpmSample = Annotated[int, typer.Option(**COUNT, help="SentencePiece trains on a seeded sample of about this many "
                                        "train pairs (sentences per side)")]
SpmModel = Annotated[Path | None, typer.Option(help="reuse this SentencePiece .model (both sides) instead of "
                                                  "training one: corpora prepared with it share one vocabulary")]
VocabFrom = Annotated[Path | None, typer.Option(help="reuse the SentencePiece model(s) of this prepared dataset, "
                                                   "or of this checkpoint (an imported Marian model), instead of "
                                                   "training")]
Workers = Annotated[int, typer.Option(**WORKERS, help="encoding processes (0: one per CPU)")]
MinWords = Annotated[int, typer.Option(min=0, max=MAX_POSITIONS, help="clean the train split: drop pairs with a "
                                       "side of fewer words (0: off)")]
MaxWords = Annotated[int, typer.Option(min=0, max=MAX_POSITIONS, help="clean the train split: drop pairs with a "
                                       "side of more words (0: off; Moses clean-corpus-n is often run with 80)")]
MaxLengthRatio = Annotated[float, typer.Option(min=0.0, max=1000.0, help="clean the train split: drop pairs whose "
                                               "longer side has more than R times the words of the shorter (0: off; "
                                               "Moses: 9)")]

#: ``ctxmt prepare FORMAT``: the corpus readers (ctxmt_cli.data.pipeline.FORMATS), then the derived formats
PrepareFormat = Literal["synthetic", "text", "jsonl", "iwslt-tags", "iwslt-xml", "voita", "maruf", "docrepair",
                        "reverse"]
SpmType = Literal["unigram", "bpe"]
TargetMode = Literal["prefix", "generate"]

# the decoding options of ``translate`` and ``evaluate`` (None: the checkpoint's recipe decides)
Beam = Annotated[int | None, typer.Option(**BEAM, show_default=False,
                                             help="beam size [default: the recipe's decode.beam]")]
Lenpen = Annotated[float | None, typer.Option(**LENPEN, show_default=False,
                                                 help="length penalty [default: the recipe's decode.lenpen]")]
BatchDocs = Annotated[int | None, typer.Option(
    **BATCH_DOCS, show_default=False, help="rows decoded in parallel: documents; pieces of documents for a model "
    "reading no earlier translation; windows in generate mode [default: the recipe's decode.batch_docs]")]
WarmupSentences = Annotated[int | None, typer.Option(
    **WARMUP, show_default=False, help="a model reading its earlier translations: cut documents into pieces "
    "that translate side by side, each first translating (and dropping) N sentences before it as its target "
    "context (faster on a few long documents; the output may differ slightly from whole documents) [default: the "
    "recipe's decode.warmup_sentences; none: whole documents]")]
TargetModeOption = Annotated[TargetMode | None, typer.Option(
    show_default=False, help="how a model reading its earlier translations decodes them: prefix (its own outputs "
    "forced), generate (the whole target window written again, the last sentence kept; a window without the "
    "expected separators is decoded again in prefix mode, and counted) [default: the recipe's decode.target_mode]")]
#: ``ctxmt prepare docrepair --round-trip`` (ctxmt_cli.decode.first_pass.ROUND_TRIPS)
RoundTripMode = Literal["sample", "beam"]
#: ``ctxmt translate --input-format`` (ctxmt_cli.decode.streaming.INPUT_FORMATS)
InputFormat = Literal["text", "jsonl"]
#: ``ctxmt translate --engine``: ctxmt's own search, or an exported CTranslate2 folder (ctxmt_cli.api.load)
Engine = Literal["torch", "ctranslate2"]
#: ``ctxmt translate|serve --quantize`` (ctxmt_cli.models.quantize.QUANTIZE): the torch engine's int8 path on the CPU
QuantizeName = Literal["int8"]
Quantize = Annotated[QuantizeName | None, typer.Option(
    show_default=False, help="run the model's linear layers in int8 on the CPU (PyTorch dynamic quantization; "
    "faster, results move slightly: see the translate page) [default: float32]")]
#: ``ctxmt translate --compile`` (ctxmt_cli.models.compiled)
Compile = Annotated[bool, typer.Option(
    "--compile", help="compile the decoder layers with torch.compile: faster decoding steps after a compile of tens "
    "of seconds on the first sentences; needs a C++ compiler (without one, a warning and the usual path); not "
    "with --quantize [default: off]")]
#: ``ctxmt export ctranslate2 --quantization`` (ctxmt_cli.export.ct2_export.QUANTIZATIONS)
Quantization = Literal["float32", "int8", "int8_float32", "float16", "bfloat16"]
GroupOrder = Literal["consecutive", "length"]
#: sacrebleu's BLEU tokenizers (ctxmt_cli.evaluate.bleu.TOKENIZERS)
Tokenize = Literal["13a", "intl", "char", "zh", "none", "ja-mecab", "ko-mecab", "spm", "flores101", "flores200",
                   "spBLEU-1K"]
Significance = Literal["bootstrap", "ar", "both"]
#: contrastive test-set readers (ctxmt_cli.evaluate.testsets.READERS)
CONTRASTIVE_KINDS = ("voita", "contrapro", "lopes", "scat", "synthetic", "jsonl")
Normalize = Literal["mean", "none"]
ScoreSpan = Literal["all", "current"]
ScatSplit = Literal["train", "valid", "test"]
#: model dimension presets (ctxmt_cli.config_base.PRESETS)
Preset = Literal["tiny", "small", "base", "big"]
#: ``ctxmt benchmark --corpus`` (ctxmt_cli.benchmarks.mbe.CORPORA)
BenchCorpus = Literal["synthetic", "maruf-iwslt17"]


def check_testset(value: str) -> str:
    """``contrastive TESTSET``: KIND, KIND:PATH or compare, KIND one of :data:`CONTRASTIVE_KINDS`."""
    kind = value.partition(":")[0]
    if value != "compare" and kind not in CONTRASTIVE_KINDS:
        raise typer.BadParameter(f"unknown test set {kind!r}; choose one of {', '.join(CONTRASTIVE_KINDS)} "
                                 "(KIND or KIND:PATH), or compare")
    return value


TESTSET_HELP = (f"the test set: KIND or KIND:PATH, KIND one of {', '.join(CONTRASTIVE_KINDS)}; or compare "
                "(then RUN_A RUN_B)")
CONTEXT_HELP = ("K context sentences per side that has context, instead of the model's own: concatenation windows "
                "of K+1 sentences (--context 3 = s4to4; an sNto1 model grows its source side only), caching: K cached "
                "sentences, a model reading next sentences (hanoit) K next ones too; refused for a sentence-level "
                "model")


