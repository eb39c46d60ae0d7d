"""Documents of the synthetic benchmark: sentence shapes, phenomenon episodes, splits.

A document (6-12 sentences) is a sequence of blocks. A block is either one
plain sentence (no context-dependent word) or an *episode* of one phenomenon at
antecedent distance ``d``: the decisive sentence, ``d - 1`` intervening
sentences, then the sentence whose translation depends on the decisive one.
Intervening sentences never carry information about the phenomenon (no noun
and no transitive verb for pronouns and ellipsis, no cue or ``yu`` for deixis,
not the ambiguous noun for lexical cohesion), so the antecedent distance is
exactly ``d``. Outside episodes a plain slot may repeat ``yu`` or an already
disambiguated ambiguous noun when an earlier occurrence is at most 3 sentences
back: the distance to the cue can then exceed 3 while a 3-sentence window still
shows the answer in its target context.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.synthetic.lexicon import (
    EOS,
    REGISTER_CUES,
    SRC_AND,
    SRC_ART,
    SRC_DO,
    SRC_HELLO,
    SRC_PRON,
    SRC_THEN,
    SRC_TOO,
    SRC_YOU,
    Lexicon,
    translate_document,
)

PHENOMENA: tuple[str, ...] = ("pronoun", "deixis", "lex_cohesion", "ellipsis_vp")
MIN_LEN, MAX_LEN = 4, 10          # tokens per sentence, final "." included
DOC_LEN = (6, 12)
# Block weights: tuned so that roughly a third of all sentences carry a
# context-dependent word while most stay translatable sentence by sentence.
BLOCK_WEIGHTS = {"plain": 0.10, "pronoun": 0.22, "deixis": 0.18,
                 "lex_cohesion": 0.17, "ellipsis_vp": 0.21}
TRAIN_DISTANCES = {"pronoun": (0, 1, 2, 3), "deixis": (1, 2, 3),
                   "lex_cohesion": (1, 2, 3), "ellipsis_vp": (1, 2, 3)}
REPEAT_PROB = 0.4  # chance that a plain slot repeats yu / an ambiguous noun

# A document: one (source, target, [(phenomenon, distance), ...]) per sentence.
Document = list[tuple[str, str, list[tuple[str, int]]]]


@dataclass
class Episode:
    """Sentences of one phenomenon episode, decisive sentence first, current last."""

    sentences: list[list[str]]
    slot: int          # token index, in sentences[0], of the decisive word
    alternative: str   # decisive word that flips the current translation


class SentenceMaker:
    """Draws source sentences (token lists) of the shapes the episodes need."""

    def __init__(self, lexicon: Lexicon, rng: random.Random):
        self.lex, self.rng = lexicon, rng

    def _opt(self, words: tuple[str, ...], p: float) -> list[str]:
        return [self.rng.choice(words)] if self.rng.random() < p else []

    def _fit(self, make):
        """Redraw ``make()`` until the sentence length lies in [MIN_LEN, MAX_LEN]."""
        while True:
            made = make()
            toks = made[0] if isinstance(made, tuple) else made
            if MIN_LEN <= len(toks) <= MAX_LEN:
                return made

    def noun_phrase(self, noun: str | None = None) -> list[str]:
        """``ka [ADJ] NOUN`` with a regular (never ambiguous) noun."""
        noun = noun or self.rng.choice(self.lex.nouns)
        return [SRC_ART, *self._opt(self.lex.adjectives, 0.4), noun]

    def argument(self) -> list[str]:
        """A name or a noun phrase (subject or object)."""
        if self.rng.random() < 0.55:
            return [self.rng.choice(self.lex.names)]
        return self.noun_phrase()

    def clause(self) -> list[str]:
        """A transitive or intransitive clause without context-dependent words."""
        lex = self.lex
        if self.rng.random() < 0.6:
            return [*self.argument(), self.rng.choice(lex.transitive),
                    *self.argument(), *self._opt(lex.adverbs, 0.4)]
        return [*self.argument(), self.rng.choice(lex.intransitive),
                *self._opt(lex.adverbs, 0.6)]

    def plain(self) -> list[str]:
        """A sentence without any context-dependent word."""
        def make():
            toks = self._opt((SRC_THEN,), 0.15) + self.clause()
            if self.rng.random() < 0.15:
                toks += [SRC_AND, *self.clause()]
            return toks + [EOS]
        return self._fit(make)

    def filler(self) -> list[str]:
        """A sentence with no noun and no transitive verb (pronoun/ellipsis gaps)."""
        lex, rng = self.lex, self.rng

        def make():
            toks = self._opt((SRC_THEN,), 0.2) + [rng.choice(lex.names),
                                                  rng.choice(lex.intransitive)]
            if rng.random() < 0.25:
                toks += [SRC_AND, rng.choice(lex.names), rng.choice(lex.intransitive)]
            return toks + self._opt(lex.adverbs, 0.7) + [EOS]
        return self._fit(make)

    def noun_last(self, noun: str) -> tuple[list[str], int]:
        """A sentence whose last noun is ``noun`` (a pronoun antecedent)."""
        def make():
            if self.rng.random() < 0.7:
                toks = [*self.argument(), self.rng.choice(self.lex.transitive),
                        *self.noun_phrase(noun)]
            else:
                toks = [*self._opt((SRC_THEN,), 0.2), *self.noun_phrase(noun),
                        self.rng.choice(self.lex.intransitive)]
            # the slot is the LAST mention: the subject may be the same noun, and the
            # mirror must change the most recent one (the antecedent)
            return toks + self._opt(self.lex.adverbs, 0.4) + [EOS], len(toks) - 1 - toks[::-1].index(noun)
        return self._fit(make)

    def pronoun_sentence(self) -> list[str]:
        """A noun-free sentence with ``ze`` as subject or object."""
        lex, rng = self.lex, self.rng

        def make():
            if rng.random() < 0.5:
                toks = [*self._opt((SRC_THEN,), 0.3), SRC_PRON, rng.choice(lex.intransitive)]
            else:
                toks = [rng.choice(lex.names), rng.choice(lex.transitive), SRC_PRON]
            return toks + self._opt(lex.adverbs, 0.6) + [EOS]
        return self._fit(make)

    def pronoun_same(self, noun: str) -> tuple[list[str], int]:
        """``ze`` with its antecedent ``noun`` earlier in the same sentence."""
        lex, rng = self.lex, self.rng

        def make():
            if rng.random() < 0.5:
                toks = [rng.choice(lex.names), rng.choice(lex.transitive),
                        *self.noun_phrase(noun), SRC_AND, SRC_PRON,
                        rng.choice(lex.intransitive), *self._opt(lex.adverbs, 0.4)]
            else:
                toks = [*self.noun_phrase(noun), rng.choice(lex.intransitive), SRC_AND,
                        rng.choice(lex.names), rng.choice(lex.transitive), SRC_PRON]
            return toks + [EOS], toks.index(noun)
        return self._fit(make)

    def you_sentence(self) -> list[str]:
        """A sentence with ``yu`` (source "you") as subject or object."""
        lex, rng = self.lex, self.rng

        def make():
            shape = rng.random()
            if shape < 0.45:
                toks = [SRC_YOU, rng.choice(lex.transitive), *self.argument()]
            elif shape < 0.75:
                toks = [*self._opt((SRC_THEN,), 0.3), SRC_YOU, rng.choice(lex.intransitive)]
            else:
                toks = [*self.argument(), rng.choice(lex.transitive), SRC_YOU]
            return toks + self._opt(lex.adverbs, 0.5) + [EOS]
        return self._fit(make)

    def ambiguous_sentence(self, noun: str, cue: str | None) -> tuple[list[str], int]:
        """A sentence with ambiguous ``noun``, preceded by ``cue`` when given."""
        lex, rng = self.lex, self.rng

        def make():
            adj = [cue] if cue else self._opt(lex.adjectives, 0.3)
            phrase = [SRC_ART, *adj, noun]
            if rng.random() < 0.6:
                toks = [*self.argument(), rng.choice(lex.transitive), *phrase]
            else:
                toks = [*phrase, rng.choice(lex.intransitive)]
            return toks + self._opt(lex.adverbs, 0.4) + [EOS], toks.index(noun) - 1
        return self._fit(make)

    def verb_sentence(self, verb: str) -> tuple[list[str], int]:
        """A sentence whose (only) transitive verb is ``verb``: an ellipsis antecedent."""
        def make():
            toks = [*self._opt((SRC_THEN,), 0.2), *self.argument(), verb,
                    *self.argument(), *self._opt(self.lex.adverbs, 0.4)]
            return toks + [EOS], toks.index(verb)
        return self._fit(make)


def _other(rng: random.Random, pool, reject) -> str:
    """Draw from ``pool`` until ``reject`` is false (pool always has a match)."""
    while True:
        word = rng.choice(pool)
        if not reject(word):
            return word


def _decisive(maker: SentenceMaker, phenomenon: str, ambiguous: str | None):
    """Decisive sentence, slot and the mirror's decisive word for one phenomenon."""
    lex, rng = maker.lex, maker.rng
    if phenomenon == "pronoun":
        noun = rng.choice(lex.nouns)
        gender = lex.gender[lex.words[noun]]
        alt = _other(rng, lex.nouns, lambda n: lex.gender[lex.words[n]] == gender)
        return (*maker.noun_last(noun), alt)
    if phenomenon == "deixis":
        cue = rng.choice(sorted(REGISTER_CUES))
        alt = _other(rng, sorted(REGISTER_CUES),
                     lambda c: REGISTER_CUES[c][0] == REGISTER_CUES[cue][0])
        return [SRC_HELLO, cue, rng.choice(lex.names), EOS], 1, alt
    if phenomenon == "lex_cohesion":
        sense = rng.randrange(2)
        cues = {lex.cue_sense[c][1]: c for c in lex.cue_adjectives
                if lex.cue_sense[c][0] == ambiguous}
        cue, alt = cues[sense], cues[1 - sense]
        return (*maker.ambiguous_sentence(ambiguous, cue), alt)
    verb = rng.choice(lex.transitive)
    return (*maker.verb_sentence(verb), _other(rng, lex.transitive, lambda v: v == verb))


