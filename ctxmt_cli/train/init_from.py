"""Two-step training: a run that starts from a trained checkpoint's weights (``train.init_from``, ``--init-from``).

Document-level systems are usually built in two steps: a sentence-level model first, then a context-aware one
started from it (Lupo et al. 2022 train their K1 models from K0; fairseq's ``--finetune-from-model``, Sockeye's
``--params`` and JoeyNMT's ``load_model`` do the same). Here:

* the **architecture** (sizes, layers, heads, positions, norm placement, embedding sharing) comes from the
  checkpoint; a recipe value that differs is reported in one line and the checkpoint's wins
  (:func:`adopt_architecture`). The recipe gives the family and its context options, the data and training;
* only **weights** are loaded: the optimiser, schedule, step counter, best loss and patience start fresh;
* parameters are matched **by name and shape** (:func:`load_matching`): what the family adds to the
  checkpoint's model (segment embeddings, context attention and gates, MBE's summary layer and classifier,
  HanoiT's rows) keeps the initialisation of a fresh run with the same seed; what the checkpoint has and the
  family lacks is skipped; a shape mismatch, or a vocabulary other than the prepared data's, is one line;
* the outcome (:class:`InitRecord`) is printed, written to the run's manifest and ``metrics.jsonl``, and kept in
  every checkpoint of the run (``init_from``), chained to the checkpoint's own start, so ``ctxmt inspect`` reads
  a model's lineage back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from ctxmt_cli.config import Recipe, recipe_to_dict, validate_recipe
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.checkpoint_check import CheckedCheckpoint
from ctxmt_cli.models.loading import open_checkpoint
from ctxmt_cli.outputs import file_sha256

#: the model fields that make the architecture: they come from the checkpoint, never from the recipe
ARCHITECTURE = ("d_model", "ffn_dim", "heads", "encoder_layers", "decoder_layers", "max_positions",
                "normalize_before", "share_embeddings", "activation", "scale_embeddings", "sinusoid", "output_bias")


@dataclass
class InitRecord:
    """Where a run's weights started: the checkpoint, what of it was used, and that checkpoint's own start."""

    path: str                           # as given in train.init_from
    sha256: str                         # of the checkpoint file: which model it was, wherever it lies now
    family: str                         # the checkpoint's family
    step: int | None                 # the checkpoint's training step (None: not written by ctxmt train)
    vocab_fingerprint: str
    loaded: int = 0                     # tensors copied from the checkpoint
    new: list[str] = field(default_factory=list)        # the model's tensors the checkpoint lacks (fresh init)
    skipped: list[str] = field(default_factory=list)    # the checkpoint's tensors the model lacks
    architecture_changes: dict = field(default_factory=dict)   # {field: [recipe value, checkpoint value]}
    parent: dict | None = None       # the checkpoint's own init_from record (the lineage goes on)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """The one line the run prints: tensors loaded, new, skipped."""
        return (f"init_from {self.path} ({self.family}, step {self.step}): loaded {self.loaded} tensors, "
                f"new {len(self.new)}, skipped {len(self.skipped)}")


def read_init_checkpoint(path: str | Path) -> CheckedCheckpoint:
    """The checked checkpoint ``train.init_from`` names; a missing, foreign or damaged file is one line."""
    try:
        return open_checkpoint(Path(path))
    except CtxmtError as err:
        raise CtxmtError(f"train.init_from: {err}") from None


def architecture_changes(recipe: Recipe, parent: CheckedCheckpoint) -> dict:
    """``{field: [recipe value, checkpoint value]}`` for every architecture field the two set differently."""
    mine, theirs = recipe.model, parent.recipe.model
    return {key: [getattr(mine, key), getattr(theirs, key)] for key in ARCHITECTURE
            if getattr(mine, key) != getattr(theirs, key)}


def adopt_architecture(recipe: Recipe, parent: CheckedCheckpoint) -> tuple[Recipe, dict]:
    """The recipe with the checkpoint's architecture (and no preset), and the values that changed.

    A family whose options count layers fits them to the checkpoint's (``fit_architecture``: HanoiT keeps N1 and
    lets the other encoder layers select); the result goes through the schema again, so anything else that no
    longer fits is one line naming the checkpoint and the key."""
    changes = architecture_changes(recipe, parent)
    raw = recipe_to_dict(recipe)
    section = {**raw["model"], "preset": None, **{key: getattr(parent.recipe.model, key) for key in ARCHITECTURE}}
    raw["model"] = type(recipe.model).fit_architecture(section)
    changes.update({key: [section[key], value] for key, value in raw["model"].items()
                    if key in section and section[key] != value})          # the family's own fitting
    source = f"{recipe.train.save_dir} recipe with the architecture of {parent.path} (train.init_from)"
    return validate_recipe(raw, source, stored=True), changes


def describe_changes(changes: dict) -> str:
    """The one line that reports the recipe's architecture values the checkpoint overrode."""
    listed = ", ".join(f"{key} {new} (recipe {old})" for key, (old, new) in changes.items())
    return f"init_from: the architecture comes from the checkpoint: {listed}"


def check_vocabulary(parent: CheckedCheckpoint, fingerprint: str, data_path: str) -> None:
    """Refuse a checkpoint whose vocabulary (its SentencePiece model and special ids) is not the prepared data's."""
    theirs = parent.raw.get("vocab_fingerprint")
    if theirs != fingerprint:
        raise CtxmtError(
            f"train.init_from {parent.path} has vocabulary fingerprint {str(theirs)[:12]}, but data.path {data_path} "
            f"has {fingerprint[:12]} (another SentencePiece model); prepare the data with the checkpoint's "
            "tokenizer (ctxmt prepare ... --vocab-from DIR, the dataset it was trained on) or start from a "
            "checkpoint trained on this data")


def load_matching(model: nn.Module, state: dict, path: Path) -> tuple[int, list[str], list[str]]:
    """Copy the tensors of ``state`` into ``model`` by name (in place, so an optimiser built on the model keeps
    its parameters); returns (loaded, new, skipped). A name both hold with different shapes is one line."""
    own = model.state_dict()
    for name, tensor in state.items():
        if name in own and tuple(own[name].shape) != tuple(tensor.shape):
            raise CtxmtError(f"train.init_from {path}: parameter {name} has shape {tuple(tensor.shape)} in the "
                             f"checkpoint but {tuple(own[name].shape)} in the recipe's model; start from a "
                             "checkpoint of the same architecture")
    loaded = 0
    with torch.no_grad():
        for name, target in own.items():
            if name in state:
                target.copy_(state[name].to(device=target.device, dtype=target.dtype))
                loaded += 1
    new = [name for name in own if name not in state]
    skipped = [name for name in state if name not in own]
    return loaded, new, skipped


def start_from(model: nn.Module, parent: CheckedCheckpoint, changes: dict) -> InitRecord:
    """Load ``parent``'s weights into ``model`` (built fresh from the run's seed) and describe what happened."""
    state = parent.raw.get("state") or {}
    loaded, new, skipped = load_matching(model, parent.raw["model"], parent.path)
    return InitRecord(
        path=str(parent.path), sha256=file_sha256(parent.path), family=parent.recipe.model.family,
        step=state.get("step"), vocab_fingerprint=str(parent.raw.get("vocab_fingerprint")), loaded=loaded, new=new,
        skipped=skipped, architecture_changes={k: list(v) for k, v in changes.items()},
        parent=parent.raw.get("init_from"))
