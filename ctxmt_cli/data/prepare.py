"""``ctxmt prepare``: raw corpus -> SentencePiece model(s) + the prepared binary store.

Steps: validate every input (files, line counts) before writing anything; refuse an
existing output without ``force`` (and with it, one ctxmt did not write: see
:mod:`ctxmt_cli.outputs`); build everything in a sibling temp directory and swap it
into place at the end (on any error the temp directory is removed and the old
output, if any, is untouched). The train split is streamed once to write the
SentencePiece training text (Moses-tokenized when asked), then every split is
streamed again, encoded in chunks, truncated to ``max_sentence_tokens`` (one
warning per split) and written to memory-mapped arrays. Memory stays bounded by
the offsets arrays plus one chunk of sentences.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.data.formats import FORMATS, auto_docids_note, count_lines, iter_parallel_located
from ctxmt_cli.data.store import FORMAT_VERSION, REFERENCE_FILE, SPLIT_NAME, SplitWriter, choose_dtype, write_meta
from ctxmt_cli.data.tokenize import BRK, SPECIAL_IDS, MosesProcessor, Tokenizer, train_sentencepiece
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.outputs import build_dir, check_new_or_replaceable
from ctxmt_cli.paths import check_input_file, check_output_dir

CHUNK_SENTENCES = 4096
#: what a prepared dataset gains after `prepare` wrote it: first-pass streams (and their partial files)
DATASET_PATTERNS = ("*.stream.*",)
PROGRESS_EVERY = 100_000
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


def resolve_split_input(fmt: str, prefix_or_file: Path, src_lang: str, tgt_lang: str) -> SplitInput:
    """Apply the CLI's PATH convention of ``fmt`` (see ``ctxmt prepare --help``)."""
    p = Path(prefix_or_file)
    if fmt == "jsonl":
        return SplitInput(p, p)
    if fmt == "iwslt-xml":
        return SplitInput(Path(f"{p}.{src_lang}.xml"), Path(f"{p}.{tgt_lang}.xml"))
    if fmt == "maruf":
        return _maruf_names(p, src_lang, tgt_lang)
    docids = Path(f"{p}.docids")
    return SplitInput(Path(f"{p}.{src_lang}"), Path(f"{p}.{tgt_lang}"),
                      docids if fmt == "text" and docids.is_file() else None)


def _maruf_names(prefix: Path, src_lang: str, tgt_lang: str) -> SplitInput:
    """``PREFIX.L`` as the other formats; else ``PREFIX_L.txt`` as Maruf et al. (2019) name their files
    (``concatenated_en2de_dev_en.txt``). The first pair with a file present wins, so a missing file of it
    is reported by name."""
    for src, tgt in ((f"{prefix}.{src_lang}", f"{prefix}.{tgt_lang}"),
                     (f"{prefix}_{src_lang}.txt", f"{prefix}_{tgt_lang}.txt")):
        if Path(src).is_file() or Path(tgt).is_file():
            return SplitInput(Path(src), Path(tgt))
    return SplitInput(Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}"))


def _validate_spec(spec: PrepareSpec) -> None:
    if spec.fmt not in FORMATS:
        raise CtxmtError(f"unknown format {spec.fmt!r}; use one of {', '.join(FORMATS)}")
    if "train" not in spec.splits:
        raise CtxmtError("no train split given; pass --train PATH")
    if spec.spm_type not in ("unigram", "bpe"):
        raise CtxmtError(f"--spm-type {spec.spm_type!r}: choose unigram or bpe")
    for name in spec.splits:
        if not SPLIT_NAME.match(name):
            raise CtxmtError(f"bad split name {name!r}; use letters, digits, '.', '-', '_'")
    if not spec.user_symbols or spec.user_symbols[0] != BRK:
        raise CtxmtError(f"user_symbols must start with {BRK} (got {list(spec.user_symbols)}); "
                         f"add {BRK} first so it gets id 4")
    if spec.vocab_size < len(SPECIAL_IDS) + len(spec.user_symbols) + 1:
        raise CtxmtError(f"--vocab-size {spec.vocab_size} is too small; use at least a few "
                         "hundred (8000 is the default)")
    if spec.max_sentence_tokens < 1:
        raise CtxmtError(f"--max-sentence-tokens must be ≥ 1, got {spec.max_sentence_tokens}")


