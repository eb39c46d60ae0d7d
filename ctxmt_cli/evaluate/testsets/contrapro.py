"""ContraPro, the En->De contrastive pronoun set (Mueller, Rios, Voita, Sennrich 2018, WMT).

Publisher: ZurichNLP/ContraPro on GitHub (README, ``evaluate.py``,
``conversion_scripts/json2text_and_context.pl``, ``opusXML2docs.pl``,
``setup_opensubs.sh``); a record's layout is also quoted in mjpost/ContraPro
``conversion_scripts/json2text.py``. What those files establish, and this
reader follows:

* ``contrapro.json``: a list of records with ``"document id"`` (the German
  document's file name, e.g. ``"1921_12806_3712161.de"``), ``"segment id"``
  (1-based line number in that document), ``"src segment"``, ``"ref segment"``,
  ``"src pronoun"``, ``"ref pronoun"`` (``Er``/``sie``/``es``, any case),
  ``"ante distance"`` (sentences back to the antecedent; 0 = same sentence),
  ``"intrasegmental"`` (true/false/null), ``"corpus"``, ``"src/ref ante ..."``
  and ``"errors"``: one ``{"contrastive", "replacement", "replacement gender",
  "type"}`` per contrastive variant.
* Documents (``setup_opensubs.sh``): OPUS OpenSubtitles2018 de-en in Moses
  format (``OpenSubtitles2018.de-en.{ids,de,en}``), split by ``opusXML2docs.pl``
  into one line-aligned pair of plain-text files per German document,
  ``documents/YEAR/YEAR_IMDBID_FILEID.{en,de}``; the key is the first
  ``YEAR/IMDBID/FILEID.xml`` path of each ``.ids`` line with ``/`` -> ``_``.
  So "segment id" counts lines of the Moses bitext, not ``<s id>`` of the OPUS
  XML (alignment merges/drops sentences, and the json does not name the
  English XML file): XML documents cannot give the publisher's lines, hence the
  Moses files or the documents folder are read here.
* Extraction (``json2text_and_context.pl --context K``, latest version) writes
  ``{json stem}.text.{src,tgt}`` and ``{json stem}.context.{src,tgt}`` (suffixes
  = ``--source``/``--target`` language codes). Per record: the document's source
  line and target line, then per error the same source and the ``contrastive``
  sentence; each text line gets its own K context lines, oldest first (document
  lines ``seg-K .. seg-1``), an empty line where that line would precede the
  document's first line. So context files hold K lines per text line.
* ``evaluate.py --reference contrapro.json --scores FILE [--maximize]``: reads,
  per record in json order, one score then one per error; lower is better by
  default; a record is correct only if its score is better (``lt``) than every
  error's -- ties lose (tie rule ``strict``). Reports by ``src:ref`` pronoun
  (lowercased), by ``intrasegmental`` and by ante distance 0, 1, 2, 3, ">3".

The Perl script's own json/document source check compares substitution counts
(a no-op); mjpost's json2text.py compares with whitespace and quotes removed, as
``check_source`` does here.

Here: items are in json order, candidates = [correct, each contrastive], the
scored sentences being the text files' lines (what the publisher scores; normally
``src/ref segment`` up to whitespace) or the documents' lines; tags ``distance``
(0-3 or ">3"), ``pronoun`` / ``src_pronoun`` (lowercased), ``category``
(``it:er``), ``intrasegmental``. Context lines that are empty on both sides are
dropped (no context there). The Moses files are streamed and not checksummed.
"""

from __future__ import annotations

import json
import re
from itertools import zip_longest
from pathlib import Path

from ctxmt_cli.data.lines import fail, read_lines
from ctxmt_cli.data.text_input import JsonInputError, load_json
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet

Row = tuple[list[str], str, list[str], list[str]]  # src_context, src, tgt_context, candidates

_IGNORED = re.compile(r"[\s\"'`\u00b4]")  # whitespace and quotes, as mjpost's json2text.py compares
_OPUS_DOC = re.compile(rb"(\d{4})/(\d+)/(\d+)\.xml")
_CHECK_HINT = "re-run the publisher's json2text_and_context.pl with this json"


