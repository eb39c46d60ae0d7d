"""McNemar's test on two systems' per-item contrastive decisions (Lupo et al. 2022, Appendix A.1).

Only discordant items count: ``b`` = A right and B wrong, ``c`` = A wrong and B
right. We report the exact two-sided binomial p-value (valid for any ``b + c``)
and the chi-squared statistic with Edwards' continuity correction,
(|b - c| - 1)² / (b + c), with its p-value (1 degree of freedom).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from ctxmt_cli.data.lines import read_lines
from ctxmt_cli.data.text_input import load_json
from ctxmt_cli.errors import CtxmtError


def _log_binom_pmf(k: int, n: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)


def mcnemar(a: list[bool], b: list[bool]) -> dict:
    """Discordant counts, exact p-value and continuity-corrected chi² with its p-value."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} vs {len(b)} decisions")
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = only_a + only_b
    if n == 0:
        return {"n": len(a), "only_a": 0, "only_b": 0, "p_exact": 1.0, "chi2": 0.0, "p_chi2": 1.0}
    logs = [_log_binom_pmf(k, n) for k in range(min(only_a, only_b) + 1)]
    top = max(logs)
    tail = math.exp(top) * sum(math.exp(x - top) for x in logs)
    chi2 = (abs(only_a - only_b) - 1) ** 2 / n if abs(only_a - only_b) > 1 else 0.0
    return {"n": len(a), "only_a": only_a, "only_b": only_b, "p_exact": min(1.0, 2 * tail),
            "chi2": chi2, "p_chi2": math.erfc(math.sqrt(chi2 / 2))}


def read_decisions(run: Path) -> dict[str, list[dict]]:
    """``{SET: [{"correct": bool, "tags": {...}}, ...]}`` from a ``ctxmt contrastive --out`` directory."""
    files = sorted(Path(run).glob("*.decisions.jsonl"))
    if not files:
        raise CtxmtError(f"{run}: no *.decisions.jsonl; pass directories written by ctxmt contrastive --out")
    return {f.name[: -len(".decisions.jsonl")]: _decisions_file(f) for f in files}


def _decisions_file(path: Path) -> list[dict]:
    """The decisions of one ``SET.decisions.jsonl``, each line checked: an object with ``correct`` (true or
    false) and ``tags`` (an object); anything else is one line naming the file and line."""
    fix = "pass directories written by ctxmt contrastive --out (or run it again)"
    rows = []
    for number, line in read_lines(path, "decisions"):
        try:
            row = load_json(line)
        except ValueError as err:                   # malformed (JSONDecodeError) or refused (JsonInputError)
            raise CtxmtError(f"{path}:{number}: not a decision ({' '.join(str(err).split())}); {fix}") from None
        if not (isinstance(row, dict) and isinstance(row.get("correct"), bool) and isinstance(row.get("tags"), dict)):
            raise CtxmtError(f'{path}:{number}: not a decision (an object with "correct": true or false and '
                             f'"tags": {{...}}); {fix}')
        rows.append(row)
    return rows


def compare_runs(run_a: Path, run_b: Path) -> dict:
    """McNemar per set, per phenomenon (or first tag) and over all items the two runs share."""
    a, b = read_decisions(run_a), read_decisions(run_b)
    shared = sorted(set(a) & set(b))
    if not shared:
        raise CtxmtError(f"{run_a} and {run_b} share no scored test set ({sorted(a)} vs {sorted(b)})")
    out: dict = {"sets": {}, "overall": None}
    all_a, all_b = [], []
    for name in shared:
        if len(a[name]) != len(b[name]) or any(x["tags"] != y["tags"] for x, y in zip(a[name], b[name], strict=True)):
            raise CtxmtError(f"set {name}: the two runs scored different items; rerun both on the same test set")
        da, db = [x["correct"] for x in a[name]], [x["correct"] for x in b[name]]
        groups: dict = defaultdict(lambda: ([], []))
        for x, y in zip(a[name], b[name], strict=True):
            key = x["tags"].get("phenomenon", next(iter(x["tags"].values()), "all")) if x["tags"] else "all"
            groups[str(key)][0].append(x["correct"])
            groups[str(key)][1].append(y["correct"])
        out["sets"][name] = {"all": mcnemar(da, db), "by": {k: mcnemar(*v) for k, v in sorted(groups.items())}}
        all_a += da
        all_b += db
    out["overall"] = mcnemar(all_a, all_b)
    return out
