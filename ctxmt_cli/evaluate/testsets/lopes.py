"""The En->Fr contrastive pronoun set of Lopes, Farajian, Bawden, Martins (2020, EAMT).

"Document-level Neural MT: A Systematic Comparison". Publisher:
rbawden/Large-contrastive-pronoun-testset-EN-FR on GitHub (README, folders
``OpenSubs/`` and ``UN-corpus/``, ``scripts/extract_current_and_context.py``,
``scripts/filter_examples.py``, ``scripts/construct_jsonl_by_year.py``,
``UN-corpus/UN-testset-enfr.json``; pull request #4 names the OpenSubs json
``testset-en-fr.json``). What those files establish, and this reader follows:

* Extracted files (``extract_current_and_context.py JSON documents/ PREFIX -c N``):
  ``PREFIX.current.{src,trg}`` with, per example, the correct line (document
  source, document target) then the contrastive line (same source, the json's
  first ``errors`` ``contrastive``): correct and contrastive lines alternate;
  ``PREFIX.context.{src,trg}`` with N lines per current line (so 2N per
  example), oldest first; all N are empty when the example is fewer than N
  lines into its document (``segment id < N``), so trimming a ``c3`` file to
  one line is not the ``c1`` file. The repository ships them as
  ``extracted/{OpenSubs,UN-corpus}.current.*`` and ``extracted/*.c{N}.context.*``
  (N = 1-3 OpenSubs, 1-5 UN); ``process.sh`` names them ``testset.N.{current,context}.*``.
* Order: the script groups the json's examples by ``"document id"``, examples
  in json order inside each document; the older version writes documents in
  order of first appearance in the json, the current one in sorted-id order.
  Both differ from json order (``filter_examples.py`` writes OpenSubs pronoun
  by pronoun).
* JSON records (ContraPro's layout): ``"document id"`` (no language suffix),
  ``"segment id"`` (0-based line), ``"src segment"``, ``"ref segment"``
  (tokenized for OpenSubs, so the extracted lines are what gets scored),
  ``"src pronoun"`` (it/they), ``"ref pronoun"`` (il/elle/ils/elles, any case),
  ``"pronoun gender"``, ``"ante distance"`` (0-5; -1 = unknown in UN),
  ``"intrasegmental"``, ``"corpus"``, ``"errors"`` (a list of one
  ``{"contrastive", "replacement", "replacement gender", "type"}``, a bare object
  in the construction scripts).
* Evaluation (README): "using the ContraPro evaluation script",
  ``evaluate.py --reference JSON --scores FILE [--maximize]`` -- per json record
  one score then one per error, lower is better, correct only when strictly
  better than every contrastive one (ties lose: tie rule ``strict``), reported by
  ``src:ref`` pronoun, by intrasegmental and by ante distance (0-3, ">3").

Here: one :class:`TestSet` per extracted prefix, named by it (``OpenSubs``); with
the json (option ``json``, else a single ``*testset*.json`` in the folder or its
parent, announced in one line) items follow json order -- so the scores file is
what ``evaluate.py`` reads -- with ContraPro's tags. Each example of the files is
matched to its record by content (source and contrastive line), so files of
either script version (or in json order) are read alike. Without the json: file
order, and ``pronoun`` is the French pronoun that the contrastive line changes.
Without an explicit ``context``, ``model_context`` (the model's context size)
picks the ``cN`` file of that size.
"""

from __future__ import annotations

import glob
import logging
import re
from difflib import SequenceMatcher
from pathlib import Path

from ctxmt_cli.data.lines import fail
from ctxmt_cli.errors import CtxmtError, OptionError, named, option
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet
from ctxmt_cli.evaluate.testsets.contrapro import (
    Row,
    check_count,
    context_option,
    errors_of,
    file_lines,
    load_records,
    record_tags,
    text_key,
    trim_context,
)

PRONOUNS = {"il": "it", "elle": "it", "ils": "they", "elles": "they"}
_WORD = re.compile(r"\w+")
_JSON_HINT = (f"give the json these files were extracted from with {option('json')} PATH, or {option('json')} none "
              "to read the files alone")
log = logging.getLogger(__name__)