def _validate_inputs(spec: PrepareSpec) -> None:
    """Missing files and line counts, for every split, before anything is written."""
    conv = _CONVENTION[spec.fmt].format(s=spec.src_lang, t=spec.tgt_lang)
    for name, inp in spec.splits.items():
        files = [("source", inp.src), ("target", inp.tgt)]
        files += [("docids", inp.docids)] if inp.docids is not None else []
        for role, path in files:
            check_input_file(path, f"--{name}: {role} file", f"for {spec.fmt}, --{name} PATH means {conv}; "
                             "check the path and --src-lang/--tgt-lang")
        if spec.fmt in ("text", "voita", "maruf"):
            counts = [(path, count_lines(Path(path))) for _, path in files]
            if len({n for _, n in counts}) > 1:
                detail = ", ".join(f"{p} has {n}" for p, n in counts)
                first = min(n for _, n in counts) + 1
                # the texts agree and the .docids file, which the user never named, does not
                note = f" ({auto_docids_note(inp.docids)})" if inp.docids is not None and counts[0][1] == counts[1][1] \
                    else ""
                raise CtxmtError(
                    f"--{name}: line counts differ ({detail} lines); first unmatched line is "
                    f"{first}; the files must be line-aligned (one sentence per line){note}")


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _write_training_text(spec: PrepareSpec, tmp: Path, say: Callable[[str], None]) -> dict:
    """Stream the train split once into the spm training file(s); returns side -> path."""
    paths = ({"src": tmp / "spm.train.txt", "tgt": tmp / "spm.train.txt"} if spec.joint else
             {s: tmp / f"spm.train.{s}.txt" for s in ("src", "tgt")})
    moses = ({"src": MosesProcessor(spec.src_lang, spec.user_symbols),
              "tgt": MosesProcessor(spec.tgt_lang, spec.user_symbols)} if spec.moses else None)
    inp = spec.splits["train"]
    say("reading the train split for SentencePiece" + (" (Moses-tokenizing)" if moses else ""))
    handles = {p: open(p, "w", encoding="utf-8", newline="\n") for p in set(paths.values())}
    pairs = 0
    try:
        for doc, _ in iter_parallel_located(spec.fmt, inp.src, inp.tgt, inp.docids):
            for pair in doc:
                pairs += 1
                for side, text in zip(("src", "tgt"), pair):
                    text = _one_line(moses[side].tokenize(text) if moses else text)
                    handles[paths[side]].write(text + "\n")
    finally:
        for h in handles.values():
            h.close()
    if pairs == 0:                     # SentencePiece would fail with an internal error
        raise CtxmtError(f"--train: the corpus is empty ({inp.src} has no sentence pairs); give a train split "
                         "with text in it")
    return paths


def _train_models(spec: PrepareSpec, tmp: Path, paths: dict, say: Callable[[str], None]) -> Tokenizer:
    kind = "joint" if spec.joint else "per-side"
    say(f"training {kind} SentencePiece model(s), vocab size {spec.vocab_size}")
    if spec.joint:
        model = train_sentencepiece(paths["src"], tmp / "spm", spec.vocab_size,
                                    spec.user_symbols, model_type=spec.spm_type, seed=spec.seed)
        protos = (model.read_bytes(), None)
    else:
        protos = tuple(
            train_sentencepiece(paths[s], tmp / f"spm.{s}", spec.vocab_size,
                                spec.user_symbols, model_type=spec.spm_type, seed=spec.seed).read_bytes()
            for s in ("src", "tgt"))
    return Tokenizer(protos[0], protos[1], moses=spec.moses, src_lang=spec.src_lang,
                     tgt_lang=spec.tgt_lang, user_symbols=spec.user_symbols)


