"""The deterministic synthetic discourse benchmark (the embedded default corpus).

``generate_benchmark(out_dir, seed, docs)`` writes a document-level parallel
corpus between two artificial languages (see :mod:`.lexicon` for the grammar
and the translation rules), split ~90/5/5 by documents, and contrastive test
sets built in mirror pairs (see :mod:`.contrastive`) in three layouts (see
:mod:`.writers`). Pure Python (stdlib only); the bytes depend only on
(seed, docs, items_per_cell).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from ctxmt_cli.synthetic.contrastive import DISTANCES, Item, make_items
from ctxmt_cli.synthetic.documents import PHENOMENA, Document, make_corpus
from ctxmt_cli.synthetic.lexicon import build_lexicon, translate_sentence
from ctxmt_cli.synthetic.writers import write_contrapro, write_items, write_manifest, write_split, write_voita

__all__ = ["DESCRIPTIONS", "DISTANCES", "PHENOMENA", "build_lexicon",
           "generate_benchmark", "translate_sentence"]

DESCRIPTIONS = {
    "pronoun": "source 'ze' (it) -> target 'lor' (masc.) / 'lei' (fem.), agreeing "
               "with the target gender of the most recently mentioned noun "
               "(distance 0 = same sentence).",
    "deixis": "source 'yu' (you) -> target 'vos' (formal) / 'tu' (informal), set by "
              "the register cue of the greeting 'hala dom|sira|pal|buki NAME .'",
    "lex_cohesion": "an ambiguous source noun has two target nouns; a cue adjective "
                    "before its first occurrence picks one and later bare "
                    "occurrences repeat it.",
    "ellipsis_vp": "source 'NAME du to .' (NAME does too) -> target 'NAME anke VERB .', "
                   "VERB the most recent transitive verb.",
}


def _corpus_stats(corpus: dict[str, list[Document]]) -> dict:
    sentences = [s for docs in corpus.values() for doc in docs for s in doc]
    share = Counter(p for _, _, events in sentences for p, _ in events)
    lengths = [len(src.split()) for src, _, _ in sentences]
    total = len(sentences)
    return {
        "splits": {split: {"documents": len(docs), "sentences": sum(map(len, docs))}
                   for split, docs in corpus.items()},
        "sentence_length": {"min": min(lengths), "max": max(lengths),
                            "mean": round(sum(lengths) / total, 3)},
        "phenomenon_share": {
            **{p: round(share[p] / total, 4) for p in PHENOMENA},
            "any": round(sum(1 for _, _, ev in sentences if ev) / total, 4)},
    }


def _word_types(corpus: dict[str, list[Document]], items: list[Item]) -> dict:
    src, tgt = set(), set()
    for docs in corpus.values():
        for doc in docs:
            for s, t, _ in doc:
                src.update(s.split())
                tgt.update(t.split())
    for item in items:
        for s in item.src_context + [item.src]:
            src.update(s.split())
        for t in item.tgt_context + item.candidates:
            tgt.update(t.split())
    return {"src": len(src), "tgt": len(tgt)}


def _contrastive_counts(items: list[Item]) -> dict:
    cells = Counter((item.phenomenon, item.distance) for item in items)
    return {"items": len(items), "pairs": len({item.pair for item in items}),
            "per_cell": {p: {str(d): cells[(p, d)] for d in DISTANCES[p]}
                         for p in PHENOMENA}}


def generate_benchmark(out_dir: Path, seed: int = 1, docs: int = 2000,
                       items_per_cell: int = 100) -> dict:
    """Write the synthetic benchmark under ``out_dir`` and return its manifest.

    Files: ``{train,valid,test}.{src,tgt}``, ``contrastive/items.jsonl``,
    ``contrastive/voita/*.json``, ``contrastive/contrapro/*`` and
    ``manifest.json``. Identical bytes for identical (seed, docs,
    items_per_cell). Raises :class:`~ctxmt_cli.errors.CtxmtError` when
    ``docs`` is too small for the minimum split sizes.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lexicon = build_lexicon(seed)
    corpus = make_corpus(lexicon, seed, docs)
    items = make_items(lexicon, seed, items_per_cell)
    for split, documents in corpus.items():
        write_split(out_dir, split, documents)
    write_items(out_dir / "contrastive" / "items.jsonl", items)
    write_voita(out_dir / "contrastive" / "voita", items, seed)
    write_contrapro(out_dir / "contrastive" / "contrapro", items)
    manifest = {
        "name": "ctxmt-synthetic", "format_version": 1, "seed": seed, "docs": docs,
        **_corpus_stats(corpus),
        "contrastive": _contrastive_counts(items),
        "word_types": _word_types(corpus, items),
        "lexicon_types": {"src": len(lexicon.source_types()),
                          "tgt": len(lexicon.target_types())},
        "phenomena": DESCRIPTIONS,
        "distances": {p: list(d) for p, d in DISTANCES.items()},
    }
    write_manifest(out_dir / "manifest.json", manifest)
    return manifest
