"""Context scaling: time per translated sentence and operation memory as the context grows ("Sequence Shortening
for Context-Aware MT", 2023, Fig. 4).

For each context size K (default 1, 2, 4, 8, 16 sentences), four random models of the same dims (same
seed, eval mode) translate the same documents with ``translate_documents``: ``concat`` s(K+1)to(K+1)
(K source + K target context sentences, no shift: each step re-encodes the source window and forces the
target window), ``caching-tokens`` (caching family, every token of each sentence cached once),
``grouping`` (caching, 9 latent groups cached per sentence) and ``sentence`` (no context: the same work
at every K, so it is the floor and its spread across K shows the machine's noise). Text: the English
IWSLT 2017 TED test talks (``../shared/data``, read with ctxmt's IWSLT XML reader) and a SentencePiece
model trained on them; without ``../shared/data`` the synthetic benchmark's source side (with a note).

Decoding: beam 1 by default; ``max_len = 1.0 * source length + 2``. A random model almost never stops
early, so outputs are about as long as their source: the decoding work is the same for every model and K,
concat's target context is as long as real translations would make it, and the rows differ only in the
cost of the context path.

* time per sentence: wall time of translating the first ``--sentences`` sentences of ``--docs`` documents,
  over the sentences, two ways; after a warm-up, the models of one K are timed ``--repeats`` times
  round-robin and the fastest run is kept (process CPU time alongside). A document's first K sentences
  have less context, as in real use.

  - *in slots*: as ``translate`` decodes by default: the documents cut into pieces that fill the
    decoding slots (:func:`~ctxmt_cli.decode.pieces.plan_pieces`). A caching model's pieces are given the K
    sentences their memory holds at their start, encoded once per call before the first step
    (``docs/families/caching.md`` has the measurement).
  - *per document*: one slot per document, each document decoded whole and every sentence encoded once:
    the sequence-shortening paper's setting, which shows the cost of the context path itself as K grows
    (its ``ratio: time-per-sentence-per-document`` lines).
* operation memory: peak minus the model weights while translating the last K + 2 of the first
  ``max(K) + 2`` sentences of one document (one row): at every K the last two sentences are the same and
  get a full context (the sentence model on the same slices shows what the slices alone change).
  CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` minus what was allocated
  before (the weights). CPU: PyTorch keeps no CPU peak statistic, but under
  ``torch.profiler.profile(profile_memory=True)`` its CPU allocator reports every allocation and free
  with its running total of allocated bytes (c10's ProfiledCPUMemoryReporter). That total counts only
  blocks allocated while profiling, so the weights are not in it; the operation memory is its highest
  value minus its value before the first event: tensor storage the allocator handed out, not RSS (blurred
  by malloc caching, oneDNN scratch, Python objects), not tracemalloc (blind to tensor storage). Both
  measurements live in ``bench_util`` (shared with the peer benchmarks' peak-memory figures).
  Attention is SDPA, whose fused kernels never hold the L x L score matrix, so concat's memory grows
  about linearly in K here (the sequence-shortening paper measured quadratic growth with explicit attention).

    python -m ctxmt_cli.benchmarks.context_scaling [--quick] [--contexts 1,2,4,8,16] [--out DIR] [--preset small]
        [--threads 1]
    ctxmt benchmark context-scaling [same options]

``--quick``: K = 1, 4, 8, 2 documents x 16 sentences, the fastest of 2 timed runs (options given explicitly win).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ctxmt_cli.heap import keep_freed_memory

# the sibling helpers (operation memory), importable only while this directory is on the path (see score.py)
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
finally:
    sys.path.pop(0)

from ctxmt_cli.config import PRESETS, validate_recipe  # noqa: E402
from ctxmt_cli.config_base import MAX_CONTEXT  # noqa: E402
from ctxmt_cli.core.batch import VocabInfo  # noqa: E402
from ctxmt_cli.data.tokenize import Tokenizer, train_sentencepiece  # noqa: E402
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats  # noqa: E402
from ctxmt_cli.decode.translator import translate_documents  # noqa: E402
from ctxmt_cli.errors import CtxmtError  # noqa: E402
from ctxmt_cli.models.families import build_model  # noqa: E402

IWSLT = bu.shared_data("iwslt17", "IWSLT17.TED.test.en-de.tgz")
MODELS = ("concat", "caching-tokens", "grouping", "sentence")
DEFAULT_CONTEXTS = (1, 2, 4, 8, 16)
MAX_LEN_A, MAX_LEN_B = 1.0, 2      # outputs about as long as their source (see the module docstring)
GROUPS = 9
#: the two ways every model is timed (module docstring): translate's default cut, and one slot per document
WAYS = ("in slots", "per document")


#: ``--quick``: fewer context sizes, documents, sentences and runs (a few minutes on 2 CPU cores); options given win
QUICK = {"contexts": (1, 4, 8), "docs": 2, "sentences": 16, "repeats": 2}


@dataclass
class Settings:
    """One benchmark run's options (the CLI and ``main`` fill it through :meth:`make`)."""

    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    out: Path = Path("out/context_scaling")
    docs: int = 4
    sentences: int = 32
    device: str = "cpu"
    preset: str = "small"
    beam: int = 1
    repeats: int = 2                   # timed runs per (model, K), round-robin; the fastest is kept
    threads: int = 1                   # one intra-op thread: stable times on a shared CPU (see run())
    vocab: int = 8000
    seed: int = 0
    log_format: str = "plain"          # the per-K lines: plain, rich (a bar over the Ks) or json (ctxmt_cli.logs)

    @classmethod
    def make(cls, quick: bool = False, contexts: str | None = None, **given) -> Settings:
        """The options given (None = not given; ``contexts`` as ``--contexts`` text) over the defaults, or over
        :data:`QUICK`'s with ``quick``."""
        given["contexts"] = parse_contexts(contexts) if contexts else None
        return cls(**{**(QUICK if quick else {}), **{k: v for k, v in given.items() if v is not None}})


