"""The encoder-decoder every family builds on, and the core contract.

Training, beam search, scoring, translation and analysis rely on nothing but this contract, so none of them ever
asks which family it runs. docs/architecture.md shows the same contract with the data flow.

Methods (the plain Transformer implements them; families do not copy them):

* ``forward(batch, probe=None, project=True) -> ModelOutput`` — teacher-forced logits (B, T, V) of
  ``batch.tgt_in`` (``project=False``: the decoder states (B, T, C) instead, for the fused training loss) and the
  family's loss terms (``ModelOutput.loss_terms``); a ``probe`` (:mod:`ctxmt_cli.core.probe`) receives every
  attention map, one layer and kind at a time, for analysis. A batch with row chunks (``Batch.chunks``) runs chunk
  by chunk in this one call (:mod:`ctxmt_cli.core.chunked`);
* ``encode(batch, probe=None) -> EncoderOut`` — states (B, S, C), mask (B, S), segment
  shift (B,), which states are the current sentence's, and a family's typed additions
  (context memory, cache entry);
* ``init_state(enc, batch) -> DecoderState`` — forces ``batch.tgt_prefix`` (default
  ``<s>``) in one parallel pass; its last token is left *pending* for the first step;
* ``decode_step(tokens (B,), state) -> (logits (B, V), state)`` — one token per row;
  equals the full forward pass at every position;
* ``reorder_state(state, index) -> state`` — rows for beam search;
* ``target_logprobs(batch, where) -> (B, T)`` — forced-decoding scores without logits.

Masks (:mod:`ctxmt_cli.core.batch`): ``bool``, True = real token, padding on the right.

How the batches are made — windows, batch plans, how a document is translated — is the second contract,
:mod:`ctxmt_cli.models.inputs`.

Hooks, each declared here with the default the plain Transformer uses and documented where it is declared; a
family overrides the smallest one (docs/architecture.md has the table of who overrides what):

* ``resolve(cfg, meta)`` — data-dependent config values (concat: ``shift: auto``);
* ``context_aware`` — whether the model reads context (reports, quickstart);
* ``loss_term_names`` / ``loss_terms(batch, token_loss, output)`` — named extra terms of the objective
  (:class:`LossTerm`; concat's context discount, MBE's classifier);
* ``source_shift`` / ``target_shift`` and the position modules passed to ``__init__`` — where each token sits
  in its window (concat);
* ``context_attention`` passed to ``__init__`` and ``EncoderOut.context`` — a context-attention block in each
  decoder layer over a context memory (caching), joined to cross-attention by a ``mix`` module (HanoiT's gate);
* input prefix — ``encode_source(src, prefix=…)`` and ``EncoderOut.prefix``: vectors before the encoder's and
  the decoder's tokens, with no positions (MBE's z); ``decoder_input(x)`` — the decoder's input vectors before
  its first layer (MBE's ``prefix_norm``); ``EncoderOut.loss_terms``: terms computed while encoding;
* ``encode_parts(parts)`` — the batch-level step of a batch in row chunks (MBE: z per group over every chunk);
* ``between_layers(layer, states, mask, attention, current)`` with ``between_layers_attention`` — a narrower key
  mask after an encoder layer (HanoiT's context selection);
* attention probe — every attention map handed to ``probe`` for analysis (caching adds its assignments).
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import torch
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch, DecoderState, EncoderOut, Fold, LossTerm, ModelOutput, SharedRows, VocabInfo
from ctxmt_cli.core.chunked import chunked_hidden
from ctxmt_cli.core.layers import ContextAttention, DecoderLayer, EncoderLayer, additive_mask, compute_dtype
from ctxmt_cli.core.linear import Linear, linear_weights, xavier_
from ctxmt_cli.core.logits import SCORE_ROWS, log_partition
from ctxmt_cli.core.positions import PositionEncoding, current_sentence_mask, window_layout
from ctxmt_cli.core.probe import AttentionProbe, AttentionView, report_decoder, target_current
from ctxmt_cli.core.sequence import compact, with_prefix


def _context_block(cfg, context_attention: tuple | None) -> ContextAttention | None:
    """A decoder layer's context-attention block (caching family): ``context_attention`` = (parallel, gate[, mix]),
    mix a factory of the module that joins a parallel block to cross-attention (HanoiT's gate); None: no block."""
    if context_attention is None:
        return None
    mix = context_attention[2]() if len(context_attention) > 2 else None
    parallel, gate = context_attention[:2]
    return ContextAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, gate, parallel, mix=mix)


