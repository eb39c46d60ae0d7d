"""Document translation: seconds per sentence, sentence-level vs s4to4 (forced target prefix) vs s4to4 regenerating
the window (concatenation re-encodes the window for every sentence).

Random models would emit arbitrary lengths and, in ``generate`` mode, the wrong number of ``<brk>``
separators (each one a fallback re-decode), so the figures would measure randomness. Every model here is
wrapped in :class:`Copy`, which adds a large logit to the token of the *source window* at the decoder's
position: the model translates by copying (joint vocabulary), so each decoder step does exactly the work of
a real one, the generated window has the real length and separator count, and both target-context modes
produce the same text. The work compared is therefore what the modes really cost:

* ``sentence``: one sentence of each document per step (the schedule a target-context model must keep), no
  context;
* ``sentence-pieces``: the same model as ``ctxmt translate`` runs it, its documents cut into pieces that fill the
  slots (:mod:`ctxmt_cli.decode.pieces`; a model reading no earlier translation);
* ``s4to4-prefix``: 3 source context sentences re-encoded with the current one, the 3 previous outputs
  forced as the decoder prefix in one parallel pass, only the current sentence generated;
* ``s4to4-generate``: the same window, the whole target window generated token by token.

Targets: prefix <= 1.6x the sentence-level seconds per sentence on the same schedule, and >= 2x faster than
generate; the pieces' gain over that schedule is printed as its own ratio.
The models run on ``--device`` (the translator puts each batch there, as ``ctxmt translate`` does).

    ctxmt benchmark document [--quick] [--preset small] [--threads 2] [--repeats 5] [--device auto]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Optional

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
    from context_scaling import load_text
finally:
    sys.path.pop(0)

from ctxmt_cli.config import PRESETS, validate_recipe  # noqa: E402
from ctxmt_cli.core.batch import (
    DecoderState,  # noqa: E402
    VocabInfo,  # noqa: E402
)
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats  # noqa: E402
from ctxmt_cli.decode.translator import translate_documents  # noqa: E402
from ctxmt_cli.models.families import build_model  # noqa: E402

Settings = bu.Settings
FORCE = 1e4                      # far above any logit of a random model: the copied token always wins
CONTEXT = 3                      # s4to4
#: the benchmarked recipe of each family beyond the preset (sentence: none)
FAMILY_OPTIONS = {"concat": {"src_context_sentences": CONTEXT, "tgt_context_sentences": CONTEXT, "shift": 20}}


@dataclass
class CopyState(DecoderState):
    """The decoder state plus the source window to copy, reordered with the beams."""

    copy: Optional[torch.Tensor] = None                                    # (B, S)

    def index_select(self, index):
        return replace(super().index_select(index), copy=self.copy.index_select(0, index))


class Copy(nn.Module):
    """Forces each decoder step to emit the source window's token at that position (see the module docstring)."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.vocab, self.cfg = inner, inner.vocab, inner.cfg

    def encode(self, batch):
        return self.inner.encode(batch)

    def init_state(self, enc, batch):
        state = self.inner.init_state(enc, batch)
        return CopyState(**{f.name: getattr(state, f.name) for f in fields(state)}, copy=batch.src)

    def reorder_state(self, state, index):
        return self.inner.reorder_state(state, index)

    def decode_step(self, tokens, state):
        logits, new = self.inner.decode_step(tokens, state)               # (B, V)
        src = state.copy
        pos = state.pos.clamp(max=src.size(1) - 1)                         # (B,) position being predicted
        target = src.gather(1, pos.unsqueeze(1)).squeeze(1)                # (B,)
        target = torch.where(target == self.vocab.pad, torch.full_like(target, self.vocab.eos), target)
        return logits.scatter_add(1, target.unsqueeze(1), torch.full_like(logits[:, :1], FORCE)), new


def build(family: str, dims: tuple, vocab: int, seed: int, device: str = "cpu"):
    """A random model of ``family`` ("sentence" or "concat" s4to4) with the preset's dims, wrapped in :class:`Copy`,
    on ``device``."""
    d, f, h, e, dl = dims
    spec = {"family": family, "preset": None, "d_model": d, "ffn_dim": f, "heads": h, "encoder_layers": e,
            "decoder_layers": dl, "dropout": 0.0}
    spec.update(FAMILY_OPTIONS.get(family, {}))
    torch.manual_seed(seed)
    model = build_model(validate_recipe({"model": spec}, "document benchmark").model, VocabInfo(vocab, vocab))
    return Copy(model).to(device).eval()


def runs(docs, tok, settings: Settings) -> dict:
    """The four timed document translations (same documents, beam 4)."""
    dims = PRESETS[settings.preset]
    sentence, concat = (build(family, dims, tok.src_vocab_size, settings.seed, settings.device)
                        for family in ("sentence", "concat"))

    def translate(model, context: int, mode: str, slots: int = len(docs)):
        # slots = the documents: pieces no longer than a document, so every mode keeps one sentence per document
        # and step; the pieces row gives the translator its default slots
        stats = TranslationStats()
        settings = DecodeSettings(context, context, beam=4, target_mode=mode, max_len_a=1.0, max_len_b=2,
                                  batch_docs=slots)
        translate_documents(model, tok, docs, settings, stats=stats)
        assert stats.fallbacks == 0, "the copying model must write every separator"
        return stats

    return {"sentence": lambda: translate(sentence, 0, "prefix"),
            "sentence-pieces": lambda: translate(sentence, 0, "prefix", DecodeSettings(0, 0).batch_docs),
            "s4to4-prefix": lambda: translate(concat, CONTEXT, "prefix"),
            "s4to4-generate": lambda: translate(concat, CONTEXT, "generate")}


def run(settings: Settings) -> dict:
    """Time the four modes, print the table and the ratio lines; seconds per sentence per mode."""
    settings = bu.check(settings)
    tiny = settings.preset == "tiny"                                      # the smoke-test path
    docs, tok, name = load_text(1000 if tiny else 8000)
    n_docs, n_sents = (2, 4) if tiny else (2, 12) if settings.quick else (4, 24)
    docs = [d[:n_sents] for d in docs[:n_docs]]
    sentences = sum(len(d) for d in docs)
    with bu.torch_threads(settings.threads):
        print(f"document {settings.preset}: {name}; {n_docs} documents x {n_sents} sentences, beam 4, "
              f"{settings.threads} torch threads; {settings.timed_repeats()} timed runs each after one warm-up"
              f"{bu.device_note(settings.device)}")
        seconds = bu.time_round_robin(runs(docs, tok, settings), settings.timed_repeats(), device=settings.device)
    per_sentence = {mode: [1000.0 * s / sentences for s in values] for mode, values in seconds.items()}
    table = bu.new_table("document translation: ms per sentence (lower is better)", "ms")
    bu.add_rows(table, f"document-{settings.preset}", per_sentence)
    median = {mode: sorted(v)[len(v) // 2] for mode, v in per_sentence.items()}
    lines = [f"ratio: document-{settings.preset} s4to4-prefix/sentence = {median['s4to4-prefix'] / median['sentence']:.2f}"
             " (target <= 1.6)",
             f"ratio: document-{settings.preset} s4to4-generate/s4to4-prefix = "
             f"{median['s4to4-generate'] / median['s4to4-prefix']:.2f} (target >= 2)",
             f"ratio: document-{settings.preset} sentence/sentence-pieces = "
             f"{median['sentence'] / median['sentence-pieces']:.2f}"]
    bu.print_report(table, lines)
    return per_sentence


if __name__ == "__main__":
    bu.main(run, __doc__)
