"""Caching multi-encoder with sequence shortening, and the multi-encoder baseline.

Paper: "Sequence Shortening for Context-Aware Machine Translation" (2023).
One encoder is shared by the current and the context sentences; each sentence is
encoded on its own (``s </s>``, positions from 0) and reduced by a
:class:`~ctxmt_cli.models.caching.shortening.Shortener` to its cache *entry* (every token,
the mean, pooled groups, latent groups or selections). The context memory of a
sentence is the entries of its previous ``src_context_sentences`` sentences, oldest
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

Hooks overridden on the core: ``encode`` (fills ``EncoderOut.context`` and ``entry``, and
hands the grouping/selecting weights of each current sentence to an attention probe as
kind ``assignment``) and ``context_aware``; ``__init__`` passes context-attention blocks into the decoder
layers. Everything else is the core contract. Its inputs (:mod:`ctxmt_cli.models.caching.inputs`) translate a
document with a memory of cached entries.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

import torch
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch, EncoderOut, Memory, VocabInfo
from ctxmt_cli.core.layers import EncoderLayer
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.core.probe import AttentionProbe, AttentionView
from ctxmt_cli.models.bilingual_windows import check_joint
from ctxmt_cli.models.caching.config import CachingConfig
from ctxmt_cli.models.caching.shortening import Shortener


class Caching(EncoderDecoder):
    """Shared-encoder caching model with optional shortening of the cached sentences."""

    context_aware = True

    def __init__(self, cfg: CachingConfig, vocab: VocabInfo):
        check_joint(cfg, vocab.joint)
        attention = None if cfg.integration == "concat" else (cfg.integration == "parallel", cfg.gate)
        super().__init__(cfg, vocab, context_attention=attention)
        d = cfg.d_model
        self.shortener = Shortener(cfg.repr, d, cfg.heads, pooling=cfg.pooling, pool_size=cfg.pool_size,
                                   groups=cfg.groups, normalizer=cfg.normalizer, hidden=cfg.categorizer_hidden,
                                   dropout=cfg.shortening_dropout, attention_dropout=cfg.attention_dropout)
        self.segment = nn.Embedding(cfg.context_slots + 1, d) if cfg.segment_embeddings else None
        self.context_pos = nn.Embedding(cfg.max_positions, d) if cfg.context_positions else None
        self.context_layers = self.context_norm = None
        if cfg.encoder == "separate":
            args = (d, cfg.heads, cfg.ffn_dim, cfg.dropout, cfg.attention_dropout, cfg.activation_dropout,
                    cfg.normalize_before)
            self.context_layers = nn.ModuleList(EncoderLayer(*args, cfg.activation) for _ in range(cfg.encoder_layers))
            self.context_norm = nn.LayerNorm(d) if cfg.normalize_before else nn.Identity()
        for emb in (self.segment, self.context_pos):
            if emb is not None:
                nn.init.normal_(emb.weight, 0.0, d ** -0.5)

    @classmethod
    def resolve(cls, cfg: CachingConfig, meta: dict) -> CachingConfig:
        """Refuse a bilingual model on prepared data with separate vocabularies; the config is otherwise unchanged."""
        check_joint(cfg, meta.get("joint", True))
        return cfg

    # ---- entries ------------------------------------------------------------------------------
    def entries_of(self, src: Tensor, current: EncoderOut, probe: AttentionProbe | None = None
                   ) -> tuple[Tensor, Tensor]:
        """Cache entries (N, M, C) and mask of sentences ``src`` (N, L); ``current`` = their shared-encoder output.

        ``probe`` receives the grouping/selecting weights as kind ``assignment`` (queries = tokens, keys = groups).
        """
        if self.context_layers is not None:
            enc = self.encode_source(src, layers=self.context_layers, norm=self.context_norm)
        else:
            enc = current
        short, mask, info = self.shortener(enc.states, enc.mask)
        if probe is not None and "weights" in info:
            groups = mask.new_ones(mask.size(0), info["weights"].size(2))   # (N, K)
            probe(AttentionView("assignment", 0, info["weights"].unsqueeze(1), enc.mask, groups, enc.mask, groups))
        return short, mask

    def _context_tokens(self, sent: Tensor, ids: Tensor, encoder_grad: bool, shortening_grad: bool
                        ) -> tuple[Tensor, Tensor, Tensor]:
        """Valid entry tokens of sentences ``sent[ids]``: values (T, C), sentence id (T,), position in entry (T,).

        Without ``encoder_grad`` the encoder runs under ``no_grad`` (no activations kept, no gradient into it);
        without ``shortening_grad`` the shortener too, so the entry is detached.
        """
        src = sent[ids]
        src = src[:, : int((src != self.vocab.pad).sum(1).max())]                # (n, L) trimmed
        with nullcontext() if encoder_grad else torch.no_grad():
            enc = self.encode_source(src, layers=self.context_layers, norm=self.context_norm)
        with nullcontext() if shortening_grad else torch.no_grad():
            short, mask, _ = self.shortener(enc.states, enc.mask)          # (n, M, C)
        pos = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
        return short[mask], ids.repeat_interleave(mask.sum(1)), pos[mask]

    def _window_memory(self, cur_src: Tensor, entry, entry_mask, sent, row, dist) -> Memory:
        """Context memory of source windows: context sentences encoded (near ones with gradient), entries packed.

        The nearest ``grad_context_sentences`` (default 0, as the paper's code) train the encoder and the
        shortening; those up to ``shortening_grad_context_sentences`` (default: all) the shortening only; the
        rest nothing (computed without autograd, their entries detached).
        """
        values, ids, pos = [], [], []
        n_enc = self.cfg.grad_context_sentences
        n_short = self.cfg.shortening_grad_context_sentences
        n_short = float("inf") if n_short is None else max(n_short, n_enc)
        for group, grads in (((dist > 0) & (dist <= n_enc), (True, True)),
                             ((dist > n_enc) & (dist <= n_short), (False, True)), (dist > n_short, (False, False))):
            group = group.nonzero().squeeze(1)
            if group.numel():
                for bucket, item in zip((values, ids, pos), self._context_tokens(sent, group, *grads), strict=True):
                    bucket.append(item)
        if self.cfg.current_in_context:
            current = (dist == 0).nonzero().squeeze(1)                     # (B,) one current sentence per row
            p = torch.arange(entry_mask.size(1), device=entry.device).expand_as(entry_mask)
            values.append(entry[entry_mask])
            ids.append(current.repeat_interleave(entry_mask.sum(1)))
            pos.append(p[entry_mask])
        if not values:
            ref = self.src_embed.weight
            return self.pack(ref.new_zeros(0, ref.size(1)), *(row.new_zeros(0),) * 3, cur_src.size(0))
        values, ids, pos = torch.cat(values), torch.cat(ids), torch.cat(pos)
        order = torch.argsort(ids * (int(pos.max()) + 1) + pos)            # rows, oldest -> newest, in-entry order
        ids = ids[order]
        return self.pack(values[order], row[ids], dist[ids], pos[order], cur_src.size(0))

    # ---- contract -----------------------------------------------------------------------------
    def encode(self, batch: Batch, probe: AttentionProbe | None = None) -> EncoderOut:
        """Current sentence states, the context memory (``context``) and this sentence's cache entry (``entry``)."""
        if batch.memory is not None:                                        # translation: one sentence per row + cache
            cur_src = batch.src
        else:                                                               # training / scoring: split the windows
            sent, row, dist = split_sentences(batch.src, self.vocab)
            cur_src = sent[dist == 0]
            cur_src = cur_src[:, : int((cur_src != self.vocab.pad).sum(1).max())]   # (B, L)
        cur = self.encode_source(cur_src, probe)
        entry = entry_mask = None
        # the cache (or the context) needs this entry; an analysis wants its assignment weights
        if batch.memory is not None or self.cfg.current_in_context or probe is not None:
            entry, entry_mask = self.entries_of(cur_src, cur, probe)
        if batch.memory is not None:
            own = [entry[r][entry_mask[r]] for r in range(entry.size(0))]
            memory = self.assemble(batch.memory, own if self.cfg.current_in_context else None)
        else:
            memory = self._window_memory(cur_src, entry, entry_mask, sent, row, dist)   # (B, Mc, C)
        own_entry = None if entry is None else Memory(entry, entry_mask)
        if self.cfg.integration == "concat":                   # multi-encoder: one memory for cross-attention
            states = torch.cat([memory.states, cur.states], dim=1)         # (B, Mc + S, C)
            mask = torch.cat([memory.mask, cur.mask], dim=1)
            current = None if cur.current is None else torch.cat([memory.current, cur.current], dim=1)   # (analysis)
            return replace(cur, states=states, mask=mask, current=current, context=memory, entry=own_entry)
        return replace(cur, context=memory, entry=own_entry)

    def assemble(self, memory: list[list[Tensor]], own: list[Tensor] | None) -> Memory:
        """Context memory (B, Mc, C) and mask from cached entries (per row, oldest -> newest) [+ each row's own
        entry]."""
        parts, rows, slots = [], [], []
        for r, entries in enumerate(memory):
            for i, e in enumerate(entries):
                parts.append(e)
                rows.append(r)
                slots.append(len(entries) - i)
            if own is not None:
                parts.append(own[r])
                rows.append(r)
                slots.append(0)
        ref = self.src_embed.weight
        lengths = torch.tensor([p.size(0) for p in parts], dtype=torch.long, device=ref.device)
        values = torch.cat(parts) if parts else ref.new_zeros(0, ref.size(1))
        starts = torch.cumsum(lengths, 0) - lengths
        pos = torch.arange(values.size(0), device=ref.device) - starts.repeat_interleave(lengths)

        def per_token(per_part: list[int]) -> Tensor:                       # (T,): each part's value on its tokens
            return torch.tensor(per_part, dtype=torch.long, device=ref.device).repeat_interleave(lengths)

        return self.pack(values, per_token(rows), per_token(slots), pos, len(memory))

    def pack(self, values: Tensor, row: Tensor, slot: Tensor, pos: Tensor, batch_size: int) -> Memory:
        """Scatter context tokens (T, C), sorted by row, into a memory (B, Mc, C) with slot and position embeddings
        added; slot 0 (the current sentence's own entry) is marked ``current``.

        A row without any token gets one zero entry (masked for ``concat``), so attention never sees an empty memory.
        """
        counts = torch.bincount(row, minlength=batch_size)                 # (B,)
        width = max(1, int(counts.max()) if counts.numel() else 1)
        rank = torch.arange(row.numel(), device=row.device) - (torch.cumsum(counts, 0) - counts)[row]
        if self.segment is not None:
            values = values + self.segment(slot.clamp(max=self.segment.num_embeddings - 1))  # distance, clamped
        if self.context_pos is not None:
            values = values + self.context_pos(pos.clamp(max=self.context_pos.num_embeddings - 1))
        ref = self.src_embed.weight
        out = ref.new_zeros(batch_size, width, ref.size(1)).index_put((row, rank), values.to(ref.dtype))  # (B, Mc, C)
        mask = torch.zeros(batch_size, width, dtype=torch.bool, device=ref.device)
        mask[row, rank] = True
        current = torch.zeros_like(mask)
        current[row, rank] = slot == 0
        if self.cfg.integration != "concat":
            mask[:, 0] |= counts == 0                                       # the zero "no context" entry
        return Memory(out, mask, current)


def split_sentences(src: Tensor, vocab: VocabInfo) -> tuple[Tensor, Tensor, Tensor]:
    """Sentences (N, L) of source windows (B, S), each closed by ``</s>``, their row (N,) and distance (N,)
    (0 = current).

    ``c1 <brk> c2 <brk> s </s>`` gives ``[c1 </s>], [c2 </s>], [s </s>]`` with distances 2, 1, 0: a context
    sentence looks exactly as it did when it was current."""
    real = src != vocab.pad                                                 # (B, S)
    sep = ((src == vocab.brk) | (src == vocab.eos)) & real
    idx = sep.long().cumsum(1) - sep.long()                                 # sentence of each token (B, S)
    n = sep.sum(1)                                                          # sentences per row (B,)
    t = torch.arange(src.size(1), device=src.device).expand_as(src)
    first = real & torch.cat([torch.ones_like(sep[:, :1]), sep[:, :-1]], dim=1)
    offset = t - torch.cummax(torch.where(first, t, torch.zeros_like(t)), dim=1).values  # position in sentence
    start = torch.cumsum(n, 0) - n                                          # first sentence id of each row
    gid = start.unsqueeze(1) + idx                                          # (B, S)
    sent = torch.full((int(n.sum()), int(offset[real].max()) + 1), vocab.pad, dtype=src.dtype, device=src.device)
    sent[gid[real], offset[real]] = torch.where(sep, torch.full_like(src, vocab.eos), src)[real]
    row = torch.repeat_interleave(torch.arange(src.size(0), device=src.device), n)
    dist = n[row] - 1 - (torch.arange(row.numel(), device=src.device) - start[row])
    return sent, row, dist


#: tiny variants the contract suite checks (tests/unit/test_contract.py): name -> model-config overrides;
#: every option of the family appears in at least one
VARIANTS: dict[str, dict] = {
    "tokens": {"repr": "tokens"},
    "tokens-current-parallel": {"repr": "tokens", "include_current": True, "integration": "parallel"},
    "tokens-concat": {"repr": "tokens", "integration": "concat", "src_context_sentences": 2},
    "bilingual": {"repr": "tokens", "integration": "parallel", "gate": True, "encoder": "separate",
                  "grad_context_sentences": 2, "bilingual": True},
    "bare-tokens": {"repr": "tokens", "segment_embeddings": False, "context_positions": False},
    "sentence": {"repr": "sentence", "src_context_sentences": 2},
    "sentence-no-current-gate": {"repr": "sentence", "include_current": False, "gate": True},
    "pooling": {"repr": "pooling", "pooling": "max", "pool_size": 2},
    "pooling-avg-parallel": {"repr": "pooling", "pooling": "avg", "pool_size": 3, "integration": "parallel"},
    "pooling-linear": {"repr": "pooling", "pooling": "linear", "pool_size": 2, "src_context_sentences": 2},
    "grouping": {"repr": "grouping", "groups": 2, "categorizer_hidden": 16, "src_context_sentences": 2},
    "grouping-softmax-gate": {"repr": "grouping", "groups": 2, "categorizer_hidden": 16, "normalizer": "softmax",
                              "gate": True, "integration": "parallel"},
    "selecting": {"repr": "selecting", "groups": 2, "categorizer_hidden": 16},
    "selecting-concat": {"repr": "selecting", "groups": 2, "categorizer_hidden": 16, "integration": "concat",
                         "include_current": False},
    "separate-encoder": {"repr": "tokens", "integration": "concat", "encoder": "separate", "include_current": True},
    "post-norm": {"repr": "grouping", "groups": 2, "categorizer_hidden": 16, "normalize_before": False},
}

#: Variants that, started from a sentence-level model of the same architecture (``train.init_from``), give its
#: logits exactly on a sentence without context: the context sub-layer is skipped when the memory is empty. The
#: others start close to it, not on it: the current sentence's own shortened representation (``include_current``)
#: or a gate is read through fresh context attention even with no context sentence.
EXACT_FROM_SENTENCE = frozenset({"tokens", "tokens-concat", "bilingual", "bare-tokens", "sentence-no-current-gate",
                                 "selecting-concat"})
