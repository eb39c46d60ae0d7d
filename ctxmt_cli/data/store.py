"""The prepared binary store: flat, memory-mapped token arrays with offsets.

Layout of a prepared directory (``ctxmt prepare`` writes it, everything else reads it)::

    meta.json                       languages, vocab sizes, dtype, split sizes, mean lengths
    spm.model (+ spm.vocab)         joint model, or spm.src.model / spm.tgt.model
    {split}.src.bin {split}.tgt.bin flat token ids (no BOS/EOS), dtype from meta
    {split}.src.idx {split}.tgt.idx int64 offsets into the .bin files, n+1 entries
    {split}.docs                    int64 sentence index of each document start, d+1 entries

First-pass streams (``ctxmt first-pass``, ``ctxmt prepare docrepair``) sit beside their split: a
translation of one side of it, sentence for sentence, with the split's documents::

    {split}.{name}.stream.bin       flat token ids (no BOS/EOS) in the vocabulary of the stream's side
    {split}.{name}.stream.idx       int64 offsets into the .bin file, n+1 entries (n = the split's sentences)
    {split}.{name}.stream.txt       the same translations as text: one line per sentence, a blank line
                                    between documents (the ``ctxmt translate`` layout)
    {split}.{name}.stream.json      what was translated, by which checkpoint, which side the ids are in;
                                    written last, so a stream without it is unfinished

Opening costs a few small reads whatever the corpus size; arrays are views into
``np.memmap`` objects and are only paged in when touched.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from ctxmt_cli.data.store_check import (
    DTYPES,
    check_documents,
    check_file_size,
    check_meta,
    check_offsets,
    check_token_ids,
    damaged,
    load_tokenizer,
    missing_split_fix,
)
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.outputs import write_atomic

FORMAT_VERSION = 1
SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: the raw target sentences of an evaluation split, one per line in split order (the references BLEU scores)
REFERENCE_FILE = "{split}.ref.txt"
STREAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")      # no '.': {split}.{name} stays unambiguous
_TYPECODES = {"uint16": "H", "int32": "i"}


def choose_dtype(vocab_size: int) -> str:
    """``uint16`` when every id fits (vocab ≤ 65535), else ``int32``."""
    return "uint16" if vocab_size <= 65535 else "int32"


class SplitWriter:
    """Append documents of sentence pairs to one split's arrays with buffered writes.

    Memory stays bounded whatever the corpus size: token ids, offsets and document starts all go to their
    files every ``flush_tokens`` ids (offsets are written as they are known, so no array grows with the
    split).
    """

    def __init__(self, directory: Path, split: str, dtype: str, flush_tokens: int = 1 << 17):
        if dtype not in _TYPECODES:
            raise ValueError(f"dtype must be one of {sorted(_TYPECODES)}, not {dtype!r}")
        self.dir, self.split, self.dtype = Path(directory), split, dtype
        self._tc = _TYPECODES[dtype]
        self._flush = flush_tokens
        self._files = {s: open(self.dir / f"{split}.{s}.bin", "wb") for s in ("src", "tgt")}
        self._files |= {f"{s}.idx": open(self.dir / f"{split}.{s}.idx", "wb") for s in ("src", "tgt")}
        self._files["docs"] = open(self.dir / f"{split}.docs", "wb")
        self._buf = {s: array(self._tc) for s in ("src", "tgt")}
        self._off = {s: array("q", [0]) for s in ("src", "tgt")}       # offsets not yet written
        self._docs = array("q")
        self._total = {"src": 0, "tgt": 0}
        self._sentences = self._documents = 0
        self._closed = False

    @property
    def n_sentences(self) -> int:
        return self._sentences

    def add_document(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> None:
        """Append one document given as ``[(src_ids, tgt_ids), ...]`` (at least one pair)."""
        if not pairs:
            raise ValueError("a document needs at least one sentence pair")
        self._start_document(len(pairs))
        for src, tgt in pairs:
            self._add("src", src)
            self._add("tgt", tgt)
        self._flush_if_full()

    def add_encoded(self, doc_sizes: Sequence[int], ids: dict, lengths: dict) -> None:
        """Append whole documents at once: ``doc_sizes`` sentences each (all ≥ 1); per side (``"src"``,
        ``"tgt"``) ``ids[side]`` the flat token ids of all their sentences in order (1-D array) and
        ``lengths[side]`` each sentence's length (1-D int array, ``sum(doc_sizes)`` entries)."""
        if any(n < 1 for n in doc_sizes):
            raise ValueError("a document needs at least one sentence pair")
        for n in doc_sizes:
            self._start_document(n)
        for side in ("src", "tgt"):
            flat = np.asarray(ids[side])
            if flat.size and (int(flat.min()) < 0 or int(flat.max()) > np.iinfo(self.dtype).max):
                raise OverflowError(f"a token id does not fit {self.dtype}")
            self._buf[side].frombytes(flat.astype(self.dtype, copy=False).tobytes())
            ends = self._total[side] + np.cumsum(np.asarray(lengths[side], dtype=np.int64))
            self._off[side].frombytes(ends.tobytes())
            self._total[side] = int(ends[-1]) if len(ends) else self._total[side]
        self._flush_if_full()

    def _start_document(self, n: int) -> None:
        self._docs.append(self._sentences)
        self._sentences += n
        self._documents += 1

    def _add(self, side: str, ids: Sequence[int]) -> None:
        self._buf[side].extend(ids)
        self._total[side] += len(ids)
        self._off[side].append(self._total[side])

    def _flush_if_full(self, force: bool = False) -> None:
        if not force and len(self._buf["src"]) + len(self._buf["tgt"]) < self._flush:
            return
        for side in ("src", "tgt"):
            self._buf[side].tofile(self._files[side])
            self._off[side].tofile(self._files[f"{side}.idx"])
            self._buf[side], self._off[side] = array(self._tc), array("q")
        self._docs.tofile(self._files["docs"])
        self._docs = array("q")

    def close(self) -> dict[str, int]:
        """Flush and close the files; returns sentences, documents, src_tokens, tgt_tokens."""
        if not self._closed:
            self._docs.append(self._sentences)
            self._flush_if_full(force=True)
            for f in self._files.values():
                f.close()
            self._closed = True
        return {"sentences": self._sentences, "documents": self._documents,
                "src_tokens": self._total["src"], "tgt_tokens": self._total["tgt"]}

    def __enter__(self) -> SplitWriter:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            for f in self._files.values():
                f.close()


