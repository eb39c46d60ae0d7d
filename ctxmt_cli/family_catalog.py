"""The family catalog: every model family, one line each, read by the recipe schema and by the models.

A family is a folder (``ctxmt_cli/models/<family>/``) and its line in :data:`CATALOG`: its recipe name and where
its three classes live, as ``"module:Class"`` import paths (the way entry points name them) rather than the classes
themselves. The recipe schema (:mod:`ctxmt_cli.config`) asks for each family's config class, and
:mod:`ctxmt_cli.models.families` for its model and inputs classes; each class is imported when first asked for.
So this module, at the bottom of the layers, imports nothing of ctxmt above it; reading a recipe imports the
families' ``config.py`` (no torch: each imports nothing above ``config_base``, import-linter's second contract) and
never their models.

A family kept outside the package (a plugin, a test) joins at run time with
:func:`ctxmt_cli.models.families.add_family`, which puts its line here with :func:`join`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from ctxmt_cli.errors import CtxmtError

#: the three classes of a family: its recipe section, its model (the core contract), its inputs (the inputs contract)
Role = Literal["config", "model", "inputs"]
ROLES: tuple[Role, ...] = ("config", "model", "inputs")
#: the plain Transformer's inputs, which a family reads unless it declares its own
PLAIN_INPUTS = "ctxmt_cli.models.inputs:Inputs"


@dataclass(frozen=True)
class FamilyEntry:
    """One family's line: its name (``model.family`` in a recipe) and its classes as ``"module:Class"``."""

    name: str
    config: str
    model: str
    inputs: str = PLAIN_INPUTS


def packaged(name: str, *, config: str, model: str, inputs: str | None = None) -> FamilyEntry:
    """The line of a family in ``ctxmt_cli/models/<name>/``: its ``config.py``, ``model.py`` and ``inputs.py`` hold
    the classes named (no ``inputs``: the plain inputs, :data:`PLAIN_INPUTS`)."""
    folder = f"ctxmt_cli.models.{name}"
    return FamilyEntry(name, config=f"{folder}.config:{config}", model=f"{folder}.model:{model}",
                       inputs=f"{folder}.inputs:{inputs}" if inputs else PLAIN_INPUTS)


#: name -> line, in the order the documentation lists the families. Adding a family: one line here.
CATALOG: dict[str, FamilyEntry] = {entry.name: entry for entry in (
    packaged("sentence", config="SentenceConfig", model="Sentence"),
    packaged("concat", config="ConcatConfig", model="Concat", inputs="ConcatInputs"),
    packaged("caching", config="CachingConfig", model="Caching", inputs="CachingInputs"),
    packaged("mbe", config="MbeConfig", model="Mbe", inputs="MbeInputs"),
    packaged("hanoit", config="HanoiTConfig", model="HanoiT", inputs="HanoiTInputs"),
)}
#: the families that ship with ctxmt, in the catalog's order (:func:`leave` keeps them)
PACKAGED: tuple[str, ...] = tuple(CATALOG)

#: (family, role) -> its class, once imported (or given by :func:`join`)
_classes: dict[tuple[str, Role], type] = {}
#: called after every change of the catalog (the recipe schema rebuilds its model union)
_watchers: list[Callable[[], None]] = []


def load(path: str) -> type:
    """The class a ``"module:Class"`` path names (``Class`` may be dotted: a nested class)."""
    module, _, name = path.partition(":")
    target = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


def family_class(name: str, role: Role) -> type:
    """The ``role`` class of the family ``name`` (a KeyError when no line names it), imported when first asked."""
    key = (name, role)
    if key not in _classes:
        path = getattr(CATALOG[name], role)
        try:
            _classes[key] = load(path)
        except (ImportError, AttributeError) as err:
            raise CtxmtError(f"family {name!r}: its {role} class {path!r} does not import ({err}); correct its line "
                             "in ctxmt_cli/family_catalog.py or the add_family call") from None
    return _classes[key]


class CatalogView(Mapping):
    """name -> what ``read`` gives for that family, for every family in the catalog: a live view (a family joined
    later is in it), each value read when asked for."""

    def __init__(self, read: Callable[[str], Any]):
        self.read = read

    def __getitem__(self, name: str) -> Any:
        if name not in CATALOG:
            raise KeyError(name)
        return self.read(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(CATALOG))

    def __len__(self) -> int:
        return len(CATALOG)


def classes_of(role: Role) -> CatalogView:
    """name -> the ``role`` class of every family (:class:`CatalogView`)."""
    return CatalogView(partial(family_class, role=role))


def path_of(cls: type) -> str:
    """The ``"module:Class"`` path of a class (what a catalog line holds)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def join(entry: FamilyEntry, *, classes: Mapping[Role, type] | None = None) -> None:
    """Add a family's line at run time (``classes``: those already at hand, for a class no path imports, one
    defined in a function). The same line again changes nothing; another family of a taken name is refused, and a
    line whose config class does not import leaves the catalog as it was."""
    classes = dict(classes or {})
    if entry.name in CATALOG:
        if CATALOG[entry.name] == entry and all(_classes.get((entry.name, r), c) is c for r, c in classes.items()):
            return
        raise CtxmtError(f"family {entry.name!r}: a family of that name is already in the catalog; choose another name")
    CATALOG[entry.name] = entry
    for role, cls in classes.items():
        _classes[(entry.name, role)] = cls
    try:
        _changed()
    except CtxmtError:
        _forget(entry.name)
        raise


def leave(name: str) -> None:
    """Take a family :func:`join` added out again (none of that name: nothing to do)."""
    if name in PACKAGED:
        raise CtxmtError(f"family {name!r} ships with ctxmt and stays in the catalog; only a family joined at run "
                         "time (add_family) can be removed")
    if name in CATALOG:
        _forget(name)
        _changed()


def _forget(name: str) -> None:
    del CATALOG[name]
    for role in ROLES:
        _classes.pop((name, role), None)


def when_changed(callback: Callable[[], None]) -> None:
    """Call ``callback`` after every :func:`join` and :func:`leave` (the recipe schema follows the catalog)."""
    _watchers.append(callback)


def _changed() -> None:
    for callback in _watchers:
        callback()
