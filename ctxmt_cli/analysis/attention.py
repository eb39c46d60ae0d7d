"""Attention statistics reduced on the fly: entropy and current-sentence share per kind × layer × head.

An :class:`AttentionStats` is the probe (:mod:`ctxmt_cli.core.probe`) of a teacher-forced
pass: it receives one layer's map of one batch at a time, adds its sums and drops it.
What it keeps grows with layers × heads and with the number of sentences, never with
window length or with the number of maps.

Definitions (also written into ``analysis.json``):

* entropy of a query: H = -Σ_k a_k log a_k over its unmasked keys, in nats (Lupo et al.
  2022, Table 5); normalised: H / log(number of keys it may see), 0 for a query with one key;
* current-sentence share of a query of the current sentence: Σ_k a_k over the keys of the
  current sentence (self-attention: the same side; cross-attention: the current source
  sentence; context attention: the current sentence's own entry) — Lupo et al. 2022, Figure 2;
* the summary entropy is the mean over every (query, head, layer, kind) with the kinds
  encoder self, decoder self and cross-attention pooled (each query of each head of each
  layer counts once); the summary share likewise over the current-sentence queries, and
  ``current_share_self`` over the two self-attention kinds only (Figure 2's quantity);
* ``entropy_of_mean_map``, a second definition of the same table's entropy: the map of each
  sentence, layer and kind averaged over its heads and real queries first (one distribution
  over the keys), its entropy taken, and the mean over (sentence, layer, kind) of the same three
  kinds — the reading of attention-analysis scripts that average the maps before measuring them.
  Averaging first counts spread *between* queries and heads as entropy, so the two can move apart.

Per sentence the pooled sums and counts are kept, so that two models scored on the same
sentences can be compared by approximate randomisation (:func:`approximate_randomization`).
"""

from __future__ import annotations

import numpy as np
import torch

from ctxmt_cli.core.probe import AttentionView

SUMMARY_KINDS = ("encoder_self", "decoder_self", "cross")
SELF_KINDS = ("encoder_self", "decoder_self")
#: an (token, group) assignment weight at or above this "carries weight"
ASSIGNED = 0.05
#: per-sentence columns: pooled sums over (query, head, layer) of the summary kinds, and their counts
COLUMNS = ("entropy_sum", "entropy_count", "entropy_current_sum", "share_sum", "share_count", "self_share_sum",
           "self_share_count", "mean_map_entropy_sum", "mean_map_count")
#: summary number -> (sum column, count column)
SUMMARY = {"entropy": ("entropy_sum", "entropy_count"), "entropy_current": ("entropy_current_sum", "share_count"),
           "current_share": ("share_sum", "share_count"), "current_share_self": ("self_share_sum", "self_share_count"),
           "entropy_of_mean_map": ("mean_map_entropy_sum", "mean_map_count")}

DEFINITIONS = {
    "entropy": "per query H = -sum_k a_k ln a_k over its unmasked keys (nats); mean over real queries",
    "entropy_normalized": "per query H / ln(number of keys it may see); 0 for a query with a single key",
    "current_share": "per current-sentence query, the attention mass on keys of the current sentence "
                     "(self: same side; cross: current source sentence; context: the sentence's own entry); "
                     "mean over current-sentence queries",
    "summary.entropy": "mean of the per-query entropy over every (query, head, layer, kind) pair, kinds "
                       "encoder_self, decoder_self and cross pooled (Lupo et al. 2022, Table 5)",
    "summary.entropy_current": "the same mean entropy over the current-sentence queries only",
    "summary.current_share": "mean share over every (current query, head, layer, kind) pair of the same three kinds",
    "summary.current_share_self": "the same over encoder_self and decoder_self only (Lupo et al. 2022, Figure 2)",
    "summary.entropy_of_mean_map": "per (sentence, layer, kind), the entropy of the map averaged over heads and real "
                                   "queries (one distribution over the keys, nats); mean over (sentence, layer, kind), "
                                   "the same three kinds pooled",
    "positions": "source tokens belong to their sentence (<brk> closes its sentence); a decoder position "
                 "belongs to the sentence of the token it predicts",
    "assignment": f"caching grouping/selecting weights: a (token, group) weight >= {ASSIGNED} carries weight",
}


