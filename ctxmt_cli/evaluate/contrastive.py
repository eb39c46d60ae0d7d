"""Contrastive scoring by forced decoding (the core contract's ``forward``), for every family.

A candidate's score is the log-probability of its target sentence(s) given the
source context, the source sentence and the target context, through the model's
own context mechanism (for a concatenation model: one teacher-forced pass over
the window; for a sentence-level model: the sentence alone). Context is ordered
oldest -> newest, exactly as in training.

``span="all"`` (default): where a set's candidates are whole sentence groups
(Voita), the score covers every sentence of the group, each given its source
context and the candidate's own earlier sentences as target context; when the
model's window covers the whole group this is a single pass over the window.
``span="current"`` scores the last sentence only. Scores are the mean token
log-probability (``normalize="mean"``, what fairseq's scorer gave Lupo et al.'s
reference implementations) or the sum (``"none"``).

All candidates of all items are cut into rows, length-bucketed and batched by a
token budget (never one batch per item).

Next sentences: contrastive test sets carry previous context only, so a model that reads next source
sentences (the offline HanoiT models of Yang et al.) is scored here with none (``Batch.src_next`` = 0 on
every row), not with the windows it was trained on; scoring a prepared split (``ctxmt cxmi``) gives it the
document's next sentences through a row's fourth element.

Target context of a bilingual model (HanoiT with ``bilingual: true``, Yang et al. §2.3): the items' given
target context sentences (a Voita-style candidate group: the candidate's own earlier sentences; other sets:
the item's target context) stand where translation puts a sentence-level first pass, as many as the row's
source context sentences; the row's fifth element carries them (the target concatenation).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.core.positions import sentence_index
from ctxmt_cli.data.batching import collate
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet
from ctxmt_cli.models.families import inputs_of

SPANS = ("all", "current")
SCORE_DECIMALS = 6  # the scores file's precision (testsets.base.scores_lines)
NORMALIZE = ("mean", "none")

#: a sentence: text (encoded with the model's tokenizer) or a tuple of token ids (prepared data, used as is)
Sentence = str | tuple[int, ...]
# (source sentences, target sentences, how many trailing target sentences are scored[, next sentences[, target
# context]]): an optional fourth element says how many of the source context sentences are next ones (the window
# layout of ctxmt_cli.data.windows: previous oldest first, next nearest first, current last; 0 when absent); an
# optional fifth, the target context sentences of a bilingual model's target concatenation (oldest first)
Row = (tuple[list[Sentence], list[Sentence], int] | tuple[list[Sentence], list[Sentence], int, int]
       | tuple[list[Sentence], list[Sentence], int, int, list[Sentence]])


def candidate_rows(item: ContrastiveItem, k: int, src_keep: int, tgt_keep: int, span: str,
                   bilingual: bool = False) -> list[Row]:
    """The forced-decoding rows whose scored tokens make up candidate ``k``'s score; ``bilingual``: each row also
    carries the target sentences before its current one, as many as its source context sentences."""
    src = item.src_context + [item.src]
    tgt = item.target_context(k) + [item.candidates[k]]

    def tail(seq: list, keep: int, end: int) -> list:
        """The window of ``seq`` ending at ``end``: that item and up to ``keep`` before it."""
        return seq[max(0, end - keep): end + 1]

    def row(end_src: int, end_tgt: int, scored: int) -> Row:
        window = tail(src, src_keep, end_src)
        if not bilingual:
            return (window, tail(tgt, tgt_keep, end_tgt), scored)
        return (window, tail(tgt, tgt_keep, end_tgt), scored, 0, tgt[max(0, end_tgt - len(window) + 1):end_tgt])

    if span == "current" or item.candidate_contexts is None:
        return [row(len(src) - 1, len(tgt) - 1, 1)]
    n = len(tgt)
    if len(src) != n:
        raise CtxmtError(f"item {item.tags}: {len(src)} source but {n} target sentences; a group needs both sides "
                         "aligned")
    if src_keep >= n - 1 and tgt_keep >= n - 1 and (n == 1 or not bilingual):  # one window holds the group
        return [(src, tgt, n)]
    return [row(j, j, 1) for j in range(n)]


class _Encoder:
    """Encodes each distinct sentence once per side (test sets repeat contexts and sources a lot)."""

    def __init__(self, tokenizer, pretokenized: bool):
        self.tokenizer, self.pretokenized = tokenizer, pretokenized
        self.cache: dict[tuple[str, str], list[int]] = {}

    def prime(self, side: str, sentences: Iterable[Sentence]) -> None:
        todo = sorted({s for s in sentences if isinstance(s, str) and (side, s) not in self.cache})
        encoded = self.tokenizer.encode_batch(todo, side, pretokenized=self.pretokenized)
        for sentence, ids in zip(todo, encoded, strict=True):
            self.cache[side, sentence] = ids

    def ids(self, side: str, sentence: Sentence) -> list[int]:
        """A text sentence's cached ids; a sentence given as ids (prepared data) as it is."""
        return self.cache[side, sentence] if isinstance(sentence, str) else list(sentence)

    def window(self, side: str, sentences: list[Sentence]) -> np.ndarray:
        """Ids of ``s_1 <brk> s_2 ... s_n </s>``."""
        tok = self.tokenizer
        parts: list[int] = []
        for sentence in sentences[:-1]:
            parts += self.ids(side, sentence) + [tok.brk_id]
        return np.asarray(parts + self.ids(side, sentences[-1]) + [tok.eos_id], dtype=np.int64)

    def concatenation(self, context: list[Sentence], current: Sentence) -> np.ndarray:
        """Ids of a bilingual target concatenation ``y_1 <brk> ... y_c <brk> x </s>``: target context sentences,
        then the current *source* sentence."""
        parts: list[int] = []
        for sentence in context:
            parts += self.ids("tgt", sentence) + [self.tokenizer.brk_id]
        return np.asarray(parts + self.ids("src", current) + [self.tokenizer.eos_id], dtype=np.int64)


