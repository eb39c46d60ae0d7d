"""Paired significance tests between MT systems, run by sacrebleu's own implementation.

:class:`sacrebleu.significance.PairedTest` does paired bootstrap resampling (Koehn,
2004; as Moses' ``bootstrap-hypothesis-difference-significance.pl``) and paired
approximate randomisation (Riezler & Maxwell, 2005; as multeval). The first system
is the baseline; every other system gets a p-value against it and, for both tests,
a bootstrap estimate of its mean score with the 95% confidence half-width.

sacrebleu reads its seed from the ``SACREBLEU_SEED`` environment variable; it is set
only while a test runs. sacrebleu treats a seed of 0 as "unseeded", so 0 is refused.
sacrebleu counts a resampled difference only when it is *strictly* larger than the
observed one, so a system compared with an identical copy of the baseline gets the
smallest p-value, 1/(N+1), not 1; such systems are flagged ``identical``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.memory import check_fits

TESTS = {"bootstrap": "bs", "ar": "ar"}  # our option value -> sacrebleu's test_type
TEST_NAMES = {"bootstrap": "paired bootstrap resampling", "ar": "paired approximate randomization"}
DEFAULT_SEED = 12345  # sacrebleu's own default, so figures match its CLI's


@dataclass
class PairedResult:
    """One test's outcome: per system, per metric ``{"score", "p_value", "mean", "ci95"}``."""

    test: str
    samples: int
    seed: int
    baseline: str
    signatures: dict[str, str]
    systems: dict[str, dict[str, dict]] = field(default_factory=dict)

    def to_json(self) -> dict:
        """Everything as plain JSON values."""
        return {"test": TEST_NAMES[self.test], "samples": self.samples, "seed": self.seed,
                "baseline": self.baseline, "signatures": self.signatures, "systems": self.systems}


def parse_tests(value: str | None, n_systems: int) -> list[str]:
    """``bootstrap|ar|both`` -> the tests to run; refuses an unknown name or fewer than two systems."""
    if value is None:
        return []
    choices = {"bootstrap": ["bootstrap"], "ar": ["ar"], "both": ["bootstrap", "ar"]}
    if value not in choices:
        raise CtxmtError(f"unknown {option('significance')} {value!r}; choose bootstrap, ar or both")
    if n_systems < 2:
        raise CtxmtError(f"{option('significance')} compares systems but {n_systems} was given; give the baseline and "
                         f"at least one other system ({option('hyp')} H1 {option('hyp')} H2, or {option('checkpoint')} "
                         f"C1 {option('checkpoint')} C2)")
    return choices[value]


def check_seed(seed: int) -> None:
    """sacrebleu reads 0 as 'no seed' (results would change run to run), so require a positive seed."""
    if seed <= 0:
        raise OptionError("seed", seed, f"sacrebleu treats 0 as unseeded; give a positive seed "
                         f"(default {DEFAULT_SEED})")


#: sacrebleu's sample counts when none is given
DEFAULT_SAMPLES = {"bootstrap": 1000, "ar": 10000}
#: bytes sacrebleu holds per sample and sentence at least: bootstrap, an int64 index and a float32 statistic
#: (``stats[idxs]``); AR, two boolean selectors
_BYTES_PER_DRAW = {"bootstrap": 12, "ar": 2}


def _check_memory(test: str, samples: int | None, sentences: int) -> None:
    """Refuse a test whose (samples x sentences) arrays cannot fit in memory: sacrebleu draws them all at once."""
    n = samples or DEFAULT_SAMPLES[test]
    check_fits(n * sentences * _BYTES_PER_DRAW[test], f"{TEST_NAMES[test]} with {n:,} samples of {sentences:,} "
               "sentences", f"{option('samples')}")


@contextmanager
def _sacrebleu_seed(seed: int):
    # PairedTest and its baseline bootstrap read the seed from the environment, not from an argument
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def paired_test(systems: Sequence[tuple[str, Sequence[str]]], references: Sequence[str],
                make_metrics: Callable[[], dict], test: str = "bootstrap", samples: int | None = None,
                seed: int = DEFAULT_SEED) -> PairedResult:
    """Run sacrebleu's paired ``test`` (``bootstrap`` or ``ar``) of every system against the first.

    ``make_metrics`` returns fresh ``{name: sacrebleu Metric}``; ``samples`` = bootstrap
    resamples or AR trials (None: sacrebleu's defaults, 1000 and 10000). With AR the
    confidence interval comes from sacrebleu's default 1000 bootstrap resamples.
    """
    from sacrebleu.significance import PairedTest

    check_seed(seed)
    _check_memory(test, samples, len(references))
    metrics = make_metrics()
    named = [(name, list(hyps)) for name, hyps in systems]
    with _sacrebleu_seed(seed):
        runner = PairedTest(named, metrics, references=[list(references)], test_type=TESTS[test],
                            n_samples=samples or 0, n_ar_confidence=0 if test == "ar" else -1, n_jobs=1)
        signatures, table = runner()
    # sacrebleu keys results by its score names ("chrF2"); they come in our metrics' order
    sacre_names = [key for key in table if key != "System"]
    ours = dict(zip(sacre_names, metrics, strict=False))
    result = PairedResult(test, runner.n_samples, seed, named[0][0],
                          {ours[k]: str(sig) for k, sig in signatures.items()})
    for i, (name, hyps) in enumerate(named):
        row = {ours[k]: _result_json(table[k][i]) for k in sacre_names}
        if i and hyps == named[0][1]:
            row["identical"] = True
        result.systems[name] = row
    return result


def _num(x) -> float | None:
    return None if x is None else float(x)  # numpy floats are not JSON serialisable


def _result_json(res) -> dict:
    return {"score": float(res.score), "p_value": _num(res.p_value), "mean": _num(res.mean), "ci95": _num(res.ci)}


def format_paired(result: PairedResult) -> list[str]:
    """Printed lines: the test, then per metric each system's score, 95% CI and p-value against the baseline."""
    unit = "resamples" if result.test == "bootstrap" else "trials"
    lines = [f"{TEST_NAMES[result.test]} ({result.samples} {unit}, seed {result.seed}), "
             f"baseline {result.baseline}:"]
    width = max(len(name) for name in result.systems)
    for metric, signature in result.signatures.items():
        for name, row in result.systems.items():
            cell = row[metric]
            ci = f"  (mean {cell['mean']:.2f} ± {cell['ci95']:.2f}, 95% CI)" if cell["mean"] is not None else ""
            if cell["p_value"] is None:
                tail = "  baseline"
            else:
                same = "  (identical to the baseline)" if row.get("identical") else ""
                tail = f"  p = {cell['p_value']:.4f}{same}"
            lines.append(f"  {name:<{width}}  {metric} = {cell['score']:.2f}{ci}{tail}")
        lines.append(f"  {metric} signature: {signature}")
    return lines
