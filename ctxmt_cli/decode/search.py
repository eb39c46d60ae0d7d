"""Family-agnostic beam and greedy search over the core contract.

Only ``encode``, ``init_state``, ``decode_step`` and ``reorder_state`` are used,
so every family decodes with the same code. ``init_state`` forces
``batch.tgt_prefix`` (``<s>`` + target context) in one parallel pass and leaves
its last token pending; the search feeds that token first.

Scores follow fairseq: the sum of the generated tokens' log-probabilities
(``</s>`` included, the forced prefix excluded) divided by ``length ** lenpen``
where the length counts ``</s>``; the sum itself is kept too
(:attr:`Hypothesis.logprob`, the sentence log-probability). Log-probabilities are taken before banned
tokens are masked, so a hypothesis' score equals what a forward pass gives it.

Sampling (:func:`greedy_search` with a generator) draws each token from the model's distribution instead of
taking the most probable: what a round trip for DocRepair's training data uses (Voita et al. 2019).

Beam search is vectorised over rows × beams: each step takes the top ``2k``
candidates of every row over beam × vocabulary (at most ``k`` of them end with
``</s>`` since each beam contributes one ``</s>``, so ``k`` live candidates
always remain). The first step extends one copy of each row's prefix (k copies would give k times the same
candidates), and its selection spreads every row to its k beams. Rows that are done leave the state at once,
so the last steps of a batch with one long row cost one row, not the whole batch. ``nbest`` N keeps the N best
finished hypotheses of each row instead of one (N <= beam), ranked by their normalised score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.decode.start import merged, start

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """The best output of one row: ``tokens`` without ``</s>``, its normalised score, decoder steps taken,
    ``logprob`` the summed log-probability of the tokens and ``</s>`` (the score before normalisation) and
    ``alternatives`` the next best finished hypotheses of the row (beam search with ``nbest`` > 1), best first."""

    tokens: list[int]
    score: float
    steps: int
    logprob: float = 0.0
    alternatives: list[Hypothesis] = field(default_factory=list)


def _max_len_tensor(max_len: int | Tensor, rows: int, device: torch.device) -> Tensor:
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


def _hypotheses(tokens: Tensor, lengths: Tensor, scores: Tensor, logprobs: Tensor) -> list[Hypothesis]:
    """Python hypotheses from the (B, N, L) token buffer (N best per row, best first; unfinished entries have a
    score of -inf and are dropped, except a row's first); runs once per search, off the hot path."""
    out = []
    for rows, ns, ss, lps in zip(tokens.tolist(), lengths.tolist(), scores.tolist(), logprobs.tolist(), strict=True):
        found = [Hypothesis(tokens=row[:n], score=s, steps=n + 1, logprob=lp)
                 for i, (row, n, s, lp) in enumerate(zip(rows, ns, ss, lps, strict=True)) if i == 0 or s != NEG_INF]
        found[0].alternatives = found[1:]
        out.append(found[0])
    return out


@torch.inference_mode()
def greedy_search(
    model, batch: Batch, max_len: int | Tensor, banned: Sequence[int] = (), *,
    min_len: int = 1, lenpen: float = 0.6, generator: torch.Generator | None = None,
) -> list[Hypothesis]:
    """Argmax decoding of every row of ``batch``; one :class:`Hypothesis` per row, in row order. With a
    ``generator``, *sampling*: each token is drawn from the model's distribution (bans, ``min_len`` and forced
    endings applied), with that generator (the same seed and batches give the same samples).

    ``max_len`` (int or (B,)) bounds the tokens before ``</s>``; the score is
    normalised like beam search's so the two are comparable.
    """
    b, device, eos = batch.size, batch.src.device, model.vocab.eos
    ban = _ban_list(model, banned)
    begun = start(model, batch, chunked=generator is None)            # samples drawn in the batch's row order
    state, limit = begun.state, begun.rows(_max_len_tensor(max_len, b, device))   # rows in the state's order
    rows = torch.arange(b, device=device)                                  # original index of each active row
    hist = torch.zeros(b, 0, dtype=torch.long, device=device)             # (R, t) tokens so far
    sums = torch.zeros(b, device=device)                                   # (R,) summed log-probs
    out_tok = torch.full((b, _width(limit)), model.vocab.pad, dtype=torch.long, device=device)
    out_len = torch.zeros(b, dtype=torch.long, device=device)
    out_score = torch.full((b,), NEG_INF, device=device)
    out_lp = torch.full((b,), NEG_INF, device=device)
    inp, t = state.pending, 0
    while rows.numel() > 0:
        logits, state = model.decode_step(inp, state)                      # (R, V)
        lprobs = _step_lprobs(logits, ban, eos, t, min_len, t >= limit[rows])
        if generator is None:
            best_lp, tok = lprobs.max(dim=-1)                              # (R,)
        else:                                                              # one draw per row from exp(lprobs)
            tok = torch.multinomial(lprobs.exp(), 1, generator=generator).squeeze(1)   # (R,)
            best_lp = lprobs.gather(1, tok.unsqueeze(1)).squeeze(1)        # (R,)
        sums = sums + best_lp
        done = (tok == eos) | torch.isinf(best_lp)
        if bool(done.any()):
            fin = rows[done]
            out_tok[fin, :t] = hist[done]
            out_len[fin] = t
            out_score[fin] = sums[done] / float(t + 1) ** lenpen
            out_lp[fin] = sums[done]
            keep = ~done
            rows, hist, sums, tok = rows[keep], hist[keep], sums[keep], tok[keep]
            state = merged(model.reorder_state(state, keep.nonzero().squeeze(1)))
        hist = torch.cat([hist, tok.unsqueeze(1)], dim=1)                  # (R, t+1)
        inp, t = tok, t + 1
    return begun.restore(_hypotheses(out_tok.unsqueeze(1), out_len.unsqueeze(1), out_score.unsqueeze(1),
                                     out_lp.unsqueeze(1)))


class _Finished:
    """Per original row: the ``n`` best finished hypotheses so far (best first) and how many were finished."""

    def __init__(self, rows: int, n: int, width: int, pad: int, device: torch.device):
        self.pad = pad
        self.tokens = torch.full((rows, n, width), pad, dtype=torch.long, device=device)  # (B, N, L)
        self.length = torch.zeros(rows, n, dtype=torch.long, device=device)               # (B, N)
        self.score = torch.full((rows, n), NEG_INF, device=device)                        # (B, N) normalised
        self.logprob = torch.full((rows, n), NEG_INF, device=device)                      # (B, N) summed
        self.count = torch.zeros(rows, dtype=torch.long, device=device)                   # (B,)

    def add(self, rows: Tensor, cand: Tensor, fin: Tensor, hist: Tensor, src_beam: Tensor, t: int,
            lenpen: float) -> None:
        """Record the ``</s>`` candidates ``fin`` (R, k) with summed log-probabilities ``cand`` (R, k).

        ``hist`` (R, k, t) holds the live beams' tokens before this step and ``src_beam`` (R, k) the beam each
        candidate extends. A candidate enters a row's list when it beats the row's n-th best; ties keep the
        earlier hypothesis, then the better-ranked candidate (a stable sort).
        """
        self.count[rows] += fin.sum(dim=1)
        norm = (cand / float(t + 1) ** lenpen).masked_fill(~fin, NEG_INF)  # (R, k)
        enters = (norm > self.score[rows, -1:]).any(dim=1)                 # (R,)
        if not bool(enters.any()):
            return
        sel, target = enters.nonzero().squeeze(1), rows[enters]
        n, width, k = self.score.size(1), self.tokens.size(2), norm.size(1)
        picked = hist[sel].gather(1, src_beam[sel].unsqueeze(2).expand(-1, -1, t))   # (R', k, t)
        new = torch.full((sel.numel(), k, width), self.pad, dtype=torch.long, device=hist.device)
        new[:, :, :t] = picked                                              # (R', k, L)
        scores = torch.cat([self.score[target], norm[sel]], dim=1)         # (R', n + k)
        order = scores.sort(dim=1, descending=True, stable=True).indices[:, :n]   # (R', n)

        def take(old: Tensor, fresh: Tensor) -> Tensor:                    # (R', n) of the kept and new ones
            return torch.cat([old, fresh], dim=1).gather(1, order)

        self.score[target] = scores.gather(1, order)
        self.logprob[target] = take(self.logprob[target], cand[sel].masked_fill(~fin[sel], NEG_INF))
        self.length[target] = take(self.length[target], torch.full_like(norm[sel], t, dtype=torch.long))
        self.tokens[target] = torch.cat([self.tokens[target], new], dim=1).gather(
            1, order.unsqueeze(2).expand(-1, -1, width))


def _select(scores: Tensor, lprobs: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """Top ``n`` candidates per row over beam × vocab: scores, source beams and tokens, each (R, n); where beam ×
    vocab holds fewer, the rest are -inf candidates (they neither finish nor live).

    ``scores`` (R, k) are the live beams' summed log-probabilities; ``lprobs`` (R*k, V) is consumed: the candidate
    scores are added into it in place.
    """
    (r, k), v = scores.shape, lprobs.size(-1)
    cand = lprobs.view(r, k, v).add_(scores.unsqueeze(2))                  # (R, k, V)
    top_s, top_i = _top(cand.view(r, k * v), min(n, k * v))               # (R, n')
    if top_s.size(1) < n:                                                  # a vocabulary smaller than the beam
        top_s = torch.cat([top_s, top_s.new_full((r, n - top_s.size(1)), NEG_INF)], dim=1)
        top_i = torch.cat([top_i, top_i.new_zeros(r, n - top_i.size(1))], dim=1)
    return top_s, torch.div(top_i, v, rounding_mode="floor"), top_i % v


#: candidates per block of :func:`_top`'s first pass (the largest of these that divides the vocabulary)
BLOCKS = (64, 50, 48, 40, 32)


def _top(flat: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """``flat.topk(n, dim=1)`` (R, L) of a beam step, in two cheap passes where the row is long.

    On the CPU ``topk`` over beam × vocabulary costs more than the log-softmax that made it. The row is cut into
    blocks: the n best values lie in the n blocks with the highest maxima (a block outside them has its maximum,
    and so every value, at most the n-th of n values taken from other blocks), so one ``amax`` over all blocks, a
    ``topk`` over the block maxima and a ``topk`` over the n chosen blocks give the same values. Only the order
    of exactly equal values may differ from one ``topk``.
    """
    r, length = flat.shape
    size = next((b for b in BLOCKS if length % b == 0), None)
    if flat.device.type != "cpu" or size is None or length < 16 * n * size:   # short rows, GPUs: topk is cheap
        return flat.topk(n, dim=1)
    blocks = flat.view(r, length // size, size)                             # (R, L/b, b)
    chosen = blocks.amax(2).topk(n, dim=1).indices                          # (R, n) the n best blocks
    values = blocks.gather(1, chosen.unsqueeze(2).expand(-1, -1, size))     # (R, n, b)
    top_s, at = values.view(r, n * size).topk(n, dim=1)                     # (R, n)
    return top_s, chosen.gather(1, at // size) * size + at % size


@torch.inference_mode()
def beam_search(
    model, batch: Batch, beam: int = 4, lenpen: float = 0.6, max_len: int | Tensor = 200,
    min_len: int = 1, banned: Sequence[int] = (), enc=None, nbest: int = 1,
) -> list[Hypothesis]:
    """Beam search over every row of ``batch``; the best :class:`Hypothesis` of each row, in row order.

    ``max_len`` (int or (B,)) bounds the tokens before ``</s>``: at that length
    live hypotheses are forced to end. A row is done when it holds ``beam``
    finished hypotheses and no live one, scored at its current length, beats
    the best of them (the usual heuristic; it makes ``beam=1`` exactly greedy).
    ``enc``: the batch's encoder output when the caller already computed it (document caches). ``nbest`` N
    (<= ``beam``): each hypothesis also carries the row's next N - 1 finished ones (``alternatives``).
    """
    k, b, device, eos = beam, batch.size, batch.src.device, model.vocab.eos
    if not 1 <= nbest <= beam:
        raise ValueError(f"nbest={nbest} must be between 1 and the beam size {beam}")
    ban = _ban_list(model, banned)
    begun = start(model, batch, enc)
    state, limit = begun.state, begun.rows(_max_len_tensor(max_len, b, device))   # rows in the state's order
    finished = _Finished(b, nbest, _width(limit), model.vocab.pad, device)
    rows = torch.arange(b, device=device)                                  # (R,) original row of each active row
    scores = torch.zeros(b, 1, device=device)                              # (R, w) live cumulative log-probs
    hist = torch.zeros(b, 1, 0, dtype=torch.long, device=device)          # (R, w, t)
    inp, t = state.pending, 0                                              # (R*w,)
    while rows.numel() > 0:
        w = scores.size(1)                                                 # live beams per row: 1, then k
        logits, state = model.decode_step(inp, state)                      # (R*w, V)
        at_limit = t >= limit[rows]                                        # (R,)
        lprobs = _step_lprobs(logits, ban, eos, t, min_len, at_limit.repeat_interleave(w))
        top_s, src_beam, tok = _select(scores, lprobs, 2 * k)              # (R, 2k) each
        is_eos = tok == eos
        fin = is_eos[:, :k] & torch.isfinite(top_s[:, :k])                 # only top-k ranks may finish
        finished.add(rows, top_s[:, :k], fin, hist, src_beam[:, :k], t, lenpen)
        live_s, pos = top_s.masked_fill(is_eos, NEG_INF).topk(k, dim=1)    # (R, k), best first
        live_beam, live_tok = src_beam.gather(1, pos), tok.gather(1, pos)  # (R, k)
        bound = live_s[:, 0] / float(t + 1) ** lenpen                      # best live, were it to stop now
        done = at_limit | torch.isinf(live_s[:, 0])
        done |= (finished.count[rows] >= k) & (finished.score[rows, 0] >= bound)
        keep = ~done
        flat = torch.arange(rows.numel(), device=device).unsqueeze(1) * w + live_beam  # (R, k) state rows
        state = merged(model.reorder_state(state, flat[keep].reshape(-1)))
        gathered = hist.gather(1, live_beam.unsqueeze(2).expand(-1, -1, t))  # (R, k, t)
        hist = torch.cat([gathered, live_tok.unsqueeze(2)], dim=2)[keep]   # (R', k, t+1)
        rows, scores, inp = rows[keep], live_s[keep], live_tok[keep].reshape(-1)
        t += 1
    return begun.restore(_hypotheses(finished.tokens, finished.length, finished.score, finished.logprob))