def parse_contexts(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4), sorted and unique; every K between 1 and the configs' limit."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise CtxmtError(f"--contexts {text!r}: expected comma-separated integers, e.g. 1,2,4,8,16") from None
    if not ks or ks[0] < 1 or ks[-1] > MAX_CONTEXT:
        raise CtxmtError(f"--contexts {text!r}: give context sizes between 1 and {MAX_CONTEXT}")
    return tuple(ks)


# ---- text -------------------------------------------------------------------------------------
def iwslt_documents(tgz: Path) -> list[list[str]]:
    """The talks of the archive's English XML files, through ctxmt's IWSLT XML reader."""
    from ctxmt_cli.data.formats_xml import xml_docs

    docs = []
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tgz) as archive:
        members = sorted((m for m in archive.getmembers() if m.name.endswith(".en.xml")), key=lambda m: m.name)
        archive.extractall(tmp, members=members, filter="data")
        for member in members:
            docs.extend([s[0] for s in sents] for sents, _ in xml_docs([Path(tmp) / member.name]))
    return docs


def synthetic_documents(seed: int = 1, count: int = 200) -> list[list[str]]:
    """Source sides of the synthetic benchmark's documents (the fallback text)."""
    from ctxmt_cli.synthetic.documents import make_corpus
    from ctxmt_cli.synthetic.lexicon import build_lexicon

    corpus = make_corpus(build_lexicon(seed), seed, count)
    return [[src for src, _, _ in doc] for split in corpus.values() for doc in split]


def load_text(vocab: int) -> tuple[list[list[str]], Tokenizer, str]:
    """Documents, a SentencePiece tokenizer trained on them, and a line naming the text."""
    if IWSLT.is_file():
        docs, name = iwslt_documents(IWSLT), "IWSLT17 TED test (en)"
    else:
        print(f"note: {IWSLT} not found (no ../shared/data; set {bu.SHARED_DATA_ENV}); using the synthetic "
              "benchmark's text instead", file=sys.stderr)
        docs, name = synthetic_documents(), "synthetic benchmark (source side)"
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "text.txt"
        corpus.write_text("\n".join(s for doc in docs for s in doc) + "\n", encoding="utf-8")
        tok = Tokenizer(train_sentencepiece(corpus, Path(tmp) / "spm", vocab).read_bytes())
    return docs, tok, name


