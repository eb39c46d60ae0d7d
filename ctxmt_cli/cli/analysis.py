"""The analysis commands of the ``ctxmt`` command line: ``analyze-attention``, ``cxmi`` and ``plot``.

Registered on the app by :func:`register`. Like every command, each parses its options and calls one function of
:mod:`ctxmt_cli.analysis`, importing torch and matplotlib inside the command so ``--help`` stays instant.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import refuse_given, user_errors
from ctxmt_cli.cli.options import (
    CONTEXT,
    COUNT,
    MAX_TOKENS,
    SAMPLES,
    SEED,
    Device,
    LogFormat,
)
from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.errors import CtxmtError

#: command name -> function; each is registered on the app by :func:`register`
COMMANDS: dict = {}


def _show(value: str | None) -> tuple[int, ...]:
    """``--show 0,5`` -> (0, 5)."""
    if not value:
        return ()
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise CtxmtError(f"--show {value}: give window numbers, comma-separated (e.g. 0 or 0,5)") from None


def analyze_attention(
    ctx: typer.Context,
    runs: list[str] | None = typer.Argument(None, metavar="[compare RUN_A RUN_B]",
                                               help="'compare' and two --out directories: approximate randomisation"),
    checkpoint: Path | None = typer.Option(None, "--checkpoint", "-c", help="model checkpoint"),
    data: Path | None = typer.Option(None, help="prepared dir (default: the checkpoint recipe's data.path)"),
    split: str = typer.Option("test", help="prepared split, teacher-forced over its references"),
    src: Path | None = typer.Option(None, help="source documents (blank line between documents) instead of a split"),
    ref: Path | None = typer.Option(None, help="their reference translations, aligned with --src"),
    context: int | None = typer.Option(None, **CONTEXT, help="K context sentences per side that has context (default: "
                                          "the model's own; for sKtoK windows of K+1 sentences; K next sentences too "
                                          "for a model reading them)"),
    max_sentences: int | None = typer.Option(None, **COUNT, help="analyse the first N windows only"),
    show: str | None = typer.Option(None, help="window numbers (comma-separated) to draw as heat maps"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="draw the PNGs (needs matplotlib)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="directory for analysis.json, sentences.jsonl and the "
                                    "PNGs (default: analysis-SPLIT beside the checkpoint)"),
    force: bool = typer.Option(False, help="overwrite an earlier analysis in --out"),
    trials: int = typer.Option(1000, **SAMPLES, help="compare: permutations of approximate randomisation"),
    seed: int = typer.Option(1, **SEED, help="compare: seed of the permutations"),
    max_tokens: int = typer.Option(DEFAULT_MAX_TOKENS, **MAX_TOKENS, help="token budget per batch"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Attention entropy and current-sentence share per kind, layer and head (Lupo et al. 2022, Table 5 and
    Figure 2), group usage of the caching family, HanoiT's kept context tokens per selection layer and its
    selection maps (Yang et al., Figures 4 and 6), heat maps.

    `ctxmt analyze-attention compare RUN_A RUN_B` tests the summary numbers of two runs by approximate randomisation.
    """
    from ctxmt_cli.analysis import attention_run

    if runs:
        if runs[0] != "compare" or len(runs) != 3:
            raise CtxmtError("usage: ctxmt analyze-attention compare RUN_A RUN_B (two directories written with --out), "
                             "or ctxmt analyze-attention -c CKPT [options]")
        refuse_given(ctx, [p.name for p in ctx.command.params if p.name not in ("runs", "trials", "seed")],
                     "belongs to an analysis; `analyze-attention compare RUN_A RUN_B` reads two finished runs")
        typer.echo(attention_run.render_compare(attention_run.compare_runs(Path(runs[1]), Path(runs[2]), trials, seed)))
        return
    if checkpoint is None:
        raise CtxmtError("analyze-attention needs --checkpoint CKPT (or: compare RUN_A RUN_B)")
    refuse_given(ctx, ("trials", "seed"), "belongs to `analyze-attention compare RUN_A RUN_B`")
    default_out = checkpoint.parent / f"analysis-{split if src is None else 'files'}"
    request = attention_run.AttentionRequest(
        checkpoint=checkpoint, out=out or default_out, data=data, split=split, src=src, ref=ref, context=context,
        max_sentences=max_sentences, show=_show(show), plots=plots, max_tokens=max_tokens, device=device, force=force,
        log_format=log_format)
    typer.echo(attention_run.render(attention_run.run_attention(request)))
    typer.echo(f"wrote {request.out}/analysis.json", err=True)


