"""``ctxmt export ctranslate2 -c CKPT -o DIR``: a checkpoint as a CTranslate2 model folder.

The folder holds what CTranslate2 reads (``model.bin``, ``config.json``, the vocabularies), the SentencePiece
model(s) of the checkpoint's tokenizer and ``ctxmt.json`` (:mod:`ctxmt_cli.export.ct2_folder`), so ``ctxmt translate
--engine ctranslate2`` rebuilds windows and tokenization from the folder alone, and a CTranslate2 user can translate
with the SentencePiece model directly: the vocabularies are the SentencePiece pieces, ctxmt's special ids are
CTranslate2's special tokens (``<blank>`` padding, ``<unk>``, ``<s>``, ``</s>``, which CTranslate2 appends to the
source itself) and ``<brk>``, the context separator, is an ordinary token.

Only models CTranslate2 computes exactly are exported (:func:`refusal`): the sentence-level Transformer and
concatenation models whose windows are plain sequences. A concatenation model's segment-shifted positions
(Lupo et al. 2022), segment embeddings, persistent encodings and position-segment embeddings (Lupo et al. 2023)
change the position codes per sentence of the window, which CTranslate2's position table cannot express; the
context discount only weights the training loss, so a model trained with it is exported.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.export.ct2_folder import META_FILE, metadata, spm_files
from ctxmt_cli.outputs import write_atomic, write_json
from ctxmt_cli.paths import check_not_input, check_output_dir
from ctxmt_cli.replacing import build_dir, check_new_or_replaceable

#: ``--quantization``: the weight types CTranslate2 stores
QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16", "bfloat16")
#: what CTranslate2's Transformer lacks, per family ctxmt cannot export
FAMILY_GAPS = {"caching": "context memory or context-attention layers", "mbe": "document-summary input",
               "hanoit": "context selection or target-context stream"}
INSTALL = "pip install 'ctxmt[ctranslate2]'"


def require_ctranslate2(what: str) -> None:
    """One line naming the extra to install when ``ctranslate2`` does not import."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise CtxmtError(f"{what} needs CTranslate2, which is not installed: {INSTALL}") from None


def _shift_text(shift) -> str | None:
    """The segment shift as the recipe spells it, or None when positions are not shifted."""
    if shift is None or shift == 0:
        return None
    if isinstance(shift, (int, str)):
        return str(shift)
    return None if (shift.src, shift.tgt) == (0, 0) else f"{{src: {shift.src}, tgt: {shift.tgt}}}"


def refusal(cfg) -> str | None:
    """Why the model config ``cfg`` cannot become a CTranslate2 Transformer (one line naming the option and its
    value, and what to export instead), or None when it can."""
    if cfg.family not in EXPORTED:
        gap = FAMILY_GAPS.get(cfg.family, "layers for this family")
        return f"model.family={cfg.family}: CTranslate2's Transformer has no {gap}; export a sentence or concat model"
    return EXPORTED[cfg.family](cfg)


def _concat_refusal(cfg) -> str | None:
    """Why a concat model cannot be exported: an option CTranslate2's Transformer has no layer for."""
    fix = "export a concat model trained with"
    shift = _shift_text(cfg.shift)
    if shift is not None:
        return (f"model.shift={shift}: CTranslate2 numbers positions along the whole sequence and cannot shift them "
                f"per sentence of the window; {fix} model.shift: null")
    if cfg.pse is not None:
        return (f"model.pse.d_se={cfg.pse.d_se}: CTranslate2 has no position-segment embeddings; {fix} model.pse: null "
                "and model.segment: null")
    if cfg.segment is not None:
        return f"model.segment={cfg.segment}: CTranslate2 has no segment embeddings; {fix} model.segment: null"
    if cfg.persistent:
        return ("model.persistent=true: CTranslate2 adds position codes once, at the input, not to every layer; "
                f"{fix} model.persistent: false")
    if cfg.reads_target_context:
        return ("model.bilingual=true: a CTranslate2 model reads source windows alone, never a first pass of the "
                f"context; {fix} model.bilingual: false")
    return None


#: the families CTranslate2's Transformer can hold, each with the check of its options (None: it can)
EXPORTED = {"sentence": lambda cfg: None, "concat": _concat_refusal}


