"""``ctxmt prepare``: raw corpus -> SentencePiece model(s) + the prepared binary store.

Steps: validate every input (files, line counts) before writing anything; refuse an
existing output without ``force`` (and with it, one ctxmt did not write: see
:mod:`ctxmt_cli.outputs`); build everything in a sibling temp directory and swap it
into place at the end (on any error the temp directory is removed and the old
output, if any, is untouched). Inputs may be gzip, xz or bzip2 files (:mod:`.compressed`).
The train split is streamed once to write a seeded sample for SentencePiece
(:mod:`.vocabulary`; skipped when ``--spm``/``--vocab-from`` reuses a model), then every
split is streamed again: read and checked here, cleaned (train only, :mod:`.clean`),
encoded and truncated to ``max_sentence_tokens`` in worker processes
(:mod:`.encode_pool`) and written straight into the memory-mapped arrays. Memory stays
bounded by a few chunks of sentences, whatever the corpus size.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.data.clean import REASONS, CleanRules, new_counts
from ctxmt_cli.data.compressed import resolve_input
from ctxmt_cli.data.encode_pool import EncodeJob, default_workers, encode_chunks
from ctxmt_cli.data.formats import FORMATS, auto_docids_note, iter_parallel_located
from ctxmt_cli.data.lines import count_lines
from ctxmt_cli.data.store import FORMAT_VERSION, REFERENCE_FILE, SPLIT_NAME, SplitWriter, choose_dtype, write_meta
from ctxmt_cli.data.tokenize import BRK, SPECIAL_IDS, Tokenizer
from ctxmt_cli.data.vocabulary import reuse_models, train_models, write_sample
from ctxmt_cli.errors import CtxmtError, named, option
from ctxmt_cli.paths import check_input_file, check_output_dir
from ctxmt_cli.replacing import build_dir, check_new_or_replaceable

CHUNK_SENTENCES = 4096
PROGRESS_EVERY = 100_000
#: ``count(split, pairs written, total or None)``: a split's progress, for a progress log
Counter = Callable[[str, int, int | None], None]
_CONVENTION = {
    "text": "PATH.{s} and PATH.{t} (and PATH.docids if present)",
    "voita": "PATH.{s} and PATH.{t}",
    "iwslt-tags": "PATH.{s} and PATH.{t}, e.g. PATH=train.tags.{s}-{t}",
    "iwslt-xml": "PATH.{s}.xml and PATH.{t}.xml",
    "jsonl": "PATH itself",
    "maruf": "PATH.{s} and PATH.{t}, else Maruf et al.'s own names PATH_{s}.txt and PATH_{t}.txt",
}


class PrepareWarning(UserWarning):
    """Non-fatal data issues found while preparing (e.g. truncated sentences)."""


@dataclass
class SplitInput:
    """The files of one split; for jsonl ``src`` and ``tgt`` are the same file."""

    src: Path
    tgt: Path
    docids: Path | None = None


@dataclass
class PrepareSpec:
    """Everything ``prepare_corpus`` needs (the CLI builds it from its options)."""

    fmt: str
    splits: dict[str, SplitInput]
    src_lang: str
    tgt_lang: str
    out: Path
    vocab_size: int = 8000
    joint: bool = True
    moses: bool = False
    max_sentence_tokens: int = 250
    spm_type: str = "unigram"          # unigram | bpe (SentencePiece model_type)
    user_symbols: tuple[str, ...] = field(default=(BRK,))
    seed: int = 1
    force: bool = False
    spm_sample: int = 2_000_000        # SentencePiece trains on a seeded sample of about this many pairs
    workers: int = 0                   # encoding processes; 0: one per CPU
    spm: Path | None = None            # reuse this SentencePiece model (joint) instead of training one
    vocab_from: Path | None = None     # reuse the SentencePiece model(s) of this prepared dataset (or checkpoint)
    vocab_tokenizer: Tokenizer | None = None   # vocab_from a checkpoint: its tokenizer (the command line reads it)
    clean: CleanRules = CleanRules()   # train-split cleaning (off by default)


def resolve_split_input(fmt: str, prefix_or_file: Path, src_lang: str, tgt_lang: str) -> SplitInput:
    """Apply the CLI's PATH convention of ``fmt`` (see ``ctxmt prepare --help``); each file may also be
    compressed, ``PATH.L1.xz`` standing for an absent ``PATH.L1`` (and ``.gz``, ``.bz2``: :mod:`.compressed`)."""
    p = Path(prefix_or_file)
    if fmt == "jsonl":
        return SplitInput(resolve_input(p), resolve_input(p))
    if fmt == "iwslt-xml":
        return SplitInput(resolve_input(f"{p}.{src_lang}.xml"), resolve_input(f"{p}.{tgt_lang}.xml"))
    if fmt == "maruf":
        return _maruf_names(p, src_lang, tgt_lang)
    docids = resolve_input(f"{p}.docids")
    return SplitInput(resolve_input(f"{p}.{src_lang}"), resolve_input(f"{p}.{tgt_lang}"),
                      docids if fmt == "text" and docids.is_file() else None)


def _maruf_names(prefix: Path, src_lang: str, tgt_lang: str) -> SplitInput:
    """``PREFIX.L`` as the other formats; else ``PREFIX_L.txt`` as Maruf et al. (2019) name their files
    (``concatenated_en2de_dev_en.txt``). The first pair with a file present wins, so a missing file of it
    is reported by name."""
    for src, tgt in ((f"{prefix}.{src_lang}", f"{prefix}.{tgt_lang}"),
                     (f"{prefix}_{src_lang}.txt", f"{prefix}_{tgt_lang}.txt")):
        src, tgt = resolve_input(src), resolve_input(tgt)
        if src.is_file() or tgt.is_file():
            return SplitInput(src, tgt)
    return SplitInput(Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}"))


def _validate_spec(spec: PrepareSpec) -> None:
    if spec.fmt not in FORMATS:
        raise CtxmtError(f"unknown format {spec.fmt!r}; use one of {', '.join(FORMATS)}")
    if "train" not in spec.splits:
        raise CtxmtError(f"no train split given; pass {option('train')} PATH")
    if spec.spm_type not in ("unigram", "bpe"):
        raise CtxmtError(f"{option('spm_type')} {spec.spm_type!r}: choose unigram or bpe")
    for name in spec.splits:
        if not SPLIT_NAME.match(name):
            raise CtxmtError(f"bad split name {name!r}; use letters, digits, '.', '-', '_'")
    if not spec.user_symbols or spec.user_symbols[0] != BRK:
        raise CtxmtError(f"user_symbols must start with {BRK} (got {list(spec.user_symbols)}); "
                         f"add {BRK} first so it gets id 4")
    if spec.vocab_size < len(SPECIAL_IDS) + len(spec.user_symbols) + 1:
        raise CtxmtError(f"{option('vocab_size')} {spec.vocab_size} is too small; use at least a few "
                         "hundred (8000 is the default)")
    if spec.max_sentence_tokens < 1:
        raise CtxmtError(f"{option('max_sentence_tokens')} must be ≥ 1, got {spec.max_sentence_tokens}")
    if spec.spm_sample < 1 or spec.workers < 0:
        raise CtxmtError(f"{option('spm_sample')} must be ≥ 1 and {option('workers')} ≥ 0 (0: one per CPU), got "
                         f"{spec.spm_sample} and {spec.workers}")
    if spec.spm is not None and spec.vocab_from is not None:
        raise CtxmtError(f"give {option('spm')} MODEL or {option('vocab_from')} PREPARED_DIR, not both: each names the "
                         "vocabulary")
    spec.clean.check()


def _validate_inputs(spec: PrepareSpec) -> dict[str, int]:
    """Missing files and line counts, for every split, before anything is written; the line count of each
    split's source file where it was counted (line-aligned formats)."""
    lines = {}
    conv = _CONVENTION[spec.fmt].format(s=spec.src_lang, t=spec.tgt_lang)
    for name, inp in spec.splits.items():
        files = [("source", inp.src), ("target", inp.tgt)]
        files += [("docids", inp.docids)] if inp.docids is not None else []
        for role, path in files:
            check_input_file(path, f"--{name}: {role} file", f"for {spec.fmt}, --{name} PATH means {conv}; "
                             f"check the path and {option('src_lang')}/{option('tgt_lang')}")
        if spec.fmt in ("text", "voita", "maruf"):
            counts = [(path, count_lines(Path(path))) for _, path in files]
            lines[name] = counts[0][1]
            if len({n for _, n in counts}) > 1:
                detail = ", ".join(f"{p} has {n}" for p, n in counts)
                first = min(n for _, n in counts) + 1
                # the texts agree and the .docids file, which the user never named, does not
                note = f" ({auto_docids_note(inp.docids)})" if inp.docids is not None and counts[0][1] == counts[1][1] \
                    else ""
                raise CtxmtError(
                    f"--{name}: line counts differ ({detail} lines); first unmatched line is "
                    f"{first}; the files must be line-aligned (one sentence per line){note}")
    return lines


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _chunks(docs: Iterator, size: int) -> Iterator[list]:
    chunk, n = [], 0
    for item in docs:
        chunk.append(item)
        n += len(item[0])
        if n >= size:
            yield chunk
            chunk, n = [], 0
    if chunk:
        yield chunk