def make_episode(maker: SentenceMaker, phenomenon: str, distance: int,
                 ambiguous: str | None = None) -> Episode:
    """One episode; ``ambiguous`` (the noun) is required for lexical cohesion."""
    if phenomenon == "pronoun" and distance == 0:
        noun = maker.rng.choice(maker.lex.nouns)
        gender = maker.lex.gender[maker.lex.words[noun]]
        alt = _other(maker.rng, maker.lex.nouns,
                     lambda n: maker.lex.gender[maker.lex.words[n]] == gender)
        toks, slot = maker.pronoun_same(noun)
        return Episode([toks], slot, alt)
    first, slot, alt = _decisive(maker, phenomenon, ambiguous)
    gap = maker.filler if phenomenon in ("pronoun", "ellipsis_vp") else maker.plain
    middle = [gap() for _ in range(distance - 1)]
    if phenomenon == "pronoun":
        last = maker.pronoun_sentence()
    elif phenomenon == "deixis":
        last = maker.you_sentence()
    elif phenomenon == "lex_cohesion":
        last = maker.ambiguous_sentence(ambiguous, None)[0]
    else:
        last = [maker.rng.choice(maker.lex.names), SRC_DO, SRC_TOO, EOS]
    return Episode([first, *middle, last], slot, alt)


