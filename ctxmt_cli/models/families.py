"""The families as the models read them: :data:`FAMILIES`, a model class and its inputs
(:mod:`ctxmt_cli.models.inputs`) per line of the family catalog (:mod:`ctxmt_cli.family_catalog`).

Adding a family: a folder ``models/<family>/`` with its recipe schema (``config.py``), its model, its inputs where
they are not the plain Transformer's, its recipes and contract variants, and one line in the catalog. A family kept
outside the package (a plugin, a test) joins the catalog at run time with :func:`add_family`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.family_catalog import CatalogView, FamilyEntry, family_class, join, leave, path_of
from ctxmt_cli.memory import check_fits
from ctxmt_cli.models.inputs import Inputs


class Family(NamedTuple):
    """A family's model class (the model contract) and inputs class (the inputs contract)."""

    model: type[EncoderDecoder]
    inputs: type[Inputs]


def _family(name: str) -> Family:
    return Family(family_class(name, "model"), family_class(name, "inputs"))


#: name -> (model class, inputs class) of every family in the catalog, a live view; a family's model module is
#: imported when its classes are first asked for
FAMILIES: Mapping[str, Family] = CatalogView(_family)


def add_family(config, model: type[EncoderDecoder], inputs: type[Inputs] = Inputs) -> None:
    """Join a family defined outside this package (a plugin, a test) to the family catalog: the recipe schema then
    reads its section (``model.family``) and :data:`FAMILIES` its model and inputs classes; every command trains,
    translates, scores and serves it. ``config``: its ``ModelBase`` subclass, whose ``family`` literal names it."""
    field = config.model_fields.get("family")
    name = None if field is None else field.default
    if not isinstance(name, str):
        raise CtxmtError(f"{config.__name__}: its 'family' field has no default; give it the family's name, "
                         f"family: Literal['name'] = 'name'")
    classes = {"config": config, "model": model, "inputs": inputs}
    join(FamilyEntry(name, **{role: path_of(cls) for role, cls in classes.items()}), classes=classes)


def remove_family(name: str) -> None:
    """Take a family :func:`add_family` joined out of the catalog again (the schema and :data:`FAMILIES`)."""
    leave(name)


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
