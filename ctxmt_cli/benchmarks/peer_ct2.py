"""CTranslate2 peer for the inference benchmarks (score, decode): ctxmt's own weights in CTranslate2's engine.

CTranslate2 has no random-init path and its Marian converter needs a real vocabulary, so the peer is
built from a :class:`~ctranslate2.specs.TransformerSpec` filled with the weights of the very ctxmt model
it is timed against, by the mapping ``ctxmt export ctranslate2`` uses (:mod:`ctxmt_cli.export.ctranslate2`). The
same weights make the comparison checkable: greedy search of both engines must return the same tokens
(``tests/unit/test_bench_peers.py``). Tokens are the strings ``w<ID>`` with ctxmt's special ids in place.
CTranslate2 runs float32 with ``intra_threads`` = the benchmark's thread count, one translator thread, on the CPU
or on the first CUDA device (where its build has CUDA), in a process of its own (:mod:`ct2_process`: in the
benchmark's process its OpenMP runtime slowed PyTorch's).
Only when ``ctranslate2`` imports (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import importlib.util
import tempfile

import torch
from bench_util import EOS, PAD
from torch import Tensor

from ctxmt_cli.benchmarks.ct2_process import RemoteTranslator  # by its package name: the worker imports it so
from ctxmt_cli.core.batch import Batch
from ctxmt_cli.export.ctranslate2 import transformer_spec

SPECIALS = ["<blank>", "<unk>", "<s>", "</s>", "<brk>"]     # ctxmt's ids 0..4 (PAD, UNK, BOS, EOS, BRK)
BANNED = [["<blank>"], ["<s>"]]                             # never generated, as in ctxmt's search


class CT2Peer:
    """CTranslate2 ``Translator`` over a ctxmt model's weights (see the module docstring); inference only."""

    name = "ct2"

    def __init__(self, model, vocab: int, max_positions: int, threads: int, quantization: str = "float32",
                 device: str = "cpu"):
        spec = transformer_spec(model, max_positions)
        self.tokens = SPECIALS + [f"w{i}" for i in range(len(SPECIALS), vocab)]
        spec.register_source_vocabulary(self.tokens)
        spec.register_target_vocabulary(self.tokens)
        spec.validate()
        spec.optimize(quantization=quantization)
        self._dir = tempfile.TemporaryDirectory(prefix="ctxmt-ct2-")
        spec.save(self._dir.name)
        self.translator = RemoteTranslator(self._dir.name, device=device, compute_type=quantization, threads=threads)
        self.version, self.quantization, self.device = self.translator.version, quantization, device

    def describe(self) -> str:
        return f"ctranslate2 {self.version}, {self.quantization}, {self.device}, own process"

    def _strings(self, rows: Tensor, drop_eos: bool = False) -> list[list[str]]:
        out = []
        for row in rows.tolist():
            ids = [i for i in row if i != PAD]
            if drop_eos and ids and ids[-1] == EOS:
                ids = ids[:-1]
            out.append([self.tokens[i] for i in ids])
        return out

    def score(self, batch: Batch) -> Tensor:
        """Summed log-probability of every target row; CTranslate2 appends ``</s>`` to the target itself."""
        results = self.translator.score_batch(self._strings(batch.src), self._strings(batch.tgt_out, drop_eos=True))
        return torch.tensor([sum(log_probs) for log_probs in results])

    def greedy(self, batch: Batch, new: int) -> Tensor:
        return self.beam(batch, 1, new)

    def beam(self, batch: Batch, k: int, new: int) -> Tensor:
        """``translate_batch`` with min = max decoding length: every row gets exactly ``new`` tokens."""
        results = self.translator.translate_batch(
            self._strings(batch.src), beam_size=k, min_decoding_length=new, max_decoding_length=new,
            suppress_sequences=BANNED)
        index = {token: i for i, token in enumerate(self.tokens)}
        return torch.tensor([[index[t] for t in best] for best in results])


def ct2_peer(model, vocab: int, max_positions: int, threads: int, say=print,
             quantization: str = "float32", device: str = "cpu") -> CT2Peer | None:
    """:class:`CT2Peer` (weights and compute in ``quantization``: float32 or int8) on ``device`` (cpu or cuda), or
    None with one printed line when ``ctranslate2`` is not installed or, for cuda, sees no CUDA device."""
    if importlib.util.find_spec("ctranslate2") is None:
        say("note: peer ct2 skipped: ctranslate2 is not installed (pip install -e '.[bench]')")
        return None
    if device == "cuda":
        import ctranslate2

        if ctranslate2.get_cuda_device_count() == 0:
            say("note: peer ct2 skipped on cuda: this ctranslate2 build sees no CUDA device")
            return None
    peer = CT2Peer(model, vocab, max_positions, threads, quantization, device)
    say(f"peer ct2: Translator ({peer.describe()})")
    return peer
