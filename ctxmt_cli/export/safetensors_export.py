"""``ctxmt export safetensors -c CKPT -o OUT.safetensors``: a checkpoint's weights in a format that cannot run code.

The file (:mod:`ctxmt_cli.models.safetensors_file`) keeps what every command that takes ``-c`` needs — weights,
resolved recipe, vocabulary, SentencePiece model(s) — and drops the optimiser and RNG states, so it translates
and scores exactly as the ``.pt`` does but cannot be resumed.
"""

from __future__ import annotations

from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.paths import check_output_file


def export_safetensors(checkpoint: Path, out: Path, force: bool = False) -> Path:
    """Write ``checkpoint`` (``.pt`` or ``.safetensors``, checked as every loader checks it) to ``out``; ``out``
    must end in ``.safetensors``, must not be the checkpoint itself and is replaced only with ``force``."""
    from ctxmt_cli.models.loading import read_checkpoint
    from ctxmt_cli.train.checkpoint import save_checkpoint

    checkpoint, out = Path(checkpoint), Path(out)
    if out.suffix != ".safetensors":
        raise CtxmtError(f"{option('out')} {out}: name the file NAME.safetensors "
                         f"(e.g. {out.with_suffix('.safetensors')})")
    check_output_file(out, option("out"), force=force, inputs=(checkpoint,))
    return save_checkpoint(read_checkpoint(checkpoint), out)