COMMANDS["analyze-attention"] = analyze_attention


def cxmi(
    ctx: typer.Context,
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", help="model checkpoint"),
    data: Path | None = typer.Option(None, help="prepared dir (default: the checkpoint recipe's data.path)"),
    split: str = typer.Option("test", help="prepared split whose reference sentences are scored"),
    context: int | None = typer.Option(None, **CONTEXT, help="K context sentences per side that has context (default: "
                                          "the model's own; K next sentences too for a model reading them, taken "
                                          "from the document); a sentence-level model reads none: its CXMI is 0"),
    random_context: bool = typer.Option(False, "--random-context", help="control: context sentences (source and "
                                        "target, aligned) drawn from another document, seeded"),
    seed: int = typer.Option(1, **SEED, help="seed of --random-context"),
    out: str | None = typer.Option(None, "--out", "-o", metavar="PATH", help="write the figures to this JSON file"),
    per_sentence: str | None = typer.Option(None, metavar="PATH", help="write P-CXMI (one JSON line per sentence) "
                                               "to this file"),
    tokens: str | None = typer.Option(None, metavar="WORD[,WORD...]", help="also P-CXMI restricted to these "
                                         "target words (e.g. il,elle,ils,elles; case-folded, a word = its "
                                         "SentencePiece pieces, each occurrence the sum of its pieces' differences)"),
    max_tokens: int = typer.Option(DEFAULT_MAX_TOKENS, **MAX_TOKENS, help="token budget per scoring batch"),
    device: Device = "auto",
    force: bool = typer.Option(False, help="replace an existing --out or --per-sentence file"),
    log_format: LogFormat = None,
):
    """Context usage (CXMI, Fernandes et al. 2021): log q(y|x,C) - log q(y|x) of the same model, per token and per
    sentence, over a prepared split's reference sentences; with --tokens, also over the tokens of chosen words."""
    from ctxmt_cli.analysis.cxmi import CxmiRequest, render, run_cxmi
    from ctxmt_cli.analysis.cxmi_words import parse_words

    if not random_context:
        refuse_given(ctx, ("seed",), "is read with --random-context only (it draws the other documents' context)")
    request = CxmiRequest(checkpoint=checkpoint, data=data, split=split, context=context, random_context=random_context,
                          seed=seed, max_tokens=max_tokens, device=device, out=out, per_sentence=per_sentence,
                          tokens=None if tokens is None else parse_words(tokens), force=force, log_format=log_format)
    typer.echo(render(run_cxmi(request)))


COMMANDS["cxmi"] = cxmi


def plot(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="training directories (train.save_dir) "
                                          "holding metrics.jsonl; several are overlaid, one colour each"),
    out: Path | None = typer.Option(None, "--out", "-o",
                                    help="directory for the PNGs (default: RUN_DIR/plots of the first run)"),
    force: bool = typer.Option(False, help="overwrite PNGs that already exist"),
):
    """Training curves (Lupo et al. 2022, Figure 3): losses, current / context loss ratio, learning rate, tokens/s
    and every loss term the family logs, one PNG per quantity against the update step (needs matplotlib)."""
    from ctxmt_cli.analysis.curves import plot_runs

    written = plot_runs(run_dirs, out, force)
    for path in written:
        typer.echo(str(path))
    typer.echo(f"{len(written)} figures from {len(run_dirs)} run(s)")


COMMANDS["plot"] = plot


def register(app: typer.Typer) -> None:
    """Add every analysis command to ``app`` (errors become one line, exit 2)."""
    for name, fn in COMMANDS.items():
        app.command(name=name)(user_errors(fn))
