"""HanoiT: layer-wise context selection in the encoder.

Paper: Yang et al., "HanoiT: Enhancing Context-aware Translation via Selective Context" (§2.2). The
current sentence and its context sentences are one encoder input; N1 unified self-attention layers read
every token, then each of N2 selection layers keeps only the context tokens that enough current-sentence
tokens attend to at or above their average (eqs. 4-7); the layers above and the decoder's cross-attention
never see the others again. With ``bilingual: true`` (§2.3) a second stream [target context; current source]
goes through the same selection and a second, gated cross-attention in each decoder layer
(:mod:`ctxmt_cli.models.hanoit.bilingual`).

Hooks overridden on the core: ``encode`` (the embedding of eq. 2, which needs ``Batch.src_next`` to tell
previous from next context), ``between_layers`` with ``between_layers_attention`` (the selection, after each
selection layer), ``context_aware``, ``loss_term_names`` (the kept share per selection layer) and ``resolve``
(a bilingual model needs a joint vocabulary); bilingual: ``context_attention`` with a ``mix`` (the gate) and
``EncoderOut.context`` (the target stream). Translation keeps the default of the inputs contract, windows: each
sentence's window is encoded anew.

How each open point of the paper is settled:

* window: ``[previous (oldest first)] [next (nearest first)] current </s>``, each context sentence closed
  by ``<brk>``; the current sentence stays last, as in every family, and ``Batch.src_next`` says how many
  context sentences are next ones (online = 1 previous, 0 next; offline = 1 + 1, the paper's default);
* embedding (eq. 2): E = word + position + learned segment. Positions are the Transformer's sinusoids and
  restart at 0 at the start of each part (previous context, next context, current sentence), running
  through the part's sentences and separators. The paper names three segments (current, source context,
  target context); with positions restarting per part, previous and next context would then look alike,
  so each context kind is split by direction: rows 0 current, 1 previous, 2 next (the bilingual model adds
  3 previous and 4 next target context);
* eq. 4: the selection layer's own self-attention probabilities, averaged over heads, taken *before*
  attention dropout; the layer's output is computed under the mask at its input, and its choice applies
  from the next layer on and to the decoder's cross-attention;
* eq. 5: ā_i = (1/p) Σ_{j current, j≠i} a_{i,j} for each current query i, with the divisor p as printed
  (not p - 1); p counts the current sentence's tokens including ``</s>``;
* eq. 6 sums over the *current* sentence's queries: the printed range [p+1, m] (the context) is a typo, as
  the text ("how many words in the current sentence") and eq. 7's bound q·p show. s_k counts the current
  queries i with a_{i,k} >= ā_i: a tie counts, tested as p·a_{i,k} >= Σ_{j≠i} a_{i,j} (no division);
* eq. 7: a context token k still alive stays iff s_k >= q·p, compared as s_k >= ceil(q·p - 1e-9) so a
  decimal q gives the intended integer bound (0.3 · 10 keeps s_k = 3). Separators ``<brk>`` are context
  tokens like any other; current tokens always stay; pads are neither queries nor keys; a dropped token
  never returns (masks only narrow); the choice is made without autograd (a hard 0/1 decision);
* dropping = masking: a masked token is in no later attention, so the core cuts the columns no row keeps
  (where no probe listens) and the outputs are those of the masked run (tested);
* Figure 4's statistic: ``kept_context_layerN`` (N = the 1-based encoder layer) is the share of the input's
  context tokens still alive after selection layer N, a weight-0 loss term (logged, validated, no gradient);
  ``selection_drops: false`` (a diagnostic, not the paper's model) logs what each layer would keep and drops none.

Bilingual (§2.3-2.4), how the open points are settled:

* target concatenation: the target side of the same context sentences the source window reads (previous and
  next), each closed by ``<brk>``, then the current *source* sentence and ``</s>``; the target context is the
  sentence-level first pass (``target_context_from: first_pass``, the paper) or the reference (ablations);
  embedded as eq. 2 with segment rows 3 (previous) and 4 (next target context); one vocabulary for both
  (the paper's shared BPE), so a bilingual model refuses a prepared set with separate vocabularies;
* encoder: the same layers and the same selection rule (``share_encoder: true``, the default), or a stack of
  its own with the same N1/N2 split; its kept shares are ``kept_target_context_layerN``;
* decoder: z^s and z^t are the outputs of the two cross-attentions of a layer (after their output
  projections), read from the same input; the gate (eq. 9; ``gate: vector`` by default, ``scalar`` one γ per
  position) joins them (eq. 10) before the layer's residual, so every decoder layer has its own gate;
* eq. 13: a training row goes without its target stream with probability α (γ = 0: exactly the monolingual
  model), the expected loss of α·L_m + (1 − α)·L_b in one pass instead of two; validation scores L_b
  (:mod:`ctxmt_cli.data.target_concat`).

Target context alone (``context_side: target``; §3.5's "target mono-lingual context", 24.98 BLEU against 24.94
with source context on IWSLT-2017): the one stream is the target concatenation in place of the source window
(the inputs put it in ``Batch.src``), embedded with segment rows 3 and 4 as the bilingual target stream, with
the same selection; its kept shares are ``kept_target_context_layerN``. The paper does not say how it fed the
target context to its one stream; this is the bilingual model's target stream without the source one.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch, EncoderOut, LossTerm, VocabInfo
from ctxmt_cli.core.layers import EncoderLayer
from ctxmt_cli.core.linear import xavier_
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.core.positions import current_sentence_mask
from ctxmt_cli.core.probe import AttentionProbe
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.hanoit.bilingual import ContextGate, memory_of, stream_input, target_concat_of, target_segments
from ctxmt_cli.models.hanoit.config import HanoiTConfig

CURRENT, PREVIOUS, NEXT = 0, 1, 2          # segment rows of the monolingual model
SEGMENTS = 3                               # + 2 reading target context: 3 previous, 4 next target context
#: slack under q·p in eq. 7, so that a decimal q (0.3) times p (10) bounds at the integer it means (3)
BOUND_SLACK = 1e-9


#: loss-term name prefix of the kept share of each context side (Figure 4's two series); the 1-based layer follows
KEPT_PREFIX = {"source": "kept_context_layer", "target": "kept_target_context_layer"}


def kept_name(layer: int, side: str = "source") -> str:
    """The loss-term name of the kept ``side`` ("source" / "target") context share after 0-based encoder layer
    ``layer``."""
    return f"{KEPT_PREFIX[side]}{layer + 1}"


def kept_layer(name: str) -> tuple[str, int] | None:
    """(side, 1-based encoder layer) of a kept-share loss-term name (:func:`kept_name`); None for another name."""
    for side, prefix in KEPT_PREFIX.items():
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return side, int(name[len(prefix):])
    return None


def part_layout(src: Tensor, brk: int, src_next: Tensor | None) -> tuple[Tensor, Tensor]:
    """Positions (B, S), restarting at 0 in each part, and segment rows (B, S) of windows ``src`` (B, S) laid
    out [previous] [next] current; ``src_next`` (B,): how many context sentences are next ones (None: 0)."""
    is_brk = (src == brk).long()
    idx = is_brk.cumsum(1) - is_brk                                         # (B, S) sentence of each token
    n_ctx = is_brk.sum(1, keepdim=True)                                     # (B, 1) context sentences
    n_next = torch.zeros_like(n_ctx) if src_next is None else torch.minimum(src_next.view(-1, 1), n_ctx)
    n_prev = n_ctx - n_next                                                 # (B, 1)
    seg = torch.where(idx < n_prev, PREVIOUS, torch.where(idx < n_ctx, NEXT, CURRENT))   # (B, S); pads: CURRENT
    prev_len = (seg == PREVIOUS).sum(1, keepdim=True)                       # (B, 1) parts are contiguous
    next_len = (seg == NEXT).sum(1, keepdim=True)
    start = torch.where(seg == PREVIOUS, 0, torch.where(seg == NEXT, prev_len, prev_len + next_len))   # (B, S)
    positions = torch.arange(src.size(1), device=src.device).unsqueeze(0) - start
    return positions, seg


@torch.no_grad()
def select_context(attention: Tensor, alive: Tensor, current: Tensor, q: float, queries: str = "current",
                   counted: Tensor | None = None) -> Tensor:
    """Eqs. 5-7: the tokens still alive after a selection layer, (B, S) bool.

    ``attention`` (B, S, S): the layer's head-averaged probabilities (query i, key k); ``alive`` (B, S): the
    keys it attended over; ``current`` (B, S): the current sentence's tokens (always kept). ``counted`` (B, S): the
    current tokens that make p and eq. 5's average (default: all of them); ``queries``: eq. 6's i runs over those
    (``current``, the text: "how many words in the current sentence") or over the alive context tokens
    (``context``, the range [p+1, m] the equation prints).
    """
    s, need, cur, _ = _correlation_counts(attention, alive, current, q, queries, counted)
    return alive & (cur | (s >= need[:, None]))


@torch.no_grad()
def rule_on_current(attention: Tensor, alive: Tensor, current: Tensor, q: float, queries: str = "current",
                    counted: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """How strict the rule is, measured on tokens it never judges: (the counted current tokens eq. 7 would keep if
    each were a context token, the counted current tokens), two scalars. The arguments are
    :func:`select_context`'s; a current token is not its own query (``a_jj`` is left out of s_j), so a key of the
    current sentence faces the bound ceil(q·p) with at most p - 1 queries where a context key has p."""
    s, need, _, cnt = _correlation_counts(attention, alive, current, q, queries, counted, own_query=False)
    return (cnt & (s >= need[:, None])).sum(), cnt.sum()


def _correlation_counts(attention: Tensor, alive: Tensor, current: Tensor, q: float, queries: str,
                        counted: Tensor | None, own_query: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Eq. 6's s_k for every key (B, S) (``own_query`` False: a current key's own query left out, which only the
    control needs: a context key is never a current query); eq. 7's bound ceil(q·p) per row (B,); the alive current
    tokens (B, S); the counted ones, the p of each row (B, S)."""
    a = attention.float()
    cur = current & alive                                                   # (B, S)
    cnt = cur if counted is None else counted & cur                         # (B, S) the p tokens
    n = a.size(-1)
    others = cnt[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=a.device)   # (B, S, S) j counted, j != i
    total = (a * others).sum(2)                                             # (B, S) Σ_{j≠i} a_ij, i.e. p·ā_i
    p = cnt.sum(1)                                                          # (B,)
    above = a * p.to(a.dtype)[:, None, None] >= total[:, :, None]           # (B, S, S) a_ik >= ā_i
    rows = cnt if queries == "current" else alive & ~cur                    # (B, S) eq. 6's queries i
    s = (above & rows[:, :, None]).sum(1)                                   # (B, S) s_k
    if not own_query:
        s = s - (above.diagonal(dim1=1, dim2=2) & rows & cur).to(s.dtype)   # a current key is not its own query
    need = torch.ceil(q * p.double() - BOUND_SLACK).to(s.dtype)             # (B,) ceil(q·p)
    return s, need, cur, cnt


