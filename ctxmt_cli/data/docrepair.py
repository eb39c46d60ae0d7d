"""DocRepair data (Voita, Sennrich & Titov 2019, "Context-Aware Monolingual Repair for Neural Machine Translation").

DocRepair is a monolingual sequence-to-sequence model that maps *inconsistent* groups of consecutive
target-language sentences to *consistent* ones. Its training pairs come from target-language documents alone:
every sentence is translated into the source language by a reverse (target → source) sentence-level model and
back by the forward (source → target) model, each sentence in isolation; the repair model reads the group of
round-trip translations and learns to write the original group. At test time a sentence-level model
translates every sentence and the repair model rewrites groups of its translations. Morishita et al. (2021)
use it as a Table 1 baseline: "1-best translations of four consecutive sentences concatenated with a special
token", forward and reverse models both their "Baseline 7 Enc-Layers" (Appendix A.2).

What this module follows, and where it departs:

* groups of ``group_size`` = 4 consecutive sentences of one document (Voita et al. 2019; Morishita et al. 2021),
  joined by ``<brk>`` (the papers' "special token"; Voita et al.'s data use ``_eos``) on both sides; a group
  never crosses a document boundary;
* the groups of a document are :func:`group_bounds`: windows of ``group_size`` sentences every ``stride``
  sentences, and one shorter group for a tail they leave uncovered; ``stride = group_size`` (the default, and
  what ``ctxmt translate --repair`` uses) cuts the document into disjoint groups, the last one holding the
  remaining 1-3 sentences, so training sees the short tail groups that translation produces. The papers do not
  say how a document's tail or overlap is handled; Voita et al.'s data are fixed 4-sentence fragments;
* the round trip (:func:`~ctxmt_cli.decode.first_pass.round_trip_corpus`) back-translates with beam search and
  *samples* the forward translation by default, as Voita et al.'s public configuration does (``round_trip:
  beam`` takes the 1-best both ways); the 10% of input tokens they replace by random ones during training is the
  repair recipe's ``data.input_noise`` (:mod:`ctxmt_cli.data.noise`), not part of this corpus;
* the result is an ordinary prepared directory with one SentencePiece model, the target language's, on both
  sides, so ``ctxmt train`` trains the repair model as a plain ``sentence`` Transformer over the joined groups
  (a standard Transformer over the concatenated group, its loss on all four sentences).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ctxmt_cli.data.prepare import check_prepare_output
from ctxmt_cli.data.store import FORMAT_VERSION, PreparedData, SplitWriter, choose_dtype, write_meta
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.replacing import build_dir

GROUP_SIZE = 4


def group_bounds(n: int, size: int = GROUP_SIZE, stride: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` sentence ranges of the groups of an n-sentence document (end exclusive).

    Windows of ``size`` sentences start every ``stride`` (default ``size``: disjoint groups) while they fit;
    if the last one stops short of the end, one more group starts ``stride`` after it and takes the rest
    (fewer than ``size`` sentences). A document shorter than ``size`` is one group. Every sentence is in at
    least one group, in document order.
    """
    stride = size if stride is None else stride
    if size < 1 or not 1 <= stride <= size:
        raise CtxmtError(f"{option('group_size')} {size} {option('stride')} {stride}: give a group size >= 1 and a "
                         "stride from 1 to the group size (a larger stride would skip sentences)")
    if n <= 0:
        return []
    groups = [(s, s + size) for s in range(0, max(n - size, 0) + 1, stride)]
    last_start, last_end = groups[-1]
    groups[-1] = (last_start, min(last_end, n))
    if groups[-1][1] < n:
        groups.append((last_start + stride, n))
    return groups


def document_groups(doc_offsets, size: int = GROUP_SIZE, stride: int | None = None) -> list[list[tuple[int, int]]]:
    """Per document, the global ``(start, end)`` sentence ranges of its groups (see :func:`group_bounds`)."""
    offs = [int(x) for x in doc_offsets]
    return [[(a + s, a + e) for s, e in group_bounds(b - a, size, stride)]
            for a, b in zip(offs, offs[1:], strict=False)]


