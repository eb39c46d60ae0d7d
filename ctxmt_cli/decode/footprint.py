"""The memory a document translation's beam search needs at least, checked before the first step
(:func:`check_search_memory`), so that a beam or a batch that cannot fit is one line naming the options to lower,
not a machine out of memory.

One search step holds, for its ``rows`` x ``beam`` hypotheses: the decoder's cached keys and values of every
layer over the whole target window, and a copy of them while the beams are reordered; the step's logits and their
float32 log-probabilities over the target vocabulary; the token histories. The source side's cross-attention keys
and values are held once per row. Counted at the longest sentence of the input, this is a lower bound: what the
search will surely allocate (the encoder, the family's own memories and torch's workspace come on top).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxmt_cli.errors import option
from ctxmt_cli.memory import check_fits


@dataclass(frozen=True)
class SearchShape:
    """The sizes a beam search's memory depends on: ``rows`` searched in parallel, ``beam`` hypotheses each, the
    source window (``src_tokens``) and the decoder's window (``tgt_tokens``: forced prefix and output), the model's
    ``layers`` (decoder), ``width`` (d_model) and ``vocab`` (target pieces), ``element`` bytes per value."""

    rows: int
    beam: int
    src_tokens: int
    tgt_tokens: int
    layers: int
    width: int
    vocab: int
    element: int = 4

    def bytes_needed(self) -> int:
        """The lower bound of the module docstring, in bytes."""
        hyps = self.rows * self.beam
        self_cache = 2 * hyps * self.layers * 2 * self.tgt_tokens * self.width * self.element   # cache + reordered
        cross = self.rows * self.layers * 2 * self.src_tokens * self.width * self.element
        scores = hyps * self.vocab * (self.element + 4)                     # logits, float32 log-probabilities
        history = 2 * hyps * self.tgt_tokens * 8                           # live and finished token ids
        return self_cache + cross + scores + history


def search_shape(model, settings, sentences: list[list[int]]) -> SearchShape:
    """The shape of the largest search step translating ``sentences`` (every non-empty sentence's source ids, all
    documents) with ``settings`` (resolved :class:`~ctxmt_cli.decode.settings.DecodeSettings`)."""
    s, cfg = settings, model.cfg
    longest = max(len(ids) for ids in sentences)
    output = int(s.max_len_a * longest + s.max_len_b) + 1                   # + </s>
    if s.target_mode == "generate" and s.tgt_context_sentences:            # the whole target window is written
        prefix, output = 1, output * (s.tgt_context_sentences + 1)
    else:
        prefix = 1 + min(s.max_window_tokens, s.tgt_context_sentences * output)
    window = s.src_context_sentences + 1 + (s.src_next_sentences or 0)
    beam = 1 if s.sample_seed is not None else s.beam
    param = next(model.parameters(), None)
    return SearchShape(rows=min(s.batch_docs, len(sentences)), beam=beam,
                       src_tokens=min(s.max_window_tokens, window * (longest + 1)), tgt_tokens=prefix + output,
                       layers=cfg.decoder_layers, width=cfg.d_model, vocab=model.vocab.tgt_size,
                       element=4 if param is None else param.element_size())


def check_search_memory(model, settings, sentences: list[list[int]], device) -> None:
    """Refuse (one line) a translation whose beam search cannot fit in ``device``'s available memory
    (:func:`ctxmt_cli.memory.check_fits`); nothing to translate is nothing to check."""
    if not sentences:
        return
    shape = search_shape(model, settings, sentences)
    lower = f"{option('beam')} (now {shape.beam})"
    if shape.rows > 1:
        lower += f" or {option('batch_docs')} (now {settings.batch_docs})"
    check_fits(shape.bytes_needed(), f"a beam search of {shape.rows} rows x beam {shape.beam} over windows of up to "
               f"{shape.tgt_tokens} target tokens", lower, device)
