"""Translating with an exported CTranslate2 folder: ctxmt's documents and windows, CTranslate2's search.

:func:`load_exported` rebuilds the tokenizer and decoding settings from the folder
(:mod:`ctxmt_cli.export.ct2_folder`) and returns a :class:`CT2Model`. The translator
(:mod:`ctxmt_cli.decode.translator`) builds each step's source windows and target prefixes as for a PyTorch model
and hands the step to :meth:`CT2Model.search`, which runs CTranslate2's ``translate_batch`` with the target
prefix (``<s>`` excluded: CTranslate2 starts the decoder itself) as ``target_prefix``.

What CTranslate2 does differently, and how the step keeps ctxmt's meaning:

* length limits count the forced prefix and are one per call, not per row: the call gets the batch's loosest
  (``min_decoding_length`` = shortest prefix + 1, ``max_decoding_length`` = longest prefix + limit); a greedy row
  that ran past its own limit is cut there (what ctxmt's search, which then forces ``</s>``, keeps), and a row
  that broke its own limit otherwise (an empty sentence after a longer prefix, a beam past its limit) is
  searched again alone with its exact limits;
* ``return_scores`` leaves out the prefix but takes log-probabilities *after* removing the suppressed tokens
  (``<blank>``, ``<s>``, ``<brk>``) and has no ``</s>`` at the length limit. ctxmt's sentence log-probability
  (tokens and ``</s>``, before any ban) is therefore ``score_batch`` of prefix + sentence with ``offset`` = the
  prefix length, computed only when scores or n-best lists are asked for (one more pass); a beam's normalised
  score is then ctxmt's, ``logprob / (tokens + 1) ** lenpen``;
* beam search (beam > 1) is CTranslate2's own: its length penalty divides by the whole target length, prefix
  included, and it stops on its own rule, so its n-best lists may differ from ctxmt's; greedy search is the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.search import Hypothesis
from ctxmt_cli.decode.steps import StepInput
from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.export.ct2_export import require_ctranslate2, vocabulary
from ctxmt_cli.export.ct2_folder import read_metadata, read_recipe, read_tokenizer


def ct2_device(name: str) -> tuple[str, int]:
    """CTranslate2's (device, index) for a ``--device`` value: ``auto`` = CUDA when CTranslate2 sees a GPU."""
    import ctranslate2

    from ctxmt_cli.device import check_device_name

    name, count = check_device_name(name), ctranslate2.get_cuda_device_count()
    if name == "cpu" or (name == "auto" and count == 0):
        return "cpu", 0
    index = int(name.partition(":")[2] or 0)
    if index >= count:
        raise OptionError("device", name, f"CTranslate2 sees {count} CUDA device(s); use {option('device')} cpu or "
                                          "auto")
    return "cuda", index


