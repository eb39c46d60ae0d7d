"""CXMI restricted to chosen target words: P-CXMI over their tokens (Fernandes et al. 2021).

Fernandes et al. (2021) score context usage per target token, P-CXMI(y_t) = log q(y_t | y_<t, x, C) -
log q(y_t | y_<t, x), and average it over the tokens of a phenomenon (e.g. the French pronouns il, elle, ils,
elles). The two rows of each reference sentence (:mod:`ctxmt_cli.analysis.cxmi`) give every scored token's
log-probability with and without context; this module keeps those of the chosen words.

Matching. A reference sentence's SentencePiece pieces are cut into words at the word-boundary marker ``▁``: a
piece that starts with it begins a word (so does the sentence's first piece), the pieces after it up to the next
such piece continue that word. A word's text is its pieces joined with the marker stripped: the word as the model's
tokenizer saw it (after Moses for a tokenizer that uses it, so ``l'homme`` is the two words ``l'`` and
``homme``). A word matches when its text, case-folded, is one of the given words, case-folded (``Il`` at a
sentence start counts as ``il``).

Multi-piece words count whole, once per occurrence: the scored span of a row is the whole current sentence and its
``</s>`` (which is no word), so every piece of a word is scored, and an occurrence's value is the sum of its
pieces' differences. Figures: ``n`` (occurrences), ``tokens`` (their pieces), ``p_cxmi_per_word`` (mean over
occurrences of the summed difference) and ``p_cxmi_per_token`` (summed differences / pieces), in nats, for the
chosen words together, per chosen word, and for every word of the split (``all_words``: restricted to every
word there is, the figures are exactly these). Where no word matched, ``n`` is 0 and the figures are None.
Sentences at a document start have no context and contribute exactly 0, as in the all-token figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ctxmt_cli.errors import OptionError

MARKER = "\u2581"                              # SentencePiece's word-boundary marker
MATCH = ("a word = the SentencePiece pieces from one starting with the word-boundary marker to the next, marker "
         "stripped, case-folded; a multi-piece word counts once per occurrence, the sum of its pieces' differences")


def parse_words(value: str) -> tuple[str, ...]:
    """``"il, elle,ils"`` -> ``("il", "elle", "ils")``; an empty list or word is refused (one line)."""
    return check_words([word.strip() for word in str(value).split(",")], value)


def check_words(words: Sequence[str], given=None) -> tuple[str, ...]:
    """The chosen words, each non-empty and without spaces (a word never holds one), duplicates dropped."""
    shown = ",".join(words) if given is None else given
    fix = "give target words separated by commas, e.g. il,elle,ils,elles"
    if isinstance(words, str) or not words or any(not isinstance(w, str) or not w.strip() for w in words):
        raise OptionError("tokens", shown, f"an empty word or list; {fix}")
    if any(len(w.split()) != 1 for w in words):
        raise OptionError("tokens", shown, f"a word holds a space (the words are matched one by one); {fix}")
    return tuple(dict.fromkeys(w.strip() for w in words))


def words_of(ids: Sequence[int], piece: Callable[[int], str]) -> list[tuple[str, int, int]]:
    """The words of a sentence's token ids: (case-folded text, first token, end token), in order."""
    words: list[list] = []
    for position, token in enumerate(ids):
        text = piece(token)
        if not words or text.startswith(MARKER):
            words.append(["", position, position])
        words[-1][0] += text.replace(MARKER, "")
        words[-1][2] = position + 1
    return [(text.casefold(), start, end) for text, start, end in words]


def word_figures(targets: Sequence[Sequence[int]], deltas: Sequence[np.ndarray], piece: Callable[[int], str],
                 words: Sequence[str]) -> dict:
    """P-CXMI of the chosen ``words`` over the reference sentences ``targets`` (token ids, no ``</s>``), whose
    scored tokens' log-probability differences (context minus none, ``</s>`` last) are ``deltas``."""
    chosen = [w.casefold() for w in check_words(words)]
    occurrences = []                                            # (word, pieces, summed difference)
    for ids, delta in zip(targets, deltas, strict=True):
        if len(delta) != len(ids) + 1:
            raise ValueError(f"{len(delta)} scored tokens for a sentence of {len(ids)} tokens and </s>")
        occurrences += [(text, end - start, float(delta[start:end].sum())) for text, start, end in words_of(ids, piece)]
    matched = [o for o in occurrences if o[0] in chosen]
    return {"words": chosen, **_figures(matched), "by_word": {w: _figures([o for o in matched if o[0] == w])
                                                              for w in chosen},
            "all_words": _figures(occurrences), "match": MATCH}


def _figures(occurrences: list[tuple[str, int, float]]) -> dict:
    """n, tokens and the two averages of some word occurrences (None for both when there are none)."""
    n, tokens = len(occurrences), sum(o[1] for o in occurrences)
    total = sum(o[2] for o in occurrences)
    return {"n": n, "tokens": tokens, "p_cxmi_per_word": total / n if n else None,
            "p_cxmi_per_token": total / tokens if tokens else None}


def render_words(restricted: dict | None) -> list[str]:
    """The printed lines of the restricted figures (none when no words were chosen)."""
    if restricted is None:
        return []
    head = f"P-CXMI on target words {','.join(restricted['words'])}"
    if restricted["n"] == 0:
        return [f"{head}: no target word matched (n = 0 of {restricted['all_words']['n']} words); nothing to average"]
    lines = [f"{head} ({restricted['match']})", f"{'words':<20}{'n':>7}{'tokens':>9}{'per word':>12}{'per token':>12}"]
    for name, fig in {"chosen": restricted, **restricted["by_word"], "all words": restricted["all_words"]}.items():
        values = [f"{fig[k]:.4f}" if fig[k] is not None else "-" for k in ("p_cxmi_per_word", "p_cxmi_per_token")]
        lines.append(f"{name:<20}{fig['n']:>7}{fig['tokens']:>9}{values[0]:>12}{values[1]:>12}")
    return lines
