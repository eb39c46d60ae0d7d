"""Voita, Sennrich & Titov (2019) En->Ru consistency test sets ("When a Good
Translation is Wrong in Context", ACL 2019; github.com/lena-voita/
good-translation-wrong-in-context, folder ``consistency_testsets/``).

Format: one JSON file per set, a list of groups::

    {"src": "s1 _eos s2 _eos s3 _eos s4",          # 4 English sentences
     "dst": ["t1 _eos t2 _eos t3 _eos t4", ...],    # candidate translations of the whole group
     "true_ind": 0,                                  # index of the correct candidate in dst
     "ctx_dist": 2}                                  # distance to the deciding context sentence

The text is already Moses-tokenized and lower/true-cased (``pretokenized``).
Sets: ``deixis_test`` (2500 groups), ``lex_cohesion_test`` (1500),
``ellipsis_infl`` (500), ``ellipsis_vp`` (500); dev: ``deixis_dev``,
``lex_cohesion_dev``. The publisher's ``scoring_data/NAME.dst`` flattens the
candidates one per line in json order, which is exactly the order of
:func:`~ctxmt_cli.evaluate.testsets.base.scores_lines`.

The publisher's ``scripts/evaluate_consistency.py`` reads one loss per line,
cuts the lines into groups of ``len(dst)``, takes ``np.argmin`` per group
(ties -> the first index) and counts the group correct when that equals
``true_ind``; it also reports ``ctx_dist`` 1-3 for deixis and lexical
cohesion. Hence ``tie_rule="first_index"`` here. Note that a few published
ellipsis groups list the correct translation twice (a later ``dst`` entry
equal to ``dst[true_ind]``); under the publisher's rule such a tie is won.

The synthetic benchmark (``ctxmt prepare synthetic``) writes the same layout
to ``raw/contrastive/voita/{pronoun,deixis,lex_cohesion,ellipsis_vp}.json``
with an extra ``"phenomenon"`` key per group; those files and that folder are
read too (no fixed language pair, not pre-tokenized).
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxmt_cli.data.text_input import JsonInputError, load_json
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet
from ctxmt_cli.paths import check_input_file

EOS = "_eos"
TEST_SETS = ("deixis_test", "lex_cohesion_test", "ellipsis_infl", "ellipsis_vp")
DEV_SETS = ("deixis_dev", "lex_cohesion_dev")
SYNTHETIC_SETS = ("pronoun", "deixis", "lex_cohesion", "ellipsis_vp")
PHENOMENON = {"deixis_test": "deixis", "deixis_dev": "deixis",
              "lex_cohesion_test": "lex_cohesion", "lex_cohesion_dev": "lex_cohesion",
              "ellipsis_infl": "ellipsis_infl", "ellipsis_vp": "ellipsis_vp"}
DOWNLOAD = "github.com/lena-voita/good-translation-wrong-in-context (consistency_testsets/)"


def split_group(text: str) -> list[str]:
    """The sentences of a ``" _eos "``-joined group, stripped."""
    return [part.strip() for part in text.split(EOS)]


def read_voita(path: Path, **options) -> list[TestSet]:
    """Voita-layout sets from one JSON file or a folder of them.

    A folder is the publisher's ``consistency_testsets/`` (the four test sets
    in the order deixis, lexical cohesion, inflection ellipsis, VP ellipsis;
    ``dev=True`` gives ``deixis_dev`` and ``lex_cohesion_dev`` instead) or the
    synthetic benchmark's ``contrastive/voita/`` folder. Other options are
    ignored (they belong to other readers). Raises :class:`CtxmtError` on
    missing files, malformed JSON or inconsistent groups.
    """
    path = Path(path)
    if path.is_dir():
        return [read_voita_file(f) for f in _folder_files(path, bool(options.get("dev", False)))]
    check_input_file(path, "Voita test set", f"give a .json file or the consistency_testsets/ folder from {DOWNLOAD}")
    return [read_voita_file(path)]


def _folder_files(folder: Path, dev: bool) -> list[Path]:
    """The files of a publisher or synthetic folder, in the fixed order."""
    names = DEV_SETS if dev else TEST_SETS
    publisher_only = [n for n in TEST_SETS + DEV_SETS if n not in SYNTHETIC_SETS]  # ellipsis_vp is in both
    if any((folder / f"{n}.json").is_file() for n in publisher_only):
        missing = [f"{n}.json" for n in names if not (folder / f"{n}.json").is_file()]
        if missing:
            raise CtxmtError(f"Voita folder {folder} lacks {', '.join(missing)}: download the complete "
                             f"consistency_testsets/ folder from {DOWNLOAD}")
        return [folder / f"{n}.json" for n in names]
    synthetic = [folder / f"{n}.json" for n in SYNTHETIC_SETS if (folder / f"{n}.json").is_file()]
    if synthetic and not dev:
        return synthetic
    wanted = ", ".join(f"{n}.json" for n in names)
    raise CtxmtError(f"no Voita test set in {folder}: expected {wanted} (from {DOWNLOAD}) "
                     f"or the synthetic benchmark's contrastive/voita/ files")


def read_voita_file(path: Path) -> TestSet:
    """One Voita-layout JSON file as a :class:`TestSet` named after its stem."""
    groups = _load_json(path)
    default = PHENOMENON.get(path.stem, path.stem)
    items = [group_item(group, path, i, default) for i, group in enumerate(groups)]
    synthetic = any("phenomenon" in group for group in groups)
    return TestSet(name=path.stem, kind="voita", items=items, tie_rule="first_index",
                   groupings=("ctx_dist",), classes="phenomenon/ctx_dist", files=[path],
                   src_lang=None if synthetic else "en", tgt_lang=None if synthetic else "ru",
                   pretokenized=not synthetic)


def _load_json(path: Path) -> list:
    """The list of groups in ``path``; one-line errors for unreadable or malformed files."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CtxmtError(f"Voita test set not found: {path} (download it from {DOWNLOAD})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CtxmtError(f"cannot read {path}: {exc} (it must be a UTF-8 JSON file)") from None
    try:
        groups = load_json(text)
    except json.JSONDecodeError as exc:
        raise CtxmtError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg} "
                         f"(re-download the file or fix it there)") from None
    except JsonInputError as exc:
        raise CtxmtError(f"{path}: {exc} (re-download the file or fix it there)") from None
    if not isinstance(groups, list) or not groups:
        raise CtxmtError(f"{path}: expected a non-empty JSON list of groups "
                         f'{{"src", "dst", "true_ind", "ctx_dist"}}, got {type(groups).__name__}'
                         f"{' (empty)' if groups == [] else ''}")
    return groups


