"""The checks a prepared dataset passes when it is opened, so that no reader meets a damaged or tampered one.

``ctxmt prepare`` writes every file of a prepared directory (:mod:`ctxmt_cli.data.store`); a file changed since
(by hand, by another tool, by a disk) could make a later command read past an array's end, take the wrong number
of bytes per token, build windows across documents or crash inside SentencePiece. Each check here turns one such
change into one line naming the file, what is wrong with it and the fix (prepare the dataset again): never a
traceback, never a silent acceptance.

- ``meta.json`` (:func:`check_meta`): the fields the readers use, of their types (a token dtype this version
  writes, split names that are names, SentencePiece files inside the directory).
- each split's ``.idx`` (:func:`check_offsets`): starts at 0, never decreases, ends at its ``.bin``'s size;
  ``.docs`` (:func:`check_documents`): starts at 0, increases (no empty document), ends at the sentence count;
  ``.bin`` (:func:`check_token_ids`): every id inside the vocabulary. The arrays are scanned in blocks, so the
  memory used stays small whatever the corpus size (about a millisecond per million entries).
- the SentencePiece model(s) (:func:`load_tokenizer`): they load.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ctxmt_cli.errors import CtxmtError, option

#: the token dtypes ``ctxmt prepare`` writes (``meta.json`` ``dtype``)
DTYPES = ("uint16", "int32")
#: the fix every line of this module ends with
FIX = (f"the file was changed or damaged since `ctxmt prepare` wrote it: prepare the dataset again "
       f"(with {option('force')})")
_BLOCK = 1 << 22              # entries scanned at a time


def damaged(path: Path, what: str) -> CtxmtError:
    """The one line for a prepared file that fails a check."""
    return CtxmtError(f"{path}: {what}; {FIX}")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _plain_name(value) -> bool:
    """A file name inside the directory: no separator, not ``.``/``..`` (a tampered ``spm`` must not read
    outside it)."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def missing_split_fix(name: str, split_name) -> str:
    """What to do about a split a dataset lacks: a path is not a split name, only train/valid/test can be added."""
    if not split_name.match(name) or "/" in name or name in (".", ".."):
        return "a split is a name such as test, not a path: pick one of the available splits"
    if name in ("train", "valid", "test"):
        return f"prepare it with --{name} PATH or pick another split"
    return "pick one of the available splits (ctxmt prepare writes train, valid and test)"


def check_meta(meta, path: Path, split_name) -> None:
    """``meta.json``'s fields the readers use, of their types; ``split_name``: the pattern of a split's name."""
    if not isinstance(meta, dict):
        raise damaged(path, f"it holds {type(meta).__name__}, not a JSON object")
    checks = (
        ("dtype", lambda v: v in DTYPES, f"one of {', '.join(DTYPES)}"),
        ("splits", lambda v: isinstance(v, dict) and v, "an object of splits"),
        ("vocab_size", lambda v: isinstance(v, dict) and all(_count(v.get(s)) and v[s] > 0 for s in ("src", "tgt")),
         "{src: N, tgt: N}"),
        ("spm", lambda v: isinstance(v, dict) and all(_plain_name(v.get(s)) for s in ("src", "tgt")),
         "{src: FILE, tgt: FILE} naming files of the directory"),
        ("src_lang", lambda v: isinstance(v, str), "a language code"),
        ("tgt_lang", lambda v: isinstance(v, str), "a language code"),
        ("moses", lambda v: isinstance(v, bool), "true or false"),
    )
    for key, good, expected in checks:
        if key not in meta:
            raise damaged(path, f"no '{key}'")
        if not good(meta[key]):
            raise damaged(path, f"'{key}' is {_shown(meta[key])}, not {expected}")
    for name, info in meta["splits"].items():
        if not split_name.match(name):
            raise damaged(path, f"split name {_shown(name)} is not a name (letters, digits, _ . -)")
        if not (isinstance(info, dict) and _count(info.get("sentences")) and _count(info.get("documents"))):
            raise damaged(path, f"'splits.{name}' is {_shown(info)}, not {{sentences: N, documents: N, ...}}")