@dataclass
class _DocState:
    """Where the document last showed the register and each ambiguous noun."""

    deixis_at: int | None = None
    ambiguous_at: dict[str, int] | None = None


def _repeat(maker: SentenceMaker, st: _DocState, position: int) -> list[str] | None:
    """Maybe repeat ``yu`` or a disambiguated noun seen at most 3 sentences back."""
    options: list[str] = []
    if st.deixis_at is not None and position - st.deixis_at <= 3:
        options.append(SRC_YOU)
    options += [a for a, p in sorted(st.ambiguous_at.items()) if position - p <= 3]
    if not options or maker.rng.random() >= REPEAT_PROB:
        return None
    choice = maker.rng.choice(options)
    if choice == SRC_YOU:
        st.deixis_at = position
        return maker.you_sentence()
    st.ambiguous_at[choice] = position
    return maker.ambiguous_sentence(choice, None)[0]


def _block(maker: SentenceMaker, st: _DocState, position: int, room: int):
    """Draw the next block: an episode when one fits, else a plain sentence."""
    rng = maker.rng
    kind = rng.choices(list(BLOCK_WEIGHTS), weights=list(BLOCK_WEIGHTS.values()))[0]
    ambiguous = None
    if kind == "lex_cohesion":
        # The cue must mark the noun's first occurrence: use a fresh noun.
        free = [a for a in maker.lex.ambiguous if a not in st.ambiguous_at]
        ambiguous = rng.choice(free) if free else None
        kind = kind if free else "plain"
    if kind == "deixis" and st.deixis_at is not None:
        kind = "plain"  # one register per document
    if kind != "plain":
        distance = rng.choice(TRAIN_DISTANCES[kind])
        if distance + 1 <= room:
            sentences = make_episode(maker, kind, distance, ambiguous).sentences
            last = position + len(sentences) - 1
            if kind == "deixis":
                st.deixis_at = last
            elif kind == "lex_cohesion":
                st.ambiguous_at[ambiguous] = last
            return sentences
    return [_repeat(maker, st, position) or maker.plain()]


def make_document(lexicon: Lexicon, rng: random.Random) -> Document:
    """One document of 6-12 sentences with its translation and phenomenon events."""
    maker = SentenceMaker(lexicon, rng)
    length = rng.randint(*DOC_LEN)
    state = _DocState(ambiguous_at={})
    sentences: list[list[str]] = []
    while len(sentences) < length:
        sentences += _block(maker, state, len(sentences), length - len(sentences))
    src = [" ".join(toks) for toks in sentences]
    return [(s, t, ev) for s, (t, ev) in zip(src, translate_document(src, lexicon), strict=True)]


def split_sizes(docs: int) -> dict[str, int]:
    """Documents per split: ~90/5/5, valid and test at least 20 each."""
    held = max(20, round(0.05 * docs))
    if docs - 2 * held < 1:
        raise CtxmtError(f"the synthetic benchmark needs at least {2 * held + 1} "
                         f"documents (got docs={docs}); raise {option('docs')}")
    return {"train": docs - 2 * held, "valid": held, "test": held}


def make_corpus(lexicon: Lexicon, seed: int, docs: int) -> dict[str, list[Document]]:
    """All splits; document ``i`` has its own sub-seed, so splits are disjoint draws."""
    out: dict[str, list[Document]] = {}
    start = 0
    for split, count in split_sizes(docs).items():
        out[split] = [make_document(lexicon, random.Random(f"ctxmt-doc:{seed}:{i}"))
                      for i in range(start, start + count)]
        start += count
    return out
