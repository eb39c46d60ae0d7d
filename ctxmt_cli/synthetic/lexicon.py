"""The two artificial languages of the synthetic benchmark and their translation.

Source language (SVO, adjective before noun, no grammatical gender)::

    sentence := [tam] clause [ko clause] "."
              | "hala" CUE NAME "."          (greeting; CUE sets the register)
              | NAME "du" "to" "."           (VP ellipsis: "NAME does too")
    clause   := arg VT arg [ADV] | arg VI [ADV]
    arg      := NAME | "ze" (it) | "yu" (you) | "ka" [ADJ | CUEADJ] NOUN

Target language (verb-final, adjective after noun, two genders)::

    "tam" -> "poi", "ko" -> "e", clause -> subj [obj] [adv] verb
    "ka" [ADJ] NOUN -> ART(g) NOUN' [ADJ'+suffix(g)]   ART: el (m) / la (f),
    adjective suffix -o (m) / -a (f), g = the lexical gender of NOUN'
    "hala" CUE NAME -> "salve" NAME' CUE'   "NAME du to" -> NAME' "anke" VERB'

Every word maps to one distinct target word, except the four context-dependent
ones, which are resolved by a :class:`DiscourseState` carried through the
document (the rules the benchmark tests):

* ``ze`` -> ``lor`` / ``lei``: gender of the most recently mentioned noun.
* ``yu`` -> ``vos`` / ``tu``: register of the most recent greeting cue
  (``dom``, ``sira`` formal; ``pal``, ``buki`` informal).
* an ambiguous noun has two target nouns; a cue adjective right before it
  picks one, and later bare occurrences repeat the sense picked first.
* ``NAME du to`` restores the most recent transitive verb.

Word forms are fixed (built from a constant seed); target noun genders are
drawn per benchmark seed, balanced between masculine and feminine.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

EOS = "."
SRC_ART, SRC_PRON, SRC_YOU, SRC_AND, SRC_THEN = "ka", "ze", "yu", "ko", "tam"
SRC_DO, SRC_TOO, SRC_HELLO = "du", "to", "hala"
TGT_ART = {"m": "el", "f": "la"}
TGT_PRON = {"m": "lor", "f": "lei"}
TGT_YOU = {"formal": "vos", "informal": "tu"}
TGT_AND, TGT_THEN, TGT_TOO, TGT_HELLO = "e", "poi", "anke", "salve"
ADJ_SUFFIX = {"m": "o", "f": "a"}
# Register cue words: source -> (register, target word).
REGISTER_CUES = {
    "dom": ("formal", "signor"), "sira": ("formal", "dama"),
    "pal": ("informal", "amico"), "buki": ("informal", "compa"),
}
_SRC_FUNCTION = {EOS, SRC_ART, SRC_PRON, SRC_YOU, SRC_AND, SRC_THEN, SRC_DO,
                 SRC_TOO, SRC_HELLO, *REGISTER_CUES}
_TGT_FUNCTION = {EOS, TGT_AND, TGT_THEN, TGT_TOO, TGT_HELLO, *TGT_ART.values(),
                 *TGT_PRON.values(), *TGT_YOU.values(),
                 *(t for _, t in REGISTER_CUES.values())}
# Sizes of the open word classes (source side).
CLASS_SIZES = {"names": 16, "nouns": 48, "ambiguous": 4, "adjectives": 16,
               "transitive": 20, "intransitive": 12, "adverbs": 10}
_LEXICON_SEED = "ctxmt-synthetic-lexicon-v1"


class ContextNeeded(ValueError):
    """A context-dependent word cannot be translated without earlier sentences."""


@dataclass(frozen=True)
class Lexicon:
    """Word classes (source words) and their translations for one seed."""

    names: tuple[str, ...]
    nouns: tuple[str, ...]
    ambiguous: tuple[str, ...]
    adjectives: tuple[str, ...]
    cue_adjectives: tuple[str, ...]
    transitive: tuple[str, ...]
    intransitive: tuple[str, ...]
    adverbs: tuple[str, ...]
    words: dict[str, str]          # one-to-one words (names, nouns, verbs, adverbs)
    adjective_stems: dict[str, str]  # source adjective -> target stem
    senses: dict[str, tuple[str, str]]  # ambiguous noun -> its two target nouns
    cue_sense: dict[str, tuple[str, int]]  # cue adjective -> (ambiguous noun, sense)
    gender: dict[str, str]         # target noun -> "m" / "f"

    def noun_target(self, noun: str, sense: int | None = None) -> str:
        """Target noun for a source noun (``sense`` only for ambiguous nouns)."""
        if noun in self.senses:
            if sense is None:
                raise ContextNeeded(f"sense of {noun!r} unknown")
            return self.senses[noun][sense]
        return self.words[noun]

    def adjective(self, adjective: str, gender: str) -> str:
        """Target adjective agreeing with a noun of ``gender``."""
        return self.adjective_stems[adjective] + ADJ_SUFFIX[gender]

    def source_types(self) -> set[str]:
        """Every source word type the grammar can produce."""
        return set(self.words) | set(self.adjective_stems) | set(self.senses) \
            | _SRC_FUNCTION

    def target_types(self) -> set[str]:
        """Every target word type the grammar can produce."""
        nouns = {t for pair in self.senses.values() for t in pair}
        adjs = {s + x for s in self.adjective_stems.values() for x in ADJ_SUFFIX.values()}
        return set(self.words.values()) | nouns | adjs | _TGT_FUNCTION


def _words(rng: random.Random, count: int, onsets: str, vowels: str,
           shape: tuple[int, int], taken: set[str], coda: str = "") -> list[str]:
    """Draw ``count`` new pseudo-words of 2-3 CV syllables (+ optional coda)."""
    out: list[str] = []
    while len(out) < count:
        n = rng.randint(*shape)
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(n))
        word += rng.choice(coda) if coda else ""
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


def _source_classes(rng: random.Random) -> dict[str, list[str]]:
    taken = set(_SRC_FUNCTION)
    # Source words use their own letters, so no source word is a target word.
    classes = {k: _words(rng, n, "bdgkmnprst", "aiu", (2, 2), taken)
               for k, n in CLASS_SIZES.items()}
    classes["cue_adjectives"] = _words(rng, 2 * CLASS_SIZES["ambiguous"],
                                       "bdgkmnprst", "aiu", (2, 2), taken)
    return classes


def build_lexicon(seed: int) -> Lexicon:
    """Build both languages; word forms are fixed, noun genders depend on ``seed``."""
    rng = random.Random(_LEXICON_SEED)
    src = _source_classes(rng)
    taken = set(_TGT_FUNCTION)
    one_to_one = [w for k in ("names", "nouns", "transitive", "intransitive", "adverbs")
                  for w in src[k]]
    targets = _words(rng, len(one_to_one), "fhjlvwz", "eoy", (2, 3), taken)
    words = dict(zip(one_to_one, targets, strict=True))
    adjective_src = src["adjectives"] + src["cue_adjectives"]
    stems = _words(rng, len(adjective_src), "fhjlvwz", "eiy", (2, 2), taken, coda="nrs")
    sense_words = _words(rng, 2 * len(src["ambiguous"]), "fhjlvwz", "eoy", (2, 3), taken)
    senses = {a: (sense_words[2 * i], sense_words[2 * i + 1])
              for i, a in enumerate(src["ambiguous"])}
    cue_sense = {c: (src["ambiguous"][i // 2], i % 2)
                 for i, c in enumerate(src["cue_adjectives"])}
    return Lexicon(
        names=tuple(src["names"]), nouns=tuple(src["nouns"]),
        ambiguous=tuple(src["ambiguous"]), adjectives=tuple(src["adjectives"]),
        cue_adjectives=tuple(src["cue_adjectives"]),
        transitive=tuple(src["transitive"]), intransitive=tuple(src["intransitive"]),
        adverbs=tuple(src["adverbs"]), words=words,
        adjective_stems=dict(zip(adjective_src, stems, strict=True)), senses=senses,
        cue_sense=cue_sense,
        gender=_genders([words[n] for n in src["nouns"]] + sense_words, seed))


def _genders(target_nouns: list[str], seed: int) -> dict[str, str]:
    """Balanced random genders: exactly half the target nouns are masculine."""
    labels = ["m", "f"] * (len(target_nouns) // 2) + ["m"] * (len(target_nouns) % 2)
    random.Random(f"ctxmt-genders:{seed}").shuffle(labels)
    return dict(zip(target_nouns, labels, strict=True))


@dataclass
class DiscourseState:
    """What earlier sentences established; positions are sentence indices."""

    index: int = 0
    last_noun: tuple[str, int] | None = None   # (target gender, position)
    register: tuple[str, int] | None = None    # (register, position)
    senses: dict[str, tuple[int, int]] = field(default_factory=dict)
    last_verb: tuple[str, int] | None = None   # (source transitive verb, position)
    events: list[tuple[str, int]] = field(default_factory=list)

    def use(self, phenomenon: str, source: tuple | None, what: str):
        """Record a resolved context-dependent word; raise if unresolvable."""
        if source is None:
            raise ContextNeeded(f"{what} needs context")
        self.events.append((phenomenon, self.index - source[-1]))
        return source[0]


def _noun_phrase(toks: list[str], pos: int, lex: Lexicon, st: DiscourseState):
    adj, pos = (toks[pos], pos + 1) if toks[pos] in lex.adjective_stems else (None, pos)
    noun = toks[pos]
    sense = None
    if adj in lex.cue_sense:
        cued, sense = lex.cue_sense[adj]
        if cued != noun:
            raise ValueError(f"cue adjective {adj!r} must precede {cued!r}")
        st.senses[noun] = (sense, st.index)
    elif noun in lex.senses:
        sense = st.use("lex_cohesion", st.senses.get(noun), f"ambiguous {noun!r}")
    elif noun not in lex.nouns:
        raise ValueError(f"expected a noun, got {noun!r}")
    target = lex.noun_target(noun, sense)
    gender = lex.gender[target]
    st.last_noun = (gender, st.index)
    out = [TGT_ART[gender], target] + ([lex.adjective(adj, gender)] if adj else [])
    return out, pos + 1


def _argument(toks: list[str], pos: int, lex: Lexicon, st: DiscourseState):
    word = toks[pos]
    if word in lex.names:
        return [lex.words[word]], pos + 1
    if word == SRC_PRON:
        return [TGT_PRON[st.use("pronoun", st.last_noun, "pronoun")]], pos + 1
    if word == SRC_YOU:
        return [TGT_YOU[st.use("deixis", st.register, "you")]], pos + 1
    if word == SRC_ART:
        return _noun_phrase(toks, pos + 1, lex, st)
    raise ValueError(f"expected a subject or object, got {word!r}")


def _clause(toks: list[str], lex: Lexicon, st: DiscourseState) -> list[str]:
    subj, pos = _argument(toks, 0, lex, st)
    verb = toks[pos] if pos < len(toks) else "<none>"
    obj: list[str] = []
    if verb in lex.transitive:
        obj, pos = _argument(toks, pos + 1, lex, st)
        st.last_verb = (verb, st.index)
    elif verb in lex.intransitive:
        pos += 1
    else:
        raise ValueError(f"expected a verb, got {verb!r}")
    adv = [lex.words[toks[pos]]] if pos < len(toks) and toks[pos] in lex.adverbs else []
    if pos + len(adv) != len(toks):
        raise ValueError(f"unexpected words after the verb: {toks[pos:]}")
    return subj + obj + adv + [lex.words[verb]]


def translate_tokens(toks: list[str], lex: Lexicon, st: DiscourseState) -> list[str]:
    """Translate one tokenised sentence, reading and updating ``st``."""
    if len(toks) < 2 or toks[-1] != EOS:
        raise ValueError(f"a sentence must end with {EOS!r}: {toks}")
    body = toks[:-1]
    if body[0] == SRC_HELLO and len(body) == 3 and body[1] in REGISTER_CUES:
        register, cue = REGISTER_CUES[body[1]]
        st.register = (register, st.index)
        return [TGT_HELLO, lex.words[body[2]], cue, EOS]
    if len(body) == 3 and body[1:] == [SRC_DO, SRC_TOO]:
        verb = st.use("ellipsis_vp", st.last_verb, "ellipsis")
        return [lex.words[body[0]], TGT_TOO, lex.words[verb], EOS]
    out = []
    if body[0] == SRC_THEN:
        out.append(TGT_THEN)
        body = body[1:]
    cut = body.index(SRC_AND) if SRC_AND in body else len(body)
    out += _clause(body[:cut], lex, st)
    if cut < len(body):
        out += [TGT_AND] + _clause(body[cut + 1:], lex, st)
    return out + [EOS]


def translate_sentence(src: str, lexicon: Lexicon,
                       state: DiscourseState | None = None) -> str:
    """Translate one source sentence sentence-by-sentence (fresh state if none).

    Raises :class:`ContextNeeded` when the sentence has a context-dependent
    word that the sentence itself (or ``state``) does not resolve.
    """
    return " ".join(translate_tokens(src.split(), lexicon, state or DiscourseState()))


def translate_document(sentences: list[str], lexicon: Lexicon
                       ) -> list[tuple[str, list[tuple[str, int]]]]:
    """Translate a document; per sentence the target and its (phenomenon, distance) events."""
    state = DiscourseState()
    out = []
    for i, src in enumerate(sentences):
        state.index, state.events = i, []
        out.append((" ".join(translate_tokens(src.split(), lexicon, state)), state.events))
    return out
