"""ctxmt's YAML loader (:class:`UniqueKeyLoader`, for recipes, corpus cards and ``--set`` values): duplicate keys are
errors, booleans are YAML 1.2's (``true``/``false`` only), and what it accepts is bounded: the size of the text, how
deep it nests, and how many values it holds once every alias is expanded.

A recipe (or a corpus card, or a ``--set`` value) is a few kilobytes, four levels deep and a few hundred values. A
file far outside that is a mistake or an attack: an alias bomb (nine anchors, each aliasing the previous one nine
times: a billion values from a few hundred bytes) makes every walk over the loaded value exponential, a list nested
thousands deep overflows Python's stack in the composer, and a self-referring anchor (``&a [*a]``) makes any walk
endless. :class:`BoundedLoader` refuses each while composing, before a Python value exists, with a
:class:`YamlLimitError` naming the limit and the line. No torch here, and nothing above the schema's layer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

#: the largest YAML text read, in bytes (the packaged recipes are 1-5 KB, the corpus cards under 20 KB)
MAX_BYTES = 1 << 20
#: the deepest nesting of sequences and mappings, aliases expanded (a recipe is 3 or 4 levels deep)
MAX_DEPTH = 64
#: the most values (scalars, sequences, mappings, keys included) once every alias is expanded (a recipe: ~150)
MAX_VALUES = 100_000


class YamlLimitError(yaml.YAMLError):
    """YAML text beyond one of this module's bounds; ``what`` says which (a phrase following "the YAML is"),
    ``line`` where (1-based, or None)."""

    def __init__(self, what: str, line: int | None = None):
        super().__init__(what)
        self.what, self.line = what, line


def _line(node_or_mark) -> int | None:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return None if mark is None else mark.line + 1


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _measure(root: yaml.Node) -> None:
    """Refuse a composed document that, aliases expanded, holds more than :data:`MAX_VALUES` values, nests deeper
    than :data:`MAX_DEPTH`, or contains itself. Each node is measured once (an alias is a shared node), without
    recursion: a chain of anchors is as long as the file allows."""
    done: dict[int, tuple[int, int]] = {}                   # id(node) -> (values, depth), aliases expanded
    active: set[int] = set()                                # nodes whose children are being measured
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if key in done:
            continue
        kids = _children(node)
        if not finished:
            active.add(key)
            stack.append((node, True))
            for kid in kids:
                if id(kid) in active:                       # an ancestor: the value would be infinite
                    raise YamlLimitError("a value that contains itself through an alias (endless)", _line(kid))
                if id(kid) not in done:
                    stack.append((kid, False))
            continue
        values = 1 + sum(done[id(kid)][0] for kid in kids)
        depth = 1 + max((done[id(kid)][1] for kid in kids), default=0)
        if values > MAX_VALUES:
            raise YamlLimitError(f"more than {MAX_VALUES:,} values once its aliases are expanded", _line(node))
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep once its aliases are expanded", _line(node))
        done[key] = (values, depth)
        active.discard(key)


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a document nesting deeper than :data:`MAX_DEPTH` (while composing, so the
    composer's recursion stays shallow) or holding, aliases expanded, more than :data:`MAX_VALUES` values or itself
    (:class:`YamlLimitError`). Text longer than :data:`MAX_BYTES` is refused by :func:`check_text_size`."""

    _depth = 0

    def compose_node(self, parent, index):
        if self._depth >= MAX_DEPTH:
            raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", _line(self.peek_event()))
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        if node is not None:
            _measure(node)
        return node


def check_text_size(size: int) -> None:
    """Refuse YAML text of ``size`` bytes beyond :data:`MAX_BYTES`."""
    if size > MAX_BYTES:
        raise YamlLimitError(f"larger than {MAX_BYTES // 1024:,} KiB")


def read_capped(path: Path) -> bytes:
    """The bytes of ``path``, at most :data:`MAX_BYTES` (a larger file is a :class:`YamlLimitError`, read no
    further than the limit)."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    check_text_size(len(data))
    return data


class DuplicateKeyError(yaml.YAMLError):
    """A mapping that gives the same key twice (PyYAML would silently keep the last one)."""

    def __init__(self, key: Any, line: int, first: int):
        super().__init__(f"key {key!r} at line {line} is given twice (first at line {first})")
        self.key, self.line, self.first = key, line, first


class UniqueKeyLoader(BoundedLoader):
    """ctxmt's YAML loader: ``yaml.SafeLoader`` that refuses duplicate keys (a second ``train:`` block must not
    replace the first), reads YAML 1.2 booleans, and (:class:`BoundedLoader`) refuses text nesting too deep or
    expanding too far."""


def _construct_unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":      # '<<: *anchor' merges, it is no key of its own
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.setdefault(key, key_node.start_mark.line + 1)
        except TypeError:                                  # an unhashable key: construct_mapping says so
            break
        if first != key_node.start_mark.line + 1:
            raise DuplicateKeyError(key, key_node.start_mark.line + 1, first)
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)
# YAML 1.2 booleans (true/false only): under YAML 1.1's rules `amp: off` or `--set train.amp=off` would be the
# boolean False, which the schema then refuses although 'off' is one of the choices it names
_BOOL = "tag:yaml.org,2002:bool"
UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
UniqueKeyLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
