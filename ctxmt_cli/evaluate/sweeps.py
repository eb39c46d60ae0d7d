"""``ctxmt evaluate``'s sweeps: context sizes K (``--context 1,2,4``) and mbe's sentences per group N
(``--group-sentences``, Morishita et al. 2021, Figure 4): option parsing, the per-setting table and the figure."""

from __future__ import annotations

from pathlib import Path

from ctxmt_cli.config_base import MAX_CONTEXT, MAX_POSITIONS
from ctxmt_cli.errors import CtxmtError, option


def _number(part: str, top: int) -> bool:
    """``part`` is a plain decimal integer from 0 to ``top`` (``isdigit`` alone takes "²", which ``int`` refuses)."""
    return part.isascii() and part.isdigit() and int(part) <= top


def parse_group_sentences(text: str | None) -> list[int | None]:
    """``--group-sentences 1,2,4,all`` -> [1, 2, 4, None] (None: the whole document); no option -> [None]."""
    if text is None:
        return [None]
    parts = [p.strip() for p in str(text).split(",")]
    if not all(_number(p, MAX_POSITIONS) and int(p) > 0 or p == "all" for p in parts) or len(set(parts)) != len(parts):
        raise CtxmtError(f"{option('group_sentences')} {text!r}: give sentences per group N from 1 to "
                         f"{MAX_POSITIONS:,} or all, each once, comma-separated, e.g. 1,2,4,8,all")
    return [None if p == "all" else int(p) for p in parts]


def parse_contexts(text: str | None) -> list[int | None]:
    """``--context 1,2,3,4`` -> [1, 2, 3, 4]; no option -> [None] (the model's own context)."""
    if text is None:
        return [None]
    parts = [p.strip() for p in str(text).split(",")]
    if not all(_number(p, MAX_CONTEXT) for p in parts):
        raise CtxmtError(f"{option('context')} {text!r}: give context sizes K from 0 to {MAX_CONTEXT}, "
                         f"comma-separated, e.g. {option('context')} 1,2,3,4")
    values = [int(p) for p in parts]
    if len(set(values)) != len(values):
        raise CtxmtError(f"{option('context')} {text!r}: each K once")
    return values


def sweep_table(corpus, metrics: dict, req) -> tuple[dict, list[str]]:
    """BLEU and chrF per checkpoint and swept setting (context size K, or sentences per group N):
    ``{checkpoint: {K or N: {metric: value}}}`` and printed rows."""
    by: dict = {}
    for system, (name, value) in corpus.sweep_of.items():
        by.setdefault(name, {})[value] = metrics[system]
    if not by:
        return {}, []
    title, key = (("per context size K (context sentences per side):", "K") if req.group_sentences is None
                  else ("per number of sentences per group N (Morishita et al. 2021, Figure 4):", "N"))
    lines = ["", title, f"{key:>4}{'BLEU':>9}{'chrF':>9}  system"]
    for name, rows in by.items():
        lines += [f"{k:>4}{row['BLEU']:>9.2f}{row['chrF']:>9.2f}  {name}" for k, row in rows.items()]
    return by, lines


def draw_group_sweep(by_setting: dict, out: Path) -> Path:
    """BLEU per sentences per group, one series per checkpoint (Figure 4), beside the --out JSON."""
    from ctxmt_cli.figures import bar_chart

    categories = list(next(iter(by_setting.values())))
    series = {name: [rows[c]["BLEU"] for c in categories] for name, rows in by_setting.items()}
    path = Path(out).with_suffix(".group_sentences.png")
    bar_chart(categories, series, "BLEU by sentences per group", path, "BLEU", xlabel="sentences per group")
    return path
