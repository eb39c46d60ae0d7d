"""``ctxmt contrastive``: load sets, score them with a checkpoint, write and show every figure.

Output directory (``--out DIR``):

* ``results.json`` -- ``{"sets": {SET: {"accuracy", "n", "by": {GROUPING: {KEY: acc}}, "class_key",
  "by_class": {CLASS: {"accuracy", "n"}}, "balanced_accuracy", "context_gain": {"accuracy", "balanced_accuracy",
  "p_exact", "only_with_context", "only_without_context", "without_context": {"accuracy", "balanced_accuracy",
  "by_class"}}, "tie_rule", "ties", "strict_accuracy", "unknown_share": {"tgt", "src"}, "warning",
  "checksums"}}, "aggregates": {...}, "definitions": {...}, "checkpoint": {"path", "sha256"}, "options": {...}}``
  (ties, strict accuracy and unknown-token shares: :mod:`ctxmt_cli.evaluate.artefacts`; classes and the context
  gain, present when asked for: :mod:`ctxmt_cli.evaluate.contrastive_classes`)
* ``SET.scores`` -- the publisher's layout: one ``-log p`` per line (lower = better), items in file
  order, candidates in the publisher's order, so their own evaluation script gives ctxmt's accuracy
* ``SET.decisions.jsonl`` -- one ``{"correct": bool, "tags": {...}}`` per item, for ``contrastive compare``
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.evaluate import contrastive_classes as classes
from ctxmt_cli.evaluate.aggregates import aggregates
from ctxmt_cli.evaluate.artefacts import DEFINITIONS, RecordingTokenizer, artefact_report
from ctxmt_cli.evaluate.contrastive import decisions, score_contexts, summarize
from ctxmt_cli.evaluate.testsets import TestSet, load_testsets, scores_lines
from ctxmt_cli.outputs import file_sha256, remove_stale, write_atomic, write_json
from ctxmt_cli.ownership import check_files_replaceable, record
from ctxmt_cli.paths import check_output_dir, check_output_file


def check_language_pair(testset: TestSet, tokenizer, checkpoint: Path) -> None:
    """Refuse a set of another language pair than the checkpoint's (where both are known)."""
    for side, want in (("src", testset.src_lang), ("tgt", testset.tgt_lang)):
        have = getattr(tokenizer, f"{side}_lang", None)
        if want and have not in (None, "src", "tgt") and have != want:
            raise CtxmtError(f"{testset.name} is {testset.src_lang}->{testset.tgt_lang} but {checkpoint} translates "
                             f"{tokenizer.src_lang}->{tokenizer.tgt_lang}; score it with a model of that pair")


def score_sets(loaded, testsets: list[TestSet], *, context=None, normalize="mean", span="all",
               max_tokens=DEFAULT_MAX_TOKENS, progress=None, context_gain: bool = False) -> tuple[dict, dict, dict]:
    """(scores, decisions, summaries) per set name; a summary also says how far ties and unknown tokens decided it,
    gives the accuracy per class and, with ``context_gain``, what the context adds (the set scored again without
    context, in the same pass: :func:`~ctxmt_cli.evaluate.contrastive.score_contexts`)."""
    scores, decided, summaries = {}, {}, {}
    tokenizer = RecordingTokenizer(loaded.tokenizer)  # the unknown-token shares reuse the scorer's encodings
    for ts in testsets:
        runs = score_contexts(loaded.model, tokenizer, ts, contexts=(context, 0) if context_gain else (context,),
                              normalize=normalize, span=span, max_tokens=max_tokens, progress=progress)
        scores[ts.name] = runs[0]
        decided[ts.name] = decisions(ts, scores[ts.name])
        summaries[ts.name] = {**summarize(ts, decided[ts.name]), **classes.class_accuracy(ts, decided[ts.name]),
                              "tie_rule": ts.tie_rule, **artefact_report(ts, scores[ts.name], tokenizer),
                              "checksums": ts.checksums()}
        if context_gain:
            summaries[ts.name]["context_gain"] = classes.context_gain(ts, decided[ts.name], decisions(ts, runs[1]))
    return scores, decided, summaries