def join_group(sentences, brk: int) -> list[int]:
    """Token ids of a group: its sentences joined by ``<brk>`` (no ``</s>``; the data pipeline adds it)."""
    parts: list[np.ndarray] = []
    for i, ids in enumerate(sentences):
        if i:
            parts.append(np.asarray([brk], dtype=np.int64))
        parts.append(np.asarray(ids, dtype=np.int64))
    return np.concatenate(parts).tolist() if parts else []


def reversed_tokenizer(tok):
    """The tokenizer of the reverse direction: the sides (models, languages) of ``tok`` swapped."""
    from ctxmt_cli.data.tokenize import Tokenizer

    state = tok.to_state()
    src, tgt = state["src_model"], state["tgt_model"]
    return Tokenizer(tgt if tgt is not None else src, src if tgt is not None else None, moses=state["moses"],
                     src_lang=state["tgt_lang"], tgt_lang=state["src_lang"], user_symbols=state["user_symbols"])


def _place(source: Path, target: Path) -> None:
    """``target`` gets ``source``'s bytes: a hard link where the file system allows (prepared files are never
    rewritten in place), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _swap(pair: Mapping) -> dict:
    return {"src": pair["tgt"], "tgt": pair["src"]}


def _reverse_meta(meta: dict, tok, data: Path) -> dict:
    splits = {name: {**info, "src_tokens": info["tgt_tokens"], "tgt_tokens": info["src_tokens"]}
              for name, info in meta["splits"].items()}
    return {**meta, "src_lang": meta["tgt_lang"], "tgt_lang": meta["src_lang"], "vocab_size": _swap(meta["vocab_size"]),
            "mean_sentence_length": _swap(meta["mean_sentence_length"]), "splits": splits,
            "tokenizer_fingerprint": tok.fingerprint(), "source": {"format": "reverse", "of": str(data.resolve())}}


def _in_temp_dir(out: Path, force: bool, build: Callable[[Path], dict], command: str, data: Path) -> dict:
    """Run ``build(tmp)`` in a sibling temp directory and swap it in at ``out`` (the old one kept on any error);
    ``data``, the dataset read, must not be ``out`` nor lie inside it."""
    check_prepare_output(out, force, [data])
    return build_dir(out, command, build, force=force, inputs=[data])


def reverse_prepared(data: Path, out: Path, *, force: bool = False) -> dict:
    """``ctxmt prepare reverse``: the prepared dataset ``data`` with source and target swapped, in ``out``.

    Same SentencePiece model(s) and ids, so a model trained on it (DocRepair's reverse model) shares the
    vocabulary of ``data``; first-pass streams and ``raw/`` are not carried over.
    """
    data, out = Path(data), Path(out)
    prepared = PreparedData(data)
    tok = reversed_tokenizer(prepared.tokenizer)
    if out.resolve() == data.resolve():
        raise CtxmtError(f"{option('out')} {out} is the {option('data')} directory; write the reversed dataset "
                         "somewhere else")

    def build(tmp: Path) -> dict:
        spm = prepared.meta["spm"]
        names = {spm["src"]: spm["src"]} if prepared.meta["joint"] else {spm["tgt"]: spm["src"], spm["src"]: spm["tgt"]}
        for old, new in names.items():
            for suffix in (".model", ".vocab"):
                src_file = data / (old.removesuffix(".model") + suffix)
                if src_file.is_file():
                    _place(src_file, tmp / (new.removesuffix(".model") + suffix))
        for split in prepared.splits:
            for old, new in (("src", "tgt"), ("tgt", "src")):
                for ext in ("bin", "idx"):
                    _place(data / f"{split}.{old}.{ext}", tmp / f"{split}.{new}.{ext}")
            _place(data / f"{split}.docs", tmp / f"{split}.docs")
        meta = _reverse_meta(prepared.meta, tok, data)
        write_meta(tmp, meta)
        return meta

    return _in_temp_dir(out, force, build, "prepare reverse", data)


def _write_repair_split(writer: SplitWriter, store, stream, groups, brk: int) -> None:
    for doc in groups:
        writer.add_document([(join_group([stream.sentence(i) for i in range(a, b)], brk),
                              join_group([store.tgt(i) for i in range(a, b)], brk)) for a, b in doc])


def build_repair_corpus(prepared: PreparedData, streams: Mapping[str, str], out: Path, *, group_size: int = GROUP_SIZE,
                        stride: int | None = None, force: bool = False, provenance: dict | None = None) -> dict:
    """Write the DocRepair corpus to ``out``: for each split, source = groups of round-trip translations
    (the target-side stream ``streams[split]``), target = the same groups of the split's own target side.

    One SentencePiece model (the target side's of ``prepared``) serves both sides. ``meta.json`` records the
    grouping under ``docrepair`` (checkpoints keep it, so ``translate --repair`` groups the same way).
    """
    from ctxmt_cli.data.tokenize import Tokenizer

    stride = group_size if stride is None else stride
    group_bounds(group_size, group_size, stride)                           # a bad size/stride fails before any work
    meta0, out = prepared.meta, Path(out)
    opened = {split: (prepared.split(split), prepared.stream(split, name)) for split, name in streams.items()}
    for split, (_, stream) in opened.items():
        if stream.side != "tgt":
            raise CtxmtError(f"stream {streams[split]!r} of split {split!r} is a translation into the source "
                             "language; DocRepair needs round-trip translations (target side)")
    spm_file = prepared.dir / meta0["spm"]["tgt"]
    tok = Tokenizer(spm_file.read_bytes(), None, moses=meta0["moses"], src_lang=meta0["tgt_lang"],
                    tgt_lang=meta0["tgt_lang"], user_symbols=meta0.get("user_symbols", ("<brk>",)))
    dtype, brk = choose_dtype(tok.tgt_vocab_size), tok.brk_id

    def build(tmp: Path) -> dict:
        shutil.copyfile(spm_file, tmp / "spm.model")
        vocab_file = spm_file.with_suffix(".vocab")
        if vocab_file.is_file():
            shutil.copyfile(vocab_file, tmp / "spm.vocab")
        counts = {}
        for split, (store, stream) in opened.items():
            with SplitWriter(tmp, split, dtype) as writer:
                _write_repair_split(writer, store, stream, document_groups(store.doc_offsets, group_size, stride), brk)
            counts[split] = writer.close()
        meta = _repair_meta(prepared, tok, dtype, counts, {"group_size": group_size, "stride": stride,
                                                           "separator": "<brk>", "round_trip_streams": dict(streams)})
        meta["source"].update(provenance or {})
        write_meta(tmp, meta)
        return meta

    return _in_temp_dir(out, force, build, "prepare docrepair", prepared.dir)


def _repair_meta(prepared: PreparedData, tok, dtype: str, counts: dict, grouping: dict) -> dict:
    """``meta.json`` of a repair corpus: the target language on both sides, one SentencePiece model."""
    meta0 = prepared.meta
    first = counts.get("train") or next(iter(counts.values()))
    return {
        "format_version": FORMAT_VERSION, "src_lang": meta0["tgt_lang"], "tgt_lang": meta0["tgt_lang"],
        "joint": True, "moses": meta0["moses"], "spm": {"src": "spm.model", "tgt": "spm.model"},
        "vocab_size": {"src": tok.tgt_vocab_size, "tgt": tok.tgt_vocab_size},
        "specials": meta0["specials"], "user_symbols": meta0.get("user_symbols", ["<brk>"]), "dtype": dtype,
        "max_sentence_tokens": grouping["group_size"] * (meta0["max_sentence_tokens"] + 1),
        "truncated": {split: 0 for split in counts}, "splits": counts,
        "mean_sentence_length": {side: first[f"{side}_tokens"] / max(first["sentences"], 1) for side in ("src", "tgt")},
        "tokenizer_fingerprint": tok.fingerprint(), "docrepair": grouping,
        "source": {"format": "docrepair", "data": str(prepared.dir.resolve())},
    }