@torch.inference_mode()
def score_testset(
    model, tokenizer, testset: TestSet, *, max_tokens: int = DEFAULT_MAX_TOKENS, normalize: str = "mean",
    span: str = "all", context: int | None = None, progress: Callable[[int], None] | None = None,
) -> list[list[float]]:
    """Score every candidate of every item; per-item lists of scores (higher = better)."""
    return score_contexts(model, tokenizer, testset, contexts=(context,), max_tokens=max_tokens, normalize=normalize,
                          span=span, progress=progress)[0]


@torch.inference_mode()
def score_contexts(
    model, tokenizer, testset: TestSet, *, contexts: Sequence[int | None], max_tokens: int = DEFAULT_MAX_TOKENS,
    normalize: str = "mean", span: str = "all", progress: Callable[[int], None] | None = None,
) -> list[list[list[float]]]:
    """:func:`score_testset` once per entry of ``contexts`` (context sentences per side; None: the model's own, 0:
    none), all in one pass: a row that two entries share (a sentence-level model's rows, an item without context)
    is scored once, so adding ``0`` to measure the context's gain costs only the rows that context changes."""
    if normalize not in NORMALIZE or span not in SPANS:
        raise CtxmtError(f"normalize={normalize!r} span={span!r}: choose normalize in {NORMALIZE} and span in {SPANS}")
    inputs = inputs_of(model.cfg)
    longest = max((len(item.src_context) for item in testset.items), default=0)
    rows, owners = [], []                                       # owners[r] = flat candidate index of row r
    offsets = np.cumsum([0] + [len(item.candidates) for item in testset.items])
    for c, context in enumerate(contexts):
        src_keep, tgt_keep = inputs.scoring_context(context, longest)
        for i, item in enumerate(testset.items):
            for k in range(len(item.candidates)):
                for row in candidate_rows(item, k, src_keep, tgt_keep, span, inputs.target_concat):
                    rows.append(row)
                    owners.append(c * offsets[-1] + offsets[i] + k)
    logprob, tokens = score_rows(model, tokenizer, rows, pretokenized=testset.pretokenized, max_tokens=max_tokens,
                                 progress=progress)[:2]
    total, count = np.zeros(len(contexts) * offsets[-1]), np.zeros(len(contexts) * offsets[-1])
    np.add.at(total, owners, logprob)
    np.add.at(count, owners, tokens)
    flat = total / count if normalize == "mean" else total
    # rounded to what the scores file holds, so the publishers' scripts and ctxmt decide on the same numbers
    flat = np.round(flat, SCORE_DECIMALS)
    return [[flat[c * offsets[-1] + offsets[i]: c * offsets[-1] + offsets[i + 1]].tolist()
             for i in range(len(testset.items))] for c in range(len(contexts))]


