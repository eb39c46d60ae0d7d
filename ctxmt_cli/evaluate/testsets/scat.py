"""SCAT, "Supporting Context for Ambiguous Translations" (Yin, Fernandes, Pruthi,
Chaudhary, Martins & Neubig, ACL 2021; github.com/neulab/contextual-mt,
``data/scat``), En->Fr, built on the OpenSubtitles pronoun set of Lopes et al.
(2020).

Format: four line-aligned UTF-8 files per split (train 11471, valid 145,
test 1000 examples)::

    highlighted.{split}.en / .fr                  the current sentence
    highlighted.{split}.context.en / .context.fr  its preceding context, on ONE line

* The ambiguous pronoun is wrapped in ``<p>...</p>`` on both sides. The
  publisher marked every occurrence of the pronoun's *string*, so markers
  also sit inside words (``w<p>it</p>h``, ``diffic<p>il</p>es``) and a line
  can hold several ``<p>`` (all the same pronoun, lower-cased). Inside
  ``<p>`` only il/elle/ils/elles occur, first letter upper-cased at times.
* Words that human translators marked as supporting context are wrapped in
  ``<hon>...<hoff>`` (inserted as ``" <hon>"`` and ``"<hoff> "``), in the
  context and in the current sentence. Overlapping highlights were inserted
  into each other (``<ho <hon>ff>``); removing ``" <hon>"``/``"<hoff> "``
  repeatedly until none is left restores the text (a broken remnant such as
  ``<h off>``, 3 lines in all, becomes a space), then runs of spaces are
  collapsed. Every marker is removed before scoring.
* Context: the publisher joins all context sentences of an example with a
  plain space; there is no separator (no ``</s>``, ``<brk>``, ``_eos``, tab),
  and subtitle lines hold several sentences of their own, so punctuation does
  not recover the segments. The whole line is therefore ONE context sentence
  (an empty line, or one with only an empty highlight, means no context).

Candidates: ``[correct, contrastive]`` (correct first, ``tie_rule="strict"``).
The contrastive sentence swaps every whole-word ``<p>`` pronoun for the other
gender (il<->elle, ils<->elles), keeping its capitalisation (Il->Elle, IL->ELLE);
since all marked occurrences are the same string and the set does not say
which one the annotation is about, all are swapped. Markers inside words are
not pronouns: they are only removed. Elision is kept grammatical: ``s'il(s)``
becomes ``si elle(s)`` and ``si elle(s)`` becomes ``s'il(s)``. Stressed uses
(``avec elle``) are swapped like the rest, as the Lopes et al. scripts do.

Tags: ``phenomenon`` ("pronoun"), ``pronoun`` (the correct French pronoun,
lower-cased; groupings ``("pronoun",)``), ``gender`` (its gender, masculine or
feminine: the class, see below), ``has_highlight`` (any non-empty ``<hon>``
marker in the example's four lines) and ``swapped`` (how many pronouns the
contrastive sentence changes).

Class (balanced accuracy): the correct pronoun's gender, not the pronoun. The
choice between the two candidates is a choice of gender, and the test split
has no item whose correct pronoun is ``ils`` (il 322 / elle 298 / elles 377):
with the pronouns as classes, a model that always picks the masculine would
score 1/3 and one that always picks the feminine 2/3 balanced accuracy, the
priors again; with the genders as classes both score 1/2.

A line with no whole-word marked pronoun (the marker is missing, or only sits
inside another word) has no contrastive candidate. By default such examples
are left out, logged as a warning and listed in :attr:`ScatTestSet.skipped`
(line number, reason, French text); ``on_unswappable="error"`` raises instead.
Real files: test 3, valid 0, train 65 such lines.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.data.text_input import text_problem
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet

log = logging.getLogger(__name__)

SWAP = {"il": "elle", "elle": "il", "ils": "elles", "elles": "ils"}
GENDER = {"il": "masculine", "ils": "masculine", "elle": "feminine", "elles": "feminine"}
SUFFIXES = (".context.en", ".context.fr", ".en", ".fr")
DOWNLOAD = "github.com/neulab/contextual-mt (data/scat)"
_HIGHLIGHT = re.compile(r" ?<hon>|<hoff> ?")
_FRAGMENT = re.compile(r"<[hofn\s]*>")
_EMPTY_HIGHLIGHT = re.compile(r"<hon>\s*<hoff>")
_MARKED = re.compile(r"<p>(.*?)</p>")
_SPACES = re.compile(r" {2,}")
_S_ELIDED = re.compile(r"(?<!\w)([sS])['’´]$")
_SI = re.compile(r"(?<!\w)([sS])i $")


@dataclass
class ScatTestSet(TestSet):
    """A SCAT split; ``skipped`` lists the examples left out for lack of a swappable pronoun.

    Each entry: ``{"line": 1-based line number, "reason": str, "fr": French text without markers}``.
    """

    __test__ = False

    skipped: list = field(default_factory=list)


def _until_stable(pattern: re.Pattern, text: str, replacement: str) -> str:
    """``pattern`` replaced in ``text`` again and again until nothing changes."""
    while True:
        replaced = pattern.sub(replacement, text)
        if replaced == text:
            return text
        text = replaced


def strip_highlights(text: str) -> str:
    """``text`` without ``<hon>``/``<hoff>`` markers, nested/corrupted insertions included.

    Removing ``" <hon>"``/``"<hoff> "`` until none is left undoes the nested insertions; what
    still looks like a broken marker (only h/o/f/n/spaces between ``<`` and ``>``, 3 lines in
    the real files) becomes a space.
    """
    return _until_stable(_FRAGMENT, _until_stable(_HIGHLIGHT, text, ""), " ")


def strip_markers(text: str) -> str:
    """``text`` without any SCAT marker, runs of spaces collapsed, stripped."""
    return _SPACES.sub(" ", strip_highlights(text).replace("<p>", "").replace("</p>", "")).strip()


def has_highlight(*texts: str) -> bool:
    """Whether any of ``texts`` has a highlight marker other than an empty ``<hon><hoff>``."""
    return any("<ho" in _EMPTY_HIGHLIGHT.sub("", t) for t in texts)


def _like(word: str, new: str) -> str:
    """``new`` with the capitalisation of ``word`` (all caps, first capital or lower)."""
    if len(word) > 1 and word.isupper():
        return new.upper()
    return new[0].upper() + new[1:] if word[:1].isupper() else new


def _elide(before: str, new: str) -> str:
    """``before`` with its trailing ``s'``/``si `` made to agree with the pronoun ``new``."""
    if new[0] in "eE":
        return _S_ELIDED.sub(lambda m: m.group(1) + "i ", before)
    return _SI.sub(lambda m: m.group(1) + "'", before)