def _blocks(array: np.ndarray):
    """``(start, block)`` over ``array``, one memory-bounded block at a time (a block overlaps the next by one
    entry, so pairwise checks see every neighbour)."""
    for start in range(0, max(len(array) - 1, 1), _BLOCK):
        yield start, np.asarray(array[start:start + _BLOCK + 1])


def check_offsets(offsets: np.ndarray, size: int, path: Path, entries: str) -> None:
    """An ``.idx`` array: ``offsets[0] == 0``, never decreasing, ``offsets[-1] == size`` (``entries``: what holds
    the ``size`` entries, for the line: ``test.src.bin holds 2090 tokens``)."""
    if len(offsets) == 0:
        raise damaged(path, "it holds no offsets (an index has one more entry than sentences)")
    if int(offsets[0]) != 0:
        raise damaged(path, f"its first offset is {int(offsets[0])}, not 0")
    for start, block in _blocks(offsets):
        if int(block.max()) > size:
            at = start + int(np.argmax(block > size))
            raise damaged(path, f"offset {at} is {int(block[at - start])}, beyond the end ({entries})")
        falls = block[1:] < block[:-1]
        if falls.any():
            at = start + int(np.argmax(falls)) + 1
            raise damaged(path, f"offset {at} ({int(offsets[at])}) is below offset {at - 1} "
                                f"({int(offsets[at - 1])}): offsets never decrease")
    if int(offsets[-1]) != size:
        raise damaged(path, f"its last offset is {int(offsets[-1])}, but {entries}")


def check_documents(starts: np.ndarray, sentences: int, path: Path) -> None:
    """A ``.docs`` array: document starts from 0, increasing (every document holds a sentence), ending at
    ``sentences``."""
    if len(starts) < 1 or int(starts[0]) != 0:
        raise damaged(path, "it does not start with document 0 at sentence 0")
    for start, block in _blocks(starts):
        stalls = block[1:] <= block[:-1]
        if stalls.any():
            at = start + int(np.argmax(stalls)) + 1
            raise damaged(path, f"document {at} starts at sentence {int(starts[at])}, not after document "
                                f"{at - 1} (at {int(starts[at - 1])}): every document holds a sentence")
    if int(starts[-1]) != sentences:
        raise damaged(path, f"its documents end at sentence {int(starts[-1])}, but the index holds {sentences}")


def check_token_ids(data: np.ndarray, vocab_size: int, path: Path) -> None:
    """Every id of a ``.bin`` array is below ``vocab_size`` (and not negative)."""
    for start in range(0, len(data), _BLOCK):
        block = np.asarray(data[start:start + _BLOCK])
        low, high = int(block.min()), int(block.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            at = start + int(np.argmax(block == bad))
            raise damaged(path, f"token {at} has id {bad}, outside the vocabulary of {vocab_size}")


def check_file_size(path: Path, itemsize: int) -> None:
    """A flat array file holds a whole number of entries (else a memory map of it fails)."""
    size = path.stat().st_size
    if size % itemsize:
        raise damaged(path, f"its {size} bytes are not a whole number of {itemsize}-byte entries")


def load_tokenizer(directory: Path, meta: dict):
    """The dataset's :class:`~ctxmt_cli.data.tokenize.Tokenizer`; a SentencePiece file that does not load is one
    line naming it (the source side's when each loads alone but not together)."""
    import sentencepiece as spm

    from ctxmt_cli.data.tokenize import Tokenizer

    try:
        return Tokenizer.load(directory)
    except (CtxmtError, PermissionError):        # an unreadable file is not a damaged one: the CLI says which
        raise
    except Exception:  # noqa: BLE001 - SentencePiece reports a bad model as RuntimeError, OSError, ...
        names = [meta["spm"]["src"], meta["spm"]["tgt"]]
        for name in names:
            try:
                spm.SentencePieceProcessor(model_proto=(Path(directory) / name).read_bytes())
            except Exception:  # noqa: BLE001 - as above
                raise damaged(Path(directory) / name, "SentencePiece cannot read it") from None
        raise damaged(Path(directory) / names[0], "SentencePiece cannot read it") from None
