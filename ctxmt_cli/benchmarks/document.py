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
* ``s4to4-generate``: the same window, the whole target window generated token by token; no window reads an
  earlier output, so the windows of all documents are decoded side by side (:mod:`ctxmt_cli.decode.generated`).
* ``s4to4-lead``: prefix mode with documents cut into pieces that translate side by side, each first
  translating (and dropping) the 3 sentences before it as its target context (``warmup_sentences`` 3,
  :mod:`ctxmt_cli.decode.pieces`).

The pieces rows run in :data:`SLOTS` slots: a test set of a few long documents (Europarl's 14 debates, 5,663
sentences) fills the translator's 64 slots with pieces of about 90 sentences; a quick run's 4 × 48 sentences fill
16 slots with pieces of 12, the shortest a lead-in of 3 allows (:data:`~ctxmt_cli.decode.pieces.LEAD_SHARE`).

Targets: prefix <= 1.6x the sentence-level seconds per sentence on the same schedule (one sentence per document
and step, the most a model reading its earlier translations can batch), generate <= 2x; against the
sentence-level model as ``ctxmt translate`` runs it (pieces), the lead-in pieces <= 2x. Each mode against the
pieces is printed as its own ratio, and so are the tokens each mode writes per sentence (generate mode writes
the K sentences of every window; the lead-in pieces their dropped sentences too).
The models run on ``--device`` (the translator puts each batch there, as ``ctxmt translate`` does).

    ctxmt benchmark document [--quick] [--preset small] [--threads 2] [--repeats 5] [--device auto]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

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
from ctxmt_cli.decode.start import join_states  # noqa: E402
from ctxmt_cli.decode.translator import translate_documents  # noqa: E402
from ctxmt_cli.models.families import build_model  # noqa: E402

Settings = bu.Settings
FORCE = 1e4                      # far above any logit of a random model: the copied token always wins
CONTEXT = 3                      # s4to4
SLOTS = 16                       # rows of the pieces modes (module docstring)
#: the benchmarked recipe of each family beyond the preset (sentence: none)
FAMILY_OPTIONS = {"concat": {"src_context_sentences": CONTEXT, "tgt_context_sentences": CONTEXT, "shift": 20}}


@dataclass
class CopyState(DecoderState):
    """The decoder state plus the source window to copy, reordered with the beams."""

    copy: torch.Tensor | None = None                                    # (B, S)

    def index_select(self, index):
        return replace(super().index_select(index), copy=self.copy.index_select(0, index))

    @classmethod
    def join(cls, parts):
        """The core fields joined; the windows to copy padded with -1 (read as padding)."""
        state = join_states([DecoderState(**{f.name: getattr(p, f.name) for f in fields(DecoderState)})
                             for p in parts])
        width = max(p.copy.size(1) for p in parts)
        copy = torch.cat([torch.cat([p.copy, p.copy.new_full((p.copy.size(0), width - p.copy.size(1)), -1)], 1)
                          for p in parts])
        return CopyState(**{f.name: getattr(state, f.name) for f in fields(state)}, copy=copy)


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
        target = torch.where((target == self.vocab.pad) | (target < 0), torch.full_like(target, self.vocab.eos), target)
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


def runs(docs, tok, settings: Settings, counted: dict) -> dict:
    """The five timed document translations (same documents, beam 4); ``counted[mode]``: the counters of its
    last call."""
    dims = PRESETS[settings.preset]
    sentence, concat = (build(family, dims, tok.src_vocab_size, settings.seed, settings.device)
                        for family in ("sentence", "concat"))
    def translate(name: str, model, context: int, mode: str, rows: int = len(docs), warmup=None):
        # rows = the documents: pieces no longer than a document, so the sentence-level model keeps one sentence per
        # document and step, the schedule of a model reading its earlier translations; the pieces rows and generate
        # mode (no window reads an earlier output) get SLOTS rows
        stats = TranslationStats()
        settings = DecodeSettings(src_context_sentences=context, tgt_context_sentences=context, beam=4,
                                  target_mode=mode, max_len_a=1.0, max_len_b=2, batch_docs=rows,
                                  warmup_sentences=warmup)
        translate_documents(model, tok, docs, settings, stats=stats)
        assert stats.fallbacks == 0, "the copying model must write every separator"
        counted[name] = stats

    return {"sentence": lambda: translate("sentence", sentence, 0, "prefix"),
            "sentence-pieces": lambda: translate("sentence-pieces", sentence, 0, "prefix", SLOTS),
            "s4to4-prefix": lambda: translate("s4to4-prefix", concat, CONTEXT, "prefix"),
            "s4to4-generate": lambda: translate("s4to4-generate", concat, CONTEXT, "generate", SLOTS),
            "s4to4-lead": lambda: translate("s4to4-lead", concat, CONTEXT, "prefix", SLOTS, CONTEXT)}


def ratio_lines(preset: str, median: dict, counted: dict) -> list[str]:
    """The ratio lines of the medians (ms per sentence) and the tokens each mode writes per sentence."""
    def line(a: str, b: str, target: str = "") -> str:
        return f"ratio: document-{preset} {a}/{b} = {median[a] / median[b]:.2f}" + (f" ({target})" if target else "")

    written = ", ".join(f"{mode} {stats.written / stats.sentences:.1f}" for mode, stats in counted.items())
    return [f"tokens written per sentence: {written}",
            line("s4to4-prefix", "sentence", "target <= 1.6"), line("s4to4-generate", "sentence", "target <= 2"),
            line("s4to4-lead", "sentence-pieces", "target <= 2"), line("s4to4-prefix", "sentence-pieces"),
            line("s4to4-generate", "sentence-pieces"), line("sentence", "sentence-pieces")]


def run(settings: Settings) -> dict:
    """Time the five modes, print the table and the ratio lines; seconds per sentence per mode."""
    settings = bu.check(settings)
    tiny = settings.preset == "tiny"                                      # the smoke-test path
    docs, tok, name = load_text(1000 if tiny else 8000)
    n_docs, n_sents = (2, 4) if tiny else (4, 48) if settings.quick else (8, 48)
    docs = [d[:n_sents] for d in docs[:n_docs]]
    sentences, counted = sum(len(d) for d in docs), {}
    with bu.torch_threads(settings.threads):
        print(f"document {settings.preset}: {name}; {n_docs} documents x {n_sents} sentences, beam 4, "
              f"{settings.threads} torch threads; {settings.timed_repeats()} timed runs each after one warm-up"
              f"{bu.device_note(settings.device)}")
        seconds = bu.time_round_robin(runs(docs, tok, settings, counted), settings.timed_repeats(),
                                      device=settings.device)
    per_sentence = {mode: [1000.0 * s / sentences for s in values] for mode, values in seconds.items()}
    table = bu.new_table("document translation: ms per sentence (lower is better)", "ms")
    bu.add_rows(table, f"document-{settings.preset}", per_sentence)
    median = {mode: sorted(v)[len(v) // 2] for mode, v in per_sentence.items()}
    bu.print_report(table, ratio_lines(settings.preset, median, counted))
    return per_sentence


if __name__ == "__main__":
    bu.main(run, __doc__)