class KindSums:
    """Sums of one attention kind, per layer × head (layers added as they come)."""

    def __init__(self):
        self.entropy: list[np.ndarray] = []         # per layer (H,)
        self.entropy_norm: list[np.ndarray] = []
        self.share: list[np.ndarray] = []
        self.queries: list[float] = []               # per layer: real queries (each head sees all)
        self.current_queries: list[float] = []

    def add(self, layer: int, entropy, entropy_norm, share, queries: float, current: float) -> None:
        while len(self.entropy) <= layer:
            h = len(entropy)
            for acc in (self.entropy, self.entropy_norm, self.share):
                acc.append(np.zeros(h))
            self.queries.append(0.0)
            self.current_queries.append(0.0)
        self.entropy[layer] += entropy
        self.entropy_norm[layer] += entropy_norm
        self.share[layer] += share
        self.queries[layer] += queries
        self.current_queries[layer] += current

    def to_json(self) -> dict:
        """Means per layer × head (None where a layer saw no current-sentence query)."""
        def mean(sums, counts):
            return [[float(x) / c for x in s] if c else [None] * len(s) for s, c in zip(sums, counts, strict=True)]

        return {"entropy": mean(self.entropy, self.queries),
                "entropy_normalized": mean(self.entropy_norm, self.queries),
                "current_share": mean(self.share, self.current_queries),
                "queries": [int(q) for q in self.queries], "current_queries": [int(q) for q in self.current_queries]}


def query_statistics(view: AttentionView) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Entropy, normalised entropy and current share of every query of ``view``: three (B, H, Tq) tensors."""
    w = view.weights.float() * view.key_mask[:, None, None, :]              # (B, H, Tq, Tk), exact 0 at masked keys
    entropy = -torch.special.xlogy(w, w).sum(-1)                            # (B, H, Tq)
    n_keys = view.key_mask.sum(1, keepdim=True).expand_as(view.query_mask)  # (B, Tq)
    if view.causal:
        seen = torch.arange(1, view.query_mask.size(1) + 1, device=w.device).unsqueeze(0)
        n_keys = torch.minimum(n_keys, seen)
    log_n = n_keys.float().log().unsqueeze(1)                               # (B, 1, Tq)
    normalized = torch.where(log_n > 0, entropy / log_n.clamp_min(1e-12), torch.zeros_like(entropy))
    share = (w * view.key_current[:, None, None, :]).sum(-1)               # (B, H, Tq)
    return entropy, normalized, share


def mean_map_entropy(view: AttentionView) -> tuple[torch.Tensor, torch.Tensor]:
    """Entropy of each row's map averaged over heads and real queries (B,), and whether the row has a real query
    (B,) float: the averaged map is one distribution over the keys (``summary.entropy_of_mean_map``)."""
    w = view.weights.float() * view.key_mask[:, None, None, :]              # (B, H, Tq, Tk)
    q = view.query_mask[:, None, :, None].float()                           # (B, 1, Tq, 1)
    n = q.sum((1, 2)) * w.size(1)                                           # (B, 1): heads x real queries
    mean = (w * q).sum((1, 2)) / n.clamp_min(1.0)                           # (B, Tk), sums to 1 where n > 0
    return -torch.special.xlogy(mean, mean).sum(-1), (n.squeeze(1) > 0).float()


class AttentionStats:
    """The probe that accumulates entropy and current share (see the module docstring), and assignment statistics.

    Set :attr:`rows` to the sentence id of each row before each batch's forward pass.
    """

    def __init__(self):
        self.kinds: dict[str, KindSums] = {}
        self.sentences: dict[int, np.ndarray] = {}  # sentence id -> COLUMNS
        self.rows: list[int] = []
        self.assignment = AssignmentStats()

    def __call__(self, view: AttentionView) -> None:
        if view.kind == "assignment":
            self.assignment.add(view, self.rows)
            return
        entropy, normalized, share = query_statistics(view)                # (B, H, Tq) each
        q = view.query_mask[:, None, :].float()                             # (B, 1, Tq)
        cq = (view.query_current & view.query_mask)[:, None, :].float()
        heads = entropy.size(1)

        def per_head(x: torch.Tensor) -> np.ndarray:                        # (B, H, Tq) -> (H,)
            return x.sum((0, 2)).double().numpy(force=True)

        self.kinds.setdefault(view.kind, KindSums()).add(
            view.layer, per_head(entropy * q), per_head(normalized * q), per_head(share * cq),
            float(q.sum()), float(cq.sum()))
        if view.kind not in SUMMARY_KINDS:
            return
        averaged, has_query = mean_map_entropy(view)                       # (B,) each
        per_row = torch.stack([(entropy * q).sum((1, 2)), q.sum((1, 2)) * heads, (entropy * cq).sum((1, 2)),
                               (share * cq).sum((1, 2)), cq.sum((1, 2)) * heads, averaged * has_query, has_query],
                              1).double().numpy(force=True)                # (B, 7)
        is_self = view.kind in SELF_KINDS
        for r, sid in enumerate(self.rows):
            acc = self.sentences.setdefault(sid, np.zeros(len(COLUMNS)))
            acc[:5] += per_row[r, :5]
            acc[7:9] += per_row[r, 5:7]
            if is_self:
                acc[5:7] += per_row[r, 3:5]

    def summary(self) -> dict:
        """The pooled summary numbers (module docstring) with their definitions."""
        total = np.sum(list(self.sentences.values()), axis=0) if self.sentences else np.zeros(len(COLUMNS))
        column = {name: total[i] for i, name in enumerate(COLUMNS)}
        out = {name: float(column[s] / column[c]) if column[c] else None for name, (s, c) in SUMMARY.items()}
        out["definition"] = (DEFINITIONS["summary.entropy"] + "; current_share: " + DEFINITIONS["summary.current_share"]
                             + "; entropy_of_mean_map: " + DEFINITIONS["summary.entropy_of_mean_map"])
        return out

    def to_json(self) -> dict:
        """``analysis.json``'s statistics: summary, per kind × layer × head, assignment, definitions."""
        out = {"summary": self.summary(), "by_kind": {k: v.to_json() for k, v in self.kinds.items()},
               "sentences": len(self.sentences), "definitions": DEFINITIONS}
        if self.assignment.sentences:
            out["assignment"] = self.assignment.to_json()
        return out