# ---- models -----------------------------------------------------------------------------------
def model_section(name: str, k: int, preset: str) -> dict:
    """The recipe ``model`` section of benchmark model ``name`` at context size ``k``."""
    sections = {
        "concat": {"family": "concat", "src_context_sentences": k, "tgt_context_sentences": k},
        "caching-tokens": {"family": "caching", "repr": "tokens", "src_context_sentences": k},
        "grouping": {"family": "caching", "repr": "grouping", "groups": GROUPS, "src_context_sentences": k},
        "sentence": {"family": "sentence"},
    }
    return {**sections[name], "preset": preset}


def build(name: str, k: int, settings: Settings, tok: Tokenizer):
    """A randomly initialised model in eval mode; the same seed for every model and K."""
    cfg = validate_recipe({"model": model_section(name, k, settings.preset)}, f"benchmark model {name}").model
    torch.manual_seed(settings.seed)
    vocab = VocabInfo(tok.src_vocab_size, tok.tgt_vocab_size, brk=tok.brk_id)
    return build_model(cfg, vocab).to(settings.device).eval()


def weight_bytes(model) -> int:
    """Bytes of the distinct parameters and buffers (tied weights counted once)."""
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def translate(model, tok, docs, *, name: str, k: int, beam: int, per_document: bool = False) -> TranslationStats:
    """Translate ``docs`` in parallel slots with ``name``'s context at size ``k`` (``per_document``: one slot per
    document, so none is cut into pieces); the call's counters."""
    src, tgt = {"concat": (k, k), "sentence": (0, 0)}.get(name, (k, 0))  # caching has no target context
    stats = TranslationStats()
    slots = {"batch_docs": len(docs)} if per_document else {}
    settings = DecodeSettings(src_context_sentences=src, tgt_context_sentences=tgt, beam=beam, max_len_a=MAX_LEN_A,
                              max_len_b=MAX_LEN_B, cache=True, **slots)
    translate_documents(model, tok, docs, settings, stats=stats)
    return stats


# ---- measurements -----------------------------------------------------------------------------
def measure_k(k: int, settings: Settings, tok, timed_docs, memory_docs) -> list[dict]:
    """Every model at context size ``k``: warmed up, timed ``repeats`` times round-robin (fastest run kept, so a
    slow spell of the shared machine hits all models alike and is mostly filtered out), then its memory."""
    models = {name: build(name, k, settings, tok) for name in MODELS}
    runs = {(name, way): functools.partial(translate, m, tok, name=name, k=k, beam=settings.beam,
                                           per_document=way == WAYS[1])
            for name, m in models.items() for way in WAYS}
    for run in runs.values():
        run([d[:2] for d in timed_docs[:2]])                               # warm-up: first-call costs out of the timing
    best = {key: [float("inf"), float("inf"), 0] for key in runs}          # wall s, CPU s, sentences
    for _ in range(settings.repeats):
        for key, run in runs.items():
            cpu = time.process_time()                                      # all threads of the process, host side
            stats = run(timed_docs)                                        # stats.seconds: wall (outputs synced)
            cpu = time.process_time() - cpu
            best[key] = [min(best[key][0], stats.seconds), min(best[key][1], cpu), stats.sentences]
    results = []
    for name in MODELS:
        row = {"model": name, "k": k}
        for way, suffix in zip(WAYS, ("", "_per_document"), strict=True):
            wall, cpu, n = best[name, way]
            row |= {f"ms_per_sentence{suffix}": 1000.0 * wall / max(1, n),
                    f"cpu_ms_per_sentence{suffix}": 1000.0 * cpu / max(1, n), "sentences": n}
        memory_run = functools.partial(runs[name, WAYS[1]], memory_docs)    # one row: the document uncut
        results.append(row | {"op_memory_mb": bu.operation_memory(memory_run, settings.device),
                              "weights_mb": weight_bytes(models[name]) / bu.MB})
    return results


