"""Bodies of the CLI commands that glue loading, decoding and evaluation together.

Kept out of ``cli.py`` so the Typer layer stays a thin parser, and importable
from tests and from the quickstart without going through Typer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ctxmt_cli.errors import CtxmtError


def dry_run_report(recipe) -> str:
    """The resolved recipe and the model's parameter count; needs no prepared data."""
    from ctxmt_cli.config import dump_recipe
    from ctxmt_cli.core.model import VocabInfo
    from ctxmt_cli.models import build_model, resolve_model_config

    meta_path = Path(recipe.data.path) / "meta.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        vocab = VocabInfo(meta["vocab_size"]["src"], meta["vocab_size"]["tgt"], joint=meta.get("joint", True))
        where = f"vocabulary of {meta_path.parent}"
    else:  # no data yet: count with a nominal vocabulary and say so
        meta = {"mean_sentence_length": {"src": 20.0, "tgt": 20.0}}
        vocab = VocabInfo(8000, 8000)
        where = f"nominal joint vocabulary of 8000; {meta_path.parent} not prepared yet"
    model_cfg = resolve_model_config(recipe.model, meta)
    model = build_model(model_cfg, vocab)
    resolved = recipe.model_copy(update={"model": model_cfg})
    return f"{dump_recipe(resolved)}\n# family: {model_cfg.family}\n# parameters: {model.num_parameters():,} ({where})"


def _device(name: str):
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        raise CtxmtError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    return torch.device(name)


def translate_file(input: str, output: str, checkpoint: Path, *, beam=None, lenpen=None, target_context=None,
                   batch_docs=None, device: str = "cpu") -> int:
    """Translate a document file with a checkpoint; returns the number of sentences."""
    from ctxmt_cli.decode.translator import read_documents, translate_documents, write_documents
    from ctxmt_cli.train.checkpoint import load_model

    if target_context not in (None, "prefix", "generate"):
        raise CtxmtError(f"--target-context {target_context!r}: choose prefix or generate")
    documents = read_documents(input)  # read first: a bad input must not cost a model load
    loaded = load_model(checkpoint, device=_device(device))
    dec, cfg = loaded.recipe.decode, loaded.recipe.model
    outputs = translate_documents(
        loaded.model, loaded.tokenizer, documents, src_context=cfg.src_context, tgt_context=cfg.tgt_context,
        beam=beam or dec.beam, lenpen=dec.lenpen if lenpen is None else lenpen, max_len_a=dec.max_len_a,
        max_len_b=dec.max_len_b, target_context=target_context or dec.target_context,
        batch_docs=batch_docs or dec.batch_sentences, max_window_tokens=loaded.recipe.data.max_window_tokens,
    )
    write_documents(outputs, output)
    return sum(len(doc) for doc in documents)


def synthetic_items(prepared: Path):
    """The synthetic benchmark's contrastive items (generic jsonl) of a prepared synthetic directory."""
    from ctxmt_cli.evaluate.contrastive import read_jsonl_items

    path = Path(prepared) / "raw" / "contrastive" / "items.jsonl"
    if not path.is_file():
        raise CtxmtError(f"{prepared} has no synthetic contrastive sets ({path}); run ctxmt prepare synthetic --out {prepared}")
    return read_jsonl_items(path)


def load_testset(spec: str):
    """Items of a test set named ``synthetic:DIR`` or ``jsonl:PATH``."""
    from ctxmt_cli.evaluate.contrastive import read_jsonl_items

    kind, _, where = spec.partition(":")
    if kind == "synthetic" and where:
        return synthetic_items(Path(where))
    if kind == "jsonl" and where:
        return read_jsonl_items(where)
    raise CtxmtError(f"test set {spec!r}: expected synthetic:PREPARED_DIR or jsonl:PATH")


def contrastive_accuracy(model, tokenizer, items, *, context=None, normalize="mean") -> dict:
    """{phenomenon: {distance: accuracy}} plus the overall accuracy under key 'all'."""
    from ctxmt_cli.evaluate.contrastive import accuracy_by, decisions, score_items

    if normalize not in ("mean", "none"):
        raise CtxmtError(f"--normalize {normalize!r}: choose mean or none")
    scores = score_items(model, tokenizer, items, context=context, normalize=normalize)
    ok = decisions(items, scores)
    table = accuracy_by(items, ok, "phenomenon", "distance")
    table["all"] = {"all": sum(ok) / max(len(ok), 1)}
    return table


