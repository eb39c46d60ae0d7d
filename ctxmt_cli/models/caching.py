"""Caching multi-encoder with sequence shortening, and the multi-encoder baseline.

Paper: "Sequence Shortening for Context-Aware Machine Translation" (seed 002).
One encoder is shared by the current and the context sentences; each sentence is
encoded on its own (``s </s>``, positions from 0) and reduced by a
:class:`~ctxmt_cli.core.shortening.Shortener` to its cache *entry* (every token,
the mean, pooled groups, latent groups or selections). The context memory of a
sentence is the entries of its previous ``context_sentences`` sentences, oldest
-> newest (plus its own entry for the aggregating reprs), each with a learned
slot (segment) embedding and learned positions. The decoder reads it through a
context-attention block (``sequential`` / ``parallel``, optional gate, eq. 5) or,
with ``integration: concat``, as extra cross-attention memory.
``encoder: separate`` computes entries with an unshared context encoder (the
paper's multi-encoder baseline: context tokens concatenated in the decoder).

Training and scoring see source windows ``c1 <brk> c2 <brk> s </s>`` (the data
layout of every family) and split them here; translation passes only the current
sentence plus the document's cached entries (``Batch.memory``), so no sentence is
encoded twice. Both paths assemble the memory with the same code, in the same order.

Hooks overridden on the core: ``encode`` (and ``__init__`` passes context-attention
blocks into the decoder layers). Everything else is the core contract.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

import torch
from torch import Tensor, nn

from ctxmt_cli.config import CachingConfig
from ctxmt_cli.core.batch import Batch, EncoderOut
from ctxmt_cli.core.layers import EncoderLayer
from ctxmt_cli.core.model import EncoderDecoder, VocabInfo
from ctxmt_cli.core.shortening import Shortener
from ctxmt_cli.data.batching import pad_rows


def split_windows(src: Tensor, vocab: VocabInfo) -> tuple[list[list[int]], list[int], list[int]]:
    """Sentences of source windows (B, S), each closed by ``</s>``; their row and distance (0 = current).

    ``c1 <brk> c2 <brk> s </s>`` gives ``[c1 </s>], [c2 </s>], [s </s>]`` with
    distances 2, 1, 0: a context sentence looks exactly as it did when it was current.
    """
    sentences, rows, dist = [], [], []
    for r, row in enumerate(src.tolist()):
        parts, cur = [], []
        for tok in row:
            if tok == vocab.pad:
                break
            if tok in (vocab.brk, vocab.eos):
                parts.append(cur + [vocab.eos])
                cur = []
            else:
                cur.append(tok)
        for i, part in enumerate(parts):
            sentences.append(part)
            rows.append(r)
            dist.append(len(parts) - 1 - i)
    return sentences, rows, dist


class Caching(EncoderDecoder):
    """Shared-encoder caching model with optional shortening of the cached sentences."""

    context_aware = True
    document_memory = True  # the translator keeps each document's entries instead of re-encoding them

    def __init__(self, cfg: CachingConfig, vocab: VocabInfo):
        attention = None if cfg.integration == "concat" else (cfg.integration == "parallel", cfg.gate)
        super().__init__(cfg, vocab, context_attention=attention)
        d = cfg.d_model
        self.shortener = Shortener(cfg.repr, d, cfg.heads, pooling=cfg.pooling, pool_size=cfg.pool_size, groups=cfg.groups,
                                   normalizer=cfg.normalizer, hidden=cfg.categorizer_hidden, dropout=cfg.dropout,
                                   attention_dropout=cfg.attention_dropout)
        self.segment = nn.Embedding(cfg.context_sentences + 1, d) if cfg.segment_embeddings else None
        self.context_pos = nn.Embedding(cfg.max_positions, d) if cfg.context_positions else None
        self.context_layers = self.context_norm = None
        if cfg.encoder == "separate":
            args = (d, cfg.heads, cfg.ffn_dim, cfg.dropout, cfg.attention_dropout, cfg.activation_dropout, cfg.normalize_before)
            self.context_layers = nn.ModuleList(EncoderLayer(*args) for _ in range(cfg.encoder_layers))
            self.context_norm = nn.LayerNorm(d) if cfg.normalize_before else nn.Identity()
        for emb in (self.segment, self.context_pos):
            if emb is not None:
                nn.init.normal_(emb.weight, 0.0, d ** -0.5)

    @staticmethod
    def resolve(cfg: CachingConfig, meta: dict) -> CachingConfig:
        """Nothing to resolve from the prepared data."""
        return cfg

    # ---- entries ------------------------------------------------------------------------------
    def entries_of(self, src: Tensor, current: EncoderOut) -> tuple[Tensor, Tensor]:
        """Cache entries (N, M, C) and mask of sentences ``src`` (N, L); ``current`` = their shared-encoder output."""
        if self.context_layers is not None:
            enc = self.encode_source(src, layers=self.context_layers, norm=self.context_norm)
        else:
            enc = current
        short, mask, _ = self.shortener(enc.states, enc.mask)
        return short, mask

    def _sentence_entries(self, sentences: list[list[int]], dist: list[int], device) -> list[Tensor]:
        """Entries of context sentences; only the nearest ``grad_context_sentences`` pass gradient into the encoder."""
        out: list = [None] * len(sentences)
        near = [i for i, d in enumerate(dist) if d <= self.cfg.grad_context_sentences]
        far = [i for i, d in enumerate(dist) if d > self.cfg.grad_context_sentences]
        for group, grad in ((near, True), (far, False)):
            if not group:
                continue
            src = pad_rows([sentences[i] for i in group], self.vocab.pad).to(device)
            # blocked sentences run the encoder without autograd: no activations kept, no gradient
            with nullcontext() if grad or not torch.is_grad_enabled() else torch.no_grad():
                enc = (self.encode_source(src, layers=self.context_layers, norm=self.context_norm)
                       if self.context_layers is not None else self.encode_source(src))
            short, mask, _ = self.shortener(enc.states, enc.mask)           # (n, M, C): the shortener still learns
            for j, i in enumerate(group):
                out[i] = short[j][mask[j]]
        return out

    # ---- contract -----------------------------------------------------------------------------
    def encode(self, batch: Batch, need_attention: bool = False) -> EncoderOut:
        """Current sentence states + the context memory in ``extra`` (and this sentence's entry for the cache)."""
        if batch.memory is not None:                                        # translation: windows of one sentence
            cur_src = batch.src
            memory = [list(m) for m in batch.memory]
        else:                                                               # training / scoring: split the windows
            sentences, rows, dist = split_windows(batch.src, self.vocab)
            current = [i for i, d in enumerate(dist) if d == 0]
            cur_src = pad_rows([sentences[i] for i in current], self.vocab.pad).to(batch.src.device)  # (B, L)
            context = [i for i, d in enumerate(dist) if d > 0]
            entries = self._sentence_entries([sentences[i] for i in context], [dist[i] for i in context], batch.src.device)
            memory = [[] for _ in current]
            for i, entry in zip(context, entries):                          # windows list context oldest first
                memory[rows[i]].append(entry)
        cur = self.encode_source(cur_src, need_attention)
        entry, entry_mask = self.entries_of(cur_src, cur)
        own = [entry[r][entry_mask[r]] for r in range(entry.size(0))]
        # the window (or the translator) decides how many context sentences: any K works at inference
        context, context_mask = self.assemble(memory, own if self.cfg.current_in_context else None)
        extra = {**cur.extra, "context": context, "context_mask": context_mask, "entry": entry, "entry_mask": entry_mask}
        if self.cfg.integration == "concat":                                # multi-encoder: one memory for cross-attention
            states = torch.cat([context, cur.states], dim=1)               # (B, Mc + S, C)
            mask = torch.cat([context_mask, cur.mask], dim=1)
            return replace(cur, states=states, mask=mask, extra=extra)
        return replace(cur, extra=extra)

    def assemble(self, memory: list[list[Tensor]], own: list[Tensor] | None) -> tuple[Tensor, Tensor]:
        """Context memory (B, Mc, C) and mask: each row's entries oldest -> newest [+ own], with slot and position embeddings.

        A row without any entry gets one zero entry (masked for ``concat``), so attention never sees an empty memory.
        """
        rows = []
        for r, entries in enumerate(memory):
            parts = [(e, len(entries) - i) for i, e in enumerate(entries)] + ([(own[r], 0)] if own is not None else [])
            rows.append([self._embed_entry(e, slot) for e, slot in parts])
        width = max(1, max(sum(e.size(0) for e in parts) for parts in rows))
        ref = self.src_embed.weight
        out = ref.new_zeros(len(rows), width, ref.size(1))                 # (B, Mc, C)
        mask = torch.zeros(len(rows), width, dtype=torch.bool, device=ref.device)
        for r, parts in enumerate(rows):
            if parts:
                row = torch.cat(parts, dim=0)                               # (M_r, C)
                out[r, : row.size(0)] = row
                mask[r, : row.size(0)] = True
            elif self.cfg.integration != "concat":
                mask[r, 0] = True                                           # the zero "no context" entry
        return out, mask

    def _embed_entry(self, entry: Tensor, slot: int) -> Tensor:
        """Add the slot embedding (distance, clamped to the trained range) and learned in-sentence positions."""
        if self.segment is not None:
            entry = entry + self.segment.weight[min(slot, self.segment.num_embeddings - 1)]
        if self.context_pos is not None:
            idx = torch.arange(entry.size(0), device=entry.device).clamp(max=self.context_pos.num_embeddings - 1)
            entry = entry + self.context_pos(idx)
        return entry
