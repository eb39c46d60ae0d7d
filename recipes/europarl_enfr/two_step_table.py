"""The table of two_step.sh, from the files its steps wrote into OUT: OUT/table.md and OUT/table.json.

Per system: updates and current-sentence target tokens of the fine-tune (metrics.jsonl); its training time (the
trainer's own clock across resumes, less the pauses in pauses.tsv) and the evaluation's (times.tsv); BLEU and chrF
with sacrebleu's paired bootstrap 95% interval and p against the control, doc-BLEU (eval/bleu.json); SCAT accuracy
per pronoun, balanced, and the context gain with McNemar's p (eval/SYSTEM/scat/results.json); pronoun P-CXMI
(eval/SYSTEM/cxmi.json). Then each concat system's decodings (``--decoded``): generate mode (its recipe's), prefix
mode on whole documents and in pieces with a lead-in (eval/decoding/SYSTEM.json): time against the sentence-level
model's translation of the same debates, the generated windows decoded again in prefix mode (their separators
were not the expected number; translate's closing JSON line, eval/SYSTEM/translate.log), BLEU with its bootstrap p
against generate mode.

Usage: python two_step_table.py OUT --control sentence_control --systems sentence sentence_control concat_s2to2_cd …
    [--decoded concat_s2to2_cd.prefix concat_s2to2_cd.lead …]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

LABELS = {
    "sentence": "sentence-level Transformer (the first step)",
    "sentence_control": "sentence-level, continued (control)",
    "concat_s2to2_cd": "concat s2to2 + CD (Lupo et al. 2022)",
    "concat_s4to4_shift_cd": "concat s4to4 + shift + CD (Lupo et al. 2023)",
    "caching_grouping_c2": "caching, Latent Grouping, 2 previous sentences",
    "mbe_enc": "MBE Enc (Morishita et al. 2021)",
    "hanoit_offline": "HanoiT offline (Yang et al.)",
}


def training(run: Path) -> dict:
    """Updates and current-sentence target tokens of a run (its metrics.jsonl), and its wall time as the trainer
    counts it across resumes (``state.elapsed`` of checkpoint_last.pt: validations included, the time before a
    kill that a resume redid excluded)."""
    import torch

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("kind") == "train"]
    state = torch.load(run / "checkpoint_last.pt", map_location="cpu", weights_only=True)["state"]
    return {"updates": max((r["step"] for r in train), default=0),
            "current_tokens": sum(r.get("current_tokens", 0.0) for r in train), "elapsed_s": state["elapsed"]}


def step_seconds(out: Path, name: str) -> dict:
    """Seconds per step name in OUT/NAME: times.tsv (each step's wall time; a step run twice counts both) or
    pauses.tsv (``NAME SECONDS WHY`` lines for the time a step was stopped by hand, e.g. with SIGSTOP while a test
    suite ran)."""
    seconds: dict[str, float] = {}
    path = out / name
    for line in path.read_text().splitlines() if path.is_file() else []:
        step, value = line.split("\t")[:2]
        seconds[step] = seconds.get(step, 0.0) + float(value)
    return seconds


def scat(path: Path) -> dict:
    """The SCAT figures of one system: accuracy, per pronoun, balanced, and the context gain."""
    result = json.loads(path.read_text())["sets"]
    entry = next(iter(result.values()))
    gain = entry.get("context_gain") or {}
    return {"accuracy": entry["accuracy"], "by_pronoun": entry["by"]["pronoun"],
            "balanced": entry["balanced_accuracy"], "gain": gain.get("accuracy"),
            "balanced_gain": gain.get("balanced_accuracy"), "p": gain.get("p_exact")}


def cxmi(path: Path) -> dict:
    result = json.loads(path.read_text())
    restricted = result.get("restricted") or {}
    return {"all_tokens": result["cxmi_per_token"], "pronouns_per_word": restricted.get("p_cxmi_per_word"),
            "pronoun_occurrences": restricted.get("n")}


def bleu(path: Path) -> dict:
    """{system: {BLEU, chrF, doc-BLEU, BLEU_ci, chrF_ci, BLEU_p, chrF_p, identical}} from ctxmt evaluate --out.

    ``identical``: the system's output is the baseline's, word for word; sacrebleu then reports the smallest
    p-value, 1/(N+1), not 1 (``ctxmt_cli.evaluate.significance``), so the tables say "identical" instead."""
    result = json.loads(path.read_text())
    tests = result["significance"]["bootstrap"]["systems"]
    figures = {}
    for name, metrics in result["metrics"].items():
        system = Path(name).stem
        figures[system] = {**metrics, **{f"{m}_{k}": tests[name][m][key] for m in ("BLEU", "chrF")
                                          for k, key in (("ci", "ci95"), ("p", "p_value"))},
                           "identical": bool(tests[name].get("identical"))}
    return figures


def wall(step: str, seconds: dict, pauses: dict) -> float:
    """A step's wall time less the time it was stopped by hand."""
    return seconds.get(step, 0.0) - pauses.get(step, 0.0)


def row(system: str, out: Path, scores: dict, seconds: dict, pauses: dict) -> dict:
    evaluated = out / "eval" / system
    evaluation = sum(wall(f"{step}_{system}", seconds, pauses) for step in ("translate", "scat", "cxmi"))
    run = training(out / system)
    return {"system": system, **run, "train_s": run["elapsed_s"] - pauses.get(f"train_{system}", 0.0),
            "eval_s": evaluation, **scores[system], "scat": scat(evaluated / "scat" / "results.json"),
            "cxmi": cxmi(evaluated / "cxmi.json")}


def pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def p_text(value: float, identical: bool) -> str:
    """A p-value as the tables print it: "identical" for a copy of the baseline (see :func:`bleu`)."""
    return "identical" if identical else f"p {value:.3f}"


def versus(value, system: str, control: str, identical: bool = False) -> str:
    """"; p X" after a figure's interval, for every system but the control."""
    return "" if value is None or system == control else f"; {p_text(value, identical)}"


def markdown(rows: list[dict], control: str) -> str:
    head = ("| system | updates | current-sentence target tokens | training | evaluation | BLEU (95% CI; p vs control) "
            "| chrF (95% CI; p) | doc-BLEU | SCAT | il / elle / elles | SCAT balanced | SCAT context gain (p) "
            "| pronoun P-CXMI (nats/word) |")
    lines = [head, "|" + "---|" * 1 + "---:|" * 12]
    for r in rows:
        s, pron = r["scat"], r["scat"]["by_pronoun"]
        system = r["system"]
        gain = "—" if s["gain"] is None else f"{100 * s['gain']:+.1f} ({s['p']:.3g})"
        pcx = r["cxmi"]["pronouns_per_word"]
        lines.append(
            f"| {LABELS.get(system, system)} | {r['updates']:,} | {r['current_tokens'] / 1e6:.2f}M "
            f"| {(r['train_s'] or 0) / 60:.1f} min | {r['eval_s'] / 60:.1f} min "
            f"| {r['BLEU']:.2f} (± {r['BLEU_ci']:.2f}{versus(r['BLEU_p'], system, control, r['identical'])}) "
            f"| {r['chrF']:.2f} (± {r['chrF_ci']:.2f}{versus(r['chrF_p'], system, control, r['identical'])}) "
            f"| {r['doc-BLEU']:.2f} | {pct(s['accuracy'])}% "
            f"| {' / '.join(pct(pron.get(k)) for k in ('il', 'elle', 'elles'))} | {pct(s['balanced'])}% | {gain} "
            f"| {'—' if pcx is None else f'{pcx:.4f}'} |")
    return "\n".join(lines) + "\n"


MODES = {"": "generate (the recipe's)", ".prefix": "prefix, whole documents", ".lead": "prefix, pieces with a lead-in"}


def counters(log: Path) -> dict:
    """The closing counters of a ``translate --log-format json`` run (its last JSON object with ``fallbacks``:
    the generated windows decoded again in prefix mode, of ``sentences``); {} for a plain log or none."""
    found: dict = {}
    for line in log.read_text(encoding="utf-8").splitlines() if log.is_file() else []:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "fallbacks" in record:
            found = {"fallbacks": record["fallbacks"], "sentences": record["sentences"]}
    return found


def decodings(out: Path, decoded: list[str], seconds: dict, pauses: dict) -> list[dict]:
    """Per concat system and decoding: translation seconds, their ratio to the sentence-level model's, BLEU and
    chrF, and the bootstrap p of BLEU against generate mode."""
    rows, sentence = [], wall("translate_sentence", seconds, pauses)
    for system in dict.fromkeys(name.rsplit(".", 1)[0] for name in decoded):
        scores = bleu(out / "eval" / "decoding" / f"{system}.json")
        for suffix, label in MODES.items():
            name = system + suffix
            took = wall(f"translate_{name}", seconds, pauses)
            log = out / "eval" / (f"{system}/translate.log" if not suffix else f"decoding/{name}.log")
            rows.append({"system": system, "decoding": label, "seconds": took,
                         "vs_sentence": took / sentence if sentence else None, **scores[name], **counters(log)})
    return rows


def decoding_markdown(rows: list[dict]) -> str:
    lines = ["| system | decoding | translation | × sentence-level | windows decoded again in prefix mode "
             "| BLEU (p vs generate) | chrF |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = "—" if r["vs_sentence"] is None else f"{r['vs_sentence']:.2f}×"
        generate = r["decoding"].startswith("generate")
        p = "" if generate else f" ({p_text(r['BLEU_p'], r['identical'])})"
        again = f"{r['fallbacks']:,} of {r['sentences']:,}" if generate and "fallbacks" in r else "—"
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['decoding']} | {r['seconds'] / 60:.1f} min "
                     f"| {ratio} | {again} | {r['BLEU']:.2f}{p} | {r['chrF']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--control", required=True)
    parser.add_argument("--systems", nargs="+", required=True)
    parser.add_argument("--decoded", nargs="*", default=[])
    args = parser.parse_args()
    scores = bleu(args.out / "eval" / "bleu.json")
    seconds, pauses = step_seconds(args.out, "times.tsv"), step_seconds(args.out, "pauses.tsv")
    rows = [row(system, args.out, scores, seconds, pauses) for system in args.systems]
    decoded = decodings(args.out, args.decoded, seconds, pauses)
    (args.out / "table.json").write_text(json.dumps({"systems": rows, "decoding": decoded}, indent=2) + "\n")
    text = markdown(rows, args.control) + ("\n" + decoding_markdown(decoded) if decoded else "")
    (args.out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
