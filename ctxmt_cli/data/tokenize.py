"""Subword tokenization: SentencePiece (joint or per side) with optional Moses pre-tokenization.

Every model that ``prepare`` trains has the same special ids: pad=0, unk=1, bos=2,
eos=3, then the user symbols in order (``<brk>`` = 4), so the context separator is
one real vocabulary item. A :class:`Tokenizer` serialises to plain Python
(:meth:`Tokenizer.to_state`) so checkpoints carry it and ``translate`` needs
nothing else.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.temps import disk_full

SPECIAL_IDS = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
BRK = "<brk>"
STATE_VERSION = 1


def train_sentencepiece(
    input_file: Path,
    model_prefix: Path,
    vocab_size: int,
    user_symbols: Sequence[str] = (BRK,),
    model_type: str = "unigram",
    seed: int = 1,
    input_sentence_size: int = 2_000_000,
) -> Path:
    """Train a SentencePiece model on ``input_file`` (one sentence per line).

    Writes ``model_prefix.model`` and ``model_prefix.vocab`` and returns the model path.
    ``hard_vocab_limit`` is off so tiny corpora give a smaller vocabulary instead of
    an error; at most ``input_sentence_size`` (shuffled) sentences are loaded so memory
    stays bounded. Deterministic for a given seed, input and machine.
    """
    model_prefix = Path(model_prefix)
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            input=str(input_file),
            model_prefix=str(model_prefix),
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=SPECIAL_IDS["pad"], unk_id=SPECIAL_IDS["unk"],
            bos_id=SPECIAL_IDS["bos"], eos_id=SPECIAL_IDS["eos"],
            user_defined_symbols=list(user_symbols),
            hard_vocab_limit=False,
            character_coverage=1.0,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=min(16, os.cpu_count() or 1),
            minloglevel=2,
        )
    except (RuntimeError, OSError) as e:
        msg = " ".join(str(e).split())
        raise CtxmtError(
            f"SentencePiece training on {input_file} failed ({msg}); check the training "
            f"text or change {option('vocab_size')}"
        ) from None
    return _written_model(model_prefix.with_name(model_prefix.name + ".model"))


def _written_model(path: Path) -> Path:
    """``path``, the model SentencePiece just wrote, once it loads: SentencePiece does not check its writes, so
    a nearly full disk leaves a truncated model (reported as the full disk it is)."""
    try:
        spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as e:
        if disk_full(path.parent):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
        raise CtxmtError(f"SentencePiece wrote {path}, which does not load ({' '.join(str(e).split())}); check the "
                         "disk it is on and run again") from None
    return path


class MosesProcessor:
    """Lazily built sacremoses tokenizer/detokenizer pair for one language."""

    def __init__(self, lang: str, protected: Sequence[str]):
        from sacremoses import MosesDetokenizer, MosesTokenizer

        self.tok = MosesTokenizer(lang=lang)
        self.detok = MosesDetokenizer(lang=lang)
        self.protected = [re.escape(s) for s in protected]

    def tokenize(self, text: str) -> str:
        return self.tok.tokenize(text, escape=False, return_str=True,
                                 protected_patterns=self.protected)

    def detokenize(self, text: str) -> str:
        return self.detok.detokenize(text.split())


class Tokenizer:
    """SentencePiece model(s) for both sides plus the optional Moses step."""

    def __init__(self, src_model: bytes, tgt_model: bytes | None = None, *,
                 moses: bool = False, src_lang: str = "src", tgt_lang: str = "tgt",
                 user_symbols: Sequence[str] = (BRK,)):
        self._src_proto = bytes(src_model)
        self._tgt_proto = None if tgt_model is None or tgt_model == src_model else bytes(tgt_model)
        self.moses = bool(moses)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.user_symbols = tuple(user_symbols)  # kept whole by Moses
        self._sp = {"src": spm.SentencePieceProcessor(model_proto=self._src_proto)}
        self._sp["tgt"] = (self._sp["src"] if self._tgt_proto is None
                           else spm.SentencePieceProcessor(model_proto=self._tgt_proto))
        for side in ("src", "tgt"):
            sp = self._sp[side]
            got = {"pad": sp.pad_id(), "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
            if got != SPECIAL_IDS:
                raise CtxmtError(f"the {side} SentencePiece model has special ids {got}, "
                                 f"expected {SPECIAL_IDS}; re-train it with `ctxmt prepare`")
        self._moses: dict[str, MosesProcessor] = {}
        self.detokenize = True             # decoding undoes Moses; False: see :meth:`without_detokenizer`

    # -- construction / serialisation -------------------------------------------------
    @property
    def joint(self) -> bool:
        """True when one model serves both sides."""
        return self._tgt_proto is None

    def to_state(self) -> dict:
        """Plain-Python state (bytes, bools, strings) for checkpoints."""
        return {"version": STATE_VERSION, "src_model": self._src_proto,
                "tgt_model": self._tgt_proto, "moses": self.moses,
                "src_lang": self.src_lang, "tgt_lang": self.tgt_lang,
                "user_symbols": list(self.user_symbols)}

    @classmethod
    def from_state(cls, state: dict) -> Tokenizer:
        """Rebuild a tokenizer from :meth:`to_state` output."""
        try:
            return cls(state["src_model"], state.get("tgt_model"), moses=state["moses"],
                       src_lang=state["src_lang"], tgt_lang=state["tgt_lang"],
                       user_symbols=state.get("user_symbols", (BRK,)))
        except KeyError as e:
            raise CtxmtError(f"tokenizer state lacks {e}; the checkpoint is incomplete "
                             "or from another tool") from None

    @classmethod
    def load(cls, prepared_dir: Path) -> Tokenizer:
        """Load the tokenizer of a prepared dataset directory (``meta.json`` + spm files)."""
        d = Path(prepared_dir)
        meta_path = d / "meta.json"
        if not meta_path.is_file():
            raise CtxmtError(f"{d} is not a prepared dataset (no meta.json); "
                             "create it with `ctxmt prepare`")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        protos = {}
        for side in ("src", "tgt"):
            p = d / meta["spm"][side]
            if not p.is_file():
                raise CtxmtError(f"SentencePiece model missing: {p}; re-run `ctxmt prepare`")
            protos[side] = p.read_bytes()
        return cls(protos["src"], protos["tgt"], moses=meta["moses"],
                   src_lang=meta["src_lang"], tgt_lang=meta["tgt_lang"],
                   user_symbols=meta.get("user_symbols", (BRK,)))

    def fingerprint(self) -> str:
        """sha256 over the vocabularies (pieces, scores, types) of both sides and the
        Moses flag: equal fingerprints mean the same ids for the same text.

        The model protos themselves also record training paths, so hashing their bytes
        would tell two identical vocabularies apart.
        """
        h = hashlib.sha256(f"moses={self.moses};joint={self.joint}".encode())
        for side in ("src",) if self.joint else ("src", "tgt"):
            sp = self._sp[side]
            for i in range(sp.get_piece_size()):
                kind = (sp.is_control(i), sp.is_unknown(i), sp.is_unused(i), sp.is_byte(i))
                h.update(f"\0{sp.id_to_piece(i)}\t{sp.get_score(i)!r}\t{kind}".encode())
        return h.hexdigest()

    def without_detokenizer(self) -> Tokenizer:
        """This tokenizer, decoding to the Moses-tokenized text the model reads and writes (no Moses
        detokenization; identical otherwise). Tokenized BLEU (``--tokenize none``) scores that text, as Yang
        et al. (HanoiT) and most document-level papers do; without ``moses`` it changes nothing."""
        twin = copy.copy(self)             # shares the SentencePiece processors and the Moses cache
        twin.detokenize = False
        return twin

    # -- ids ------------------------------------------------------------------------
    pad_id = property(lambda self: SPECIAL_IDS["pad"])
    unk_id = property(lambda self: SPECIAL_IDS["unk"])
    bos_id = property(lambda self: SPECIAL_IDS["bos"])
    eos_id = property(lambda self: SPECIAL_IDS["eos"])

    @property
    def brk_id(self) -> int:
        """Id of the ``<brk>`` context separator (the same on both sides)."""
        ids = {s: self._sp[s].piece_to_id(BRK) for s in ("src", "tgt")}
        if ids["src"] != ids["tgt"] or ids["src"] == self.unk_id:
            raise CtxmtError(f"the vocabulary has no usable {BRK} symbol ({ids}); re-run "
                             "`ctxmt prepare` (it adds <brk> to every model)")
        return ids["src"]

    @property
    def src_vocab_size(self) -> int:
        return self._sp["src"].get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._sp["tgt"].get_piece_size()

    def piece(self, token_id: int, side: str = "tgt") -> str:
        """The subword string of ``token_id`` on ``side`` (``"src"`` or ``"tgt"``)."""
        return self._sp[side].id_to_piece(int(token_id))

    # -- text <-> ids -----------------------------------------------------------------
    def _moses_for(self, side: str) -> MosesProcessor:
        if side not in self._moses:
            lang = self.src_lang if side == "src" else self.tgt_lang
            self._moses[side] = MosesProcessor(lang, self.user_symbols)
        return self._moses[side]

    def pretokenize(self, text: str, side: str) -> str:
        """The text spm sees: Moses-tokenized when ``moses`` is on, else unchanged."""
        return self._moses_for(side).tokenize(text) if self.moses else text

    def encode_batch(self, texts: Sequence[str], side: str,
                     pretokenized: bool = False, num_threads: int | None = None) -> list[list[int]]:
        """Encode many sentences at once (spm runs them in parallel, on ``num_threads`` threads: default
        SentencePiece's own). No BOS/EOS added.

        ``pretokenized=True`` skips the Moses step (the texts already went through it).
        """
        if self.moses and not pretokenized:
            texts = [self.pretokenize(t, side) for t in texts]
        if num_threads is None:
            return self._sp[side].encode(list(texts))
        return self._sp[side].encode(list(texts), num_threads=num_threads)

    def encode_src(self, text: str) -> list[int]:
        """Source sentence -> ids (no BOS/EOS)."""
        return self._sp["src"].encode(self.pretokenize(text, "src"))

    def encode_tgt(self, text: str) -> list[int]:
        """Target sentence -> ids (no BOS/EOS)."""
        return self._sp["tgt"].encode(self.pretokenize(text, "tgt"))

    def _decode(self, ids: Sequence[int], side: str) -> str:
        drop = (self.pad_id, self.bos_id, self.eos_id)
        text = self._sp[side].decode([int(i) for i in ids if int(i) not in drop])
        return self._moses_for(side).detokenize(text) if self.moses and self.detokenize else text

    def decode_tgt(self, ids: Sequence[int]) -> str:
        """Target ids -> detokenized text; pad/bos/eos are dropped, user symbols kept."""
        return self._decode(ids, "tgt")

    def decode_src(self, ids: Sequence[int]) -> str:
        """Source ids -> detokenized text; pad/bos/eos are dropped, user symbols kept."""
        return self._decode(ids, "src")