def _whole_word(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is not glued to letters or digits on either side."""
    return not (start > 0 and text[start - 1].isalnum()) and not (end < len(text) and text[end].isalnum())


def swap_pronouns(line: str) -> tuple[str, str | None, list[str]]:
    """``(correct, contrastive, pronouns)`` for a marked French line.

    ``contrastive`` is None where no whole-word marked pronoun can be swapped;
    ``pronouns`` are the swapped pronouns as they appear in the line.
    """
    text = strip_highlights(line)
    correct, contrastive, pronouns, pos = [], "", [], 0
    for m in _MARKED.finditer(text):
        before = text[pos:m.start()]
        correct.append(before + m.group(1))
        contrastive += before
        word = m.group(1)
        if word.lower() in SWAP and _whole_word(text, m.start(), m.end()):
            new = _like(word, SWAP[word.lower()])
            contrastive = _elide(contrastive, new) + new
            pronouns.append(word)
        else:
            contrastive += word
        pos = m.end()
    correct.append(text[pos:])
    contrastive += text[pos:]
    clean = strip_markers("".join(correct))
    return clean, strip_markers(contrastive) if pronouns else None, pronouns


def read_scat(path: Path, **options) -> list[TestSet]:
    """The SCAT split at ``path`` (folder, ``.../highlighted.SPLIT`` prefix or one of its files).

    Options: ``split`` (default ``"test"``, used when ``path`` is a folder),
    ``on_unswappable`` (``"skip"``, the default, or ``"error"``); others are
    ignored. Returns one :class:`ScatTestSet` named ``scat_SPLIT``.
    """
    split = options.get("split") or "test"
    mode = options.get("on_unswappable", "skip")
    if mode not in ("skip", "error"):
        raise CtxmtError(f"on_unswappable must be 'skip' or 'error', not {mode!r}")
    prefix = _prefix(Path(path), split)
    files = [Path(f"{prefix}{s}") for s in (".en", ".fr", ".context.en", ".context.fr")]
    src, tgt, src_ctx, tgt_ctx = (_read_lines(f) for f in files)
    counts = {f.name: len(lines) for f, lines in zip(files, (src, tgt, src_ctx, tgt_ctx), strict=True)}
    if len(set(counts.values())) != 1:
        listed = ", ".join(f"{name}: {n}" for name, n in counts.items())
        raise CtxmtError(f"SCAT files of {prefix} are not line-aligned ({listed}); re-download them from {DOWNLOAD}")
    name = prefix.name[len("highlighted."):] if prefix.name.startswith("highlighted.") else prefix.name
    testset = ScatTestSet(name=f"scat_{name}", kind="scat", items=[], tie_rule="strict",
                          groupings=("pronoun",), classes="gender", files=files, src_lang="en", tgt_lang="fr")
    for i, lines in enumerate(zip(src, tgt, src_ctx, tgt_ctx, strict=True)):
        item = scat_item(*lines)
        if item is not None:
            testset.items.append(item)
            continue
        reason = "no whole-word il/elle/ils/elles inside <p>...</p> to swap"
        if mode == "error":
            raise CtxmtError(f"{files[1]}, line {i + 1}: {reason}; mark the pronoun as <p>il</p> "
                             f"or read with on_unswappable='skip'")
        testset.skipped.append({"line": i + 1, "reason": reason, "fr": strip_markers(lines[1])})
    if testset.skipped:
        shown = ", ".join(str(s["line"]) for s in testset.skipped[:10])
        more = " ..." if len(testset.skipped) > 10 else ""
        log.warning("%s: %d of %d examples have no swappable pronoun and are left out (lines %s%s)",
                    files[1], len(testset.skipped), len(src), shown, more)
    return [testset]


def scat_item(src: str, tgt: str, src_ctx: str, tgt_ctx: str) -> ContrastiveItem | None:
    """One example as a :class:`ContrastiveItem`, or None when it has no swappable pronoun."""
    correct, contrastive, pronouns = swap_pronouns(tgt)
    if contrastive is None:
        return None
    source_context, target_context = strip_markers(src_ctx), strip_markers(tgt_ctx)
    tags = {"phenomenon": "pronoun", "pronoun": pronouns[0].lower(), "gender": GENDER[pronouns[0].lower()],
            "has_highlight": has_highlight(src, tgt, src_ctx, tgt_ctx), "swapped": len(pronouns)}
    return ContrastiveItem(src_context=[source_context] if source_context else [], src=strip_markers(src),
                           tgt_context=[target_context] if target_context else [],
                           candidates=[correct, contrastive], correct=0, tags=tags)


def _prefix(path: Path, split: str) -> Path:
    """The ``highlighted.SPLIT`` prefix that ``path`` names."""
    if path.is_dir():
        return path / f"highlighted.{split}"
    for suffix in SUFFIXES:
        if path.name.endswith(suffix) and path.is_file():
            return path.with_name(path.name[: -len(suffix)])
    return path


def _read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file (split on "\\n" only: the text may hold other line-break characters)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CtxmtError(f"SCAT file missing: {path} (download data/scat from {DOWNLOAD}; it needs "
                         f"highlighted.SPLIT.{{en,fr,context.en,context.fr}})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CtxmtError(f"cannot read {path}: {exc} (it must be a UTF-8 text file)") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        problem = text_problem(line)
        if problem is not None:
            raise CtxmtError(f"{path}:{number}: not text: {problem}; re-download it from {DOWNLOAD}")
    return [line.rstrip("\r") for line in lines]