def last_token(mask: Tensor) -> Tensor:
    """Each row's last real token (B, S) bool: the window's ``</s>``, where the current sentence ends."""
    return mask & (mask.long().cumsum(1) == mask.sum(1, keepdim=True))


JOINT_NEEDED = ("model.bilingual / model.context_side: target: the target context shares the source stream's "
                "embeddings, which needs one vocabulary for both sides; prepare the data with one "
                "(`ctxmt prepare ... --joint`, the default), or set bilingual: false and context_side: source")


class HanoiT(EncoderDecoder):
    """Encoder-decoder whose top encoder layers select the context tokens the layers above read."""

    context_aware = True

    def __init__(self, cfg: HanoiTConfig, vocab: VocabInfo):
        if cfg.reads_target_context and not vocab.joint:
            raise CtxmtError(JOINT_NEEDED)
        d, bilingual = cfg.d_model, cfg.bilingual
        gate = (lambda: ContextGate(d, cfg.gate, cfg.gate_scale)) if bilingual else None
        super().__init__(cfg, vocab, context_attention=(True, False, gate) if bilingual else None)
        self.segment = nn.Embedding(SEGMENTS + 2 * cfg.reads_target_context, d)   # E_s of eq. 2, N(0, 1)
        first = cfg.unified_layers
        self.between_layers_attention = frozenset(range(first, first + cfg.selection_layers))
        sides = ("source", "target") if bilingual else (cfg.context_side,)
        self.loss_term_names = tuple(kept_name(i, side) for side in sides
                                     for i in sorted(self.between_layers_attention))
        self.target_layers = self.target_norm = None                        # share_encoder: false, its own stack
        if bilingual and not cfg.share_encoder:
            args = (d, cfg.heads, cfg.ffn_dim, cfg.dropout, cfg.attention_dropout, cfg.activation_dropout,
                    cfg.normalize_before)
            self.target_layers = nn.ModuleList(EncoderLayer(*args, cfg.activation) for _ in range(cfg.encoder_layers))
            self.target_norm = nn.LayerNorm(d) if cfg.normalize_before else nn.Identity()
            for module in self.target_layers.modules():                     # initialised as the core's encoder
                if isinstance(module, nn.Linear):
                    xavier_(module)                                         # fused q/k/v: block by block
                    nn.init.zeros_(module.bias)

    @classmethod
    def resolve(cls, cfg: HanoiTConfig, meta: dict) -> HanoiTConfig:
        """Refuse a model reading target context on prepared data with separate vocabularies (the target context
        shares the source stream's embeddings); the config is otherwise unchanged."""
        if cfg.reads_target_context and not meta.get("joint", True):
            raise CtxmtError(JOINT_NEEDED)
        return cfg

    def encode(self, batch: Batch, probe: AttentionProbe | None = None) -> EncoderOut:
        """Embed [previous; next; current] with positions restarting per part and segments (eq. 2), then the
        encoder with its selection layers; the kept shares count against the input's context tokens.
        Bilingual: the target concatenation too (``EncoderOut.context``, the second cross-attention's memory);
        ``context_side: target``: the source rows are target concatenations (the inputs put them there)."""
        enc = self._encode_stream(batch.src, batch.src_next, probe, self.cfg.context_side)
        if not self.cfg.bilingual:
            return enc
        concat = target_concat_of(batch)
        rows, on = stream_input(None if concat is None else concat.tokens, batch.src.size(0), self.vocab.pad,
                                self.vocab.eos, batch.src.device)
        target = self._encode_stream(rows, None if concat is None else concat.next_sentences, None, "target", on)
        memory = memory_of(target.states, target.mask, on)
        if target.current is not None:
            memory.current = target.current & memory.mask
        return replace(enc, context=memory, loss_terms={**enc.loss_terms, **target.loss_terms})

    def _encode_stream(self, src: Tensor, src_next: Tensor | None, probe: AttentionProbe | None, side: str,
                       on: Tensor | None = None) -> EncoderOut:
        """One stream (B, S) through its encoder: the source window, or the target concatenation (``side``
        "target": segment rows 3/4, its own stack without ``share_encoder``; only rows ``on`` (B,) count in its
        kept shares)."""
        positions, seg = part_layout(src, self.vocab.brk, src_next)
        layers = norm = None
        if side == "target":
            seg = target_segments(seg, CURRENT)
            layers, norm = self.target_layers, self.target_norm
        x = self.src_embed(src) * self.scale + self.src_pos(positions, None) + self.segment(seg)   # (B, S, C)
        enc = self.encode_source(src, probe, layers=layers, norm=norm, embedded=(self.dropout(x), None), hook=True)
        if not enc.loss_terms:
            return enc
        context = (src != self.vocab.pad) & ~current_sentence_mask(src, self.vocab.brk)   # (B, S)
        count = (context if on is None else context & on[:, None]).sum().float()
        return replace(enc, loss_terms={kept_name(i, side): replace(enc.loss_terms[kept_name(i)], count=count)
                                        for i in sorted(self.between_layers_attention)})

    def between_layers(self, layer: int, states: Tensor, mask: Tensor, attention: Tensor | None,
                       current: Tensor | None) -> tuple[Tensor, dict[str, LossTerm]]:
        """After a selection layer: the context tokens eqs. 5-7 keep, and how many context tokens are left."""
        if attention is None:
            return mask, {}
        keep = select_context(attention, mask, current, self.cfg.q, self.cfg.selection_queries,
                              self._counted(mask, current))                                  # (B, S)
        left = (keep & ~current).sum().float()
        # count: the context tokens alive at this layer's input; encode replaces it by the input's context tokens
        terms = {kept_name(layer): LossTerm(left, (mask & ~current).sum().float(), weight=0.0)}
        return (keep if self.cfg.selection_drops else mask), terms        # measure only: what it would keep

    def selection_control(self, attention: Tensor, mask: Tensor, current: Tensor) -> tuple[Tensor, Tensor]:
        """:func:`rule_on_current` under this model's reading of eqs. 5-7, for a selection layer's head-averaged
        ``attention`` (B, S, S) over the keys ``mask`` (B, S): how strict the rule is (``analyze-attention``)."""
        return rule_on_current(attention, mask, current, self.cfg.q, self.cfg.selection_queries,
                               self._counted(mask, current))

    def _counted(self, mask: Tensor, current: Tensor) -> Tensor | None:
        """The current tokens that make p (B, S): all of them (None), or without ``</s>`` (``selection_eos: false``)."""
        return None if self.cfg.selection_eos else current & ~last_token(mask)


