"""The ``caching`` family's inputs: previous-sentence windows in training, and in translation a per-document
memory: each sentence is encoded once and the entry it leaves (``EncoderOut.entry``) is cached and read by the next
sentences (``Batch.memory``), instead of re-encoding every window. Overrides :meth:`Inputs.translate`."""

from __future__ import annotations

from ctxmt_cli.models.inputs import DocumentRun, Inputs


class CachingInputs(Inputs):
    """Translation with a document memory of cached sentence entries."""

    def translate(self, run: DocumentRun) -> None:
        self.check_groups(run.settings.group_sentences, run.settings.group_order)
        run.in_slots(memory=True)