def run_all(settings: Settings, docs, tok) -> list[dict]:
    """Every (K, model) measurement, one K after the other, each reported on stdout in ``settings.log_format``
    (json: one object per measurement) with the Ks done, elapsed time and ETA."""
    from ctxmt_cli.logs import CountLog

    timed_docs = [d[: settings.sentences] for d in docs[: settings.docs]]
    length = max(settings.contexts) + 2
    memory_doc = next((d for d in docs if len(d) >= length), max(docs, key=len))[:length]
    results: list[dict] = []
    log = CountLog(settings.log_format, "context sizes", sys.stdout)
    log.update("context-scaling", 0, len(settings.contexts))
    try:
        for i, k in enumerate(settings.contexts):
            started = time.perf_counter()
            # the last k + 2 sentences: every K ends on the same two sentences, translated with a full context
            results += measure_k(k, settings, tok, timed_docs, [memory_doc[-(k + 2):]])
            for r in results[-len(MODELS):]:
                log.message(f"  K={k:<2} {r['model']:<15} {r['ms_per_sentence']:8.2f} ms/sentence "
                            f"(CPU {r['cpu_ms_per_sentence']:8.2f}) {r['op_memory_mb']:8.2f} MB", **r)
            log.message(f"  K={k} took {time.perf_counter() - started:.0f} s", k=k,
                        seconds=round(time.perf_counter() - started, 3))
            log.update("context-scaling", i + 1, len(settings.contexts))
    finally:
        log.close()
    return results


# ---- report -----------------------------------------------------------------------------------
def cell(results: list[dict], name: str, k: int, key: str) -> float:
    """The value ``key`` of ``name`` at context size ``k``."""
    return next(r[key] for r in results if r["model"] == name and r["k"] == k)


def ratio(results: list[dict], name: str, key: str) -> float:
    """Largest-K value over smallest-K value (0 when the smallest is 0)."""
    ks = sorted({r["k"] for r in results})
    low = cell(results, name, ks[0], key)
    return cell(results, name, ks[-1], key) / low if low else 0.0


def tables(results: list[dict]):
    """Rich tables of wall time, CPU time and operation memory per sentence: models x K, with the last/first ratio."""
    from rich.table import Column, Table

    ks = sorted({r["k"] for r in results})
    heads = [f"K={k}" for k in ks] + [f"K{ks[-1]}/K{ks[0]}"]
    out = []
    for key, title in (("ms_per_sentence", "ms per sentence (wall, in slots)"),
                       ("ms_per_sentence_per_document", "ms per sentence (wall, one slot per document)"),
                       ("cpu_ms_per_sentence", "ms per sentence (CPU, in slots)"),
                       ("op_memory_mb", "op. memory MB (peak - weights)")):
        table = Table("model", *(Column(h, justify="right") for h in heads), title=title)
        for name in MODELS:
            table.add_row(name, *(f"{cell(results, name, k, key):.2f}" for k in ks), f"{ratio(results, name, key):.2f}")
        out.append(table)
    return out


def ratio_lines(results: list[dict]) -> list[str]:
    """The closing ``ratio:`` lines, caching-tokens vs sentence per K first."""
    ks = sorted({r["k"] for r in results})
    lines = []
    for k in ks:
        whole, slots = (cell(results, "caching-tokens", k, key) / cell(results, "sentence", k, key)
                        for key in ("ms_per_sentence_per_document", "ms_per_sentence"))
        lines.append(f"caching-tokens / sentence time per sentence at K={k}: {whole:.2f}x per document "
                     f"(the context path; expected <= 1.3), {slots:.2f}x in slots")
    for key, label in (("ms_per_sentence", "time-per-sentence"),
                       ("ms_per_sentence_per_document", "time-per-sentence-per-document"), ("op_memory_mb", "memory")):
        lines += [f"ratio: {label} K{ks[-1]}/K{ks[0]} {name} = {ratio(results, name, key):.2f}" for name in MODELS]
    return lines


