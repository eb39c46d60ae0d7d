"""The families: one line each in :data:`FAMILIES`, a model class and its inputs (:mod:`ctxmt_cli.models.inputs`).

Adding a family: a folder ``models/<family>/`` with its recipe schema (``config.py``, joined to
:data:`ctxmt_cli.config.ModelConfig`), its model, its inputs where they are not the plain Transformer's, its
recipes and contract variants, and one line here. A family kept outside the package (a plugin, a test) joins at
run time with :func:`add_family`.
"""

from __future__ import annotations

from typing import NamedTuple

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.memory import check_fits
from ctxmt_cli.models.caching.inputs import CachingInputs
from ctxmt_cli.models.caching.model import Caching
from ctxmt_cli.models.concat.inputs import ConcatInputs
from ctxmt_cli.models.concat.model import Concat
from ctxmt_cli.models.hanoit.inputs import HanoiTInputs
from ctxmt_cli.models.hanoit.model import HanoiT
from ctxmt_cli.models.inputs import Inputs
from ctxmt_cli.models.mbe.inputs import MbeInputs
from ctxmt_cli.models.mbe.model import Mbe
from ctxmt_cli.models.sentence.model import Sentence


class Family(NamedTuple):
    """A family's model class (the model contract) and inputs class (the inputs contract)."""

    model: type[EncoderDecoder]
    inputs: type[Inputs]


FAMILIES: dict[str, Family] = {
    "sentence": Family(Sentence, Inputs),
    "concat": Family(Concat, ConcatInputs),
    "caching": Family(Caching, CachingInputs),
    "mbe": Family(Mbe, MbeInputs),
    "hanoit": Family(HanoiT, HanoiTInputs),
}


def add_family(config, model: type[EncoderDecoder], inputs: type[Inputs] = Inputs) -> None:
    """Join a family defined outside this package (a plugin, a test): its recipe section to the schema
    (:func:`ctxmt_cli.config.add_family_config`) and its model and inputs classes to :data:`FAMILIES`; every
    command then trains, translates, scores and serves it. ``config``: its ``ModelBase`` subclass."""
    from ctxmt_cli.config import add_family_config

    add_family_config(config)
    FAMILIES[config.model_fields["family"].default] = Family(model, inputs)


def remove_family(name: str) -> None:
    """Take a family :func:`add_family` joined out again (the schema and :data:`FAMILIES`)."""
    from ctxmt_cli.config import remove_family_config

    remove_family_config(name)
    FAMILIES.pop(name, None)


def build_model(cfg, vocab: VocabInfo) -> EncoderDecoder:
    """Instantiate the family named by ``cfg.family`` (``cfg`` already resolved); dimensions whose weights cannot
    fit in host memory are refused first (one line), not found out by the kernel's OOM killer."""
    check_fits(4 * least_parameters(cfg, vocab), f"a model of d_model {cfg.d_model}, ffn_dim {cfg.ffn_dim}, "
               f"{cfg.encoder_layers}+{cfg.decoder_layers} layers", "model.d_model, model.ffn_dim or the layers")
    return FAMILIES[cfg.family].model(cfg, vocab)


def least_parameters(cfg, vocab: VocabInfo) -> int:
    """The parameters every family's model of ``cfg``'s dimensions has at least: each encoder layer's attention and
    feed-forward block, each decoder layer's two attentions and feed-forward block, one embedding table."""
    d, f = cfg.d_model, cfg.ffn_dim
    return (cfg.encoder_layers * (4 * d * d + 2 * d * f) + cfg.decoder_layers * (8 * d * d + 2 * d * f)
            + max(vocab.src_size, vocab.tgt_size) * d)


def resolve_model_config(cfg, meta: dict):
    """Fill data-dependent values (e.g. ``shift: auto``) from the prepared data's meta.json."""
    return FAMILIES[cfg.family].model.resolve(cfg, meta)


def inputs_of(cfg) -> Inputs:
    """The inputs contract of the model whose recipe section is ``cfg`` (a model's ``cfg``)."""
    return FAMILIES[cfg.family].inputs(cfg)


def context_sentences(cfg, context=None) -> tuple[int, int]:
    """(source, target) context sentences to decode with (:meth:`Inputs.context`)."""
    return inputs_of(cfg).context(context)


def next_sentences(cfg, context=None) -> int:
    """Next source sentences to decode with: the model's own, or ``context`` = K where it reads any
    (:meth:`Inputs.next_sentences` of the family; the same refusals as :func:`context_sentences`)."""
    inputs = inputs_of(cfg)
    inputs.context(context)
    return inputs.next_sentences(None) if context is None else inputs.resized_next(context)