class CT2Model:
    """An exported model: what the translator reads of a model (``cfg``, ``vocab``, batching and document mode:
    windows) and :meth:`search`, CTranslate2's search of one step (see the module docstring)."""


    def __init__(self, cfg, vocab: VocabInfo, translator, src_tokens: list[str], tgt_tokens: list[str]):
        self.cfg, self.vocab, self.translator = cfg, vocab, translator
        self.context_aware = cfg.family != "sentence"
        self.src_tokens, self.tgt_tokens = src_tokens, tgt_tokens
        self.tgt_ids = {token: i for i, token in enumerate(tgt_tokens)}

    def search(self, scores: bool):
        """The translator's step search (:data:`~ctxmt_cli.decode.slots.StepSearch`); ``scores``: compute each
        hypothesis' log-probability (else NaN: nobody reads it)."""
        return partial(self._search, scores=scores)

    # ---- one step --------------------------------------------------------------------------------
    def _rows(self, step: StepInput) -> tuple[list[list[str]], list[list[str]]]:
        """Source windows without padding and their final ``</s>`` (CTranslate2 appends it), and target prefixes
        without padding and ``<s>``, as token strings."""
        pad, eos = self.vocab.pad, self.vocab.eos
        src = [[self.src_tokens[i] for i in row if i != pad] for row in step.batch.src.tolist()]
        src = [row[:-1] if row and row[-1] == self.src_tokens[eos] else row for row in src]
        prefix = [[self.tgt_tokens[i] for i in row[1:] if i != pad] for row in step.batch.tgt_prefix.tolist()]
        return src, prefix

    def _translate(self, src, prefix, least: int, most: int, beam: int, lenpen: float, nbest: int, banned):
        """``translate_batch`` of the rows; per row its hypotheses as id lists after the prefix, best first."""
        found = self.translator.translate_batch(
            src, prefix if any(prefix) else None, beam_size=beam, num_hypotheses=nbest, length_penalty=lenpen,
            min_decoding_length=least, max_decoding_length=most, max_input_length=0,
            suppress_sequences=[[self.tgt_tokens[i]] for i in banned])
        return [[[self.tgt_ids[t] for t in hyp[len(p):]] for hyp in result.hypotheses]
                for result, p in zip(found, prefix, strict=True)]

    def _search(self, step: StepInput, banned: Sequence[int], beam: int, lenpen: float, nbest: int,
                scores: bool) -> list[Hypothesis]:
        src, prefix = self._rows(step)
        limits = step.max_len.tolist()
        lengths = [len(p) for p in prefix]
        ban = sorted({self.vocab.pad, self.vocab.bos, *banned})
        run = partial(self._translate, beam=beam, lenpen=lenpen, nbest=nbest, banned=ban)
        found = run(src, prefix, min(lengths) + 1, max(p + n for p, n in zip(lengths, limits, strict=True)))
        if beam == 1:                                    # greedy: the first tokens are those a shorter limit keeps
            found = [[h[:n] for h in hyps] for hyps, n in zip(found, limits, strict=True)]
        wrong = [r for r, hyps in enumerate(found) if any(not h or len(h) > limits[r] for h in hyps)]
        for r in wrong:                                  # rare: this row's own limits, alone
            found[r] = run([src[r]], [prefix[r]], lengths[r] + 1, lengths[r] + limits[r])[0]
        logprobs = self._logprobs(src, prefix, found) if scores else [[math.nan] * len(h) for h in found]
        return [_hypothesis(hyps, lps, lenpen) for hyps, lps in zip(found, logprobs, strict=True)]

    def _logprobs(self, src, prefix, found) -> list[list[float]]:
        """ctxmt's log-probability of every hypothesis: its tokens and ``</s>`` after the forced prefix (``offset`` is
        one per call, so the prefix's own log-probabilities are dropped here)."""
        rows = [(r, h) for r, hyps in enumerate(found) for h in hyps]
        scored = self.translator.score_batch([src[r] for r, _ in rows],
                                             [prefix[r] + [self.tgt_tokens[i] for i in h] for r, h in rows],
                                             max_input_length=0)
        sums = iter([sum(s.log_probs[len(prefix[r]):]) for (r, _), s in zip(rows, scored, strict=True)])
        return [[next(sums) for _ in hyps] for hyps in found]


def _hypothesis(hyps: list[list[int]], logprobs: list[float], lenpen: float) -> Hypothesis:
    """The best hypothesis of a row with its alternatives; scores normalised as ctxmt's search does."""
    made = [Hypothesis(list(h), lp / float(len(h) + 1) ** lenpen, len(h) + 1, logprob=lp)
            for h, lp in zip(hyps, logprobs, strict=True)]
    made[0].alternatives = made[1:]
    return made[0]


def load_exported(folder: Path, device: str = "auto", threads: int | None = None):
    """An exported folder, ready to translate: a :class:`~ctxmt_cli.models.loading.LoadedModel` whose ``model`` is
    a :class:`CT2Model` (weights in CTranslate2, on ``device``), with the recipe and tokenizer it was exported with.

    ``threads``: CTranslate2's threads per batch (``intra_threads``); default torch's thread count, what ctxmt's own
    search would use (two thread pools that both spin-wait on the same cores slow each other down many times)."""
    require_ctranslate2(f"{option('engine')} ctranslate2")
    import ctranslate2
    import torch

    from ctxmt_cli.models.loading import LoadedModel

    folder = Path(folder)
    meta = read_metadata(folder)
    recipe, tokenizer = read_recipe(meta, folder), read_tokenizer(meta, folder)
    vocab = VocabInfo(**meta["vocab"])
    where, index = ct2_device(device)
    try:
        translator = ctranslate2.Translator(str(folder), device=where, device_index=index, compute_type="default",
                                            intra_threads=threads or torch.get_num_threads())
    except (RuntimeError, ValueError) as err:
        raise CtxmtError(f"CTranslate2 cannot load {folder} ({' '.join(str(err).split())}); export it again") from None
    model = CT2Model(recipe.model, vocab, translator, vocabulary(tokenizer, "src", vocab.src_size),
                     vocabulary(tokenizer, "tgt", vocab.tgt_size))
    return LoadedModel(model, recipe, tokenizer, vocab, {"ctranslate2": meta})