#: tiny variants the contract suite checks (tests/unit/test_contract.py): name -> model-config overrides; the q
#: values make these untrained models drop some context tokens (online, offline, split-1-5), most (high-q) or none
VARIANTS: dict[str, dict] = {
    "online": {"src_context_sentences": 1, "src_next_sentences": 0, "q": 0.7},
    "offline": {"src_context_sentences": 1, "src_next_sentences": 1, "q": 0.7},
    "split-1-5": {"encoder_layers": 6, "unified_layers": 1, "selection_layers": 5, "q": 0.5},
    "split-6-0": {"encoder_layers": 6, "unified_layers": 6, "selection_layers": 0},
    "high-q": {"encoder_layers": 3, "selection_layers": 2, "q": 1.0, "src_next_sentences": 2},
    "post-norm": {"normalize_before": False, "q": 0.1},
    "eq6-as-printed": {"selection_queries": "context", "q": 0.7},
    "no-eos": {"selection_eos": False, "q": 0.7},
    "measure-only": {"selection_drops": False, "q": 0.7},
    "bilingual-online": {"src_context_sentences": 1, "src_next_sentences": 0, "q": 0.7, "bilingual": True},
    "bilingual-offline": {"src_context_sentences": 1, "src_next_sentences": 1, "q": 0.7, "bilingual": True,
                          "gate_scale": 0.5},
    "bilingual-separate": {"q": 0.5, "bilingual": True, "share_encoder": False, "gate": "scalar"},
    "target-context": {"src_context_sentences": 1, "src_next_sentences": 1, "q": 0.7, "context_side": "target"},
}

#: Started from a sentence-level model (``train.init_from``), no variant gives its logits exactly: the learned
#: segment embedding (current / source context / target context) is new and added to every input position.
EXACT_FROM_SENTENCE: frozenset = frozenset()