def run_contrastive(spec: str, checkpoint: Path, *, data: Path | None = None, out: Path | None = None,
                    force: bool = False, device: str = "auto", show: bool = True, log_format: str | None = None,
                    **options) -> dict:
    """Score the sets named by ``spec`` and return (and with ``out``, write) the results; the progress goes to
    stderr in ``log_format`` (None: a bar on a terminal, else plain lines), none without ``show``."""

    from ctxmt_cli.models.families import context_sentences
    from ctxmt_cli.models.loading import load_model, torch_device

    score_options = {k: options.pop(k) for k in ("context", "normalize", "span", "max_tokens", "context_gain")
                     if k in options}
    if out is not None:                             # before the model loads: what can be known without the sets
        inputs = _inputs(checkpoint, data, spec, options)
        check_output_dir(Path(out), option("out"), inputs=inputs)
        check_output_file(Path(out) / "results.json", f"{option('out')} file", force=None, inputs=inputs,
                          make_parents=True)
        check_files_replaceable([Path(out) / "results.json"], f"{option('out')} file", force)
    reader_options = {k: v for k, v in options.items() if v is not None}
    if score_options.get("context") is not None:  # readers that extract context (ContraPro documents) use K too
        reader_options["context"] = score_options["context"]
    loaded = load_model(checkpoint, device=torch_device(device))
    # without --context, a reader with one file per context size (Lopes' cN) takes the model's size
    # readers with one file per context size (Lopes' cN) pick by the model's (wider side)
    testsets = load_testsets(spec, data, model_context=max(context_sentences(loaded.recipe.model)), **reader_options)
    for ts in testsets:
        check_language_pair(ts, loaded.tokenizer, checkpoint)
    if out is not None:
        check_outputs(Path(out), testsets, _inputs(checkpoint, data, spec, options), force)
    with _progress(testsets, show, log_format, 2 if score_options.get("context_gain") else 1) as progress:
        scores, decided, summaries = score_sets(loaded, testsets, progress=progress, **score_options)
    results = {
        "sets": summaries, "aggregates": aggregates(testsets, decided),
        "definitions": {**DEFINITIONS, **classes.DEFINITIONS},
        "checkpoint": {"path": str(checkpoint), "sha256": file_sha256(checkpoint)},
        "options": {"testset": spec, "data": None if data is None else str(data), **score_options},
    }
    if out is not None:
        write_outputs(Path(out), results, testsets, scores, decided)
    return results


def _inputs(checkpoint: Path, data: Path | None, spec: str = "", options: dict | None = None) -> list[Path]:
    """What ``contrastive`` reads: the checkpoint, the test set's folder or file (``--data`` or ``KIND:PATH``) and
    the files directly in it, and the files its reader's options name (``--documents``, ``--json``)."""
    named = [Path(p) for p in (data, spec.partition(":")[2] or None) if p is not None]
    extra = [Path(v) for k, v in (options or {}).items() if k in ("documents", "json") and v not in (None, "none")]
    inputs = [Path(checkpoint), *named, *extra]
    for folder in (p for p in named if p.is_dir()):
        inputs += [p for p in folder.iterdir() if p.is_file()]
    return inputs


def output_files(out: Path, testsets: list[TestSet]) -> list[Path]:
    """The files ``--out`` receives: SET.scores and SET.decisions.jsonl per set, and results.json."""
    return [out / f"{ts.name}.{kind}" for ts in testsets for kind in ("scores", "decisions.jsonl")] + \
        [out / "results.json"]


def check_outputs(out: Path, testsets: list[TestSet], inputs: list[Path], force: bool) -> None:
    """Before scoring: ``--out`` is a directory we may write, none of its files is an input, and one that exists is
    replaced only with ``force`` and only if an earlier ``contrastive`` wrote it (unchanged since)."""
    check_output_dir(out, option("out"), inputs=inputs)
    for path in output_files(out, testsets):
        check_output_file(path, f"{option('out')} file", force=None, inputs=inputs, make_parents=True)
    check_files_replaceable(output_files(out, testsets), f"{option('out')} file", force)


def write_outputs(out: Path, results: dict, testsets: list[TestSet], scores: dict, decided: dict) -> None:
    """results.json, SET.scores and SET.decisions.jsonl (written only after everything was scored, each
    atomically: a failure leaves no empty or partial file behind)."""
    out.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    for ts in testsets:
        write_atomic(out / f"{ts.name}.scores", "".join(line + "\n" for line in scores_lines(scores[ts.name])))
        rows = (json.dumps({"correct": ok, "tags": item.tags}, ensure_ascii=False)
                for item, ok in zip(ts.items, decided[ts.name], strict=True))
        write_atomic(out / f"{ts.name}.decisions.jsonl", "".join(r + "\n" for r in rows))
    write_json(out / "results.json", results)
    record(out, output_files(out, testsets), command="contrastive")


class _progress:
    """The candidate rows scored so far, on stderr in a log format (:class:`ctxmt_cli.logs.CountLog`; silent when
    ``show`` is False): a line every 10 s at most. The total counts candidates, once per scoring (``passes``: 2
    with the context gain), before identical rows are merged (scored once), so the count jumps to the total at
    the end."""

    def __init__(self, testsets: list[TestSet], show: bool, log_format: str | None = None, passes: int = 1):
        self.total = passes * sum(len(item.candidates) for ts in testsets for item in ts.items)
        self.show, self.log_format, self.log, self.done = show, log_format, None, 0

    def __enter__(self):
        if not self.show:
            return None
        from ctxmt_cli.logs import CountLog

        self.log = CountLog.on_stderr(self.log_format, "rows", every=10.0)
        self.log.update("scoring", 0, self.total)
        return self._advance

    def _advance(self, n: int) -> None:
        self.done += n
        self.log.update("scoring", self.done, self.total)

    def __exit__(self, kind, *exc):
        if self.log is not None:
            if kind is None:
                self.log.update("scoring", self.total, self.total)
            self.log.close()


