"""Recipes, options and messages a user can get wrong: one line on stderr, exit 2, every input byte-identical.

Each row is (arguments, fragments the error line must hold), run by :func:`check_bad_input` in the scratch
directory of :func:`files` (``ws`` of the bad-input battery plus the files these rows need). None of these rows
needs a model: each is refused before one would load.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import typer

from ctxmt_cli.cli import app
from tests.integration.test_bad_inputs import check_bad_input, placeholders, ws  # noqa: F401 (ws: a fixture)

PACKAGE = Path(__file__).resolve().parents[2] / "ctxmt_cli"


@pytest.fixture
def files(ws: Path) -> Path:  # noqa: F811 (the imported fixture)
    """``ws`` plus recipes of every wrong kind, runs with broken metrics, corpora with a stray .docids."""
    (ws / "binary.yaml").write_bytes(bytes(range(256)) * 8)
    (ws / "empty.yaml").write_text("")
    (ws / "comments.yaml").write_text("# a recipe\n# still to be written\n")
    (ws / "list.yaml").write_text("- model\n- train\n")
    (ws / "threads.yaml").write_text("train:\n  threads: true\n")
    row = {"step": 1, "kind": "train", "epoch": 0, "loss": 2.0}
    (ws / "garbled").mkdir()
    (ws / "garbled" / "metrics.jsonl").write_text(
        json.dumps(row) + "\nxx garbage xx\n" + json.dumps({**row, "step": 2}) + "\n")
    (ws / "shapeless").mkdir()
    (ws / "shapeless" / "metrics.jsonl").write_text(json.dumps(row) + "\n[1, 2]\n" + json.dumps(row) + "\n")
    (ws / "latin1run").mkdir()
    (ws / "latin1run" / "metrics.jsonl").write_bytes(json.dumps(row).encode() + b"\n\xe9t\xe9\n")
    for name, ids in (("count", "d1\nd1\nd2\n"), ("blank", "d1\nd1\nd1\nd1\n")):
        (ws / f"{name}.en").write_text("one\ntwo\n\nthree\n" if name == "blank" else "one\ntwo\nthree\nfour\n")
        (ws / f"{name}.de").write_text("eins\nzwei\n\ndrei\n" if name == "blank" else "eins\nzwei\ndrei\nvier\n")
        (ws / f"{name}.docids").write_text(ids)
    (ws / "nod.en").write_text("one\ntwo\n")
    (ws / "nod.de").write_text("eins\nzwei\n")
    (ws / "exported").mkdir()
    (ws / "exported" / "ctxmt.json").write_text("{}\n")
    for name, text in BEYOND.items():
        (ws / name).write_text(text)
    return ws


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """YAML of ``levels`` anchors, each aliasing the previous one ``fan`` times: fan^levels values once expanded."""
    lines = [f"a0: &a0 [{', '.join(['x'] * fan)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


#: recipes beyond the loader's bounds, or holding values beyond the schema's (issue 35's cases)
BEYOND = {
    "bomb.yaml": alias_bomb() + "train:\n  betas: *a8\n",
    "deep.yaml": "train: " + "[" * 3000 + "]" * 3000 + "\n",
    "selfref.yaml": "train: &t\n  betas: [*t, 0.9]\n",
    "big.yaml": "# a recipe padded past any size a recipe has\n" * 30_000,
    "inf_lr.yaml": "train:\n  lr: .inf\n",
    "nan_betas.yaml": "train:\n  betas: [.nan, .inf]\n",
    "seed_neg.yaml": "train:\n  seed: -1\n",
    "seed_huge.yaml": "train:\n  seed: 36893488147419103232\n",
    "d_model.yaml": "model:\n  family: sentence\n  d_model: 1e9\n",
    "d_model_int.yaml": "model:\n  family: sentence\n  preset: null\n  d_model: 1000000000\n",
    "shift.yaml": "model:\n  family: concat\n  shift: -3\n",
}


RECIPES = [
    (["train", "binary.yaml", "--dry-run"], ["binary.yaml:", "not UTF-8 text", "a recipe is a YAML text file"]),
    (["recipes", "show", "binary.yaml"], ["binary.yaml:", "not UTF-8 text"]),
    (["train", "empty.yaml", "--dry-run"], ["empty.yaml", "the recipe is empty"]),
    (["train", "comments.yaml", "--dry-run"], ["comments.yaml", "the recipe is empty"]),
    (["train", "comments.yaml", "--dry-run", "--set", "train.lr=1e-3"], ["comments.yaml", "the recipe is empty"]),
    (["train", "list.yaml", "--dry-run"], ["list.yaml", "must be a YAML mapping", "holds a list"]),
    (["train", "list.yaml", "--dry-run", "--set", "train.lr=1e-3"], ["list.yaml", "must be a YAML mapping"]),
    (["train", "threads.yaml", "--dry-run"], ["threads.yaml", "train.threads: expected an integer, not true/false"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.threads=true"],
     ["--set 'train.threads=true'", "train.threads: expected an integer"]),
    (["train", "{recipe}", "--dry-run", "--set", "model.dropout=false"],
     ["--set 'model.dropout=false'", "expected a number, not true/false"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.betas=[true, 0.98]"], ["train.betas: expected a number"]),
    (["train", "", "--dry-run"], ["the recipe name is empty", "ctxmt recipes list"]),
    (["train", " ", "--dry-run"], ["the recipe name is empty"]),
    (["recipes", "show", ""], ["the recipe name is empty"]),
    (["recipes", "copy", "", "-o", "adir"], ["the recipe name is empty"]),
    (["train", "/dev/null", "--dry-run"], ["recipe is not a regular file: /dev/null"]),
    (["train", "bomb.yaml", "--dry-run"], ["bomb.yaml:", "more than 100,000 values once its aliases are expanded"]),
    (["train", "deep.yaml", "--dry-run"], ["deep.yaml:1:", "nested more than 64 levels deep"]),
    (["train", "selfref.yaml", "--dry-run"], ["selfref.yaml:", "contains itself through an alias"]),
    (["train", "big.yaml", "--dry-run"], ["big.yaml:", "larger than 1,024 KiB", "the most a recipe may be"]),
    (["recipes", "show", "big.yaml"], ["big.yaml:", "larger than 1,024 KiB"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.betas=" + "[" * 3000 + "]" * 3000],
     ["--set 'train.betas=[[[", "nested more than 64 levels deep"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.betas=[" + alias_bomb().replace("\n", ", ").replace(": ", "_: ")
      + "]"], ["--set 'train.betas=[a0_: &a0", "more than 100,000 values"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.betas=&a [*a]"], ["--set", "contains itself"]),
    (["train", "{recipe}", "--dry-run", "--set", ".".join(["x"] * 3000) + "=1"], ["a key path of 3000 parts"]),
    (["train", "inf_lr.yaml", "--dry-run"], ["inf_lr.yaml: train.lr: Input should be a finite number (got inf)"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.lr=.inf"], ["--set 'train.lr=.inf'", "finite number"]),
    (["train", "nan_betas.yaml", "--dry-run"], ["nan_betas.yaml: train.betas.0: Input should be a finite number"]),
    (["train", "seed_neg.yaml", "--dry-run"], ["seed_neg.yaml: train.seed", "greater than or equal to 0 (got -1)"]),
    (["train", "seed_huge.yaml", "--dry-run"], ["train.seed: Input should be less than or equal to 4294967295"]),
    (["train", "{recipe}", "--dry-run", "--set", "train.seed=36893488147419103232"], ["--set", "4294967295"]),
    (["train", "d_model.yaml", "--dry-run"], ["d_model.yaml: model.d_model", "valid integer", "'1e9'"]),
    (["train", "d_model_int.yaml", "--dry-run"], ["model.d_model: Input should be less than or equal to 16384"]),
    (["train", "{recipe}", "--dry-run", "--set", "decode.beam=1000000000"],
     ["decode.beam", "less than or equal to 1024"]),
    (["train", "{recipe}", "--dry-run", "--set", "decode.lenpen=1e308"], ["decode.lenpen", "less than or equal to 5"]),
    (["train", "shift.yaml", "--dry-run"], ["shift.yaml: model.shift: Input should be greater than or equal to 0"]),
    (["train", "{recipe}", "--dry-run", "--set", "0\x1e0=1"], ["unknown key '0\\x1e0'"]),   # a line break, shown
]

UNREAD = [
    (["prepare", "synthetic", "--train", "small", "--out", "p"],
     ["--train does not apply to `ctxmt prepare synthetic`", "corpus formats", "--docs"]),
    (["prepare", "synthetic", "--src-lang", "en", "--out", "p"], ["--src-lang does not apply", "synthetic"]),
    (["prepare", "synthetic", "--separate", "--out", "p"], ["--separate does not apply", "synthetic"]),
    (["prepare", "synthetic", "--moses", "--out", "p"], ["--moses does not apply", "synthetic"]),
    (["prepare", "synthetic", "--spm-type", "unigram", "--out", "p"], ["--spm-type does not apply"]),
    (["prepare", "synthetic", "--max-sentence-tokens", "50", "--out", "p"], ["--max-sentence-tokens does not apply"]),
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--docs", "100", "--out", "p"],
     ["--docs does not apply to `ctxmt prepare text`", "only synthetic reads it"]),
    (["prepare", "jsonl", "--train", "doc.txt", "--docs", "100", "--out", "p"], ["--docs does not apply", "jsonl"]),
    (["prepare", "iwslt-xml", "--train", "small", "--docs", "100", "--out", "p"], ["--docs", "iwslt-xml"]),
    (["prepare", "iwslt-tags", "--train", "small", "--docs", "100", "--out", "p"], ["--docs", "iwslt-tags"]),
    (["prepare", "voita", "--train", "small", "--docs", "100", "--out", "p"], ["--docs", "voita"]),
    (["prepare", "maruf", "--train", "small", "--docs", "100", "--out", "p"], ["--docs", "maruf"]),
    (["prepare", "maruf", "--train", "small", "--splits", "train", "--out", "p"], ["--splits", "docrepair"]),
    (["prepare", "reverse", "--data", "adir", "--docs", "100", "--out", "p"], ["--docs does not apply", "reverse"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--beam", "3"], ["--beam goes with --checkpoint"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--split", "valid"], ["--split goes with --checkpoint"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--data", "adir"], ["--data goes with --checkpoint"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--device", "cpu"], ["--device goes with --checkpoint"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--samples", "5"], ["--samples", "--significance"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--seed", "5"], ["--seed", "--significance"]),
    (["contrastive", "compare", "adir", "adir", "-c", "model.pt"],
     ["--checkpoint does not apply to `contrastive compare"]),
    (["contrastive", "compare", "adir", "adir", "--out", "o"], ["--out does not apply to `contrastive compare"]),
    (["contrastive", "synthetic", "-c", "model.pt", "--force"], ["--force is read with --out"]),
    (["cxmi", "-c", "model.pt", "--seed", "3"], ["--seed is read with --random-context only"]),
    (["analyze-attention", "compare", "adir", "adir", "--split", "valid"], ["--split belongs to an analysis"]),
    (["analyze-attention", "-c", "model.pt", "--seed", "1"], ["--seed belongs to `analyze-attention compare"]),
]

VALUES = [  # the same bounds on every command that takes the option
    (["evaluate", "-c", "model.pt", "--beam", "0"], ["evaluate: --beam 0", "greater than or equal to 1"]),
    (["evaluate", "-c", "model.pt", "--beam", "-1"], ["evaluate: --beam -1", "greater than or equal to 1"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--significance", "ar", "--samples", "0"],
     ["--samples 0", "greater than or equal to 1"]),
    (["translate", "doc.txt", "-c", "model.pt", "--beam", "-1"],
     ["translate: --beam -1", "greater than or equal to 1"]),
    (["first-pass", "-c", "model.pt", "--data", "adir", "--split", "x", "--beam", "-1"],
     ["--beam -1", "greater than or equal to 1"]),
    (["serve", "-c", "model.pt", "--beam", "0"], ["serve: --beam 0", "greater than or equal to 1"]),
    (["cxmi", "-c", "model.pt", "--context", "-1"], ["cxmi: --context -1", "greater than or equal to 0"]),
    (["analyze-attention", "-c", "model.pt", "--context", "-1"], ["--context -1", "greater than or equal to 0"]),
    (["contrastive", "synthetic", "-c", "model.pt", "--context", "-1"], ["--context -1", "greater than or equal to 0"]),
    (["cxmi", "-c", "model.pt", "--max-tokens", "0"], ["cxmi: --max-tokens 0", "greater than or equal to 16"]),
    # issue 35: no number without an upper bound, no float that is not finite
    (["translate", "doc.txt", "-c", "model.pt", "--beam", "1000000000"],
     ["translate: --beam 1000000000", "less than or equal to 1024"]),
    (["translate", "doc.txt", "-c", "model.pt", "--beam", "1e9"], ["translate: --beam 1e9", "valid integer"]),
    (["translate", "doc.txt", "-c", "model.pt", "--lenpen", "inf"], ["--lenpen inf", "less than or equal to 5"]),
    (["translate", "doc.txt", "-c", "model.pt", "--lenpen", "nan"], ["--lenpen nan"]),
    (["translate", "doc.txt", "-c", "model.pt", "--batch-docs", "1000000000"], ["--batch-docs 1000000000"]),
    (["translate", "doc.txt", "-c", "model.pt", "--nbest", "99999"], ["--nbest 99999", "less than or equal to 1024"]),
    (["quickstart", "--docs", "36893488147419103232", "--out", "q"],
     ["quickstart: --docs 36893488147419103232", "less than or equal to 1000000"]),
    (["prepare", "synthetic", "--docs", "36893488147419103232", "--out", "p"], ["--docs", "1000000"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--significance", "ar", "--samples", "1000000000"],
     ["evaluate: --samples 1000000000", "less than or equal to 1000000"]),
    (["evaluate", "-c", "model.pt", "--lenpen", "1e308"], ["evaluate: --lenpen 1e308", "less than or equal to 5"]),
    (["evaluate", "-c", "model.pt", "--context", "1,100"], ["--context '1,100'", "from 0 to 64"]),
    (["evaluate", "-c", "model.pt", "--context", "²"], ["--context '²'", "from 0 to 64"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--significance", "ar", "--seed", "-1"], ["--seed -1"]),
    (["serve", "-c", "model.pt", "--batch-wait-ms", "1e308"], ["--batch-wait-ms 1e308", "less than or equal to 60000"]),
    (["contrastive", "synthetic", "-c", "model.pt", "--max-tokens", "99999999999"], ["--max-tokens 99999999999"]),
    (["cxmi", "-c", "model.pt", "--context", "65"], ["cxmi: --context 65", "less than or equal to 64"]),
    (["prepare", "text", "--train", "small", "--vocab-size", "99999999999", "--out", "p"], ["--vocab-size"]),
]

MESSAGES = [
    (["plot", "garbled", "--out", "figs"], ["garbled/metrics.jsonl, line 2: not a JSON object", "remove or repair"]),
    (["plot", "shapeless", "--out", "figs"], ["shapeless/metrics.jsonl, line 2: a JSON list, not an object"]),
    (["plot", "latin1run", "--out", "figs"], ["latin1run/metrics.jsonl, line 2: not UTF-8"]),
    (["prepare", "text", "--train", "count", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     ["line counts differ", "count.docids was picked up automatically", "rename or move it"]),
    (["prepare", "text", "--train", "blank", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     ["blank.en:3: empty sentence", "blank.docids was picked up automatically", "rename or move it"]),
    (["prepare", "maruf", "--train", "nod", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     ["nod.en:1: the file does not start with a <d> line", "`ctxmt prepare text`"]),
    (["serve", "-c", "exported", "--port", "0"], ["exported is a folder written by ctxmt export ctranslate2",
                                                  "serve the .pt checkpoint it was exported from"]),
]


def _ids(rows) -> list[str]:
    return [" ".join(args) or "''" for args, _ in rows]


@pytest.mark.parametrize("args,needles", RECIPES + UNREAD + VALUES, ids=_ids(RECIPES + UNREAD + VALUES))
def test_recipes_options_and_values(args, needles, files):
    check_bad_input(args, needles, files, placeholders())


@pytest.mark.parametrize("args,needles", MESSAGES, ids=_ids(MESSAGES))
def test_messages_name_the_real_cause(args, needles, files):
    if args[0] == "plot":
        pytest.importorskip("matplotlib", reason="plot needs matplotlib (the test extra)")
    if args[0] == "serve":
        pytest.importorskip("starlette", reason="serve needs the serve extra")
    check_bad_input(args, needles, files, placeholders())
    assert not (files / "p").exists() and not (files / "figs").exists()


def _known_options() -> set[str]:
    """Every --option of every ctxmt command (both halves of a flag pair), and --help / --version."""
    found = {"--help", "--version"}

    def walk(command) -> None:
        for sub in getattr(command, "commands", {}).values():
            walk(sub)
        for param in getattr(command, "params", []):
            found.update(o for o in [*param.opts, *getattr(param, "secondary_opts", [])] if o.startswith("--"))

    walk(typer.main.get_command(app))
    return found


#: options of other programs that a message may name (pip's)
FOREIGN = {"--force-reinstall"}
_ERROR_CALLS = {"CtxmtError", "fail", "BadParameter", "refuse_given", "warning", "_warn"}
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _call_name(node: ast.Call):
    return getattr(node.func, "id", None) or getattr(node.func, "attr", None)


def test_every_option_an_error_message_names_exists():
    """A hint naming an option that no command has (``--format``) sends the user nowhere."""
    known, missing = _known_options() | FOREIGN, []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _call_name(node) in _ERROR_CALLS:
                for part in ast.walk(node):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        missing += [f"{path.relative_to(PACKAGE)}:{part.lineno}: {flag}"
                                    for flag in _FLAG.findall(part.value) if flag not in known]
    assert not missing, missing
    assert {"--beam", "--set", "--docs", "--separate"} <= known     # the walk found the commands' options


#: beams, batches, models and tests that cannot fit in the memory the rows grant (CTXMT_MEMORY_LIMIT), refused
#: before they start; the same rows with the defaults translate (tests/integration/test_cli.py)
MEMORY = [
    (["translate", "doc.txt", "-c", "{ckpt}", "--beam", "1024", "-o", "out.txt"],
     ["a beam search of 2 rows x beam 1024", "more than the 16.0 MiB free in host memory (CTXMT_MEMORY_LIMIT)",
      "lower --beam (now 1024) or --batch-docs (now 128)"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--beam", "1024", "--batch-docs", "1"],
     ["a beam search of 1 rows x beam 1024", "lower --beam (now 1024)"]),
    (["evaluate", "-c", "{ckpt}", "--data", "{data}", "--beam", "1024", "--out", "e.json"],
     ["a beam search of", "x beam 1024", "lower --beam"]),
    (["train", "{recipe}", "--dry-run", "--set", "model.d_model=1024", "--set", "model.ffn_dim=4096", "--set",
      "model.heads=16", "--set", "model.encoder_layers=6", "--set", "model.decoder_layers=6"],
     ["a model of d_model 1024, ffn_dim 4096, 6+6 layers", "lower model.d_model, model.ffn_dim or the layers"]),
]


@pytest.mark.parametrize("args,needles", MEMORY, ids=_ids(MEMORY))
def test_what_cannot_fit_in_memory_is_refused_before_it_starts(args, needles, files, monkeypatch, synthetic_dir,
                                                               concat_checkpoint):
    monkeypatch.setenv("CTXMT_MEMORY_LIMIT", "16M")
    check_bad_input(args, needles, files, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))
