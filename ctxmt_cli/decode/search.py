"""Family-agnostic beam and greedy search over the core contract.

Only ``encode``, ``init_state``, ``decode_step`` and ``reorder_state`` are used,
so every family decodes with the same code. ``init_state`` forces
``batch.tgt_prefix`` (``<s>`` + target context) in one parallel pass and leaves
its last token pending; the search feeds that token first.

Scores follow fairseq: the sum of the generated tokens' log-probabilities
(``</s>`` included, the forced prefix excluded) divided by ``length ** lenpen``
where the length counts ``</s>``. Log-probabilities are taken before banned
tokens are masked, so a hypothesis' score equals what a forward pass gives it.

Beam search is vectorised over rows × beams: each step takes the top ``2k``
candidates of every row over beam × vocabulary (at most ``k`` of them end with
``</s>`` since each beam contributes one ``</s>``, so ``k`` live candidates
always remain). Rows that are done leave the state at once, so the last steps
of a batch with one long row cost one row, not the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import torch
from torch import Tensor

from ctxmt_cli.core.batch import Batch

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """The best output of one row: ``tokens`` without ``</s>``, its normalised score, decoder steps taken."""

    tokens: list[int]
    score: float
    steps: int


def _max_len_tensor(max_len: Union[int, Tensor], rows: int, device: torch.device) -> Tensor:
    """``max_len`` as a (B,) long tensor: the most tokens a hypothesis may hold before ``</s>``."""
    if isinstance(max_len, Tensor):
        out = max_len.to(device=device, dtype=torch.long).reshape(-1)
        if out.numel() != rows:
            raise ValueError(f"max_len has {out.numel()} entries for {rows} rows")
        return out.clamp(min=0)
    return torch.full((rows,), max(int(max_len), 0), dtype=torch.long, device=device)


def _width(limit: Tensor) -> int:
    """Width of the finished-token buffer: the longest allowed hypothesis plus one."""
    return (int(limit.max()) if limit.numel() else 0) + 1


def _start(model, batch: Batch, repeat: int, enc=None):
    """Encode (unless ``enc`` is given), force the prefix, and repeat every row ``repeat`` times (beams are adjacent rows)."""
    enc = model.encode(batch) if enc is None else enc
    state = model.init_state(enc, batch)
    if repeat > 1:
        rows = torch.arange(batch.size, device=batch.src.device)
        state = model.reorder_state(state, rows.repeat_interleave(repeat))
    return state


def _ban_list(model, banned: Sequence[int]) -> list[int]:
    """Pad and ``<s>`` are never generated; ``banned`` adds more (e.g. ``<brk>`` in prefix mode)."""
    return sorted({model.vocab.pad, model.vocab.bos, *(int(b) for b in banned)})


def _step_lprobs(logits: Tensor, ban: list[int], eos: int, t: int, min_len: int, forced: Tensor) -> Tensor:
    """Log-probabilities (N, V) in float32 with bans, ``min_len`` and forced endings applied.

    ``forced`` (N,) marks rows at their maximum length: only ``</s>`` remains,
    with its real log-probability (taken before ``min_len`` masking, so a
    ``max_len`` below ``min_len`` still ends cleanly).
    """
    lprobs = torch.log_softmax(logits.float(), dim=-1)                     # (N, V)
    lprobs[:, ban] = NEG_INF
    eos_lp = lprobs[:, eos].clone()                                        # (N,)
    if t < min_len:
        lprobs[:, eos] = NEG_INF
    if bool(forced.any()):
        lprobs = lprobs.masked_fill(forced.unsqueeze(1), NEG_INF)
        lprobs[:, eos] = torch.where(forced, eos_lp, lprobs[:, eos])
    return lprobs


def _hypotheses(tokens: Tensor, lengths: Tensor, scores: Tensor) -> list[Hypothesis]:
    """Python hypotheses from the (B, L) token buffer; runs once per search, off the hot path."""
    out = []
    for row, n, s in zip(tokens.tolist(), lengths.tolist(), scores.tolist()):
        out.append(Hypothesis(tokens=row[:n], score=s, steps=n + 1))
    return out


@torch.inference_mode()
def greedy_search(
    model, batch: Batch, max_len: Union[int, Tensor], banned: Sequence[int] = (), *,
    min_len: int = 1, lenpen: float = 0.6,
) -> list[Hypothesis]:
    """Argmax decoding of every row of ``batch``; one :class:`Hypothesis` per row, in row order.

    ``max_len`` (int or (B,)) bounds the tokens before ``</s>``; the score is
    normalised like beam search's so the two are comparable.
    """
    b, device, eos = batch.size, batch.src.device, model.vocab.eos
    limit = _max_len_tensor(max_len, b, device)
    ban = _ban_list(model, banned)
    state = _start(model, batch, 1)
    rows = torch.arange(b, device=device)                                  # original index of each active row
    hist = torch.zeros(b, 0, dtype=torch.long, device=device)             # (R, t) tokens so far
    sums = torch.zeros(b, device=device)                                   # (R,) summed log-probs
    out_tok = torch.full((b, _width(limit)), model.vocab.pad, dtype=torch.long, device=device)
    out_len = torch.zeros(b, dtype=torch.long, device=device)
    out_score = torch.full((b,), NEG_INF, device=device)
    inp, t = state.pending, 0
    while rows.numel() > 0:
        logits, state = model.decode_step(inp, state)                      # (R, V)
        lprobs = _step_lprobs(logits, ban, eos, t, min_len, t >= limit[rows])
        best_lp, tok = lprobs.max(dim=-1)                                  # (R,)
        sums = sums + best_lp
        done = (tok == eos) | torch.isinf(best_lp)
        if bool(done.any()):
            fin = rows[done]
            out_tok[fin, :t] = hist[done]
            out_len[fin] = t
            out_score[fin] = sums[done] / float(t + 1) ** lenpen
            keep = ~done
            rows, hist, sums, tok = rows[keep], hist[keep], sums[keep], tok[keep]
            state = model.reorder_state(state, keep.nonzero().squeeze(1))
        hist = torch.cat([hist, tok.unsqueeze(1)], dim=1)                  # (R, t+1)
        inp, t = tok, t + 1
    return _hypotheses(out_tok, out_len, out_score)


class _Finished:
    """Per original row: the best finished hypothesis so far and how many were finished."""

    def __init__(self, rows: int, width: int, pad: int, device: torch.device):
        self.tokens = torch.full((rows, width), pad, dtype=torch.long, device=device)  # (B, L)
        self.length = torch.zeros(rows, dtype=torch.long, device=device)               # (B,)
        self.score = torch.full((rows,), NEG_INF, device=device)                       # (B,)
        self.count = torch.zeros(rows, dtype=torch.long, device=device)                # (B,)

    def add(self, rows: Tensor, norm: Tensor, fin: Tensor, hist: Tensor, src_beam: Tensor, t: int) -> None:
        """Record the ``</s>`` candidates ``fin`` (R, k) with normalised scores ``norm`` (R, k).

        ``hist`` (R, k, t) holds the live beams' tokens before this step and
        ``src_beam`` (R, k) the beam each candidate extends.
        """
        self.count[rows] += fin.sum(dim=1)
        norm = norm.masked_fill(~fin, NEG_INF)
        best, arg = norm.max(dim=1)                                        # (R,)
        better = best > self.score[rows]
        if not bool(better.any()):
            return
        beam = src_beam.gather(1, arg.unsqueeze(1)).squeeze(1)             # (R,)
        picked = hist[torch.arange(hist.size(0), device=hist.device), beam]  # (R, t)
        target = rows[better]
        self.tokens[target, :t] = picked[better]
        self.length[target] = t
        self.score[target] = best[better]


def _select(scores: Tensor, lprobs: Tensor, k: int, first: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Top ``2k`` candidates per row over beam × vocab: scores, source beams and tokens, each (R, 2k).

    ``lprobs`` (R*k, V) is consumed: the candidate scores are added into it in place.
    """
    r, v = scores.size(0), lprobs.size(-1)
    cand = lprobs.view(r, k, v).add_(scores.unsqueeze(2))                  # (R, k, V)
    if first:
        # All beams are copies of one prefix: only beam 0 may extend it, or the beam fills with duplicates.
        cand[:, 1:] = NEG_INF
    top_s, top_i = cand.view(r, k * v).topk(min(2 * k, k * v), dim=1)      # (R, 2k)
    return top_s, torch.div(top_i, v, rounding_mode="floor"), top_i % v