def _with_references(docs: Iterator, refs) -> Iterator:
    """``docs`` unchanged, writing each target sentence to ``refs`` as it passes (when ``refs`` is a file)."""
    for doc in docs:
        if refs is not None:
            refs.writelines(_one_line(p[1]) + "\n" for p in doc[0])
        yield doc


def _encode_split(spec: PrepareSpec, tok: Tokenizer, tmp: Path, name: str, dtype: str,
                  say: Callable[[str], None], count: Counter | None = None,
                  total: int | None = None) -> tuple[dict, dict]:
    """Read, clean (train), encode in ``spec.workers`` processes and write one split; its sizes and changes.
    ``count(split, pairs, total)``: the pairs written so far after every chunk (``total``: the source file's lines
    where they were counted, blank lines included, else None), instead of a ``say`` line every
    :data:`PROGRESS_EVERY` pairs."""
    inp = spec.splits[name]
    job = EncodeJob(str(inp.src), spec.max_sentence_tokens, spec.clean if name == "train" else CleanRules())
    changes = {"truncated": 0, "first_truncated": None, "dropped": new_counts()}
    say(f"encoding the {name} split")
    docs = iter_parallel_located(spec.fmt, inp.src, inp.tgt, inp.docids)
    next_report = PROGRESS_EVERY
    # the raw target text of a split one evaluates on: references for BLEU, as written (ids lose what the
    # vocabulary cannot spell and what detokenization cannot restore)
    ref_path = None if name == "train" else tmp / REFERENCE_FILE.format(split=name)
    with SplitWriter(tmp, name, dtype) as writer, \
            (nullcontext() if ref_path is None else open(ref_path, "w", encoding="utf-8")) as refs:
        chunks = _chunks(_with_references(docs, refs), CHUNK_SENTENCES)
        for enc in encode_chunks(job, chunks, tok, spec.workers or default_workers()):
            if enc.doc_sizes:
                writer.add_encoded(enc.doc_sizes, enc.ids, enc.lengths)
            changes["truncated"] += enc.truncated
            changes["first_truncated"] = changes["first_truncated"] or enc.first_truncated
            for reason, n in enc.dropped.items():
                changes["dropped"][reason] += n
            if count is not None:
                count(name, writer.n_sentences, total)
            elif writer.n_sentences >= next_report:
                say(f"  {name}: {writer.n_sentences} sentence pairs")
                next_report += PROGRESS_EVERY
        counts = writer.close()
    if count is not None:                    # the end: blank lines and dropped pairs never reach the total
        count(name, counts["sentences"] if total is None else total, total)
    return counts, changes