def _pretokenized(paths: dict) -> Iterator[tuple[str, str]]:
    """Read back the (Moses-tokenized) training text as ``(src, tgt)`` pairs, in order."""
    if paths["src"] == paths["tgt"]:
        with open(paths["src"], "rb") as f:
            for src in f:
                yield src.decode("utf-8").rstrip("\n"), next(f).decode("utf-8").rstrip("\n")
        return
    with open(paths["src"], "rb") as fs, open(paths["tgt"], "rb") as ft:
        for src, tgt in zip(fs, ft):
            yield src.decode("utf-8").rstrip("\n"), tgt.decode("utf-8").rstrip("\n")


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


class _Truncation:
    """Counts over-long sentence pairs of one split and remembers the first one."""

    def __init__(self, limit: int):
        self.limit, self.count, self.first = limit, 0, None

    def check(self, src: list[int], tgt: list[int], where: str) -> tuple[list[int], list[int]]:
        if len(src) <= self.limit and len(tgt) <= self.limit:
            return src, tgt
        self.count += 1
        self.first = self.first or where
        return src[: self.limit], tgt[: self.limit]


def _encode_split(spec: PrepareSpec, tok: Tokenizer, tmp: Path, name: str, dtype: str,
                  pretok: Iterator[tuple[str, str]] | None,
                  say: Callable[[str], None]) -> tuple[dict, _Truncation]:
    inp = spec.splits[name]
    trunc = _Truncation(spec.max_sentence_tokens)
    say(f"encoding the {name} split")
    docs = iter_parallel_located(spec.fmt, inp.src, inp.tgt, inp.docids)
    next_report = PROGRESS_EVERY
    # the raw target text of a split one evaluates on: references for BLEU, as written (ids lose what the
    # vocabulary cannot spell and what detokenization cannot restore)
    ref_path = None if name == "train" else tmp / REFERENCE_FILE.format(split=name)
    with SplitWriter(tmp, name, dtype) as writer, \
            (nullcontext() if ref_path is None else open(ref_path, "w", encoding="utf-8")) as refs:
        for chunk in _chunks(docs, CHUNK_SENTENCES):
            pairs = [p for doc, _ in chunk for p in doc]
            if refs is not None:
                refs.writelines(_one_line(p[1]) + "\n" for p in pairs)
            if pretok is not None:
                pairs = [next(pretok) for _ in pairs]
            ids = {side: tok.encode_batch([p[k] for p in pairs], side, pretokenized=pretok is not None)
                   for k, side in enumerate(("src", "tgt"))}
            k = 0
            for doc, lines in chunk:
                out = []
                for line in lines:
                    out.append(trunc.check(ids["src"][k], ids["tgt"][k], f"{inp.src}:{line}"))
                    k += 1
                writer.add_document(out)
            if writer.n_sentences >= next_report:
                say(f"  {name}: {writer.n_sentences} sentence pairs")
                next_report += PROGRESS_EVERY
        counts = writer.close()
    return counts, trunc