@torch.inference_mode()
def beam_search(
    model, batch: Batch, beam: int = 4, lenpen: float = 0.6, max_len: Union[int, Tensor] = 200,
    min_len: int = 1, banned: Sequence[int] = (), enc=None,
) -> list[Hypothesis]:
    """Beam search over every row of ``batch``; the best :class:`Hypothesis` of each row, in row order.

    ``max_len`` (int or (B,)) bounds the tokens before ``</s>``: at that length
    live hypotheses are forced to end. A row is done when it holds ``beam``
    finished hypotheses and no live one, scored at its current length, beats
    the best of them (the usual heuristic; it makes ``beam=1`` exactly greedy).
    ``enc``: the batch's encoder output when the caller already computed it (document caches).
    """
    k, b, device, eos = beam, batch.size, batch.src.device, model.vocab.eos
    limit = _max_len_tensor(max_len, b, device)
    ban = _ban_list(model, banned)
    state = _start(model, batch, k, enc)
    finished = _Finished(b, _width(limit), model.vocab.pad, device)
    rows = torch.arange(b, device=device)                                  # (R,) original row of each active row
    scores = torch.zeros(b, k, device=device)                              # (R, k) live cumulative log-probs
    hist = torch.zeros(b, k, 0, dtype=torch.long, device=device)          # (R, k, t)
    inp, t = state.pending, 0                                              # (R*k,)
    while rows.numel() > 0:
        logits, state = model.decode_step(inp, state)                      # (R*k, V)
        at_limit = t >= limit[rows]                                        # (R,)
        lprobs = _step_lprobs(logits, ban, eos, t, min_len, at_limit.repeat_interleave(k))
        top_s, src_beam, tok = _select(scores, lprobs, k, t == 0)          # (R, 2k) each
        is_eos = tok == eos
        fin = is_eos[:, :k] & torch.isfinite(top_s[:, :k])                 # only top-k ranks may finish
        finished.add(rows, top_s[:, :k] / float(t + 1) ** lenpen, fin, hist, src_beam[:, :k], t)
        live_s, pos = top_s.masked_fill(is_eos, NEG_INF).topk(k, dim=1)    # (R, k), best first
        live_beam, live_tok = src_beam.gather(1, pos), tok.gather(1, pos)  # (R, k)
        bound = live_s[:, 0] / float(t + 1) ** lenpen                      # best live, were it to stop now
        done = at_limit | torch.isinf(live_s[:, 0])
        done |= (finished.count[rows] >= k) & (finished.score[rows] >= bound)
        keep = ~done
        flat = torch.arange(rows.numel(), device=device).unsqueeze(1) * k + live_beam  # (R, k) state rows
        state = model.reorder_state(state, flat[keep].reshape(-1))
        gathered = hist.gather(1, live_beam.unsqueeze(2).expand(-1, -1, t))  # (R, k, t)
        hist = torch.cat([gathered, live_tok.unsqueeze(2)], dim=2)[keep]   # (R', k, t+1)
        rows, scores, inp = rows[keep], live_s[keep], live_tok[keep].reshape(-1)
        t += 1
    return _hypotheses(finished.tokens, finished.length, finished.score)
