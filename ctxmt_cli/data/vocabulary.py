"""The vocabulary of a prepared dataset: SentencePiece trained on a seeded sample, or reused from elsewhere.

Training reads the train split once and keeps each pair with probability ``spm_sample / lines`` (a seeded
draw, so the same corpus and seed give the same sample and the same model), writing only the sample to disk:
memory and disk stay bounded by the sample, not the corpus. Reusing (``--spm MODEL`` or ``--vocab-from
PREPARED_DIR``) skips that pass: several corpora then share one vocabulary, and their ``meta.json`` carry
the same ``tokenizer_fingerprint``, which training and translation check.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ctxmt_cli.data.formats import iter_parallel_located
from ctxmt_cli.data.lines import count_lines
from ctxmt_cli.data.tokenize import MosesProcessor, Tokenizer, train_sentencepiece
from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.paths import check_input_file


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def write_sample(spec, tmp: Path, lines: int | None, say: Callable[[str], None]) -> tuple[dict, int]:
    """Stream the train split once into the SentencePiece training file(s), keeping a seeded sample of about
    ``spec.spm_sample`` pairs; returns side -> path and the number of pairs written."""
    paths = ({"src": tmp / "spm.train.txt", "tgt": tmp / "spm.train.txt"} if spec.joint else
             {s: tmp / f"spm.train.{s}.txt" for s in ("src", "tgt")})
    moses = ({"src": MosesProcessor(spec.src_lang, spec.user_symbols),
              "tgt": MosesProcessor(spec.tgt_lang, spec.user_symbols)} if spec.moses else None)
    inp = spec.splits["train"]
    lines = lines if lines is not None else count_lines(Path(inp.src))   # pairs ≤ lines: an upper bound
    keep = min(1.0, spec.spm_sample / max(lines, 1))
    rng = np.random.default_rng(spec.seed)
    say(f"reading the train split for SentencePiece (a sample of about {min(spec.spm_sample, lines)} pairs"
        + (", Moses-tokenizing)" if moses else ")"))
    handles = {p: open(p, "w", encoding="utf-8", newline="\n") for p in set(paths.values())}
    pairs = written = 0
    try:
        for doc, _ in iter_parallel_located(spec.fmt, inp.src, inp.tgt, inp.docids):
            pairs += len(doc)
            chosen = doc if keep >= 1 else [p for p, u in zip(doc, rng.random(len(doc)), strict=True) if u < keep]
            written += len(chosen)
            for pair in chosen:
                for side, text in zip(("src", "tgt"), pair, strict=True):
                    text = _one_line(moses[side].tokenize(text) if moses else text)
                    handles[paths[side]].write(text + "\n")
    finally:
        for h in handles.values():
            h.close()
    if pairs == 0:                     # SentencePiece would fail with an internal error
        raise CtxmtError(f"{option('train')}: the corpus is empty ({inp.src} has no sentence pairs); give a train "
                         "split with text in it")
    if written == 0:                   # a sample drawn from a corpus far larger than its line count said
        raise OptionError("spm_sample", spec.spm_sample, "the sample of the train split came out empty; raise it")
    return paths, written


def train_models(spec, tmp: Path, paths: dict, say: Callable[[str], None]) -> Tokenizer:
    """Train the joint or per-side SentencePiece model(s) on the sample in ``paths``."""
    kind = "joint" if spec.joint else "per-side"
    say(f"training {kind} SentencePiece model(s), vocab size {spec.vocab_size}")
    per_file = spec.spm_sample * (2 if spec.joint else 1)      # the joint file holds both sides
    if spec.joint:
        model = train_sentencepiece(paths["src"], tmp / "spm", spec.vocab_size, spec.user_symbols,
                                    model_type=spec.spm_type, seed=spec.seed, input_sentence_size=per_file)
        protos = (model.read_bytes(), None)
    else:
        protos = tuple(
            train_sentencepiece(paths[s], tmp / f"spm.{s}", spec.vocab_size, spec.user_symbols,
                                model_type=spec.spm_type, seed=spec.seed,
                                input_sentence_size=per_file).read_bytes()
            for s in ("src", "tgt"))
    return Tokenizer(protos[0], protos[1], moses=spec.moses, src_lang=spec.src_lang,
                     tgt_lang=spec.tgt_lang, user_symbols=spec.user_symbols)


def reuse_models(spec, tmp: Path, say: Callable[[str], None]) -> Tokenizer:
    """The tokenizer of ``spec.spm`` (one model for both sides) or of the prepared ``spec.vocab_from``, its
    model file(s) copied into ``tmp`` under the names ``meta.json`` gives them."""
    if spec.spm is not None:
        model = check_input_file(Path(spec.spm), f"{option('spm')}: SentencePiece model",
                                 "give a .model file (e.g. spm.model of a prepared dataset)")
        say(f"reusing the SentencePiece model {model}")
        tok = _checked(lambda: Tokenizer(model.read_bytes(), None, moses=spec.moses, src_lang=spec.src_lang,
                                         tgt_lang=spec.tgt_lang, user_symbols=spec.user_symbols), model)
        shutil.copyfile(model, tmp / "spm.model")
        return tok
    if spec.vocab_tokenizer is not None:
        return _checkpoint_models(spec, tmp, say)
    from ctxmt_cli.data.store import PreparedData

    data = PreparedData(Path(spec.vocab_from))
    say(f"reusing the vocabulary of {data.dir}")
    if bool(data.meta.get("moses")) != spec.moses:
        was = "with" if data.meta.get("moses") else "without"
        raise CtxmtError(f"{option('vocab_from')} {data.dir} was prepared {was} {option('moses')}: its vocabulary "
                         "reads text "
                         f"tokenized that way; {'add' if data.meta.get('moses') else 'drop'} {option('moses')}")
    tok = _checked(lambda: data.tokenizer, data.dir)
    for name in set(data.meta["spm"].values()):
        shutil.copyfile(data.dir / name, tmp / name)
    return Tokenizer(*(tok.to_state()[k] for k in ("src_model", "tgt_model")), moses=spec.moses,
                     src_lang=spec.src_lang, tgt_lang=spec.tgt_lang, user_symbols=tok.user_symbols)


def _checkpoint_models(spec, tmp: Path, say: Callable[[str], None]) -> Tokenizer:
    """The tokenizer a checkpoint carries (``spec.vocab_tokenizer``, read from ``spec.vocab_from`` by the command
    line: an imported Marian model, or any trained model), its model file(s) written into ``tmp`` under the names
    ``meta.json`` gives them, so documents are tokenized exactly as that model reads them."""
    tok = spec.vocab_tokenizer
    say(f"reusing the vocabulary of the checkpoint {spec.vocab_from}")
    if tok.moses != spec.moses:
        was = "with" if tok.moses else "without"
        raise CtxmtError(f"{option('vocab_from')} {spec.vocab_from} reads text {was} Moses tokenization; "
                         f"{'add' if tok.moses else 'drop'} {option('moses')}")
    tok = _checked(lambda: spec.vocab_tokenizer, Path(spec.vocab_from))
    state = tok.to_state()
    if tok.joint:
        (tmp / "spm.model").write_bytes(state["src_model"])
    else:
        (tmp / "spm.src.model").write_bytes(state["src_model"])
        (tmp / "spm.tgt.model").write_bytes(state["tgt_model"])
    return Tokenizer(state["src_model"], state["tgt_model"], moses=spec.moses, src_lang=spec.src_lang,
                     tgt_lang=spec.tgt_lang, user_symbols=tok.user_symbols)


def _checked(build: Callable[[], Tokenizer], where: Path) -> Tokenizer:
    """``build()``, whose model must load and hold ctxmt's special ids and ``<brk>`` (one line naming ``where``)."""
    try:
        tok = build()
        tok.brk_id                                                   # noqa: B018 (raises when unusable)
    except CtxmtError as err:
        raise CtxmtError(f"{where}: {err}") from None
    except (RuntimeError, OSError) as err:                            # not a SentencePiece model at all
        raise CtxmtError(f"{where} is not a SentencePiece model ({' '.join(str(err).split())}); give the "
                         ".model file ctxmt prepare wrote") from None
    return tok