@torch.inference_mode()
def score_rows(
    model, tokenizer, rows: list[Row], *, pretokenized: bool = False, max_tokens: int = DEFAULT_MAX_TOKENS,
    progress: Callable[[int], None] | None = None, per_token: bool = False,
) -> tuple:
    """Summed log-probability and token count (``</s>`` included) of each row's scored trailing target sentences;
    with ``per_token``, a third element: each row's scored tokens' log-probabilities, in target order.

    Identical rows are scored once and get the very same numbers (publishers' duplicate candidates tie
    exactly; a row that gets no context is the same row as its context-free twin).
    """
    enc = _Encoder(tokenizer, pretokenized)
    enc.prime("src", (s for r in rows for s in r[0]))
    enc.prime("tgt", (s for r in rows for s in [*r[1], *(r[4] if len(r) > 4 else ())]))
    distinct: dict[tuple, int] = {}
    row_of = np.array([distinct.setdefault((tuple(r[0]), tuple(r[1]), r[2], r[3] if len(r) > 3 else 0,
                                            tuple(r[4]) if len(r) > 4 else None), len(distinct))
                       for r in rows], dtype=np.int64)
    unique_rows = list(distinct)
    encoded = _encode_rows(enc, unique_rows, inputs_of(model.cfg))
    kept: list | None = [None] * len(unique_rows) if per_token else None
    logprob, tokens = _score_rows(model, tokenizer, encoded, max_tokens=max_tokens, progress=progress, kept=kept)
    if kept is None:
        return logprob[row_of], tokens[row_of]
    return logprob[row_of], tokens[row_of], [kept[r] for r in row_of]


def shared_source_batches(src_key: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray, *,
                          max_tokens: int) -> list[np.ndarray]:
    """Length-bucketed row batches within ``max_tokens`` padded tokens (rows × each row's longer side), rows with
    the same source window adjacent.

    Sorting by (source length, source window, target length) keeps padding low
    and lets a batch encode each distinct source window once.
    """
    order = np.lexsort((tgt_len, src_key, src_len))
    batches, start, width = [], 0, 0
    for pos, row in enumerate(order):
        size = int(max(src_len[row], tgt_len[row]))
        if pos > start and max(width, size) * (pos - start + 1) > max_tokens:
            batches.append(order[start:pos])
            start, width = pos, 0
        width = max(width, size)
    if start < len(order):
        batches.append(order[start:])
    return batches


@dataclass
class _EncodedRows:
    """The distinct rows of :func:`score_rows` as token ids, each list one entry per row."""

    sources: list[np.ndarray]           # source windows
    targets: list[np.ndarray]           # target windows
    scored: np.ndarray                  # how many trailing target sentences are scored
    following: np.ndarray               # the next sentences in each source window (``Batch.src_next``)
    concat: list[np.ndarray] | None     # a bilingual model's target concatenations (its ``scoring_batch``'s)


def _encode_rows(enc: _Encoder, rows: list[tuple], inputs) -> _EncodedRows:
    """``rows`` (distinct, in :func:`score_rows`' key form) as ids for a model with these ``inputs``."""
    following = np.array([r[3] for r in rows], dtype=np.int64)
    if following.any() and not inputs.next_sentences():
        raise ValueError("rows hold next sentences but the model reads none")
    concat = None
    if inputs.target_concat:                                        # a row without a fifth element: none
        concat = [np.zeros(0, np.int64) if r[4] is None else enc.concatenation(list(r[4]), r[0][-1]) for r in rows]
    return _EncodedRows(sources=[enc.window("src", list(r[0])) for r in rows],
                        targets=[enc.window("tgt", list(r[1])) for r in rows],
                        scored=np.array([r[2] for r in rows], dtype=np.int64), following=following, concat=concat)


def _score_rows(model, tokenizer, rows: _EncodedRows, *, max_tokens: int, progress: Callable[[int], None] | None,
                kept: list | None) -> tuple[np.ndarray, np.ndarray]:
    """Summed log-probability and token count of the scored trailing sentences of every row; ``progress`` after
    each batch (its row count); ``kept`` (when given) receives each row's scored token log-probabilities."""
    inputs = inputs_of(model.cfg)
    src_key = _source_keys(rows)
    src_len, tgt_len = np.array([len(s) for s in rows.sources]), np.array([len(t) + 1 for t in rows.targets])
    logprob, tokens = np.zeros(len(rows.sources)), np.zeros(len(rows.sources))
    device = next(model.parameters()).device
    for ids in shared_source_batches(src_key, src_len, tgt_len, max_tokens=max_tokens):
        batch = _shared_source_batch(model, tokenizer, inputs, rows, ids, src_key).to(device)
        index, n_sent = sentence_index(batch.tgt_out, tokenizer.brk_id)              # (B, T), (B,)
        last = torch.as_tensor(rows.scored[ids], device=device)                       # (B,)
        mask = (index >= (n_sent - last).unsqueeze(1)) & (batch.tgt_out != tokenizer.pad_id)   # (B, T)
        token_lp = model.target_logprobs(batch, mask)                                 # (B, T), 0 off the mask
        logprob[ids] = token_lp.sum(1).cpu().numpy()
        tokens[ids] = mask.sum(1).cpu().numpy()
        if kept is not None:
            for row, values, scored_mask in zip(ids, token_lp.cpu().numpy(), mask.cpu().numpy(), strict=True):
                kept[row] = values[scored_mask]
        if progress is not None:
            progress(len(ids))
    return logprob, tokens