class EncoderDecoder(nn.Module):
    """Transformer encoder-decoder over (possibly concatenated) windows; see the module docstring for the contract."""

    #: whether the model reads context beyond the current sentence
    context_aware: ClassVar[bool] = False
    #: names of the extra loss terms :meth:`loss_terms` returns, fixed for the whole run
    loss_term_names: ClassVar[tuple[str, ...]] = ()
    #: encoder layers whose head-averaged self-attention probabilities :meth:`between_layers` reads
    between_layers_attention: ClassVar[frozenset[int]] = frozenset()

    def __init__(
        self, cfg, vocab: VocabInfo, src_pos: PositionEncoding | None = None,
        tgt_pos: PositionEncoding | None = None, shift: tuple[int, int] = (0, 0), per_window_shift: bool = False,
        context_attention: tuple | None = None,
    ):
        super().__init__()
        self.cfg, self.vocab = cfg, vocab
        d = cfg.d_model
        self.scale = d ** 0.5 if cfg.scale_embeddings else 1.0            # 1.0: Marian's scale_embedding false
        self.shift, self.per_window_shift = shift, per_window_shift
        self.src_embed = nn.Embedding(vocab.src_size, d, padding_idx=vocab.pad)
        share = cfg.share_embeddings
        share_all = (share == "all") or (share == "auto" and vocab.joint and vocab.src_size == vocab.tgt_size)
        self.tgt_embed = self.src_embed if share_all else nn.Embedding(vocab.tgt_size, d, padding_idx=vocab.pad)
        self.output = Linear(d, vocab.tgt_size, bias=cfg.output_bias)
        self.src_pos = src_pos or PositionEncoding(d, cfg.sinusoid)
        self.tgt_pos = tgt_pos or PositionEncoding(d, cfg.sinusoid)
        self.dropout = nn.Dropout(cfg.dropout)
        args = (d, cfg.heads, cfg.ffn_dim, cfg.dropout, cfg.attention_dropout, cfg.activation_dropout,
                cfg.normalize_before, cfg.activation)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*args) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*args, context=_context_block(cfg, context_attention))
                                            for _ in range(cfg.decoder_layers))
        self.encoder_norm = nn.LayerNorm(d) if cfg.normalize_before else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if cfg.normalize_before else nn.Identity()
        self._init_weights()
        if share != "none":
            self.output.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                xavier_(module)                                            # fused projections: block by block
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for emb in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(emb.weight, std=self.cfg.d_model ** -0.5)
            nn.init.zeros_(emb.weight[self.vocab.pad])

    # ---- hooks -------------------------------------------------------------------------------
    @classmethod
    def resolve(cls, cfg, meta: dict):
        """The model config with data-dependent values filled from the prepared data's ``meta``; default: unchanged."""
        return cfg

    def loss_terms(self, batch: Batch, token_loss: Tensor, output: ModelOutput) -> dict[str, LossTerm]:
        """Extra terms of the training objective, named as :attr:`loss_term_names`.

        ``token_loss`` (B, T) is the label-smoothed loss of every target token (0 at padding), for terms
        that reweight tokens; ``output`` is this batch's forward output. Default: the terms ``forward`` put
        into ``output.loss_terms`` (none for the plain Transformer).
        """
        return dict(output.loss_terms)

    def encode_parts(self, parts: list[Batch]) -> tuple[list[EncoderOut], dict[str, LossTerm]]:
        """Encode the row chunks of one batch (:meth:`Batch.parts`): one EncoderOut per chunk, and the batch's
        loss terms. Default: each chunk on its own (rows are independent), each term's sums added up."""
        encs = [self.encode(part) for part in parts]
        terms: dict[str, LossTerm] = {}
        for enc in encs:
            for name, t in enc.loss_terms.items():
                terms[name] = t if name not in terms else replace(t, sum=terms[name].sum + t.sum,
                                                                   count=terms[name].count + t.count)
        return [replace(enc, loss_terms={}) for enc in encs], terms

    def between_layers(self, layer: int, states: Tensor, mask: Tensor, attention: Tensor | None,
                       current: Tensor | None) -> tuple[Tensor, dict[str, LossTerm]]:
        """After layer ``layer`` of the model's own encoder stack: the key mask (B, S) of every later layer and of
        cross-attention, and statistics. ``states`` (B, S, C): the layer's output; ``attention`` (B, S, S): its
        head-averaged self-attention probabilities for a layer in :attr:`between_layers_attention`, else None;
        ``current`` (B, S): the current sentence's tokens (None unless a layer or a probe asks). Default: unchanged."""
        return mask, {}

    def decoder_input(self, x: Tensor) -> Tensor:
        """The decoder's input (B, T, C) before its first layer, full pass and steps alike. Default: as it is."""
        return x

    def source_shift(self, src: Tensor) -> Tensor:
        """Per-row segment shift (B,) of the source windows; ``per-window`` = mean sentence length."""
        b = src.size(0)
        if not self.per_window_shift:
            return torch.full((b,), self.shift[0], dtype=torch.long, device=src.device)
        real = ((src != self.vocab.pad) & (src != self.vocab.brk) & (src != self.vocab.eos)).sum(1)
        n = (src == self.vocab.brk).sum(1) + 1
        return torch.div(real + n // 2, n, rounding_mode="floor")          # rounded mean length

    def target_shift(self, src_shift: Tensor) -> Tensor:
        """Per-row shift of the target windows (per-window: the source window's)."""
        if self.per_window_shift:
            return src_shift
        return torch.full_like(src_shift, self.shift[1])

    # ---- contract ----------------------------------------------------------------------------
    def encode(self, batch: Batch, probe: AttentionProbe | None = None) -> EncoderOut:
        """Encode the source windows: (B, S) → states (B, S, C)."""
        return self.encode_source(batch.src, probe)

    def embed_source(self, src: Tensor) -> tuple[Tensor, Tensor | None]:
        """Encoder input of token rows ``src`` (B, S): embeddings + positions, after dropout (B, S, C), and the
        persistent part re-added before every later layer (or None)."""
        if self.plain_positions(0):                                        # 0..S-1 from the cached table
            pe = self.src_pos.first(src.size(1), src.device)               # (1, S, C)
            x = self.dropout(self.src_embed(src) * self.scale + pe)
            return x, pe.expand(src.size(0), -1, -1) if self.src_pos.persistent else None
        positions, seg, _ = window_layout(src, self.vocab.brk, self.source_shift(src))
        pe = self.src_pos(positions, seg)                                  # (B, S, C)
        x = self.dropout(self.src_embed(src) * self.scale + pe)
        return x, self.src_pos.persisted(positions, seg, pe)

    def plain_positions(self, side: int) -> bool:
        """Whether every token of ``side`` (0 source, 1 target) sits at its column, 0..T-1, with no segment code
        (no shift, no segment embedding: the plain Transformer), so the positions need no window layout."""
        pos = self.src_pos if side == 0 else self.tgt_pos
        return pos.segment is None and not self.per_window_shift and self.shift[side] == 0

    def encode_source(self, src: Tensor, probe: AttentionProbe | None = None, layers=None, norm=None,
                      prefix: Tensor | None = None, embedded=None, hook: bool | None = None) -> EncoderOut:
        """Run an encoder stack over token rows ``src`` (B, S); the model's own stack unless ``layers``/``norm``
        are given.

        ``probe`` receives each layer's self-attention (``encoder_self``). ``prefix`` (B, P, C): vectors put
        before the tokens without positional encoding (the input-prefix hook, e.g. a document summary); they
        are keys of every layer and of cross-attention, and part of the returned states (never current).
        ``embedded``: :meth:`embed_source`'s output when the caller already computed it. The model's own stack
        runs the between-layers hook (:meth:`between_layers`) after each layer; ``hook`` True runs it after each
        layer of ``layers`` too (a stack of the same shape, e.g. a second stream's own encoder)."""
        own = layers is None if hook is None else hook
        watch = self.between_layers_attention if own else None             # None: no hook on this stack
        layers = self.encoder_layers if layers is None else layers
        mask = src != self.vocab.pad                                       # (B, S)
        shift = self.source_shift(src)
        x, again = self.embed_source(src) if embedded is None else embedded
        current = None if probe is None and not watch else current_sentence_mask(src, self.vocab.brk) & mask  # (B, S)
        if prefix is not None:
            x, again, mask, current = with_prefix(prefix, x, again, mask, current)   # (B, P + S, ...)
        # the key mask in SDPA's own (additive) form, made once for every layer: (B, 1, 1, S)
        dtype = compute_dtype(x)
        attn_mask, terms = additive_mask(mask[:, None, None, :], dtype), {}
        for i, layer in enumerate(layers):
            if i > 0 and again is not None:
                x = x + again
            x, w = layer(x, attn_mask, probe is not None or (watch is not None and i in watch))
            if probe is not None:
                probe(AttentionView("encoder_self", i, w, mask, mask, current, current))
            if watch is not None:
                narrowed, found = self.between_layers(i, x, mask, w.detach().mean(1) if i in watch else None, current)
                terms.update(found)
                if narrowed is not mask:
                    mask = mask & narrowed                                 # masks only narrow
                    if probe is None and not (x.requires_grad and x.device.type != "cpu"):
                        mask, x, again, current = compact(mask, x, again, current)   # (B, S', ...)
                    attn_mask = additive_mask(mask[:, None, None, :], dtype)
        states = (self.encoder_norm if norm is None else norm)(x)
        return EncoderOut(states, mask, self.target_shift(shift), current=current, loss_terms=terms)

    def _decode_full(self, tokens: Tensor, enc: EncoderOut, cross_kv, n_sent=None, probe=None, context=None):
        """Decoder over whole sequences ``tokens`` (B, T) with causal self-attention (``context``: see context_kv);
        ``probe`` receives each layer's maps."""
        if self.plain_positions(1):                                         # 0..T-1 from the cached table
            pe = self.tgt_pos.first(tokens.size(1), tokens.device)         # (1, T, C)
            again = pe.expand(tokens.size(0), -1, -1) if self.tgt_pos.persistent else None
        else:
            positions, seg, _ = window_layout(tokens, self.vocab.brk, enc.shift, n_sent)
            pe = self.tgt_pos(positions, seg)                              # (B, T, C)
            again = self.tgt_pos.persisted(positions, seg, pe)             # (B, T, C) or None: re-added per layer
        x = self.decoder_input(self.dropout(self.tgt_embed(tokens) * self.scale + pe))
        enc_mask, kvs = additive_mask(enc.mask[:, None, None, :], compute_dtype(x)), []   # (B, 1, 1, S), once
        real = current = keys = None                                       # the probe's masks, only when asked
        if probe is not None:
            real = keys = tokens != self.vocab.pad
            current = target_current(tokens, self.vocab.brk, self.vocab.pad)
        if enc.prefix is not None:                                         # prepended positions, output dropped
            x, again, keys, current = with_prefix(enc.prefix, x, again, keys, current)
            if real is not None:                                           # prefix positions: keys, never queries
                real = torch.cat([torch.zeros_like(enc.prefix[..., 0], dtype=torch.bool), real], 1)
        for i, layer in enumerate(self.decoder_layers):
            if i > 0 and again is not None:
                x = x + again
            layer_context = None if context is None else (context[0][i], context[1][:, None, None, :], Fold())
            x, kv, w = layer(x, (cross_kv[i], enc_mask, Fold()), need_weights=probe is not None, context=layer_context)
            kvs.append(kv)
            if probe is not None:
                report_decoder(probe, i, w, real, current, enc, keys)
        p = 0 if enc.prefix is None else enc.prefix.size(1)
        return self.decoder_norm(x[:, p:]), kvs

    def cross_kv(self, enc: EncoderOut) -> list[tuple[Tensor, Tensor]]:
        """Cross-attention keys/values of every decoder layer, computed once per sentence."""
        return [layer.cross_attn.project_kv(enc.states) for layer in self.decoder_layers]

    def context_kv(self, enc: EncoderOut):
        """Context-attention keys/values per layer over ``enc.context`` (B, Mc, C) and its mask (B, Mc);
        None without context attention."""
        if self.decoder_layers[0].context is None:
            return None
        memory = enc.context
        return [layer.context.attn.project_kv(memory.states) for layer in self.decoder_layers], memory.mask

    def forward(self, batch: Batch, probe: AttentionProbe | None = None, project: bool = True) -> ModelOutput:
        """Teacher-forced logits (B, T, V) for ``batch.tgt_in``; ``project=False``: the decoder states
        (B, T, C) instead, for a loss that fuses the output projection (training goes through forward
        so DDP sees the pass). ``probe`` receives every attention map (:mod:`ctxmt_cli.core.probe`)."""
        hidden, terms = self.decoder_hidden(batch, probe)
        if not project:
            return ModelOutput(None, hidden, terms)
        logits = self.output(hidden)
        if batch.chunks is not None:                                        # (N, V) -> (B, T, V), 0 past a chunk
            logits = batch.unpack(logits, batch.tgt_in.size(1))
        return ModelOutput(logits, loss_terms=terms)

    @torch.no_grad()
    def target_logprobs(self, batch: Batch, where: Tensor | None = None) -> Tensor:
        """log p(``batch.tgt_out``) at the target positions ``where`` (B, T) bool (default all), 0 elsewhere: (B, T).

        For scoring without gradients. The numbers of ``log_softmax(forward(batch).logits)``
        gathered at the targets, but the output projection runs only where asked (a contrastive
        set scores the current sentence, not its target context) and no (N, V) logits are ever held
        (:func:`log_partition`): log p(y) = z_y - log Σ_v exp z_v.
        """
        hidden, _ = self.decoder_hidden(batch)                              # (B, T, C)
        if batch.chunks is not None:
            hidden = batch.unpack(hidden, batch.tgt_out.size(1))
        if where is None:
            where = torch.ones_like(batch.tgt_out, dtype=torch.bool)
        result = torch.zeros(where.shape, dtype=torch.float32, device=hidden.device)   # (B, T)
        states, target = hidden[where], batch.tgt_out[where]               # (N, C), (N,)
        if states.size(0) == 0:
            return result
        weight, bias = linear_weights(self.output)                          # (V, C), (V,) or None
        picked = (states * weight.index_select(0, target)).float().sum(1) + (0 if bias is None else bias[target])
        lse = torch.cat([log_partition(states[i:i + SCORE_ROWS], weight, bias=bias)    # (N,)
                         for i in range(0, states.size(0), SCORE_ROWS)])
        return result.masked_scatter_(where, picked - lse)

    def decoder_hidden(self, batch: Batch, probe: AttentionProbe | None = None) -> tuple[Tensor, dict]:
        """Final decoder states (B, T, C) for ``batch.tgt_in`` (teacher forcing) and the loss terms the encoder
        produced (``EncoderOut.loss_terms``); ``probe`` sees the attention. A chunked batch: (N, C), packed."""
        if batch.chunks is not None:
            return chunked_hidden(self, batch, probe)
        enc = self.encode(batch, probe)
        cross, context = self.cross_kv(enc), self.context_kv(enc)
        if batch.src_index is not None:  # target rows share source rows: expand after encoding each once
            idx = batch.src_index

            def pick(t: Tensor) -> Tensor:
                return t.index_select(0, idx)

            enc = replace(enc, states=pick(enc.states), mask=pick(enc.mask), shift=pick(enc.shift),
                          current=None if enc.current is None else pick(enc.current),
                          prefix=None if enc.prefix is None else pick(enc.prefix),
                          context=None if enc.context is None else enc.context.index_select(idx))
            cross = [(pick(k), pick(v)) for k, v in cross]
            if context is not None:
                context = ([(pick(k), pick(v)) for k, v in context[0]], pick(context[1]))
        hidden, _ = self._decode_full(batch.tgt_in, enc, cross, probe=probe, context=context)
        return hidden, enc.loss_terms

    def init_state(self, enc: EncoderOut, batch: Batch) -> DecoderState:
        """Decoder state after forcing ``batch.tgt_prefix`` (default ``<s>``), in one parallel pass."""
        b, device = enc.states.size(0), enc.states.device
        prefix = batch.tgt_prefix
        if prefix is None:
            prefix = torch.full((b, 1), self.vocab.bos, dtype=torch.long, device=device)
        lengths = (prefix != self.vocab.pad).sum(1)                        # (B,) >= 1
        n_sent = batch.tgt_sentences
        if n_sent is None:
            n_sent = (prefix == self.vocab.brk).sum(1) + 1
        cached = prefix[:, :-1]                                            # (B, P-1): all but the last column
        valid = torch.arange(cached.size(1), device=device).unsqueeze(0) < (lengths - 1).unsqueeze(1)
        cross, context = self.cross_kv(enc), self.context_kv(enc)
        if enc.prefix is not None:                                          # the prefix is cached from the first step
            valid = torch.cat([valid.new_ones(b, enc.prefix.size(1)), valid], 1)
        shared = None
        if cached.size(1) > 0 or enc.prefix is not None:   # the prefix's keys/values, once per sentence, not per beam
            _, kvs = self._decode_full(cached.masked_fill(~valid[:, valid.size(1) - cached.size(1):], self.vocab.pad),
                                       enc, cross, n_sent, context=context)
            shared = SharedRows.one_per_row(kvs, valid)
        h, dh = self.cfg.heads, self.cfg.d_model // self.cfg.heads
        empty = enc.states.new_zeros(b, h, 0, dh)                           # (B, H, 0, D): the rows' own keys
        return DecoderState(
            self_k=[empty] * len(self.decoder_layers), self_v=[empty] * len(self.decoder_layers),
            cross=SharedRows.one_per_row(cross, enc.mask), prefix=shared, self_mask=valid[:, :0], pos=lengths - 1,
            sent_idx=(cached == self.vocab.brk).logical_and(valid[:, valid.size(1) - cached.size(1):]).sum(1),
            n_sent=n_sent, shift=enc.shift,
            pending=prefix.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1),
            context=None if context is None else SharedRows.one_per_row(*context),
        )

    def decode_step(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """Feed one token per row (B,); return next-token logits (B, V) and the new state."""
        positions = (state.pos + state.sent_idx * state.shift).unsqueeze(1)  # (B, 1)
        seg = (state.n_sent - state.sent_idx).clamp(min=1).unsqueeze(1)     # (B, 1)
        pe = self.tgt_pos(positions, seg)                                   # (B, 1, C)
        x = self.decoder_input(self.dropout(self.tgt_embed(tokens.unsqueeze(1)) * self.scale + pe))
        again = self.tgt_pos.persisted(positions, seg, pe)                  # (B, 1, C) or None: re-added per layer
        self_mask = torch.cat([state.self_mask, state.self_mask.new_ones(tokens.size(0), 1)], dim=1)
        dtype = compute_dtype(x)                                            # masks made once per step, not per layer
        mask4, new_k, new_v = additive_mask(self_mask[:, None, None, :], dtype), [], []
        cross_k, cross_v, cross_mask, cross_fold = state.cross.for_rows()
        cross_mask = additive_mask(cross_mask[:, None, None, :], dtype)   # (G, 1, 1, S)
        if state.context is not None:
            ctx_k, ctx_v, ctx_mask, ctx_fold = state.context.for_rows()
        if state.prefix is not None:
            pre_k, pre_v, pre_mask, pre_fold = state.prefix.for_rows()
            pre_mask = additive_mask(pre_mask[:, None, None, :], dtype)     # (G, 1, 1, P)
        for i, layer in enumerate(self.decoder_layers):
            if i > 0 and again is not None:
                x = x + again
            past = (state.self_k[i], state.self_v[i])
            cross = ((cross_k[i], cross_v[i]), cross_mask, cross_fold)
            context = None if state.context is None else ((ctx_k[i], ctx_v[i]), ctx_mask[:, None, None, :], ctx_fold)
            shared = None if state.prefix is None else ((pre_k[i], pre_v[i]), pre_mask, pre_fold)
            x, (k, v), _ = layer(x, cross, past=past, self_mask=mask4, context=context, shared=shared)
            new_k.append(k)
            new_v.append(v)
        logits = self.output(self.decoder_norm(x))[:, 0]                   # (B, V)
        state = replace(
            state, self_k=new_k, self_v=new_v, self_mask=self_mask, pos=state.pos + 1,
            sent_idx=state.sent_idx + (tokens == self.vocab.brk).long(), pending=tokens,
        )
        return logits, state

    def reorder_state(self, state: DecoderState, index: Tensor) -> DecoderState:
        """Select (and duplicate) rows of the state for beam search."""
        return state.index_select(index)

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

