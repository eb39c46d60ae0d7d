"""Mini-batch Embedding (MBE): one summary vector z of the sentences of a document group.

Paper: Morishita, Suzuki, Iwata, Nagata (2021) "Context-aware Neural Machine Translation
with Mini-batch Embedding". The sentences of one document that share a batch form a
*group*; one extra Transformer encoder layer encodes each of them on its own, v_i is the
mean of sentence i's states and z the mean of the v_i over the group (eq. 2). z is one
extra input position without positional encoding in the encoder, the decoder (prepended,
its output dropped) or both (eq. 3). With the gate, a classifier P(d | z) = softmax(W z)
(W: 2 × e, no bias) tells same-document from mixed-document groups, trained with
L = L_NMT + λ L_MB (eqs. 5-7), and the model reads z~ = P(same document | z) · z (eq. 8).

Where the paper is silent this follows the public code (nttcslab-nlp/mbe-nmt), each choice
an option: the extra layer is a side branch over the embedded source (the main encoder
reads the same embeddings), dropout on z (``summary_dropout``), the classifier loss per
sentence with label smoothing (``classifier_loss: per_group`` is the paper's eq. 6 per
group). Where the public code is wrong this does not follow it:

* v_i is the mean over sentence i's *real* tokens (``</s>`` included); the code averages over
  padding positions, so a single sentence or a group of equal lengths gets z = 0;
* the classifier is trained on both labels; the code passes the padding index as the loss's
  ignore index, which equals the mixed-document label, so it never sees a negative;
* incremental decoding stays on and exact with z in the decoder (its position is in the
  self-attention cache from the first step); the code switches incremental decoding off.

The paper's gate cannot learn in general: P(d|z) = softmax(Wz) is linear in z, a mean of sentence vectors, and
a mixed group of sentences drawn from random documents has the same expected z as a same-document group, so the
best W leaves alpha at the prior (a toy with a strong per-document signal: alpha 0.500 same vs 0.506 mixed).
``gate_classifier: mean_spread`` (not in the paper) reads the spread of the group's sentence vectors as well,
which does separate them (:func:`gate_classifier`); ``linear`` (the default) is the paper's.

With the pre-norm Transformer (``normalize_before``) the extra layer's output is layer-normed
before the mean, as the encoder's own output is. The groups ride in ``Batch.extras``
(:class:`SentenceGroups`); a batch without them treats every row as its own group, and one without
``mixed`` labels every group "same document".

``prefix_norm`` follows the public code's ``--doc-encoder-layer-norm`` / ``--doc-decoder-layer-norm`` (not in the
paper): one LayerNorm over every input position of the side holding z, z's and the tokens' (embeddings, positions,
dropout), before the first layer; the extra layer still reads the tokens un-normed. It cancels the gate's scale:
LN(alpha z) = LN(z) but for its epsilon, so with it the gate acts only through the classifier's loss.

Hooks overridden on the core: ``encode`` (z through the encoder's input prefix and/or
``EncoderOut.prefix`` for the decoder; the classifier's terms in ``EncoderOut.loss_terms``), ``decoder_input``
(``prefix_norm``),
``encode_parts`` (a training batch in row chunks: z per group over the sentences of every chunk, the
classifier once, then each chunk's encoder at its own width), ``context_aware`` and ``loss_term_names``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch, EncoderOut, Extras, LossTerm, VocabInfo
from ctxmt_cli.core.layers import EncoderLayer
from ctxmt_cli.core.linear import Linear, xavier_
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.core.probe import AttentionProbe
from ctxmt_cli.models.mbe.config import MbeConfig


@dataclass
class SentenceGroups(Extras):
    """``Batch.extras`` of an mbe batch: the group of each source row (rows of a group share one summary z) and,
    in training, whether each group mixes documents (the gate classifier's label)."""

    whole = ("mixed",)

    groups: Tensor                               # (B,) long, group of each source row
    mixed: Tensor | None = None               # (G,) bool, training: whether group g mixes documents


def groups_of(batch: Batch) -> SentenceGroups | None:
    """The batch's sentence groups, or None (every row its own group)."""
    return batch.extras if isinstance(batch.extras, SentenceGroups) else None

SAME = 1                      # class index of "the group's sentences come from one document" (d = 1)
TERMS = ("classifier_loss", "classifier_accuracy", "alpha_same", "alpha_mixed")


#: keeps the spread's square root differentiable where a group's sentence vectors agree (a group of one)
SPREAD_EPS = 1e-6


def gate_classifier(kind: str, d: int) -> nn.Module:
    """P(d | group)'s logits (G, 2): ``linear`` is eq. 5, W z with W 2 x e and no bias; ``mean_spread`` reads
    [z; spread] (G, 2e) through one hidden ReLU layer of e units (with biases). The paper's W z is linear in a
    mean of sentence vectors, and a mixed group drawn from random documents has the same expected mean as a
    same-document group, so no W separates them (alpha stays near the prior); the spread of the sentence
    vectors differs (one document's sentences are alike), and the MLP can read it."""
    if kind == "linear":
        return Linear(d, 2, bias=False)
    return nn.Sequential(Linear(2 * d, d), nn.ReLU(), Linear(d, 2))


class Mbe(EncoderDecoder):
    """Encoder-decoder reading one summary vector of its sentence group."""

    context_aware = True

    def __init__(self, cfg: MbeConfig, vocab: VocabInfo):
        super().__init__(cfg, vocab)
        d = cfg.d_model
        args = (d, cfg.heads, cfg.ffn_dim, cfg.dropout, cfg.attention_dropout, cfg.activation_dropout,
                cfg.normalize_before)
        self.summary_layer = EncoderLayer(*args, cfg.activation)           # g_enc of eq. 2
        self.summary_norm = nn.LayerNorm(d) if cfg.normalize_before else nn.Identity()
        self.summary_dropout = nn.Dropout(cfg.dropout if cfg.summary_dropout is None else cfg.summary_dropout)
        self.classifier = gate_classifier(cfg.gate_classifier, d) if cfg.gate else None   # W of eq. 5, or the MLP
        # prefix_norm: the public code's LayerNorm over the input holding z, on each side z is placed
        on = [cfg.prefix_norm and cfg.placement in (side, "both") for side in ("encoder", "decoder")]
        self.encoder_input_norm, self.decoder_input_norm = (nn.LayerNorm(d) if o else None for o in on)
        self.loss_term_names = TERMS if cfg.gate else ()
        for module in (self.summary_layer, self.classifier):
            for sub in ([] if module is None else module.modules()):
                if isinstance(sub, nn.Linear):
                    xavier_(sub)                                           # fused q/k/v: block by block

    def summarize(self, embedded: Tensor, mask: Tensor, groups: Tensor,
                  n_groups: int | None = None) -> tuple[Tensor, Tensor | None]:
        """z per group (G, C) (eq. 2) from the embedded source (B, S, C), and the classifier's logits (G, 2)."""
        return self.group_summary(self.sentence_vectors(embedded, mask), groups, n_groups)

    def sentence_vectors(self, embedded: Tensor, mask: Tensor) -> Tensor:
        """v_i (B, C) of eq. 2: the extra layer over each embedded sentence (B, S, C), mean over its real tokens."""
        e, _ = self.summary_layer(embedded, mask[:, None, None, :])
        e = self.summary_norm(e)                                            # (B, S, C)
        real = mask.unsqueeze(-1).to(e.dtype)                               # (B, S, 1)
        return (e * real).sum(1) / real.sum(1).clamp_min(1.0)               # (B, C): mean over real tokens

    def group_summary(self, v: Tensor, groups: Tensor, n_groups: int | None = None) -> tuple[Tensor, Tensor | None]:
        """z (G, C): the mean of the v_i (B, C) of each group (eq. 2), after dropout; the classifier's logits (G, 2).

        ``n_groups`` (G) when known from a shape (``SentenceGroups.mixed``): reading ``groups.max()`` would make a GPU
        wait for the host; the group sizes come from an ``index_add`` for the same reason (``bincount`` syncs)."""
        n = int(groups.max()) + 1 if n_groups is None else n_groups
        size = v.new_zeros(n, 1).index_add_(0, groups, v.new_ones(groups.size(0), 1)).clamp_min(1.0)   # (G, 1)
        z = v.new_zeros(n, v.size(1)).index_add_(0, groups, v) / size       # (G, C)
        spread = None
        if self.cfg.gate and self.cfg.gate_classifier == "mean_spread":     # per channel: sqrt(E[v^2] - E[v]^2)
            second = v.new_zeros(n, v.size(1)).index_add_(0, groups, v * v) / size          # (G, C)
            spread = (second - z * z).clamp_min(0.0).add(SPREAD_EPS).sqrt()                  # (G, C)
        z = self.summary_dropout(z)
        if self.classifier is None:
            return z, None
        return z, self.classifier(z if spread is None else torch.cat([z, spread], -1))       # (G, C), (G, 2)

    def encode(self, batch: Batch, probe: AttentionProbe | None = None) -> EncoderOut:
        """z of each row's group into the encoder input and/or the decoder prefix (eq. 3)."""
        (enc,), terms = self._encode_rows([batch], probe)
        return replace(enc, loss_terms=terms)

    def encode_parts(self, parts: list[Batch]) -> tuple[list[EncoderOut], dict]:
        """A chunked batch: z of each group over the sentences of every chunk, the classifier once, then each
        chunk's encoder at its own width (the batch-level hook of the core)."""
        return self._encode_rows(parts)

    def _encode_rows(self, parts: list[Batch], probe: AttentionProbe | None = None) -> tuple[list[EncoderOut], dict]:
        """EncoderOuts of ``parts`` (the row chunks of one batch, or the batch alone) and the classifier's terms.

        One embedding per chunk serves the extra layer and the encoder (the same dropout draw, as when they
        share one padded tensor); without ``groups`` (one part) every row is its own group."""
        found = [groups_of(p) for p in parts]
        if len(parts) > 1 and any(g is None for g in found):
            raise ValueError("row chunks of an mbe batch need their SentenceGroups (Batch.extras)")
        src0 = parts[0].src
        groups = [g.groups if g is not None else torch.arange(src0.size(0), device=src0.device) for g in found]
        masks = [p.src != self.vocab.pad for p in parts]                    # (b, S) per chunk
        embedded = [self.embed_source(p.src) for p in parts]
        v = torch.cat([self.sentence_vectors(e, m) for (e, _), m in zip(embedded, masks, strict=True)])   # (B, C)
        every = torch.cat(groups) if len(groups) > 1 else groups[0]         # (B,)
        mixed = None if found[0] is None else found[0].mixed
        z, logits = self.group_summary(v, every, None if mixed is None else mixed.size(0))
        terms = {}
        if logits is not None:
            alpha = logits.float().softmax(-1)[:, SAME]                     # (G,) P(same document | z)
            z = z * alpha.to(z.dtype).unsqueeze(1)                          # eq. 8
            terms = self.classifier_terms(logits, alpha, every, mixed)
        placement, encs = self.cfg.placement, []
        for part, emb, rows in zip(parts, embedded, groups, strict=True):
            per_row = z.index_select(0, rows).unsqueeze(1)                  # (b, 1, C)
            prefix = None
            if placement != "decoder":                                      # the encoder's input: [z; tokens]
                prefix, emb = per_row, emb
                if self.encoder_input_norm is not None:                     # every position normed (prefix_norm)
                    prefix, emb = self.encoder_input_norm(per_row), (self.encoder_input_norm(emb[0]), emb[1])
            enc = self.encode_source(part.src, probe, prefix=prefix, embedded=emb)
            to_decoder = None if placement == "encoder" else self.decoder_input(per_row)     # (b, 1, C)
            encs.append(replace(enc, prefix=to_decoder))
        return encs, terms

    def decoder_input(self, x: Tensor) -> Tensor:
        """With ``prefix_norm`` and z in the decoder: every input position layer-normed, z's (the prefix) and the
        tokens' alike (the public code's LayerNorm over [z; tokens]); otherwise as they are."""
        return x if self.decoder_input_norm is None else self.decoder_input_norm(x)

    def classifier_terms(self, logits: Tensor, alpha: Tensor, groups: Tensor, mixed: Tensor | None) -> dict:
        """L_MB (eq. 6) with weight λ, and statistics: accuracy, mean α on same- and mixed-document groups."""
        n = logits.size(0)
        mixed = torch.zeros(n, dtype=torch.bool, device=logits.device) if mixed is None else mixed.bool()
        label = (~mixed).long()                                             # (G,) 1 = same document
        if self.cfg.classifier_loss == "per_sentence":                      # every sentence votes for its group's label
            loss = F.cross_entropy(logits.float().index_select(0, groups), label.index_select(0, groups),
                                   reduction="sum", label_smoothing=self.cfg.classifier_label_smoothing)
            count = groups.numel()
        else:
            loss, count = F.cross_entropy(logits.float(), label, reduction="sum"), n
        correct = (logits.argmax(-1) == label).float()
        same = (~mixed).float()

        def stat(total: Tensor, k: Tensor) -> LossTerm:                     # logged, never added to the loss
            return LossTerm(total.detach(), k.detach().float(), weight=0.0)

        return {"classifier_loss": LossTerm(loss, torch.tensor(float(count), device=logits.device),
                                            weight=self.cfg.classifier_weight),
                "classifier_accuracy": stat(correct.sum(), torch.tensor(float(n), device=logits.device)),
                "alpha_same": stat((alpha * same).sum(), same.sum()),
                "alpha_mixed": stat((alpha * (1 - same)).sum(), (1 - same).sum())}


#: tiny variants the contract suite checks (tests/unit/test_contract.py): name -> model-config overrides
VARIANTS: dict[str, dict] = {
    "encoder": {},
    "decoder": {"placement": "decoder"},
    "both": {"placement": "both"},
    "no-gate": {"gate": False, "mixed_groups": 0.0},
    "per-group": {"classifier_loss": "per_group", "placement": "both"},
    "spread-gate": {"gate_classifier": "mean_spread", "placement": "decoder"},
    "prefix-norm": {"prefix_norm": True, "placement": "both"},
    "post-norm": {"normalize_before": False, "placement": "decoder"},
}

#: Started from a sentence-level model (``train.init_from``), no variant gives its logits exactly: z, from the new
#: summary layer, is an extra input position even for a group of one sentence.
EXACT_FROM_SENTENCE: frozenset = frozenset()