def position_table(recipe) -> int:
    """Position codes to store per side: the longest source window (``data.max_window_tokens``) and the longest
    target sequence decoding can build (``<s>``, target context that leaves room for the current sentence, at most
    ``max_len_a * n + max_len_b`` new tokens)."""
    limit, dec = recipe.data.max_window_tokens, recipe.decode
    return limit + dec.max_len_b + math.ceil(max(dec.max_len_a - 1.0, 0.0) * limit) + 2


def vocabulary(tokenizer, side: str, size: int) -> list[str]:
    """The token strings of ids 0..size-1 on ``side``: SentencePiece pieces, ctxmt's special ids as CTranslate2's
    special tokens (``<blank>`` padding, ``<unk>``, ``<s>``, ``</s>``)."""
    tokens = [tokenizer.piece(i, side) for i in range(size)]
    for i, name in ((tokenizer.pad_id, "<blank>"), (tokenizer.unk_id, "<unk>"), (tokenizer.bos_id, "<s>"),
                    (tokenizer.eos_id, "</s>")):
        tokens[i] = name
    if len(set(tokens)) != len(tokens):
        twice = next(t for t in tokens if tokens.count(t) > 1)
        raise CtxmtError(f"the {side} SentencePiece vocabulary holds the token {twice!r} twice once ctxmt's special "
                         "ids become CTranslate2's special tokens; re-run ctxmt prepare with another vocabulary")
    return tokens


def _check_out(out_dir: Path, checkpoint: Path, force: bool) -> None:
    """The --out folder is new, or (``force``) a model folder ctxmt exported holding nothing else and not the
    checkpoint."""
    check_not_input(out_dir, [checkpoint], option("out_dir"))
    check_new_or_replaceable(out_dir, option("out_dir"), force, [checkpoint], kind="a model folder ctxmt exported",
                             command="export ctranslate2")
    if not out_dir.exists():
        check_output_dir(out_dir, option("out_dir"))


def _save(loaded, out: Path, quantization: str, positions: int) -> None:
    """Write the CTranslate2 model, the SentencePiece model(s) and ``ctxmt.json`` into the empty folder ``out``."""
    from ctxmt_cli.export.ctranslate2 import transformer_spec

    tok, vocab = loaded.tokenizer, loaded.vocab
    spec = transformer_spec(loaded.model, positions)
    spec.config.add_source_eos = True               # a CTranslate2 user passes pieces; ctxmt's windows end in </s>
    spec.register_source_vocabulary(vocabulary(tok, "src", vocab.src_size))
    spec.register_target_vocabulary(vocabulary(tok, "tgt", vocab.tgt_size))
    spec.validate()
    spec.optimize(quantization=quantization)
    spec.save(str(out))
    for name, proto in spm_files(tok).items():
        write_atomic(out / name, proto)
    meta = metadata(loaded.recipe, tok, vocab, quantization, positions)
    write_json(out / META_FILE, meta)


def export_ctranslate2(checkpoint: Path, out_dir: Path, quantization: str = "float32", force: bool = False) -> dict:
    """Export ``checkpoint`` to the folder ``out_dir``; its ``ctxmt.json`` metadata. Nothing is written when the
    model cannot be represented; the folder appears whole (written beside it, then renamed)."""
    from ctxmt_cli.models.loading import load_model

    require_ctranslate2("ctxmt export ctranslate2")
    if quantization not in QUANTIZATIONS:
        raise OptionError("quantization", quantization, f"choose one of {', '.join(QUANTIZATIONS)}")
    checkpoint, out_dir = Path(checkpoint), Path(out_dir)
    _check_out(out_dir, checkpoint, force)
    loaded = load_model(checkpoint, device="cpu")
    why = refusal(loaded.recipe.model)
    if why is not None:
        raise CtxmtError(f"cannot export {checkpoint} to CTranslate2: {why}")
    def write(tmp: Path) -> None:
        _save(loaded, tmp, quantization, position_table(loaded.recipe))

    build_dir(out_dir, "export ctranslate2", write, what=option("out_dir"), force=force, inputs=[checkpoint])
    return json.loads((out_dir / META_FILE).read_text(encoding="utf-8"))