def _build(spec: PrepareSpec, tmp: Path, say: Callable[[str], None],
           warn: Callable[[str], None]) -> dict:
    train_text = _write_training_text(spec, tmp, say)
    tok = _train_models(spec, tmp, train_text, say)
    dtype = choose_dtype(max(tok.src_vocab_size, tok.tgt_vocab_size))
    splits, truncated = {}, {}
    for name in ["train"] + [s for s in spec.splits if s != "train"]:
        pretok = _pretokenized(train_text) if name == "train" and spec.moses else None
        splits[name], trunc = _encode_split(spec, tok, tmp, name, dtype, pretok, say)
        truncated[name] = trunc.count
        if trunc.count:
            warn(f"{name}: {trunc.count} sentence pair(s) longer than {trunc.limit} tokens were "
                 f"truncated (first at {trunc.first}); raise --max-sentence-tokens to keep "
                 "them whole")
    for p in set(train_text.values()):
        p.unlink()
    train = splits["train"]
    meta = {
        "format_version": FORMAT_VERSION, "src_lang": spec.src_lang, "tgt_lang": spec.tgt_lang,
        "joint": tok.joint, "moses": spec.moses,
        "spm": ({"src": "spm.model", "tgt": "spm.model"} if tok.joint
                else {"src": "spm.src.model", "tgt": "spm.tgt.model"}),
        "vocab_size": {"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size},
        "specials": {**SPECIAL_IDS, "brk": tok.brk_id},
        "user_symbols": list(spec.user_symbols),
        "dtype": dtype, "max_sentence_tokens": spec.max_sentence_tokens,
        "truncated": truncated, "splits": splits,
        "mean_sentence_length": {
            "src": train["src_tokens"] / max(train["sentences"], 1),
            "tgt": train["tgt_tokens"] / max(train["sentences"], 1)},
        "tokenizer_fingerprint": tok.fingerprint(),
        "source": {"format": spec.fmt, "inputs": {
            name: {"src": str(Path(i.src).resolve()), "tgt": str(Path(i.tgt).resolve()),
                   "docids": str(Path(i.docids).resolve()) if i.docids else None}
            for name, i in spec.splits.items()}},
    }
    write_meta(tmp, meta)
    return meta


def spec_inputs(spec: PrepareSpec) -> list[Path]:
    """Every file ``spec`` reads (what the output must never be, nor contain)."""
    return [Path(p) for i in spec.splits.values() for p in (i.src, i.tgt, i.docids) if p]


def check_prepare_output(out: Path, force: bool, inputs=()) -> None:
    """Before any work: ``out`` must be new, or (with ``force``) a dataset ctxmt prepared holding nothing else,
    containing none of ``inputs``, in a place we can write."""
    out = Path(out)
    if not (out.exists() or out.is_symlink()):
        check_output_dir(out, "--out")
        return
    check_new_or_replaceable(out, "--out", force, inputs, kind="a prepared dataset", command="prepare")
    check_output_dir(out.parent, "the directory of --out")


def _callbacks(progress, warn) -> tuple[Callable[[str], None], Callable[[str], None]]:
    say = progress or (lambda _line: None)
    return say, warn or (lambda msg: warnings.warn(msg, PrepareWarning, stacklevel=4))


def prepare_into(spec: PrepareSpec, directory: Path, progress: Callable[[str], None] | None = None,
                 warn: Callable[[str], None] | None = None) -> dict:
    """Validate ``spec`` and build the prepared dataset in the existing empty ``directory`` (a command's temp
    directory, swapped into place by :func:`ctxmt_cli.outputs.build_dir`); its ``meta.json`` content."""
    say, warn = _callbacks(progress, warn)
    _validate_spec(spec)
    _validate_inputs(spec)
    return _build(spec, Path(directory), say, warn)


def prepare_corpus(spec: PrepareSpec, progress: Callable[[str], None] | None = None,
                   warn: Callable[[str], None] | None = None) -> dict:
    """Prepare ``spec.out`` from the raw corpus and return its ``meta.json`` content.

    ``progress(line)`` receives status lines; ``warn(line)`` receives data warnings
    (default: :func:`warnings.warn` with :class:`PrepareWarning`).
    """
    say, warn = _callbacks(progress, warn)
    out = Path(spec.out)
    _validate_spec(spec)
    check_prepare_output(out, spec.force, spec_inputs(spec))
    _validate_inputs(spec)
    meta = build_dir(out, "prepare", lambda tmp: _build(spec, tmp, say, warn), force=spec.force,
                     inputs=spec_inputs(spec), patterns=DATASET_PATTERNS)
    sizes = ", ".join(f"{k}: {v['sentences']} pairs" for k, v in meta["splits"].items())
    say(f"wrote {out} ({sizes})")
    return meta
