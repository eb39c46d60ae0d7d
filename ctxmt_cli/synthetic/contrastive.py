"""Contrastive test items built in mirror pairs.

For antecedent distance d >= 1 a pair is two mini-documents (3 context
sentences + the current one) that share every sentence except one word of the
decisive sentence, d sentences back (another noun of the other gender, the cue
of the other register, the cue adjective of the other sense, another verb).
The shared current source sentence therefore has a different correct
translation in each; each item offers its own correct translation and the
mirror's as the contrastive candidate. A model that ignores context scores the
two candidates the same in both items, so it wins at most one of the two (ties
lose): context-agnostic accuracy is at most 50% by construction.

Distance 0 (pronoun only) is the sentence-level control: the antecedent is in
the current sentence, the pair's two items use nouns of opposite gender, and
the contrastive candidate swaps the pronoun's gender.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ctxmt_cli.synthetic.documents import PHENOMENA, SentenceMaker, make_episode
from ctxmt_cli.synthetic.lexicon import SRC_DO, SRC_PRON, SRC_YOU, TGT_PRON, TGT_YOU, Lexicon, translate_document

DISTANCES: dict[str, tuple[int, ...]] = {
    "pronoun": (0, 1, 2, 3), "deixis": (1, 2, 3),
    "lex_cohesion": (1, 2, 3), "ellipsis_vp": (1, 2, 3)}
CONTEXT_SIZE = 3


@dataclass
class Item:
    """One binary contrastive item; ``candidates[0]`` is the correct one."""

    src_context: list[str]
    src: str
    tgt_context: list[str]
    candidates: list[str]
    phenomenon: str
    distance: int
    pair: int
    src_word: str      # the context-dependent source word
    ref_word: str      # its translation in the correct candidate
    replacement: str   # the word the contrastive candidate has instead

    def to_json(self) -> dict:
        """The generic ``items.jsonl`` record."""
        return {"src_context": self.src_context, "src": self.src,
                "tgt_context": self.tgt_context, "candidates": self.candidates,
                "correct": 0,
                "tags": {"phenomenon": self.phenomenon, "distance": self.distance,
                         "pair": self.pair}}


def _decisive_targets(lex: Lexicon) -> set[str]:
    """Target words that carry a context-dependent decision."""
    senses = {t for pair in lex.senses.values() for t in pair}
    verbs = {lex.words[v] for v in lex.transitive}
    return set(TGT_PRON.values()) | set(TGT_YOU.values()) | senses | verbs


def _key_words(correct: str, contrastive: str, keys: set[str]) -> tuple[str, str]:
    """(correct word, replacement) at the decisive position where the two differ."""
    a, b = correct.split(), contrastive.split()
    diffs = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
    if len(a) != len(b) or not diffs:
        raise RuntimeError(f"candidates must differ in place: {correct!r} / {contrastive!r}")
    at = next((i for i in diffs if a[i] in keys), diffs[0])
    return a[at], b[at]


def _swap_pronoun(target: str) -> str:
    """The same target with the pronoun's gender flipped (distance-0 contrast)."""
    flip = {TGT_PRON["m"]: TGT_PRON["f"], TGT_PRON["f"]: TGT_PRON["m"]}
    return " ".join(flip.get(w, w) for w in target.split())


def _source_word(phenomenon: str, src: str, lex: Lexicon) -> str:
    fixed = {"pronoun": SRC_PRON, "deixis": SRC_YOU, "ellipsis_vp": SRC_DO}
    if phenomenon in fixed:
        return fixed[phenomenon]
    return next(w for w in src.split() if w in lex.senses)


def _mirror_documents(lex: Lexicon, rng: random.Random, phenomenon: str,
                      distance: int) -> list[list[str]]:
    """The two 4-sentence source documents of one mirror pair."""
    maker = SentenceMaker(lex, rng)
    ambiguous = rng.choice(lex.ambiguous) if phenomenon == "lex_cohesion" else None
    episode = make_episode(maker, phenomenon, distance, ambiguous)
    # Older padding may hold distractors (other nouns, other verbs): the rules
    # pick the most recent antecedent, which is the decisive sentence.
    padding = [maker.plain() for _ in range(CONTEXT_SIZE - distance)]
    mirrored = list(episode.sentences[0])
    mirrored[episode.slot] = episode.alternative
    docs = [padding + episode.sentences, padding + [mirrored] + episode.sentences[1:]]
    return [[" ".join(toks) for toks in doc] for doc in docs]


def mirror_pair(lex: Lexicon, rng: random.Random, phenomenon: str, distance: int,
                pair: int) -> list[Item]:
    """Two items of one (phenomenon, distance) cell sharing ``pair``."""
    docs = _mirror_documents(lex, rng, phenomenon, distance)
    translated = [translate_document(doc, lex) for doc in docs]
    for tr in translated:  # guard the construction: one event, at the right distance
        if tr[CONTEXT_SIZE][1] != [(phenomenon, distance)]:
            raise RuntimeError(f"bad {phenomenon} item: {tr[CONTEXT_SIZE][1]}")
    currents = [tr[CONTEXT_SIZE][0] for tr in translated]
    if distance == 0:
        contrasts = [_swap_pronoun(t) for t in currents]
    else:
        contrasts = [currents[1], currents[0]]
    keys = _decisive_targets(lex)
    items = []
    for doc, tr, correct, contrast in zip(docs, translated, currents, contrasts, strict=True):
        ref_word, replacement = _key_words(correct, contrast, keys)
        items.append(Item(
            src_context=doc[:CONTEXT_SIZE], src=doc[CONTEXT_SIZE],
            tgt_context=[t for t, _ in tr[:CONTEXT_SIZE]], candidates=[correct, contrast],
            phenomenon=phenomenon, distance=distance, pair=pair,
            src_word=_source_word(phenomenon, doc[CONTEXT_SIZE], lex),
            ref_word=ref_word, replacement=replacement))
    return items


def make_items(lex: Lexicon, seed: int, per_cell: int = 100) -> list[Item]:
    """All contrastive items: ``per_cell`` (rounded up to even) per phenomenon x distance."""
    items: list[Item] = []
    pair = 0
    for phenomenon in PHENOMENA:
        for distance in DISTANCES[phenomenon]:
            for k in range((per_cell + 1) // 2):
                rng = random.Random(f"ctxmt-contrastive:{seed}:{phenomenon}:{distance}:{k}")
                items += mirror_pair(lex, rng, phenomenon, distance, pair)
                pair += 1
    return items