def read_lopes(path: Path, **options) -> list[TestSet]:
    """Every extracted set at ``path`` (a folder of ``*.current.{src,trg}``, a prefix, or one of the files).

    Options: ``context`` (sentences to keep; default: the ``cN`` file of ``model_context`` sentences, else the
    largest ``cN`` file or what ``PREFIX.context.*`` holds), ``model_context`` (the scoring model's context
    size), ``json`` (the publisher's test-set json; False or "none" ignores any), ``check_source`` (default
    True; False assumes the older script's order unchecked), ``src_lang``/``tgt_lang`` (en/fr).
    """
    context = context_option(options.get("context"))
    model_context = context_option(options.get("model_context"))
    langs = (options.get("src_lang") or "en", options.get("tgt_lang") or "fr")
    sets = []
    for prefix in _prefixes(Path(path)):
        json_path = _json_for(prefix, options.get("json"))
        sets.append(_read_set(prefix, (context, model_context), json_path, options.get("check_source", True), langs))
    return sets


def _prefixes(path: Path) -> list[Path]:
    """The extraction prefixes at ``path``."""
    if path.is_dir():
        stems = sorted(p.name[: -len(".current.src")] for p in path.glob("*.current.src")
                       if (path / p.name.replace(".current.src", ".current.trg")).is_file())
        if not stems:
            raise CtxmtError(f"no *.current.src with *.current.trg in {path}; give the publisher's extracted folder "
                             "(e.g. Large-contrastive-pronoun-testset-EN-FR/OpenSubs/extracted) or a file prefix")
        return [path / stem for stem in stems]
    for suffix in (".current.src", ".current.trg"):
        if path.name.endswith(suffix):
            return [path.with_name(path.name[: -len(suffix)])]
    if not Path(f"{path}.current.src").is_file():
        raise CtxmtError(f"lopes test set not found: no {path}.current.src; give the extracted folder or prefix")
    return [path]


def _json_for(prefix: Path, given) -> Path | None:
    """The json to read: ``given`` (a path, or False/"none" for none), else one found and announced."""
    if given is False or (isinstance(given, str) and given.lower() == "none"):
        return None
    if given:
        path = Path(given)
        if not path.is_file():
            raise OptionError("json", given, f"no such file; give the publisher's test-set json "
                             f"(OpenSubs/testset-en-fr.json), or {option('json')} none to read the files alone")
        return path
    found = _find_json(prefix.parent)
    if found is not None:
        where = "beside" if found.parent == prefix.parent else "one folder above"
        log.warning(named(f"lopes %s: item order and tags from %s (found %s the extracted files; {option('json')} PATH "
                          f"for another, {option('json')} none to read the files alone)"), prefix.name, found, where)
    return found


def _find_json(folder: Path) -> Path | None:
    """The publisher's json next to the extracted files or one folder up (``OpenSubs/testset-en-fr.json``)."""
    for where in (folder, folder.parent):
        found = sorted(p for p in where.glob("*.json") if "testset" in p.name.lower())
        preferred = [p for p in found if p.name == "testset-en-fr.json"]
        if len(found) == 1 or preferred:
            return (preferred or found)[0]
        if found:
            raise CtxmtError(f"several test-set json files in {where}: {', '.join(p.name for p in found)}; "
                             f"choose one with {option('json')} PATH")
    return None


def _context_files(prefix: Path, want: int | None, explicit: bool) -> tuple[Path, Path]:
    """``PREFIX.cN.context.*`` for N = ``want`` (else the smallest above it; ``want`` None: the largest; a model
    wider than every file: the largest), else ``PREFIX.context.*`` (the script's own name)."""
    numbered = {}
    pattern = re.compile(re.escape(prefix.name) + r"\.c(\d+)\.context\.src")
    for path in prefix.parent.glob(f"{glob.escape(prefix.name)}.c*.context.src"):
        match = pattern.fullmatch(path.name)
        if match and path.with_name(path.name[:-4] + ".trg").is_file():
            numbered[int(match.group(1))] = (path, path.with_name(path.name[:-4] + ".trg"))
    plain = (Path(f"{prefix}.context.src"), Path(f"{prefix}.context.trg"))
    if want in numbered:
        return numbered[want]
    bigger = sorted(n for n in numbered if want is None or n > want)
    if bigger or (numbered and not explicit):
        return numbered[bigger[0] if bigger and want is not None else max(numbered)]
    if all(p.is_file() for p in plain):
        return plain
    have = f" (only c{', c'.join(map(str, sorted(numbered)))})" if numbered else ""
    raise CtxmtError(f"missing context files for {prefix}: no {prefix.name}.c{want or 'N'}.context.src/.trg{have} "
                     f"nor {prefix.name}.context.src/.trg; run the publisher's extract_current_and_context.py "
                     f"-c {want or 'N'}, or pass {option('context')} 0")


