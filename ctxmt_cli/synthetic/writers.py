"""File layouts of the synthetic benchmark.

* ``{split}.src`` / ``{split}.tgt``: one sentence per line, one blank line
  between documents, the two sides line-aligned.
* ``contrastive/items.jsonl``: the generic layout (see :meth:`Item.to_json`).
* ``contrastive/voita/{phenomenon}.json``: Voita et al. (2019) consistency-set
  layout: groups of 4 sentences joined by " _eos ", candidates in ``dst``,
  the correct one at ``true_ind``.
* ``contrastive/contrapro/``: ContraPro (Mueller et al., 2018) layout:
  ``contrapro.json`` plus the four files its extraction script writes with
  ``--context 3`` (text: correct target then each contrastive, source repeated;
  context: 3 lines per text line, oldest first).

Every file is written with "\\n" newlines and UTF-8, so a (seed, docs) pair
gives identical bytes on every run and platform.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from ctxmt_cli.synthetic.contrastive import CONTEXT_SIZE, Item
from ctxmt_cli.synthetic.documents import PHENOMENA, Document

EOS_JOIN = " _eos "


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)


def _lines(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def write_split(out_dir: Path, split: str, documents: list[Document]) -> None:
    """``{split}.src`` and ``{split}.tgt`` with blank lines between documents."""
    for side, column in (("src", 0), ("tgt", 1)):
        blocks = ["\n".join(sent[column] for sent in doc) for doc in documents]
        _write(out_dir / f"{split}.{side}", "\n\n".join(blocks) + "\n")


def write_items(path: Path, items: list[Item]) -> None:
    """The generic JSON-lines layout, one item per line."""
    _write(path, _lines([json.dumps(item.to_json(), ensure_ascii=False)
                         for item in items]))


def voita_groups(items: list[Item], phenomenon: str, seed: int) -> list[dict]:
    """Voita-layout groups for one phenomenon; ``true_ind`` drawn per group."""
    rng = random.Random(f"ctxmt-voita:{seed}:{phenomenon}")
    groups = []
    for item in items:
        if item.phenomenon != phenomenon:
            continue
        true_ind = rng.randrange(2)
        order = [item.candidates[0], item.candidates[1]]
        if true_ind:
            order.reverse()
        groups.append({
            "src": EOS_JOIN.join(item.src_context + [item.src]),
            "dst": [EOS_JOIN.join(item.tgt_context + [c]) for c in order],
            "true_ind": true_ind, "ctx_dist": item.distance,
            "phenomenon": phenomenon})
    return groups


def write_voita(out_dir: Path, items: list[Item], seed: int) -> None:
    """One ``{phenomenon}.json`` per phenomenon."""
    for phenomenon in PHENOMENA:
        groups = voita_groups(items, phenomenon, seed)
        _write(out_dir / f"{phenomenon}.json", json.dumps(groups, ensure_ascii=False) + "\n")


def contrapro_record(item: Item, index: int) -> dict:
    """One ContraPro-style record; the item is its own 4-sentence document."""
    return {
        "document id": f"synthetic-{index:06d}", "segment id": CONTEXT_SIZE + 1,
        "src segment": item.src, "ref segment": item.candidates[0],
        "ante distance": item.distance, "intrasegmental": item.distance == 0,
        "src pronoun": item.src_word, "ref pronoun": item.ref_word,
        "errors": [{"contrastive": c, "replacement": item.replacement}
                   for c in item.candidates[1:]],
        "phenomenon": item.phenomenon}


def write_contrapro(out_dir: Path, items: list[Item]) -> None:
    """``contrapro.json`` and the extraction script's text/context files."""
    records = [contrapro_record(item, i) for i, item in enumerate(items)]
    _write(out_dir / "contrapro.json", json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    text = {"src": [], "tgt": []}
    context = {"src": [], "tgt": []}
    for item in items:
        # Correct target first, then each contrastive one, as the script does;
        # every text line gets its own copy of the context lines.
        for candidate in item.candidates:
            text["src"].append(item.src)
            text["tgt"].append(candidate)
            context["src"] += item.src_context
            context["tgt"] += item.tgt_context
    for side in ("src", "tgt"):
        _write(out_dir / f"contrapro.text.{side}", _lines(text[side]))
        _write(out_dir / f"contrapro.context.{side}", _lines(context[side]))


def write_manifest(path: Path, manifest: dict) -> None:
    """``manifest.json``, keys in a fixed order."""
    _write(path, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
