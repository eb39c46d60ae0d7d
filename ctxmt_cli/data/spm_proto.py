"""SentencePiece models rewritten onto a vocabulary table of another toolkit (Marian's ``vocab.json``).

A Marian / OPUS-MT model segments the source with ``source.spm`` and the target with ``target.spm``, and looks
every piece up in one shared table (``vocab.json``): the ids are the table's, not either model's. ctxmt's
:class:`~ctxmt_cli.data.tokenize.Tokenizer` reads ids straight from SentencePiece, with its own special ids
(pad 0, unk 1, bos 2, eos 3, ``<brk>`` 4). :func:`onto_table` writes, for one side, a SentencePiece model whose
pieces are exactly the given table, in its order: a piece the side's own model has keeps its score and type, so
the side segments text exactly as before; a piece only the other side (or the table alone) has is ``UNUSED``,
which SentencePiece's unigram segmentation never produces (decoding still spells it). Both sides then share one
id space, the table's.

The model file is a protobuf ``ModelProto``; this module reads and writes the few fields it needs with the
protobuf wire format itself (the ``protobuf`` package is not a dependency): ``pieces`` (1: piece 1, score 2,
type 3) and the trainer spec's model type (3) and special ids and pieces (40-43, 45-48). Every other field is
copied byte for byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ctxmt_cli.errors import CtxmtError

#: SentencePiece piece types (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
#: trainer spec fields: model type; unk/bos/eos/pad ids; their pieces
MODEL_TYPE, UNIGRAM = 3, 1
SPECIAL_ID_FIELDS = {"unk": 40, "bos": 41, "eos": 42, "pad": 43}
SPECIAL_PIECE_FIELDS = {"unk": 45, "bos": 46, "eos": 47, "pad": 48}


@dataclass(frozen=True)
class Piece:
    """One vocabulary entry of a SentencePiece model."""

    text: str
    score: float
    kind: int


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _put_varint(value: int) -> bytes:
    value &= (1 << 64) - 1                                               # negative int32s: ten bytes, as protobuf
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """The top-level fields of a protobuf message: (number, wire type, value) in file order; a length-delimited
    value is its bytes, a varint its integer, a fixed 32/64-bit value its raw bytes."""
    out, at = [], 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at:at + size], at + size
            if len(value) != size:
                raise ValueError("truncated field")
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, at = data[at:at + width], at + width
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    return out


def encode(items: list[tuple[int, int, bytes | int]]) -> bytes:
    """The protobuf bytes of ``items`` (as :func:`fields` gives them)."""
    out = bytearray()
    for number, wire, value in items:
        out += _put_varint(number << 3 | wire)
        if wire == 0:
            out += _put_varint(value)
        elif wire == 2:
            out += _put_varint(len(value)) + value
        else:
            out += value
    return bytes(out)


def read_pieces(model: bytes, name: str) -> tuple[list[Piece], int]:
    """The pieces of a SentencePiece model file and its model type (1 unigram, 2 BPE, ...); a file that is no
    SentencePiece model is one line naming ``name``."""
    try:
        pieces, kind = [], UNIGRAM
        for number, wire, value in fields(model):
            if number == 1 and wire == 2:
                entry = {n: v for n, _, v in fields(value)}
                score = struct.unpack("<f", entry.get(2, b"\0\0\0\0"))[0]
                pieces.append(Piece(entry.get(1, b"").decode("utf-8"), score, entry.get(3, NORMAL)))
            elif number == 2 and wire == 2:
                kind = next((v for n, w, v in fields(value) if n == MODEL_TYPE and w == 0), UNIGRAM)
    except (ValueError, UnicodeDecodeError, struct.error) as err:
        raise CtxmtError(f"{name} is not a SentencePiece model ({err}); give the folder's own file") from None
    if not pieces:
        raise CtxmtError(f"{name} is not a SentencePiece model (no pieces); give the folder's own file")
    return pieces, kind


def _piece_bytes(piece: Piece) -> bytes:
    return encode([(1, 2, piece.text.encode("utf-8")), (2, 5, struct.pack("<f", piece.score)), (3, 0, piece.kind)])


def _trainer_spec(spec: bytes, specials: dict[str, tuple[int, str]]) -> bytes:
    """The trainer spec with the special ids and pieces of ``specials`` (name -> (id, piece))."""
    numbers = set(SPECIAL_ID_FIELDS.values()) | set(SPECIAL_PIECE_FIELDS.values())
    kept = [f for f in fields(spec) if f[0] not in numbers]
    for name, (index, text) in specials.items():
        kept += [(SPECIAL_ID_FIELDS[name], 0, index), (SPECIAL_PIECE_FIELDS[name], 2, text.encode("utf-8"))]
    return encode(kept)


def onto_table(model: bytes, table: list[tuple[str, int]], specials: dict[str, tuple[int, str]]) -> bytes:
    """A SentencePiece model whose pieces are ``table`` in order: (piece, type) where a type given as ``NORMAL``
    takes the piece's score and type from ``model`` when it has the piece and is ``UNUSED`` otherwise; any other
    type (control, unknown, user-defined) is kept as given. ``specials`` sets the trainer spec's unk/bos/eos/pad
    ids and pieces, which must name control (unknown for unk) pieces of the table at those ids."""
    own = {p.text: p for p in read_pieces(model, "the SentencePiece model")[0]}
    pieces = []
    for text, kind in table:
        mine = own.get(text)
        if kind != NORMAL:
            pieces.append(Piece(text, 0.0, kind))
        elif mine is not None and mine.kind in (NORMAL, USER_DEFINED):
            pieces.append(mine)
        else:
            pieces.append(Piece(text, 0.0, UNUSED))
    out = [(1, 2, _piece_bytes(p)) for p in pieces]
    for number, wire, value in fields(model):
        if number == 2 and wire == 2:
            value = _trainer_spec(value, specials)
        if number != 1:
            out.append((number, wire, value))
    return encode(out)