def _read_set(prefix: Path, contexts: tuple[int | None, int | None], json_path: Path | None, check: bool,
              langs: tuple[str, str]) -> TestSet:
    """One extracted set, with its json when there is one; ``contexts`` = (asked for, the model's)."""
    cur_src, cur_trg = Path(f"{prefix}.current.src"), Path(f"{prefix}.current.trg")
    src, trg = file_lines(cur_src, "Lopes current"), file_lines(cur_trg, "Lopes current")
    fix = "re-run the publisher's extract_current_and_context.py"
    check_count(cur_trg, len(trg), len(src), cur_src.name, fix)
    if not src:
        raise fail(cur_src, None, "no examples", fix)
    if len(src) % 2:
        raise fail(cur_src, len(src), "odd number of lines", f"correct and contrastive lines alternate; {fix}")
    for line in range(0, len(src), 2):
        if src[line] != src[line + 1]:
            raise fail(cur_src, line + 2, "source differs from the line before",
                       f"each example is a correct then a contrastive line with the same source; {fix}")
    files = [cur_src, cur_trg]
    rows = _rows(src, trg, prefix, contexts, files)
    if json_path is None:
        items = [ContrastiveItem(src_context=sc, src=s, tgt_context=tc, candidates=c, tags=_derived_tags(c))
                 for sc, s, tc, c in rows]
        groupings: tuple[str, ...] = ("pronoun",)
    else:
        records = load_records(json_path, ("src segment", "errors", "document id"))
        position = _match_records(records, src, trg, cur_src, json_path, check)
        # json order; a record's further errors (none in the published sets) join as evaluate.py reads them
        items = [ContrastiveItem(src_context=rows[p][0], src=rows[p][1], tgt_context=rows[p][2],
                                 candidates=rows[p][3] + [e["contrastive"] for e in errors_of(r)[1:]],
                                 tags=record_tags(r)) for p, r in zip(position, records, strict=True)]
        groupings, files = ("distance", "pronoun"), [json_path, *files]
    return TestSet(name=prefix.name, kind="lopes", items=items, tie_rule="strict", groupings=groupings,
                   classes="pronoun", files=files, src_lang=langs[0], tgt_lang=langs[1])


def _rows(src: list[str], trg: list[str], prefix: Path, contexts: tuple[int | None, int | None],
          files: list[Path]) -> list[Row]:
    """(src_context, src, tgt_context, [correct, contrastive]) per example, in file order."""
    context, model_context = contexts
    want = model_context if context is None else context
    if want == 0:
        return [([], src[i], [], trg[i: i + 2]) for i in range(0, len(src), 2)]
    ctx_src_path, ctx_trg_path = _context_files(prefix, want, explicit=context is not None)
    ctx_src, ctx_trg = file_lines(ctx_src_path, "Lopes context"), file_lines(ctx_trg_path, "Lopes context")
    per = len(ctx_src) // max(len(src), 1)
    if per == 0 or per * len(src) != len(ctx_src):
        raise fail(ctx_src_path, None, f"{len(ctx_src)} lines is not a multiple of the {len(src)} current lines",
                   "the extraction writes N context lines per current line; re-run it")
    check_count(ctx_trg_path, len(ctx_trg), len(ctx_src), ctx_src_path.name, "re-run the extraction")
    k = per if want is None else want if context is not None else min(want, per)
    if k > per:
        raise CtxmtError(f"{ctx_src_path}: holds {per} context line(s) per current line, {k} asked for; "
                         f"use the c{k} files or re-run the publisher's extract_current_and_context.py -c {k}")
    files += [ctx_src_path, ctx_trg_path]
    rows = []
    for line in range(0, len(src), 2):
        window = slice(line * per + per - k, (line + 1) * per)
        sc, tc = trim_context(ctx_src[window], ctx_trg[window])
        rows.append((sc, src[line], tc, trg[line: line + 2]))
    return rows


