"""COMET (Rei et al., 2020) from a local model, through the optional ``unbabel-comet`` package.

Install with ``pip install 'ctxmt[comet]'``. The model is whatever the user downloaded
(e.g. ``Unbabel/wmt22-comet-da``): its folder (holding ``checkpoints/model.ckpt``) or the
``.ckpt`` file itself. ctxmt never downloads a COMET model; comet itself may still fetch
the model's encoder config from the Hugging Face hub unless it is cached.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, OptionError, option

INSTALL_HINT = "pip install 'ctxmt[comet]' (or pip install unbabel-comet)"


def require_comet() -> None:
    """Refuse early, with the install command, when ``unbabel-comet`` is not installed."""
    if importlib.util.find_spec("comet") is None:
        raise CtxmtError(f"{option('comet')} needs the optional package unbabel-comet, which is not installed; "
                         f"{INSTALL_HINT}")


def resolve_checkpoint(path: Path) -> Path:
    """The ``.ckpt`` file of a COMET model folder (as ``comet.download_model`` lays it out) or file."""
    path = Path(path)
    if path.is_file():
        return path
    for candidate in (path / "checkpoints" / "model.ckpt", path / "model.ckpt"):
        if candidate.is_file():
            return candidate
    what = "is a folder without checkpoints/model.ckpt" if path.is_dir() else "not found"
    raise OptionError("comet", path, f"{what}; give a downloaded COMET model folder or its .ckpt file")


def comet_system_scores(model_path: Path, sources: Sequence[str], systems: dict[str, Sequence[str]],
                        references: Sequence[str], gpus: int = 0, batch_size: int = 16) -> dict[str, float]:
    """COMET system score of each system's segments (one model load for all systems)."""
    require_comet()
    try:
        from comet import load_from_checkpoint
    except ImportError as err:  # installed but broken (e.g. a torch/lightning mismatch)
        raise CtxmtError(f"{option('comet')}: importing unbabel-comet failed ({err}); reinstall it: "
                         f"{INSTALL_HINT}") from None
    model = load_from_checkpoint(str(resolve_checkpoint(model_path)))
    scores = {}
    for name, hyps in systems.items():
        data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(sources, hyps, references, strict=True)]
        output = model.predict(data, batch_size=batch_size, gpus=gpus, progress_bar=False)
        scores[name] = float(output.system_score)
    return scores