def _map(path: Path, dtype: str) -> np.ndarray:
    if not path.is_file():
        raise CtxmtError(f"prepared file missing: {path}; re-run `ctxmt prepare`")
    check_file_size(path, np.dtype(dtype).itemsize)
    if path.stat().st_size == 0:
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class SplitArrays:
    """Read-only view of one split: per-sentence token arrays and document boundaries, checked when opened
    (:mod:`ctxmt_cli.data.store_check`; with ``vocab``: the token ids, with ``counts``: ``meta.json``'s counts)."""

    def __init__(self, directory: Path, split: str, dtype: str, vocab: dict | None = None,
                 counts: dict | None = None):
        d = Path(directory)
        self.name = split
        if dtype not in _TYPECODES:
            raise damaged(d / "meta.json", f"'dtype' is {dtype!r}, not one of {', '.join(DTYPES)}")
        self.src_data = _map(d / f"{split}.src.bin", dtype)
        self.tgt_data = _map(d / f"{split}.tgt.bin", dtype)
        self.src_offsets = _map(d / f"{split}.src.idx", "int64")
        self.tgt_offsets = _map(d / f"{split}.tgt.idx", "int64")
        self.doc_offsets = _map(d / f"{split}.docs", "int64")
        n = len(self.src_offsets) - 1
        if len(self.tgt_offsets) != n + 1:
            raise CtxmtError(f"prepared split {split!r} in {d} is inconsistent ({split}.src.idx has {n + 1} "
                             f"offsets, {split}.tgt.idx {len(self.tgt_offsets)}); re-run `ctxmt prepare --force`")
        for side, data, offsets in (("src", self.src_data, self.src_offsets), ("tgt", self.tgt_data, self.tgt_offsets)):
            check_offsets(offsets, len(data), d / f"{split}.{side}.idx",
                          f"{split}.{side}.bin holds {len(data)} tokens")
            if vocab is not None:
                check_token_ids(data, vocab[side], d / f"{split}.{side}.bin")
        check_documents(self.doc_offsets, n, d / f"{split}.docs")
        if counts is not None and (counts["sentences"], counts["documents"]) != (n, self.n_documents):
            raise damaged(d / "meta.json", f"split {split!r} holds {counts['sentences']} sentences in "
                                           f"{counts['documents']} documents, its files {n} in {self.n_documents}")

    @property
    def n_sentences(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def n_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def src(self, i: int) -> np.ndarray:
        """Token ids of source sentence ``i`` (a view into the memmap, no BOS/EOS)."""
        return self.src_data[self.src_offsets[i]:self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        """Token ids of target sentence ``i`` (a view into the memmap, no BOS/EOS)."""
        return self.tgt_data[self.tgt_offsets[i]:self.tgt_offsets[i + 1]]

    @cached_property
    def src_lengths(self) -> np.ndarray:
        """Source sentence lengths in tokens, int64, shape (n,)."""
        return np.asarray(np.diff(self.src_offsets))

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        """Target sentence lengths in tokens, int64, shape (n,)."""
        return np.asarray(np.diff(self.tgt_offsets))

    @cached_property
    def doc_index(self) -> np.ndarray:
        """Document index of every sentence, int64, shape (n,)."""
        counts = np.asarray(np.diff(self.doc_offsets))
        return np.repeat(np.arange(self.n_documents, dtype=np.int64), counts)

    def documents(self) -> Iterator[tuple[int, int]]:
        """``(start, end)`` sentence ranges of the documents, in order (end exclusive)."""
        offs = self.doc_offsets
        for k in range(self.n_documents):
            yield int(offs[k]), int(offs[k + 1])


class StreamArrays:
    """Read-only view of a finished first-pass stream of one split: per-sentence ids, the split's documents.

    ``side`` is the vocabulary the ids are in (``"tgt"``: a translation into the target language, which can
    stand in for the split's target side; ``"src"``: a back-translation); ``info`` is its ``.stream.json``.
    """

    def __init__(self, directory: Path, split: SplitArrays, name: str, dtype: str, vocab: dict | None = None):
        d = Path(directory)
        info_path = d / f"{split.name}.{name}.stream.json"
        try:
            self.info = json.loads(info_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CtxmtError(f"{info_path} is not valid JSON ({e}); write the stream again with "
                             f"{option('force')}") from None
        if not isinstance(self.info, dict):
            raise CtxmtError(f"{info_path} is not a JSON object; write the stream again with {option('force')}")
        self.name, self.split, self.side = name, split.name, self.info.get("side")
        self.data = _map(d / f"{split.name}.{name}.stream.bin", dtype)
        self.offsets = _map(d / f"{split.name}.{name}.stream.idx", "int64")
        self.doc_offsets = split.doc_offsets
        if self.side in ("src", "tgt") and len(self.offsets) == split.n_sentences + 1:
            stem = f"{split.name}.{name}.stream"
            check_offsets(self.offsets, len(self.data), d / f"{stem}.idx", f"{stem}.bin holds {len(self.data)} tokens")
            if vocab is not None:
                check_token_ids(self.data, vocab[self.side], d / f"{stem}.bin")
        else:
            raise CtxmtError(f"first-pass stream {name!r} of split {split.name!r} in {d} does not match the split "
                             f"({len(self.offsets) - 1} sentences for {split.n_sentences}); write it again with "
                             f"{option('force')}")

    @property
    def n_sentences(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def sentence(self, i: int) -> np.ndarray:
        """Token ids of translated sentence ``i`` (a view into the memmap, no BOS/EOS)."""
        return self.data[self.offsets[i]:self.offsets[i + 1]]

    @cached_property
    def lengths(self) -> np.ndarray:
        """Sentence lengths in tokens, int64, shape (n,)."""
        return np.asarray(np.diff(self.offsets))

    def documents(self) -> Iterator[tuple[int, int]]:
        """``(start, end)`` sentence ranges of the documents (the split's), in order (end exclusive)."""
        offs = self.doc_offsets
        for k in range(self.n_documents):
            yield int(offs[k]), int(offs[k + 1])


def write_meta(directory: Path, meta: dict) -> None:
    """Write ``meta.json`` (pretty, UTF-8)."""
    text = json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=False)
    write_atomic(Path(directory) / "meta.json", text + "\n")


class PreparedData:
    """A prepared dataset directory: ``meta``, lazily loaded ``tokenizer``, ``split(name)``."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        meta_path = self.dir / "meta.json"
        if not meta_path.is_file():
            raise CtxmtError(f"{self.dir} is not a prepared dataset (no meta.json); "
                             "create it with `ctxmt prepare`")
        try:
            self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CtxmtError(f"{meta_path} is not valid JSON ({e}); re-run `ctxmt prepare --force`") from None
        if not isinstance(self.meta, dict):
            raise damaged(meta_path, f"it holds a JSON {type(self.meta).__name__}, not an object")
        version = self.meta.get("format_version")
        if version != FORMAT_VERSION:
            raise CtxmtError(f"{meta_path} has format_version {version!r}, this ctxmt reads "
                             f"{FORMAT_VERSION}; re-run `ctxmt prepare --force`")
        check_meta(self.meta, meta_path, SPLIT_NAME)
        self._splits: dict[str, SplitArrays] = {}

    @property
    def splits(self) -> list[str]:
        """Names of the prepared splits (``train`` first)."""
        return list(self.meta["splits"])

    def split(self, name: str) -> SplitArrays:
        """Open split ``name``; an unknown name is a one-line error listing the splits."""
        if name not in self.meta["splits"]:
            raise CtxmtError(f"split {name!r} is not in {self.dir} (available: {', '.join(self.splits)}); "
                             f"{missing_split_fix(name, SPLIT_NAME)}")
        if name not in self._splits:
            self._splits[name] = SplitArrays(self.dir, name, self.meta["dtype"], vocab=self.meta["vocab_size"],
                                             counts=self.meta["splits"][name])
        return self._splits[name]

    def stream(self, split: str, name: str) -> StreamArrays:
        """Open the finished first-pass stream ``name`` of ``split``; a missing one is a one-line error."""
        store = self.split(split)
        if not (self.dir / f"{split}.{name}.stream.json").is_file():
            have = self.streams(split)
            raise CtxmtError(f"split {split!r} of {self.dir} has no finished first-pass stream {name!r} (streams: "
                             f"{', '.join(have) or 'none'}); write it with `ctxmt first-pass`")
        return StreamArrays(self.dir, store, name, self.meta["dtype"], vocab=self.meta["vocab_size"])

    def streams(self, split: str) -> list[str]:
        """Names of the finished first-pass streams of ``split``, sorted."""
        suffix = ".stream.json"
        return sorted(p.name[len(split) + 1:-len(suffix)] for p in self.dir.glob(f"{split}.*{suffix}")
                      if STREAM_NAME.match(p.name[len(split) + 1:-len(suffix)]))

    @cached_property
    def tokenizer(self):
        """The dataset's :class:`~ctxmt_cli.data.tokenize.Tokenizer` (checked against meta)."""
        tok = load_tokenizer(self.dir, self.meta)
        expected = self.meta.get("tokenizer_fingerprint")
        if expected and tok.fingerprint() != expected:
            raise CtxmtError(f"the SentencePiece model(s) in {self.dir} do not match its "
                             f"meta.json fingerprint; re-run `ctxmt prepare --force`")
        return tok


class MemorySplit:
    """A split held in memory, with :class:`SplitArrays`' read interface: documents of (source ids, target ids).

    For commands that read raw text files (``--src``/``--ref``) and then window and batch them exactly as
    a prepared split.
    """

    def __init__(self, documents: Sequence[Sequence[tuple[Sequence[int], Sequence[int]]]], name: str = "files"):
        self.name = name
        pairs = [pair for doc in documents for pair in doc]
        self._src = [np.asarray(s, dtype=np.int64) for s, _ in pairs]
        self._tgt = [np.asarray(t, dtype=np.int64) for _, t in pairs]
        self.doc_offsets = np.cumsum([0] + [len(doc) for doc in documents]).astype(np.int64)
        self.src_lengths = np.asarray([len(s) for s in self._src], dtype=np.int64)
        self.tgt_lengths = np.asarray([len(t) for t in self._tgt], dtype=np.int64)
        counts = np.diff(self.doc_offsets)
        self.doc_index = np.repeat(np.arange(len(documents), dtype=np.int64), counts)

    @property
    def n_sentences(self) -> int:
        return len(self._src)

    @property
    def n_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def src(self, i: int) -> np.ndarray:
        """Token ids of source sentence ``i``."""
        return self._src[i]

    def tgt(self, i: int) -> np.ndarray:
        """Token ids of target sentence ``i``."""
        return self._tgt[i]

    def documents(self) -> Iterator[tuple[int, int]]:
        """``(start, end)`` sentence ranges of the documents, in order (end exclusive)."""
        for k in range(self.n_documents):
            yield int(self.doc_offsets[k]), int(self.doc_offsets[k + 1])