class AssignmentStats:
    """Group usage of the caching family's Latent Grouping / Selecting weights (tokens × groups per sentence)."""

    def __init__(self):
        self.sentences = 0
        self.groups_used = 0.0                       # Σ over sentences of the groups carrying weight
        self.group_load: np.ndarray | None = None    # (K,) tokens assigned to each group, over the split
        self.group_mass: np.ndarray | None = None    # (K,) assignment mass of each group
        self.tokens = 0.0

    def add(self, view: AttentionView, rows: list[int]) -> None:
        w = view.weights[:, 0].float() * view.query_mask.unsqueeze(-1)     # (N, L, K)
        carries = w >= ASSIGNED                                             # (N, L, K)
        tokens, mass = carries.sum((0, 1)).double(), w.sum((0, 1)).double()   # (K,)
        if self.group_load is None:
            self.group_load, self.group_mass = np.zeros(w.size(2)), np.zeros(w.size(2))
        self.group_load += tokens.numpy(force=True)
        self.group_mass += mass.numpy(force=True)
        self.groups_used += float(carries.any(1).sum())
        self.sentences += w.size(0)
        self.tokens += float(view.query_mask.sum())

    def to_json(self) -> dict:
        """Group usage over the split."""
        mass = self.group_mass / max(self.group_mass.sum(), 1e-12)
        return {"groups": len(mass), "sentences": self.sentences,
                "groups_used_per_sentence": self.groups_used / max(self.sentences, 1),
                "groups_used": int((self.group_load > 0).sum()),
                "group_mass_share": mass.tolist(),
                "tokens_per_group": (self.group_load / max(self.sentences, 1)).tolist(),
                "definition": "groups_used_per_sentence: mean number of groups with a weight >= "
                              f"{ASSIGNED} on some token; groups_used: groups with such a weight in any "
                              "sentence; group_mass_share: each group's share of all assignment weight; "
                              "tokens_per_group: mean tokens per sentence with a weight >= "
                              f"{ASSIGNED} in the group"}


def approximate_randomization(a: np.ndarray, b: np.ndarray, trials: int = 1000, seed: int = 1) -> float:
    """p-value of the difference of two pooled ratios Σsum/Σcount over the same sentences (Riezler and Maxwell, 2005).

    ``a``/``b`` are (N, 2) per-sentence (sum, count) of two systems. Each trial swaps each sentence's pair
    between the systems with probability 1/2; p = (trials whose |difference| >= the observed one + 1) / (trials + 1).
    """
    rng = np.random.default_rng(seed)
    observed = abs(a[:, 0].sum() / a[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum())
    total, delta = a + b, b - a                                             # a swapped sentence moves delta from B to A
    at_least = 0
    for start in range(0, trials, 128):                                     # (chunk, N) swaps at a time: bounded memory
        swap = rng.random((min(128, trials - start), len(a))) < 0.5
        sa = a.sum(0) + swap.astype(float) @ delta                          # (chunk, 2)
        sb = total.sum(0) - sa
        diff = np.abs(sa[:, 0] / sa[:, 1] - sb[:, 0] / sb[:, 1])
        at_least += int(np.sum(diff >= observed - 1e-12))
    return float((at_least + 1) / (trials + 1))