def group_item(group: dict, path: Path, index: int, phenomenon: str) -> ContrastiveItem:
    """One group as a :class:`ContrastiveItem`; errors name the file and group index."""
    where = f"{path}, group {index}"
    if not isinstance(group, dict):
        raise CtxmtError(f"{where}: expected a JSON object, got {type(group).__name__}")
    missing = [k for k in ("src", "dst", "true_ind", "ctx_dist") if k not in group]
    if missing:
        raise CtxmtError(f"{where}: missing key(s) {', '.join(missing)} (each group needs src, dst, true_ind, "
                         f"ctx_dist)")
    src, dst, true_ind = group["src"], group["dst"], group["true_ind"]
    if not isinstance(src, str) or not isinstance(dst, list) or not all(isinstance(d, str) for d in dst):
        raise CtxmtError(f'{where}: "src" must be a string and "dst" a list of strings')
    if len(dst) < 2:
        raise CtxmtError(f'{where}: "dst" has {len(dst)} candidate(s); a contrastive group needs at least 2')
    if isinstance(true_ind, bool) or not isinstance(true_ind, int) or not 0 <= true_ind < len(dst):
        raise CtxmtError(f'{where}: "true_ind" {true_ind!r} is not an index into its {len(dst)} candidates '
                         f"(use 0..{len(dst) - 1})")
    source = split_group(src)
    candidates = [split_group(d) for d in dst]
    for k, sentences in enumerate(candidates):
        if len(sentences) != len(source):
            raise CtxmtError(f'{where}: candidate {k} has {len(sentences)} sentence(s) but "src" has '
                             f'{len(source)}; join exactly one translation per source sentence with " _eos "')
    contexts = [sentences[:-1] for sentences in candidates]
    tags = {"phenomenon": group.get("phenomenon", phenomenon), "ctx_dist": group["ctx_dist"]}
    return ContrastiveItem(src_context=source[:-1], src=source[-1], tgt_context=contexts[true_ind],
                           candidates=[sentences[-1] for sentences in candidates], correct=true_ind,
                           tags=tags, candidate_contexts=contexts)