def _source_keys(rows: _EncodedRows) -> np.ndarray:
    """(N,) one key per distinct source side: the window, its next sentences and target concatenation."""
    keys: dict[tuple, int] = {}
    second = [b""] * len(rows.sources) if rows.concat is None else [c.tobytes() for c in rows.concat]
    return np.array([keys.setdefault((s.tobytes(), int(m), c), len(keys))
                     for s, m, c in zip(rows.sources, rows.following, second, strict=True)])


def _shared_source_batch(model, tokenizer, inputs, rows: _EncodedRows, ids: np.ndarray, src_key: np.ndarray):
    """The scoring batch of rows ``ids``, each distinct source side encoded once (``Batch.src_index``), as the
    family reads it."""
    unique, src_index = np.unique(src_key[ids], return_inverse=True)
    if len(unique) == len(ids):                                    # every row its own source: nothing to share
        src_rows = ids
    else:
        # a row holding each distinct source (reversed: the first row of each wins)
        first = {k: j for j, k in zip(ids[::-1], src_key[ids][::-1], strict=True)}
        src_rows = np.array([first[k] for k in unique], dtype=np.int64)
    following = rows.following[src_rows] if inputs.next_sentences() else None
    batch = collate([rows.sources[j] for j in src_rows], [rows.targets[j] for j in ids], tokenizer.pad_id,
                    tokenizer.bos_id, src_next=following)
    if len(unique) < len(ids):
        batch.src_index = torch.from_numpy(src_index.reshape(-1))
    concat = None if rows.concat is None else [rows.concat[j] for j in src_rows]
    return inputs.scoring_batch(batch, model.vocab, concat)


def decisions(testset: TestSet, scores: list[list[float]]) -> list[bool]:
    """Per item: did the correct candidate win under the set's tie rule?

    ``strict``: better than every contrastive candidate (ties lose, ContraPro).
    ``first_index``: the first best candidate is the correct one (Voita's argmin of losses).
    """
    out = []
    for item, row in zip(testset.items, scores, strict=True):
        c = item.correct
        before, after = row[:c], row[c + 1:]
        if testset.tie_rule == "first_index":
            ok = all(row[c] > s for s in before) and all(row[c] >= s for s in after)
        else:
            ok = all(row[c] > s for s in before + after)
        out.append(ok)
    return out


def accuracy_by(items: list[ContrastiveItem], correct: list[bool], *keys: str) -> dict:
    """Nested accuracy table, e.g. keys ("phenomenon", "distance") -> {phenomenon: {distance: accuracy}}."""
    groups: dict = defaultdict(list)
    for item, ok in zip(items, correct, strict=True):
        groups[tuple(str(item.tags.get(k)) for k in keys)].append(ok)
    table: dict = {}
    for key, oks in sorted(groups.items()):
        node = table
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = sum(oks) / len(oks)
    return table


def summarize(testset: TestSet, correct: list[bool]) -> dict:
    """``{"accuracy": a, "n": count, "by": {GROUPING: {KEY: a}}}``; a compound grouping ``a/b`` keys by ``"x/y"``."""
    by = {}
    for grouping in testset.groupings:
        groups = grouped(testset.items, correct, grouping)
        by[grouping] = {key: sum(oks) / len(oks) for key, oks in groups.items()}
    return {"accuracy": sum(correct) / max(len(correct), 1), "n": len(correct), "by": by}


def grouped(items: list[ContrastiveItem], values: list, grouping: str | None) -> dict[str, list]:
    """``values`` (one per item) grouped by the items' tag ``grouping`` (``KEY`` or ``KEY/KEY``: ``"x/y"``), keys in
    natural order; grouping None: one group ``"all"``."""
    flat: dict = defaultdict(list)
    for item, value in zip(items, values, strict=True):
        flat["all" if grouping is None else "/".join(str(item.tags.get(k)) for k in grouping.split("/"))].append(value)
    return dict(sorted(flat.items(), key=lambda kv: _natural(kv[0])))


def _natural(key: str):
    """Sort "2" before "10" and numbers before words (">3", "None")."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("/")]