def plot(results: list[dict], path: Path, title: str) -> bool:
    """Seed 002 Fig. 4 style: operation memory vs K (left), time per sentence vs K (right); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")                                              # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ks = sorted({r["k"] for r in results})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in ((axes[0], "op_memory_mb", "operation memory (MB)"),
                           (axes[1], "ms_per_sentence_per_document", "time per sentence, per document (ms)")):
        for name in MODELS:
            ax.plot(ks, [cell(results, name, k, key) for k in ks], marker="o", label=name)
        ax.set(xlabel="context size (sentences)", ylabel=label, xticks=ks)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)                                                         # no figure left open in a long process
    return True


def report(results: list[dict], settings: Settings, header: dict) -> None:
    """Print the tables, write JSON and PNG, print the ratio lines last."""
    from ctxmt_cli.tables import print_table

    for table in tables(results):
        print_table(table)
    settings.out.mkdir(parents=True, exist_ok=True)
    payload = {"settings": {**asdict(settings), "out": str(settings.out)}, **header, "results": results}
    (settings.out / "context_scaling.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    title = (f"{header['text']}; {settings.preset} ({header['dims']}), beam {settings.beam}, "
             f"{header['device']}, {header['memory']}")
    png = settings.out / "context_scaling.png"
    drawn = plot(results, png, title)
    print(f"wrote {settings.out / 'context_scaling.json'}" + (f" and {png}" if drawn else
          "; note: matplotlib is not installed (pip install 'ctxmt[plot]'), so no PNG"))
    for line in ratio_lines(results):
        print(line)


def check(settings: Settings) -> None:
    """One-line errors for options the run cannot use."""
    if settings.preset not in PRESETS:
        raise CtxmtError(f"--preset {settings.preset!r}: choose one of {', '.join(PRESETS)}")
    if min(settings.docs, settings.sentences, settings.beam, settings.repeats, settings.threads) < 1:
        raise CtxmtError("--docs, --sentences, --beam, --repeats and --threads must be >= 1")
    if not (settings.device == "cpu" or settings.device.startswith("cuda")):
        raise CtxmtError(f"--device {settings.device!r}: use cpu or cuda (cuda:N)")
    if settings.device != "cpu" and not torch.cuda.is_available():
        raise CtxmtError(f"--device {settings.device}: CUDA is not available here; use --device cpu")


def run(settings: Settings) -> list[dict]:
    """The whole benchmark with ``settings.threads`` torch threads (restored afterwards); the measurements.

    One thread by default: on a CPU shared with other jobs, intra-op threads wait for each other
    (wall times with 2 threads were 5-20x slower and erratic in our runs).
    """
    check(settings)
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        return measure_and_report(settings)
    finally:
        torch.set_num_threads(threads)


def measure_and_report(settings: Settings) -> list[dict]:
    """Load the text, measure every (K, model), report."""
    docs, tok, text = load_text(settings.vocab)
    timed = sum(min(len(d), settings.sentences) for d in docs[: settings.docs])
    d, f, h, e, dl = PRESETS[settings.preset]
    dims = f"d={d} ffn={f} heads={h} layers={e}+{dl}"
    print(f"context scaling: {text}; {timed} sentences timed in {min(len(docs), settings.docs)} documents; "
          f"memory on the last K + 2 of {max(settings.contexts) + 2} sentences of one document; "
          f"{settings.preset} ({dims}); "
          f"vocab {tok.src_vocab_size}; beam {settings.beam}; max_len = {MAX_LEN_A} * source + {MAX_LEN_B}; "
          f"{settings.device}, {torch.get_num_threads()} threads")
    results = run_all(settings, docs, tok)
    memory = ("memory: torch.cuda.max_memory_allocated" if settings.device.startswith("cuda")
              else "memory: CPU allocator totals via torch.profiler")
    report(results, settings, {"text": text, "dims": dims, "device": settings.device, "memory": memory,
                               "vocab": tok.src_vocab_size, "max_len": [MAX_LEN_A, MAX_LEN_B]})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts")
    parser.add_argument("--quick", action="store_true")
    flags = (("out", Path), ("docs", int), ("sentences", int), ("device", str), ("preset", str), ("beam", int),
             ("repeats", int), ("threads", int))
    for flag, kind in flags:
        parser.add_argument(f"--{flag}", type=kind)
    args = parser.parse_args()
    keep_freed_memory()                  # the heap setting every ctxmt command starts with (ctxmt_cli.heap)
    try:
        run(Settings.make(args.quick, args.contexts, **{flag: getattr(args, flag) for flag, _ in flags}))
    except CtxmtError as err:
        raise SystemExit(f"context_scaling: error: {err}") from None


if __name__ == "__main__":
    main()