def render(results: dict):
    """Two rich tables: one row per set (accuracy under the publisher's tie rule and the strict one, ties,
    unknown-token shares, n, every grouping) and the aggregates; then each set's accuracy per class, over all items
    and balanced, with and without context where the context gain was measured (:func:`render_classes`)."""
    from rich.console import Group
    from rich.table import Table

    table = Table(title="contrastive accuracy (%)", caption="ties: " + DEFINITIONS["ties"])
    columns = ("set", "n", "accuracy", "strict", "ties", "unk tgt/src", "by")
    for column in columns:
        table.add_column(column, justify="left" if column in ("set", "by") else "right")
    for name, res in results["sets"].items():
        groups = []
        for grouping, cells in res["by"].items():
            if "/" not in grouping:  # compound groupings stay in results.json; the terminal gets the margins
                groups.append(f"{grouping}: " + "  ".join(f"{k} {100 * a:.1f}" for k, a in cells.items()))
        unknown = res.get("unknown_share") or {}
        table.add_row(name, str(res["n"]), f"{100 * res['accuracy']:.2f} ({res.get('tie_rule', '')})",
                      _percent(res.get("strict_accuracy")),
                      str(res.get("ties", "")), f"{_percent(unknown.get('tgt'), 1)}/{_percent(unknown.get('src'), 1)}",
                      "\n".join(groups))
    for name, value in results["aggregates"].items():
        table.add_row(f"[bold]{name}[/bold]", "", f"{100 * value:.2f}", "", "", "", "aggregate")
    return Group(table, render_classes(results))


def render_classes(results: dict):
    """A rich table of each set's accuracy per class, all items and the balanced accuracy, with context and, where
    the context gain was measured, without it, the difference and McNemar's exact p."""
    from rich.table import Table

    table = Table(title="accuracy per class (%) and context gain", caption="balanced: "
                  + classes.DEFINITIONS["balanced_accuracy"] + "; gain: with minus without context, in points")
    for column in ("set", "class", "n", "with context", "without", "gain", "p (McNemar)"):
        table.add_column(column, justify="left" if column in ("set", "class") else "right")
    for name, res in results["sets"].items():
        gain = res.get("context_gain") or {}
        without = gain.get("without_context", {})
        rows = [(key, str(c["n"]), c["accuracy"],
                 without.get("by_class", {}).get(key), "") for key, c in res.get("by_class", {}).items()]
        rows.append(("all", str(res["n"]), res["accuracy"], without.get("accuracy"),
                     f"{gain['p_exact']:.3g}" if gain else ""))
        rows.append(("balanced", "", res.get("balanced_accuracy"), without.get("balanced_accuracy"), ""))
        for i, (label, n, with_context, without_context, p) in enumerate(rows):
            difference = None if without_context is None else with_context - without_context
            first = f"{name}\nclass: {res.get('class_key') or '(one)'}" if i == 0 else ""
            table.add_row(first, label, n, _percent(with_context), _percent(without_context),
                          "" if difference is None else f"{100 * difference:+.2f}", p)
    return table


def _percent(value: float | None, decimals: int = 2) -> str:
    return "" if value is None else f"{100 * value:.{decimals}f}"


def warning_lines(results: dict) -> list[str]:
    """The one-line warnings of the scored sets (ties or unknown tokens deciding the accuracy)."""
    return [res["warning"] for res in results["sets"].values() if res.get("warning")]


def render_compare(result: dict, run_a: Path, run_b: Path):
    """A rich table of McNemar's test per set and phenomenon."""
    from rich.table import Table

    table = Table(title=f"McNemar: A = {run_a}  vs  B = {run_b}")
    for column in ("set", "group", "n", "A only", "B only", "p (exact)", "chi²", "p (chi²)"):
        table.add_column(column, justify="left" if column in ("set", "group") else "right")

    def row(name: str, group: str, m: dict) -> None:
        table.add_row(name, group, str(m["n"]), str(m["only_a"]), str(m["only_b"]), f"{m['p_exact']:.4g}",
                      f"{m['chi2']:.3f}", f"{m['p_chi2']:.4g}")

    for name, res in result["sets"].items():
        row(name, "all", res["all"])
        for group, m in res["by"].items():
            if len(res["by"]) > 1:
                row("", group, m)
    row("[bold]overall[/bold]", "", result["overall"])
    return table