def format_table(table: dict) -> str:
    """Plain text rendering of a {phenomenon: {distance: accuracy}} table."""
    lines = []
    for phenomenon, row in table.items():
        cells = "  ".join(f"d={d}: {100 * acc:5.1f}" for d, acc in row.items())
        lines.append(f"{phenomenon:>14}  {cells}")
    return "\n".join(lines)


def run_contrastive(testset: str, checkpoint: Path, *, context=None, normalize="mean", out=None, device="cpu") -> str:
    """Score a test set with a checkpoint; write results.json when ``out`` is given."""
    from ctxmt_cli.train.checkpoint import load_model

    items = load_testset(testset)
    loaded = load_model(checkpoint, device=_device(device))
    table = contrastive_accuracy(loaded.model, loaded.tokenizer, items, context=context, normalize=normalize)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        payload = {"testset": testset, "checkpoint": str(checkpoint), "n": len(items), "accuracy": table}
        (Path(out) / "results.json").write_text(json.dumps(payload, indent=2))
    return format_table(table)


def check_vocabulary(loaded, prepared, checkpoint) -> None:
    """Refuse a prepared directory whose vocabulary is not the checkpoint's."""
    if loaded.tokenizer.fingerprint() != prepared.tokenizer.fingerprint():
        raise CtxmtError(f"{checkpoint} was trained with another vocabulary than {prepared.dir}; "
                         "use the prepared data the model was trained on (or retrain)")


def split_documents(prepared, split: str):
    """Source documents and reference documents (detokenised text) of a prepared split."""
    store = prepared.split(split)
    tok = prepared.tokenizer
    sources, references = [], []
    for start, end in store.documents():
        sources.append([tok.decode_src(store.src(i).tolist()) for i in range(start, end)])
        references.append([tok.decode_tgt(store.tgt(i).tolist()) for i in range(start, end)])
    return sources, references


def translate_split(loaded, prepared, split: str, beam: Optional[int] = None):
    """Translate a prepared split as documents; returns (hypothesis lines, reference lines)."""
    from ctxmt_cli.decode.translator import translate_documents

    sources, references = split_documents(prepared, split)
    dec, cfg = loaded.recipe.decode, loaded.recipe.model
    outputs = translate_documents(
        loaded.model, loaded.tokenizer, sources, src_context=cfg.src_context, tgt_context=cfg.tgt_context,
        beam=beam or dec.beam, lenpen=dec.lenpen, max_len_a=dec.max_len_a, max_len_b=dec.max_len_b,
        target_context=dec.target_context, batch_docs=dec.batch_sentences,
        max_window_tokens=loaded.recipe.data.max_window_tokens,
    )
    return [s for doc in outputs for s in doc], [s for doc in references for s in doc]


def _read_lines(path: Path, role: str) -> list[str]:
    if not Path(path).is_file():
        raise CtxmtError(f"{role} file not found: {path}")
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise CtxmtError(f"{path}: not UTF-8 at byte {err.start}; convert it, e.g. iconv -f LATIN1 -t UTF-8") from None


def run_evaluate(checkpoint, split, data, hyp, ref, *, lowercase=False, device="cpu") -> str:
    """BLEU/chrF of a checkpoint on a prepared split, or of a hypothesis file against a reference file."""
    from ctxmt_cli.evaluate.bleu import corpus_scores

    if hyp is not None or ref is not None:
        if hyp is None or ref is None:
            raise CtxmtError("--hyp and --ref go together; give both files")
        hyps, refs = _read_lines(hyp, "--hyp"), _read_lines(ref, "--ref")
        if len(hyps) != len(refs):
            raise CtxmtError(f"--hyp {hyp} has {len(hyps)} lines but --ref {ref} has {len(refs)}; they must be aligned")
    else:
        if checkpoint is None:
            raise CtxmtError("give --checkpoint (to translate a split) or --hyp and --ref")
        from ctxmt_cli.data.store import PreparedData
        from ctxmt_cli.train.checkpoint import load_model

        loaded = load_model(checkpoint, device=_device(device))
        prepared = PreparedData(Path(data or loaded.recipe.data.path))
        check_vocabulary(loaded, prepared, checkpoint)
        hyps, refs = translate_split(loaded, prepared, split)
    scores = corpus_scores(hyps, refs, lowercase=lowercase)
    return "\n".join(f"{s.name} = {s.score:.2f}  ({s.signature})" for s in scores)