def extraction_order(records: list[dict]) -> list[int]:
    """Record indices in the older extraction script's order: grouped by document, first appearance first."""
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(str(record["document id"]), []).append(index)
    return [index for group in groups.values() for index in group]


def _match_records(records, src, trg, cur_src: Path, json_path: Path, check: bool) -> list[int]:
    """For each record (json order), the position of its example in the files.

    Examples are matched by content (source and contrastive line, whitespace and quotes ignored), so the
    older script's order, the current script's and json order all read alike. Records that share both
    lines go, in json order, to the examples of their own document where a neighbouring example tells it.
    """
    if len(records) * 2 != len(src):
        raise fail(cur_src, None, f"{len(src) // 2} examples but {json_path.name} has {len(records)} records",
                   _JSON_HINT)
    if not check:
        order = extraction_order(records)
        return [pair for pair, _ in sorted(enumerate(order), key=lambda pi: pi[1])]
    waiting: dict[tuple[str, str], list[int]] = {}
    for index, record in enumerate(records):
        key = (text_key(record["src segment"]), text_key(errors_of(record)[0]["contrastive"]))
        waiting.setdefault(key, []).append(index)
    keys = [(text_key(src[2 * pair]), text_key(trg[2 * pair + 1])) for pair in range(len(src) // 2)]
    owner: list[int | None] = [None] * len(keys)
    for pair, key in enumerate(keys):       # pass 1: examples whose lines only one record has
        if len(waiting.get(key, ())) == 1:
            owner[pair] = waiting[key].pop()
    for pair, key in enumerate(keys):       # pass 2: shared lines, by the document of the nearest placed neighbour
        if owner[pair] is None:
            owner[pair] = _take(waiting.get(key), records, _neighbour_docs(owner, records, pair))
            if owner[pair] is None:
                raise fail(cur_src, 2 * pair + 1, f"example {pair + 1} (this source, contrastive on line "
                           f"{2 * pair + 2} of the .trg) matches no record of {json_path.name}", _JSON_HINT)
    position = [0] * len(records)
    for pair, index in enumerate(owner):
        position[index] = pair
    return position


def _neighbour_docs(owner: list[int | None], records: list[dict], pair: int) -> list[str]:
    """The documents of the nearest placed examples before and after ``pair`` (documents are contiguous)."""
    docs = []
    for side in (range(pair - 1, -1, -1), range(pair + 1, len(owner))):
        placed = next((owner[other] for other in side if owner[other] is not None), None)
        if placed is not None:
            docs.append(str(records[placed]["document id"]))
    return docs


def _take(candidates: list[int] | None, records: list[dict], docs: list[str]) -> int | None:
    """Remove and return the first candidate record of the first of ``docs`` that has one, else the first one."""
    if not candidates:
        return None
    ranked = [[i for i in candidates if str(records[i]["document id"]) == doc] for doc in docs] + [candidates]
    chosen = next(group for group in ranked if group)[0]
    candidates.remove(chosen)
    return chosen


def changed_pronoun(correct: str, contrastive: str) -> str | None:
    """The French subject pronoun (il/elle/ils/elles) of ``correct`` that the contrastive line replaces.

    Read from the words that differ, wherever they are: a contrastive line may also change an agreeing
    word earlier in the sentence ("longue et ardue, et elle" -> "long et ardue, et il").
    """
    a, b = _WORD.findall(correct.lower()), _WORD.findall(contrastive.lower())
    changed = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            swapped = [x for x, y in zip(a[i1:i2], b[j1:j2], strict=True) if x in PRONOUNS and y in PRONOUNS and x != y]
            if swapped:
                return swapped[0]
        if op in ("replace", "delete"):
            changed += a[i1:i2]
    return next((w for w in changed if w in PRONOUNS), None)


def _derived_tags(candidates: list[str]) -> dict:
    """Tags without the json: the changed pronoun and the English pronoun it translates."""
    pronoun = changed_pronoun(candidates[0], candidates[1])
    return {"pronoun": pronoun, "src_pronoun": PRONOUNS.get(pronoun or "")}
