"""The ``caching`` family's inputs: previous-sentence windows in training, and in translation a per-document
memory: each sentence is encoded once and the entry it leaves (``EncoderOut.entry``) is cached and read by the next
sentences (``Batch.memory``), instead of re-encoding every window. A bilingual model (``bilingual: true``) reads
windows with the target side of their context first (:mod:`ctxmt_cli.models.bilingual_windows`) and translates
window by window, as its memory would need the first pass's entries too. Overrides :meth:`Inputs.translation`; the
bilingual window's methods come from :class:`~ctxmt_cli.models.bilingual_windows.BilingualWindowInputs`."""

from __future__ import annotations

from ctxmt_cli.models.bilingual_windows import BilingualWindowInputs
from ctxmt_cli.models.inputs import Translation


class CachingInputs(BilingualWindowInputs):
    """Translation with a document memory of cached sentence entries (a bilingual model: window by window)."""

    def translation(self) -> Translation:
        """``memory``; a bilingual model ``first_pass``, each window re-encoded with its first pass."""
        return "first_pass" if self.target_concat else "memory"