def _vocabulary(spec: PrepareSpec, tmp: Path, lines: dict, say: Callable[[str], None]) -> tuple[Tokenizer, dict]:
    """Train the SentencePiece model(s) on a sample of the train split, or reuse given ones; the tokenizer and
    how the vocabulary came to be (for ``meta.json``)."""
    if spec.spm is not None or spec.vocab_from is not None:
        tok = reuse_models(spec, tmp, say)
        source = spec.spm if spec.spm is not None else spec.vocab_from
        # a flag as data: meta.json records how the vocabulary was reused
        return tok, {"reused": str(Path(source).resolve()), "option": "--spm" if spec.spm else "--vocab-from"}
    paths, sampled = write_sample(spec, tmp, lines.get("train"), say)
    tok = train_models(spec, tmp, paths, say)
    for p in set(paths.values()):
        p.unlink()
    return tok, {"trained": True, "spm_sample": spec.spm_sample, "sampled_pairs": sampled}


def _build(spec: PrepareSpec, tmp: Path, say: Callable[[str], None],
           warn: Callable[[str], None], lines: dict | None = None, count: Counter | None = None) -> dict:
    tok, vocabulary = _vocabulary(spec, tmp, lines or {}, say)
    dtype = choose_dtype(max(tok.src_vocab_size, tok.tgt_vocab_size))
    splits, truncated, dropped = {}, {}, {}
    for name in ["train"] + [s for s in spec.splits if s != "train"]:
        splits[name], changes = _encode_split(spec, tok, tmp, name, dtype, say, count, (lines or {}).get(name))
        truncated[name] = changes["truncated"]
        if changes["truncated"]:
            warn(f"{name}: {changes['truncated']} sentence pair(s) longer than {spec.max_sentence_tokens} tokens "
                 f"were truncated (first at {changes['first_truncated']}); raise {option('max_sentence_tokens')} to "
                 "keep them whole")
        if name == "train":
            dropped = changes["dropped"]
    if splits["train"]["sentences"] == 0:
        raise CtxmtError(f"{option('train')}: cleaning dropped every sentence pair of {spec.splits['train'].src} "
                         f"({dropped_summary(dropped)}); loosen {option('min_words')}, {option('max_words')} or "
                         f"{option('max_length_ratio')}")
    meta = _meta(spec, tok, dtype, splits, truncated, vocabulary, dropped)
    write_meta(tmp, meta)
    return meta