def load_records(path: Path, required: tuple[str, ...]) -> list[dict]:
    """The publisher's JSON list of records; each must hold ``required`` keys and non-empty ``errors``."""
    try:
        raw = load_json(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise CtxmtError(f"{path}: not UTF-8 at byte {err.start}; re-download the publisher's file") from None
    except json.JSONDecodeError as err:
        raise CtxmtError(f"{path}:{err.lineno}: malformed JSON ({err.msg} at column {err.colno}); "
                         "re-download the publisher's file") from None
    except JsonInputError as err:
        raise CtxmtError(f"{path}: {err}; re-download the publisher's file") from None
    if not isinstance(raw, list) or not raw:
        raise CtxmtError(f"{path}: expected a non-empty JSON list of records; is this the publisher's test-set json?")
    for number, record in enumerate(raw, 1):
        missing = [key for key in required if not isinstance(record, dict) or key not in record]
        if missing:
            raise CtxmtError(f"{path}: record {number} lacks {', '.join(repr(k) for k in missing)}; "
                             "is this the publisher's test-set json?")
        errors = errors_of(record)
        if not errors or not all(isinstance(e, dict) and isinstance(e.get("contrastive"), str) for e in errors):
            raise CtxmtError(f"{path}: record {number}: 'errors' must hold objects with a 'contrastive' sentence")
    return raw


def errors_of(record: dict) -> list[dict]:
    """The record's contrastive variants (a single object counts as one)."""
    errors = record["errors"]
    return [errors] if isinstance(errors, dict) else list(errors) if isinstance(errors, list) else []


def distance_tag(value):
    """Antecedent distance as the publisher's evaluate.py buckets it: 0, 1, 2, 3 or ">3"."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 3:
        return ">3"
    return value


def record_tags(record: dict) -> dict:
    """Tags of one record: distance bucket, pronouns (lowercased), category, intrasegmental."""
    src = str(record.get("src pronoun") or "").lower() or None
    ref = str(record.get("ref pronoun") or "").lower() or None
    tags = {"distance": distance_tag(record.get("ante distance")), "pronoun": ref, "src_pronoun": src,
            "category": f"{src}:{ref}", "intrasegmental": record.get("intrasegmental")}
    if "phenomenon" in record:  # the synthetic benchmark's copy
        tags["phenomenon"] = record["phenomenon"]
    return tags


def text_key(text: str) -> str:
    """The text with whitespace and quote characters removed: what :func:`same_text` compares."""
    return _IGNORED.sub("", text)


def same_text(a: str, b: str) -> bool:
    """Equal once whitespace and quote characters are ignored."""
    return text_key(a) == text_key(b)


def file_lines(path: Path, role: str) -> list[str]:
    """All lines of a UTF-8 text file, line endings removed (only ``\\n`` splits)."""
    return [text for _, text in read_lines(path, role)]


def trim_context(src_ctx: list[str], tgt_ctx: list[str]) -> tuple[list[str], list[str]]:
    """Drop context positions empty on both sides (the extraction's "no context here")."""
    keep = [i for i, (s, t) in enumerate(zip(src_ctx, tgt_ctx, strict=True)) if s.strip() or t.strip()]
    return [src_ctx[i] for i in keep], [tgt_ctx[i] for i in keep]


def context_option(value) -> int | None:
    """The ``context`` option: None (what the files hold) or a count >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CtxmtError(f"{option('context')} must be a whole number >= 0, got {value!r}")
    return value


def check_count(path: Path, have: int, need: int, what: str, fix: str) -> None:
    """One-line error when a file has ``have`` lines where ``need`` are expected."""
    if have != need:
        raise fail(path, min(have, need) + 1, f"{have} lines but {what} needs {need}", fix)


def read_contrapro(path: Path, **options) -> list[TestSet]:
    """ContraPro from ``contrapro.json`` plus the extraction's text/context files or the documents.

    ``path``: the folder holding ``contrapro.json`` (or the json itself). Options:
    ``src_lang``/``tgt_lang`` (en/de; also ``.src/.tgt`` suffixes are read),
    ``context`` (sentences to keep; default what the files hold; when extracting, the ``model_context`` the
    scoring model reads (``ctxmt contrastive`` passes it), else 1),
    ``documents`` (ContraPro's ``documents/`` folder, or the OPUS Moses files
    ``OpenSubtitles2018.de-en.{ids,de,en}`` / their prefix: extract the context
    directly, no Perl; used by default when the text files are absent and
    ``PATH/documents`` exists), ``check_source`` (default True).
    """
    json_path = _json_path(Path(path))
    src_lang, tgt_lang = options.get("src_lang") or "en", options.get("tgt_lang") or "de"
    context = context_option(options.get("context"))
    check = options.get("check_source", True)
    records = load_records(json_path, ("src segment", "ref segment", "errors"))
    text = _text_files(json_path.parent, json_path.stem, src_lang, tgt_lang)
    documents = options.get("documents")
    if documents is None and text is None and (json_path.parent / "documents").is_dir():
        documents = json_path.parent / "documents"
    if documents is not None:
        k = context if context is not None else _model_context(options.get("model_context"))
        rows, used = rows_from_documents(records, Path(documents), k, (src_lang, tgt_lang), check, json_path)
    elif text is not None:
        rows, used = rows_from_text(records, text, context, check, json_path.name)
    elif context == 0:
        rows, used = [([], r["src segment"], [], [r["ref segment"]] + [e["contrastive"] for e in errors_of(r)])
                      for r in records], []
    else:
        raise CtxmtError(f"missing context files: no {json_path.stem}.text.{src_lang} / .context.{src_lang} "
                         f"next to {json_path}; run ContraPro's json2text_and_context.pl, or pass "
                         "documents=DIR (ContraPro's documents/ or the OPUS Moses files), or context=0")
    items = [ContrastiveItem(src_context=sc, src=s, tgt_context=tc, candidates=c, correct=0, tags=record_tags(r))
             for r, (sc, s, tc, c) in zip(records, rows, strict=True)]
    return [TestSet(name=json_path.stem, kind="contrapro", items=items, tie_rule="strict",
                    groupings=("distance", "pronoun"), classes="pronoun", files=[json_path, *used],
                    src_lang=src_lang, tgt_lang=tgt_lang)]


def _model_context(value) -> int:
    """Context sentences to extract without ``--context``: as many as the model reads (1 when none is known)."""
    return 1 if value is None else context_option(value)


def _json_path(path: Path) -> Path:
    """``contrapro.json`` in the folder (or the only json there), the file given, or ``PATH.json``."""
    if path.is_file():
        return path
    if Path(f"{path}.json").is_file():  # the prefix DIR/contrapro
        return Path(f"{path}.json")
    if (path / "contrapro.json").is_file():
        return path / "contrapro.json"
    found = sorted(path.glob("*.json")) if path.is_dir() else []
    if len(found) == 1:
        return found[0]
    raise CtxmtError(f"no contrapro.json in {path}; give the folder holding the publisher's contrapro.json "
                     "(git clone https://github.com/ZurichNLP/ContraPro)")


def _text_files(folder: Path, stem: str, src_lang: str, tgt_lang: str) -> dict[str, Path] | None:
    """The extraction's four files (language suffixes, else ``.src/.tgt``), or None without text files."""
    for src, tgt in ((src_lang, tgt_lang), ("src", "tgt")):
        paths = {"text_src": folder / f"{stem}.text.{src}", "text_tgt": folder / f"{stem}.text.{tgt}",
                 "ctx_src": folder / f"{stem}.context.{src}", "ctx_tgt": folder / f"{stem}.context.{tgt}"}
        if paths["text_src"].is_file() or paths["text_tgt"].is_file():
            return paths
    return None


def rows_from_text(records: list[dict], paths: dict[str, Path], context: int | None,
                   check: bool, json_name: str) -> tuple[list[Row], list[Path]]:
    """Rows from ``contrapro.text.*`` / ``contrapro.context.*``, checked against the json."""
    sizes = [1 + len(errors_of(r)) for r in records]
    total, fix = sum(sizes), f"re-run the extraction with {json_name}"
    src, tgt = file_lines(paths["text_src"], "ContraPro text"), file_lines(paths["text_tgt"], "ContraPro text")
    check_count(paths["text_src"], len(src), total, f"{json_name} (1 + errors per record)", fix)
    check_count(paths["text_tgt"], len(tgt), total, f"{json_name} (1 + errors per record)", fix)
    ctx_src = ctx_tgt = None
    per = k = 0
    if context != 0:
        for key in ("ctx_src", "ctx_tgt"):
            if not paths[key].is_file():
                raise CtxmtError(f"missing context file {paths[key]}; run the extraction "
                                 f"(json2text_and_context.pl {option('context')} K), or pass documents=DIR or "
                                 "context=0")
        ctx_src, ctx_tgt = (file_lines(paths[key], "ContraPro context") for key in ("ctx_src", "ctx_tgt"))
        per = len(ctx_src) // total
        if per * total != len(ctx_src):
            raise fail(paths["ctx_src"], None, f"{len(ctx_src)} lines is not a multiple of the {total} text lines",
                       f"{fix}; the script writes K context lines per text line")
        check_count(paths["ctx_tgt"], len(ctx_tgt), len(ctx_src), paths["ctx_src"].name, fix)
        k = per if context is None else context
        if k > per:
            raise CtxmtError(f"{paths['ctx_src']}: holds {per} context line(s) per text line, {k} asked for; "
                             f"re-extract with {option('context')} {k} or pass documents=DIR")
    rows, line = [], 0
    for number, (record, size) in enumerate(zip(records, sizes, strict=True), 1):
        if check:
            _check_block(paths, src, tgt, line, record, number)
        sc = ctx_src[line * per + per - k: (line + 1) * per] if ctx_src is not None else []
        tc = ctx_tgt[line * per + per - k: (line + 1) * per] if ctx_tgt is not None else []
        sc, tc = trim_context(sc, tc)
        rows.append((sc, src[line], tc, tgt[line: line + size]))
        line += size
    used = [paths["text_src"], paths["text_tgt"]] + ([paths["ctx_src"], paths["ctx_tgt"]] if context != 0 else [])
    return rows, used


def _check_block(paths: dict[str, Path], src: list[str], tgt: list[str], line: int, record: dict, number: int) -> None:
    """The record's text lines: its source each time, then its contrastive sentences."""
    for j, error in enumerate([None] + errors_of(record)):
        if not same_text(src[line + j], record["src segment"]):
            raise fail(paths["text_src"], line + j + 1, f"source differs from 'src segment' of json record {number}",
                       _CHECK_HINT)
        if error is not None and not same_text(tgt[line + j], error["contrastive"]):
            raise fail(paths["text_tgt"], line + j + 1,
                       f"differs from contrastive {j} of json record {number}", _CHECK_HINT)


def doc_key(document_id: str, langs: tuple[str, str]) -> str:
    """The document's file stem: ``1921_12806_3712161.de`` -> ``1921_12806_3712161``."""
    name = str(document_id).rsplit("/", 1)[-1]
    for lang in langs:
        if name.endswith(f".{lang}"):
            return name[: -len(lang) - 1]
    return name


def rows_from_documents(records: list[dict], documents: Path, k: int, langs: tuple[str, str],
                        check: bool, json_path: Path) -> tuple[list[Row], list[Path]]:
    """Rows built as ``json2text_and_context.pl --context k`` would, from the documents themselves."""
    for number, record in enumerate(records, 1):
        if "document id" not in record or not isinstance(record.get("segment id"), int):
            raise CtxmtError(f"{json_path}: record {number} needs 'document id' and an integer 'segment id' "
                             "to extract context from documents")
    docs, used = load_documents({doc_key(r["document id"], langs) for r in records}, documents, langs)
    rows = []
    for number, record in enumerate(records, 1):
        src_doc, tgt_doc, where = docs[doc_key(record["document id"], langs)]
        seg = record["segment id"]
        if not 1 <= seg <= len(src_doc):
            raise CtxmtError(f"{json_path}: record {number}: segment id {seg} is outside document "
                             f"{record['document id']} ({len(src_doc)} lines); use the OpenSubtitles2018 release")
        if check and not same_text(src_doc[seg - 1], record["src segment"]):
            raise fail(where, seg, f"differs from 'src segment' of json record {number}",
                       "use the documents of OpenSubtitles2018 de-en as setup_opensubs.sh builds them")
        back = range(seg - k, seg)
        sc, tc = trim_context([src_doc[i - 1] if i >= 1 else "" for i in back],
                              [tgt_doc[i - 1] if i >= 1 else "" for i in back])
        rows.append((sc, src_doc[seg - 1], tc, [tgt_doc[seg - 1]] + [e["contrastive"] for e in errors_of(record)]))
    return rows, used


def load_documents(keys: set[str], documents: Path, langs: tuple[str, str]):
    """``{key: (src_lines, tgt_lines, src_path)}`` from the documents folder or the OPUS Moses files."""
    moses = _moses_files(documents, langs)
    if moses is not None:
        return _moses_documents(keys, *moses), []
    src_lang, tgt_lang = langs
    out, used = {}, []
    for key in sorted(keys):
        for base in (documents / key.split("_")[0], documents):
            src_path, tgt_path = base / f"{key}.{src_lang}", base / f"{key}.{tgt_lang}"
            if src_path.is_file() and tgt_path.is_file():
                break
        else:
            raise CtxmtError(f"document {key} not found: expected {documents / key.split('_')[0] / key}"
                             f".{{{src_lang},{tgt_lang}}}; give the documents/ folder that ContraPro's "
                             "setup_opensubs.sh writes, or the OPUS Moses files (.ids + both languages)")
        src, tgt = file_lines(src_path, "document"), file_lines(tgt_path, "document")
        check_count(tgt_path, len(tgt), len(src), src_path.name, "the two sides of a document are line-aligned")
        out[key] = (src, tgt, src_path)
        used += [src_path, tgt_path]
    return out, used


def _moses_files(documents: Path, langs: tuple[str, str]) -> tuple[Path, Path, Path] | None:
    """``(ids, src, tgt)`` when ``documents`` names OPUS Moses files (``X.ids``, the prefix ``X``, or their folder)."""
    if documents.suffix == ".ids" and documents.is_file():
        ids = documents
    elif Path(f"{documents}.ids").is_file():
        ids = Path(f"{documents}.ids")
    elif documents.is_dir() and len(found := sorted(documents.glob("*.ids"))) == 1:
        ids = found[0]
    else:
        return None
    prefix = str(ids)[: -len(".ids")]
    src, tgt = Path(f"{prefix}.{langs[0]}"), Path(f"{prefix}.{langs[1]}")
    for side in (src, tgt):
        if not side.is_file():
            raise CtxmtError(f"{ids}: OPUS Moses file {side} not found; unzip OpenSubtitles2018 "
                             f"{'-'.join(sorted(langs))}.txt.zip next to it")
    return ids, src, tgt


def _moses_documents(keys: set[str], ids: Path, src: Path, tgt: Path) -> dict:
    """Split the Moses bitext into the wanted documents, as ``opusXML2docs.pl`` does (streamed)."""
    out: dict[str, tuple[list[str], list[str], Path]] = {key: ([], [], src) for key in keys}
    with ids.open("rb") as fi, src.open("rb") as fs, tgt.open("rb") as ft:
        for number, (i, s, t) in enumerate(zip_longest(fi, fs, ft), 1):
            if i is None or s is None or t is None:
                short = ids if i is None else src if s is None else tgt
                raise fail(short, number, "ends early: the .ids and both language files must have as many lines",
                           "unzip the OPUS download again")
            match = _OPUS_DOC.search(i)
            key = b"_".join(match.groups()).decode() if match else None
            if key in out:
                out[key][0].append(_decode(s, src, number))
                out[key][1].append(_decode(t, tgt, number))
    for key, (lines, _, _) in out.items():
        if not lines:
            raise CtxmtError(f"{ids}: document {key} of the json is not in these OPUS files; "
                             "use OpenSubtitles2018 (the release ContraPro was built from)")
    return out


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise fail(path, number, f"not valid UTF-8 (byte 0x{raw[err.start]:02x})", "re-download the file") from None
