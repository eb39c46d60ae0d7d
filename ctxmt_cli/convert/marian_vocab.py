"""A Marian model's vocabulary (``source.spm``, ``target.spm``, ``vocab.json``) as a ctxmt tokenizer, and where
each ctxmt id's embedding row comes from.

ctxmt's ids put its special tokens first (pad 0, unk 1, bos 2, eos 3, ``<brk>`` 4); the rest of ``vocab.json``
follows in its own order. Each side's SentencePiece model is rewritten onto that one table
(:func:`ctxmt_cli.data.spm_proto.onto_table`), so both sides segment text exactly as Hugging Face's
``MarianTokenizer`` does and share the table's ids. Rows:

* ``bos`` is Marian's decoder start, which is its pad token: the row of ``<pad>``, with its logit;
* ``pad`` (never attended to, never emitted) and ``<brk>`` (the context separator, new) are *muted*: their output
  bias is :data:`MUTED_BIAS`, so their probability is 0 in float32 and every other token's log-probability is
  Marian's; ``<brk>`` gets a fresh row that fine-tuning a context-aware family learns;
* a piece one of the SentencePiece models produces but ``vocab.json`` lacks (Hugging Face reads it as ``<unk>``)
  becomes an id of its own, muted, with the row of ``<unk>``: the encoder reads exactly what Marian reads;
* a language token of a multilingual model (``>>fra<<``) is a user-defined piece of the source side, kept whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.data import spm_proto as sp
from ctxmt_cli.data.tokenize import BRK, Tokenizer
from ctxmt_cli.errors import CtxmtError

#: the output bias of an id the imported model never emits: exp(-100) is below float32's smallest normal number
#: relative to the best logit, so the softmax over the other ids is Marian's own
MUTED_BIAS = -100.0
#: Marian's multilingual target-language tokens, read whole from the source text
LANGUAGE_TOKEN = re.compile(r"^>>.+<<$")
SPECIALS = {"pad": (0, "<pad>"), "unk": (1, "<unk>"), "bos": (2, "<s>"), "eos": (3, "</s>")}


@dataclass
class Table:
    """ctxmt's vocabulary for an imported model: the tokenizer, the Marian row of every ctxmt id (None: a fresh
    row) and the muted ids (see the module docstring)."""

    tokenizer: Tokenizer
    rows: list = field(default_factory=list)
    muted: list = field(default_factory=list)
    added: int = 0                      # pieces the SentencePiece models have and vocab.json lacks


def _marian_ids(vocab: dict, config: dict, path: Path) -> dict:
    """Marian's pad/unk/eos ids, checked against config.json."""
    ids = {"pad": vocab.get("<pad>"), "unk": vocab.get("<unk>"), "eos": vocab.get("</s>")}
    for name, key in (("pad", "pad_token_id"), ("eos", "eos_token_id")):
        if ids[name] is None or ids[name] != config.get(key):
            raise CtxmtError(f"{path}: {SPECIALS[name][1]} has id {ids[name]}, but config.json {key} is "
                             f"{config.get(key)}; give the folder's own vocab.json")
    if ids["unk"] is None:
        raise CtxmtError(f"{path} has no <unk> entry; give the folder's own vocab.json")
    for reserved in ("<s>", BRK):
        if reserved in vocab:
            raise CtxmtError(f"{path}: entry {reserved!r} (id {vocab[reserved]}) is not supported: ctxmt reserves it")
    return ids


def check_vocab(vocab: dict, rows: int, path: Path) -> list[str]:
    """The pieces of ``vocab.json`` by id; its ids must be exactly 0..rows-1 (the embedding's rows)."""
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in vocab.items()):
        raise CtxmtError(f"{path} must map pieces to integer ids; give the folder's own vocab.json")
    by_id = {v: k for k, v in vocab.items()}
    if len(by_id) != len(vocab) or set(by_id) != set(range(rows)):
        raise CtxmtError(f"{path} has {len(vocab)} entries with ids {min(by_id, default=0)}..{max(by_id, default=0)}, "
                         f"but the model has {rows} embedding rows (config.json vocab_size); give the folder's own "
                         "vocab.json")
    return [by_id[i] for i in range(rows)]


def build_table(protos: dict, vocab: dict, config: dict, path: Path, langs: tuple[str, str]) -> Table:
    """The ctxmt tokenizer and row map of a Marian vocabulary: ``protos`` {"src", "tgt"} SentencePiece model bytes,
    ``vocab`` the parsed vocab.json (``path`` names it), ``config`` the parsed config.json."""
    pieces = check_vocab(vocab, config.get("vocab_size"), path)
    ids = _marian_ids(vocab, config, path)
    own = {}
    for side, proto in protos.items():
        found, kind = sp.read_pieces(proto, f"{side} SentencePiece model")
        if kind != sp.UNIGRAM:
            raise CtxmtError(f"the {'source' if side == 'src' else 'target'}.spm of {path.parent} is not a unigram "
                             "SentencePiece model (model_type BPE, word or char); ctxmt imports unigram models")
        own[side] = [p.text for p in found if p.kind == sp.NORMAL]
    table = [("<pad>", sp.CONTROL), ("<unk>", sp.UNKNOWN), ("<s>", sp.CONTROL), ("</s>", sp.CONTROL),
             (BRK, sp.USER_DEFINED)]
    rows, muted = [ids["pad"], ids["unk"], ids["pad"], ids["eos"], None], [0, 4]
    specials = {ids["pad"], ids["unk"], ids["eos"]}
    for index, piece in enumerate(pieces):
        if index not in specials:
            table.append((piece, sp.USER_DEFINED if LANGUAGE_TOKEN.match(piece) else sp.NORMAL))
            rows.append(index)
    missing = sorted({p for side in own.values() for p in side if p not in vocab})
    for piece in missing:                              # Hugging Face reads these as <unk>
        muted.append(len(table))
        table.append((piece, sp.NORMAL))
        rows.append(ids["unk"])
    src, tgt = (sp.onto_table(protos[s], table, SPECIALS) for s in ("src", "tgt"))
    tokenizer = Tokenizer(src, tgt, moses=False, src_lang=langs[0], tgt_lang=langs[1])
    return Table(tokenizer, rows, muted, len(missing))