def dropped_summary(dropped: dict) -> str:
    """``dropped N pairs (too_short a, ...), D documents split, E emptied`` for a message."""
    total = sum(dropped.get(r, 0) for r in REASONS)
    by = ", ".join(f"{r} {dropped.get(r, 0)}" for r in REASONS)
    return (f"dropped {total} pairs ({by}); {dropped.get('documents_split', 0)} documents cut at a dropped "
            f"sentence, {dropped.get('documents_dropped', 0)} emptied")


def _meta(spec: PrepareSpec, tok: Tokenizer, dtype: str, splits: dict, truncated: dict, vocabulary: dict,
          dropped: dict) -> dict:
    train = splits["train"]
    return {
        "format_version": FORMAT_VERSION, "src_lang": spec.src_lang, "tgt_lang": spec.tgt_lang,
        "joint": tok.joint, "moses": spec.moses,
        "spm": ({"src": "spm.model", "tgt": "spm.model"} if tok.joint
                else {"src": "spm.src.model", "tgt": "spm.tgt.model"}),
        "vocab_size": {"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size},
        "specials": {**SPECIAL_IDS, "brk": tok.brk_id},
        "user_symbols": list(tok.user_symbols),
        "dtype": dtype, "max_sentence_tokens": spec.max_sentence_tokens,
        "truncated": truncated, "splits": splits,
        "clean": {**spec.clean.to_meta(), "dropped": dropped, "documents": "cut at every dropped sentence"},
        "vocabulary": vocabulary,
        "mean_sentence_length": {
            "src": train["src_tokens"] / max(train["sentences"], 1),
            "tgt": train["tgt_tokens"] / max(train["sentences"], 1)},
        "tokenizer_fingerprint": tok.fingerprint(),
        "source": {"format": spec.fmt, "inputs": {
            name: {"src": str(Path(i.src).resolve()), "tgt": str(Path(i.tgt).resolve()),
                   "docids": str(Path(i.docids).resolve()) if i.docids else None}
            for name, i in spec.splits.items()}},
    }


def spec_inputs(spec: PrepareSpec) -> list[Path]:
    """Every file ``spec`` reads (what the output must never be, nor contain)."""
    return [Path(p) for i in spec.splits.values() for p in (i.src, i.tgt, i.docids) if p]


def check_prepare_output(out: Path, force: bool, inputs=()) -> None:
    """Before any work: ``out`` must be new, or (with ``force``) a dataset ctxmt prepared holding nothing else,
    containing none of ``inputs``, in a place we can write."""
    out = Path(out)
    if not (out.exists() or out.is_symlink()):
        check_output_dir(out, option("out"), inputs=inputs)
        return
    check_new_or_replaceable(out, option("out"), force, inputs, kind="a prepared dataset", command="prepare")
    check_output_dir(out.parent, f"the directory of {option('out')}")


def _callbacks(progress, warn) -> tuple[Callable[[str], None], Callable[[str], None]]:
    say = progress or (lambda _line: None)
    return say, warn or (lambda msg: warnings.warn(named(msg), PrepareWarning, stacklevel=4))


def prepare_into(spec: PrepareSpec, directory: Path, progress: Callable[[str], None] | None = None,
                 warn: Callable[[str], None] | None = None, count: Counter | None = None) -> dict:
    """Validate ``spec`` and build the prepared dataset in the existing empty ``directory`` (a command's temp
    directory, swapped into place by :func:`ctxmt_cli.replacing.build_dir`); its ``meta.json`` content."""
    say, warn = _callbacks(progress, warn)
    _validate_spec(spec)
    lines = _validate_inputs(spec)
    return _build(spec, Path(directory), say, warn, lines, count)


def prepare_corpus(spec: PrepareSpec, progress: Callable[[str], None] | None = None,
                   warn: Callable[[str], None] | None = None, count: Counter | None = None) -> dict:
    """Prepare ``spec.out`` from the raw corpus and return its ``meta.json`` content.

    ``progress(line)`` receives status lines; ``warn(line)`` receives data warnings
    (default: :func:`warnings.warn` with :class:`PrepareWarning`); ``count(split, pairs, total)`` the pairs each
    split has written so far (``ctxmt prepare``'s progress; ``total`` None where the lines were not counted).
    """
    say, warn = _callbacks(progress, warn)
    out = Path(spec.out)
    _validate_spec(spec)
    check_prepare_output(out, spec.force, spec_inputs(spec))
    lines = _validate_inputs(spec)
    meta = build_dir(out, "prepare", lambda tmp: _build(spec, tmp, say, warn, lines, count), force=spec.force,
                     inputs=spec_inputs(spec))
    sizes = ", ".join(f"{k}: {v['sentences']} pairs" for k, v in meta["splits"].items())
    say(f"wrote {out} ({sizes})")
    return meta
