"""``ctxmt analyze-attention``: teacher-forced attention statistics of a checkpoint over a split, and their figures.

The split's windows (the model's own context, or ``--context K`` sentences per side) are
length-bucketed into token-budget batches and run through ``forward`` with an
:class:`~ctxmt_cli.analysis.attention.AttentionStats` probe, which reduces each layer's
map as soon as it exists. Writes ``analysis.json`` (summary, per kind × layer × head, group
usage for the caching family, for a model that selects context tokens (HanoiT) the kept share
after each selection layer (:mod:`ctxmt_cli.analysis.selection`), every definition),
``sentences.jsonl`` (the per-sentence sums that ``analyze-attention compare`` tests) and, unless
``plots`` is off, PNGs: the layer × head grids of entropy and current share, the kept shares
against the selection layer, and for each ``--show N`` window its attention per layer (averaged
over heads, sentence boundaries drawn), its grouping/selecting assignment, and its bottom and top
encoder self-attention with the dropped context tokens marked.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ctxmt_cli.analysis.attention import COLUMNS, SUMMARY, AttentionStats, approximate_randomization
from ctxmt_cli.analysis.selection import KeptShares, render_kept
from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.outputs import remove_stale, temp_name, write_atomic, write_json
from ctxmt_cli.ownership import check_files_replaceable, record
from ctxmt_cli.paths import check_not_input, check_output_dir, check_output_file

OUTPUTS = ("analysis.json", "sentences.jsonl")


@dataclass
class AttentionRequest:
    """Everything ``analyze-attention`` was asked (the CLI's options)."""

    checkpoint: Path
    out: Path
    data: Path | None = None
    split: str = "test"
    src: Path | None = None
    ref: Path | None = None
    context: int | None = None
    max_sentences: int | None = None
    show: tuple[int, ...] = ()
    plots: bool = True
    max_tokens: int = DEFAULT_MAX_TOKENS
    device: str = "cpu"
    force: bool = False
    log_format: str | None = None    # windows analysed so far, on stderr (None: a bar on a terminal, else lines)


def _check(req: AttentionRequest) -> None:
    """Refuse a bad request before any work (one line each)."""
    if (req.src is None) != (req.ref is None):
        raise CtxmtError(f"{option('src')} and {option('ref')} go together (a source file and its reference "
                         "translation)")
    if req.src is not None and req.data is not None:
        raise CtxmtError(f"give either {option('data')} DIR {option('split')} S or {option('src')} F {option('ref')} "
                         "F, not both")
    if req.context is not None and req.context < 0:
        raise OptionError("context", req.context, "give a number of context sentences >= 0")
    check_output_dir(req.out, option("out"), inputs=[req.checkpoint, req.data, req.src, req.ref])
    for name in OUTPUTS:
        check_output_file(Path(req.out) / name, f"{option('out')} file", force=None, make_parents=True,
                          inputs=[req.checkpoint, req.data, req.src, req.ref])
    taken = [name for name in OUTPUTS if (Path(req.out) / name).exists()]
    if taken and not req.force:
        raise CtxmtError(f"{option('out')} {req.out} already holds {', '.join(taken)}; pass {option('force')} to "
                         f"overwrite or choose another {option('out')}")
    check_files_replaceable([Path(req.out) / name for name in OUTPUTS], f"{option('out')} file", req.force)
    if req.plots:
        from ctxmt_cli.figures import require_matplotlib

        require_matplotlib()


def read_split(loaded, req: AttentionRequest):
    """The split to analyse: a prepared split (vocabulary checked) or the ``--src``/``--ref`` files tokenised."""
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.decode.documents import read_documents

    if req.src is None:
        from ctxmt_cli.evaluate.translation import check_vocabulary

        prepared = PreparedData(req.data or Path(loaded.recipe.data.path))
        check_vocabulary(loaded, prepared, req.checkpoint)
        return prepared.split(req.split)
    src, ref = read_documents(req.src), read_documents(req.ref)
    return documents_split(loaded, src, ref, Path(req.src).name, f"{option('src')} {req.src} and {option('ref')} "
                                                                 f"{req.ref}")


def documents_split(loaded, src: list[list[str]], ref: list[list[str]], name: str, what: str = "src and ref"):
    """Aligned source and reference documents as a split (tokenized with the model's tokenizer); documents
    that differ in shape are refused, naming ``what``."""
    from ctxmt_cli.data.store import MemorySplit

    def shape(docs: list[list[str]]) -> list[int]:
        return [len(d) for d in docs]

    if shape(src) != shape(ref):
        raise CtxmtError(f"{what} differ in documents or sentences per document "
                         f"({sum(shape(src))} vs {sum(shape(ref))} sentences); give aligned files")
    tok = loaded.tokenizer
    ids_src = tok.encode_batch([s for d in src for s in d], "src")
    ids_ref = tok.encode_batch([s for d in ref for s in d], "tgt")
    docs, i = [], 0
    for doc in src:
        docs.append(list(zip(ids_src[i:i + len(doc)], ids_ref[i:i + len(doc)], strict=True)))
        i += len(doc)
    return MemorySplit(docs, name=name)


def window_dataset(loaded, split, context: int | None, target_concat=None):
    """Windows of ``split`` with the model's context, or ``context`` sentences on each side that has context
    (and as many next sentences, for a model that reads them: they come from the split's documents);
    ``target_concat``: a bilingual model's second rows (:func:`target_concatenation`)."""
    from ctxmt_cli.data.windows import WindowDataset, WindowSpec
    from ctxmt_cli.models.families import context_sentences, next_sentences

    src_ctx, tgt_ctx = context_sentences(loaded.recipe.model, context)
    spec = WindowSpec(src_ctx, tgt_ctx, loaded.recipe.data.max_window_tokens,
                      src_next_sentences=next_sentences(loaded.recipe.model, context))
    return WindowDataset(split, spec, loaded.vocab.brk, loaded.vocab.eos, target_concat)


def target_concatenation(loaded, req: AttentionRequest, split):
    """The target concatenation of every window of a HanoiT reading target context (bilingual, or context_side:
    target), as validation gives it (every row has one): the target context its recipe names (a first-pass stream
    of the prepared split, or the reference); None for any other model. ``--src``/``--ref`` files have no first-pass
    stream: refused there unless the model reads the reference."""
    from ctxmt_cli.models.families import inputs_of

    model = loaded.recipe.model
    if not inputs_of(model).target_concat:
        return None
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.data.target_concat import TargetConcat, target_side

    if req.src is None:
        prepared = PreparedData(req.data or Path(loaded.recipe.data.path))
        return TargetConcat(target_side(prepared, req.split, model.target_context_from, model.first_pass_stream))
    return reference_concatenation(loaded, split, str(req.checkpoint))


def reference_concatenation(loaded, split, name: str):
    """The target concatenation of documents given with their references (not a prepared split): the
    reference, for a model reading target context from it; None for a model reading no target context."""
    from ctxmt_cli.data.target_concat import ReferenceSide, TargetConcat
    from ctxmt_cli.models.families import inputs_of

    model = loaded.recipe.model
    if not inputs_of(model).target_concat:
        return None
    if model.target_context_from != "reference":
        raise CtxmtError(f"{name} is a {model.family} model reading first-pass translations of the context, "
                         f"which {option('src')}/{option('ref')} files do not have; analyse a prepared split holding "
                         f"the stream ({option('data')} DIR {option('split')} S, written by `ctxmt first-pass`)")
    return TargetConcat(ReferenceSide(split))


@torch.no_grad()
def collect_statistics(model, dataset, indices: np.ndarray, *, max_tokens: int, device,
                       progress: Callable[[int], None] | None = None) -> tuple[AttentionStats, KeptShares]:
    """Run every window of ``indices`` through ``model`` with a statistics probe, batch by batch; the kept shares
    of a model that selects context tokens are pooled from each pass's loss terms. ``progress(n)``: after each
    batch, its n windows."""
    from ctxmt_cli.data.batching import BatchBudget
    from ctxmt_cli.models.families import inputs_of

    stats, kept = AttentionStats(), KeptShares()
    listen = kept.probe(model, stats)                                       # stats, and the rule's control (HanoiT)
    vocab = model.vocab
    inputs = inputs_of(model.cfg)
    budget = BatchBudget(max_tokens=max_tokens)
    for plan in inputs.plan_batches(dataset, indices, budget=budget, shuffle=False, mixed=False):  # real documents
        batch = inputs.collate(dataset, plan, vocab).to(device)
        stats.rows = [int(j) for j in batch.ids]
        kept.add(model(batch, probe=listen, project=False).loss_terms)
        if progress is not None:
            progress(len(stats.rows))
    return stats, kept


def run_attention(req: AttentionRequest) -> dict:
    """Analyse, write the outputs, return ``analysis.json``'s content."""
    from ctxmt_cli.models.loading import load_model, torch_device

    _check(req)
    loaded = load_model(req.checkpoint, torch_device(req.device))
    if req.src is None and req.data is None:          # the recipe's data folder is an input too
        check_not_input(Path(req.out), [Path(loaded.recipe.data.path)], option("out"), replaced=False)
    split = read_split(loaded, req)
    dataset = window_dataset(loaded, split, req.context, target_concatenation(loaded, req, split))
    indices = analysed_windows(dataset, req.max_sentences, req.show)
    stats, result = _analysed(loaded, dataset, indices, req)
    out = Path(req.out)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    stage = temp_name(out / "analysis")          # everything drawn first: nothing replaced unless all may be
    stage.mkdir()
    try:
        write_json(stage / "analysis.json", result)
        doc = dataset.split.doc_index
        lines = [json.dumps({"sentence": sid, "doc": int(doc[sid]), **dict(zip(COLUMNS, row.tolist(), strict=True))})
                 for sid, row in sorted(stats.sentences.items())]
        write_atomic(stage / "sentences.jsonl", "\n".join(lines) + "\n")
        figures = []
        if req.plots:
            from ctxmt_cli.analysis.attention_figures import draw_all

            figures = draw_all(loaded, dataset, [(int(indices[n]), n) for n in req.show], result, stage)
        _install(stage, out, req.force)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if req.plots:
        result["figures"] = [str(out / Path(p).name) for p in figures]
    return result


def _analysed(loaded, dataset, indices: np.ndarray, req: AttentionRequest) -> tuple[AttentionStats, dict]:
    """:func:`attention_result`, the windows done so far on stderr in ``req.log_format``."""
    from ctxmt_cli.logs import CountLog

    log, done = CountLog.periodic(req.log_format, "windows"), 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        log.update("analyze-attention", done, len(indices))

    log.update("analyze-attention", 0, len(indices))
    try:
        return attention_result(loaded, dataset, indices, req.max_tokens, str(req.checkpoint), progress=advance)
    finally:
        log.close()


def _install(stage: Path, out: Path, force: bool) -> None:
    """Move the files written in ``stage`` into ``out``; one that exists there is replaced only with ``force`` and
    when an earlier analysis wrote it (checked for all before any moves)."""
    names = sorted(p.name for p in stage.iterdir())
    check_files_replaceable([out / name for name in names], f"{option('out')} file", force)
    for name in names:
        os.replace(stage / name, out / name)
    record(out, [out / name for name in names], command="analyze-attention")


def analysed_windows(dataset, max_sentences: int | None, show: tuple[int, ...] = ()) -> np.ndarray:
    """The windows to analyse (the first ``max_sentences``); none, or a ``show`` number out of range, is refused."""
    indices = dataset.indices if max_sentences is None else dataset.indices[:max_sentences]
    if len(indices) == 0:
        raise CtxmtError(f"no sentence to analyse in split {dataset.split.name!r}")
    for n in show:
        if not 0 <= n < len(indices):
            raise OptionError("show", n, f"the split has windows 0..{len(indices) - 1}")
    return indices


def attention_result(loaded, dataset, indices: np.ndarray, max_tokens: int, checkpoint: str | None = None, *,
                     progress: Callable[[int], None] | None = None) -> tuple[AttentionStats, dict]:
    """The statistics of ``indices`` and ``analysis.json``'s content (``checkpoint``: the path it names;
    ``progress(n)``: after each batch of n windows)."""
    device = next(loaded.model.parameters()).device
    stats, kept = collect_statistics(loaded.model, dataset, indices, max_tokens=max_tokens, device=device,
                                     progress=progress)
    result = stats.to_json()
    if kept.to_json() is not None:
        result["kept_context"] = kept.to_json()
    src_ctx, tgt_ctx = dataset.spec.src_context_sentences, dataset.spec.tgt_context_sentences
    result.update(checkpoint=checkpoint, family=loaded.recipe.model.family, split=dataset.split.name,
                  context={"src": src_ctx, "tgt": tgt_ctx, "src_next": dataset.spec.src_next_sentences})
    if dataset.target_concat is not None:                                   # what its target context was
        model = loaded.recipe.model
        result["context"]["target_concat"] = model.first_pass_stream if model.target_context_from == "first_pass" \
            else "reference"
    return stats, result


def analyze_documents(loaded, src: list[list[str]], ref: list[list[str]], *, context: int | None = None,
                      max_sentences: int | None = None, max_tokens: int = DEFAULT_MAX_TOKENS) -> dict:
    """``analysis.json``'s content for aligned source and reference documents (what ``--src``/``--ref`` files
    give), computed without writing anything (the Python API's ``Model.analyze``)."""
    split = documents_split(loaded, src, ref, "documents")
    dataset = window_dataset(loaded, split, context, reference_concatenation(loaded, split, "this model"))
    return attention_result(loaded, dataset, analysed_windows(dataset, max_sentences), max_tokens)[1]


def render(result: dict) -> str:
    """The printed report: the summary numbers with their definition, then each kind's layer means."""
    s = result["summary"]

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    lines = [f"{result['family']} on {result['split']} ({result['sentences']} sentences, context "
             f"{result['context']['src']}/{result['context']['tgt']})",
             f"entropy {fmt(s['entropy'])} nats (current-sentence queries {fmt(s['entropy_current'])}; of the "
             f"mean map {fmt(s.get('entropy_of_mean_map'))})   "
             f"current share {fmt(s['current_share'])} (self-attention {fmt(s['current_share_self'])})",
             f"  ({s['definition']})"]
    for kind, v in result["by_kind"].items():
        means = [np.nanmean(np.asarray(layer, dtype=float)) for layer in v["entropy"]]
        shares = [np.nanmean(np.asarray(layer, dtype=float)) for layer in v["current_share"]]
        lines.append(f"{kind:>13}: entropy per layer {' '.join(f'{m:.3f}' for m in means)}; "
                     f"current share {' '.join(f'{m:.3f}' for m in shares)}")
    if "assignment" in result:
        a = result["assignment"]
        lines.append(f"   assignment: {a['groups_used_per_sentence']:.2f} of {a['groups']} groups carry weight "
                     f"per sentence; {a['groups_used']} used over the split")
    if "kept_context" in result:
        lines += render_kept(result["kept_context"])
    return "\n".join(lines)


def _read_sentences(run: Path) -> dict[int, np.ndarray]:
    path = Path(run) / "sentences.jsonl"
    if not path.is_file():
        raise CtxmtError(f"{run} holds no sentences.jsonl; give a directory written "
                         "by `ctxmt analyze-attention --out`")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    # a run written before a column existed reads 0 there (its count too: the number is left out of a comparison)
    return {r["sentence"]: np.asarray([r.get(c, 0.0) for c in COLUMNS], dtype=float) for r in rows}


def compare_runs(run_a: Path, run_b: Path, trials: int = 1000, seed: int = 1) -> dict:
    """Approximate randomisation on the summary numbers of two runs over the same sentences."""
    a, b = _read_sentences(run_a), _read_sentences(run_b)
    if a.keys() != b.keys():
        raise CtxmtError(f"{run_a} and {run_b} analysed different sentences ({len(a)} vs {len(b)}); "
                         f"run both on the same split and {option('max_sentences')}")
    ids = sorted(a)
    xa, xb = np.stack([a[i] for i in ids]), np.stack([b[i] for i in ids])   # (N, columns)
    out = {"sentences": len(ids), "trials": trials, "seed": seed, "runs": [str(run_a), str(run_b)]}
    for name, columns in SUMMARY.items():
        s, c = (COLUMNS.index(col) for col in columns)
        if xa[:, c].sum() == 0 or xb[:, c].sum() == 0:
            continue
        va, vb = xa[:, s].sum() / xa[:, c].sum(), xb[:, s].sum() / xb[:, c].sum()
        p = approximate_randomization(xa[:, [s, c]], xb[:, [s, c]], trials, seed)
        out[name] = {"a": float(va), "b": float(vb), "difference": float(vb - va), "p_value": p}
    return out


def render_compare(result: dict) -> str:
    """The comparison as lines: each summary number for both runs, the difference and its p-value."""
    a, b = result["runs"]
    lines = [f"approximate randomisation, {result['trials']} trials (seed {result['seed']}), "
             f"{result['sentences']} sentences", f"A = {a}", f"B = {b}"]
    for name in SUMMARY:
        if name in result:
            r = result[name]
            lines.append(f"{name:>19}: A {r['a']:.4f}  B {r['b']:.4f}  B-A {r['difference']:+.4f}  "
                         f"p = {r['p_value']:.4f}")
    return "\n".join(lines)
