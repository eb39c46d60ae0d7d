"""MkDocs hook: the CLI reference and the recipe reference, generated from the code at build time.

``reference/cli.md`` is filled from the Typer app (``ctxmt_cli.cli.app``) through click's introspection: every
command and subcommand with its help, usage line and parameters. ``reference/recipes.md`` is filled from the
pydantic recipe schema (``ctxmt_cli.config``): every section and family config class with each field's type,
default, bounds or choices and description. Neither page can drift from the code: each build regenerates it.

The two generators, :func:`cli_reference` and :func:`recipe_reference`, need neither MkDocs nor a build; the
unit test ``tests/unit/test_docs_reference.py`` calls them directly. The checkout this file lies in is put first
on ``sys.path``, so a build documents the code beside it even where another ctxmt is installed.
"""

from __future__ import annotations

import html
import inspect
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: page (relative to docs/) -> (marker replaced, generator name)
PAGES = {
    "reference/cli.md": ("<!-- ctxmt:cli-reference -->", "cli_reference"),
    "reference/recipes.md": ("<!-- ctxmt:recipe-reference -->", "recipe_reference"),
}


# ---- shared ------------------------------------------------------------------------------------------------------
def _text(value: str) -> str:
    """Plain text for a Markdown table cell or paragraph: HTML characters escaped, pipes escaped, one line."""
    return html.escape(" ".join(str(value).split()), quote=False).replace("|", "\\|")


def _code(value: str) -> str:
    """A code span for a table cell; its pipes stay as they are (Python-Markdown's tables do not split cells at a
    pipe inside a code span, and would show an escaped one with its backslash)."""
    value = " ".join(str(value).split())
    ticks = "``" if "`" in value else "`"
    pad = " " if ticks == "``" else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


# ---- CLI ---------------------------------------------------------------------------------------------------------
def _root_command():
    import typer

    from ctxmt_cli.cli import app

    return typer.main.get_command(app)


def _context(command, name: str, parent=None):
    """A click context for ``command`` (Typer's vendored click where it has one, else click)."""
    return command.context_class(command, info_name=name, parent=parent)


def _subcommands(command, ctx):
    """(name, command, context) of each visible subcommand of a group, in the group's order."""
    if not hasattr(command, "list_commands"):
        return []
    found = []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or getattr(sub, "hidden", False):
            continue
        found.append((name, sub, _context(sub, name, ctx)))
    return found


def cli_commands() -> list[str]:
    """Every visible command path below ``ctxmt``, e.g. ``["prepare", …, "recipes", "recipes list", …]``."""
    root = _root_command()
    paths: list[str] = []

    def walk(command, ctx, prefix: str) -> None:
        for name, sub, sub_ctx in _subcommands(command, ctx):
            path = f"{prefix} {name}".strip()
            paths.append(path)
            walk(sub, sub_ctx, path)

    walk(root, _context(root, "ctxmt"), "")
    return paths


def _parameters(command, ctx) -> list[str]:
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:                        # a plain click argument has no help record
            record = (param.human_readable_name, "")
        names, helptext = record
        kind = "argument" if param.param_type_name == "argument" else "option"
        rows.append(f"| {_code(names)} | {kind} | {_text(helptext)} |")
    if not rows:
        return []
    return ["| parameter | kind | description |", "|---|---|---|", *rows, ""]


def _command_section(command, ctx, path: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{path}`", ""]
    helptext = inspect.cleandoc(command.help or "")
    for paragraph in helptext.split("\n\n"):
        if paragraph.strip():
            out += [_text(paragraph), ""]
    out += ["```text", command.get_usage(ctx).strip(), "```", ""]
    out += _parameters(command, ctx)
    return out


def cli_reference() -> str:
    """Markdown for every command of ``ctxmt``: help, usage and each parameter (options with their defaults)."""
    root = _root_command()
    root_ctx = _context(root, "ctxmt")
    out = _command_section(root, root_ctx, "ctxmt", 2)

    def walk(command, ctx, prefix: str, level: int) -> None:
        for name, sub, sub_ctx in _subcommands(command, ctx):
            path = f"{prefix} {name}"
            out.extend(_command_section(sub, sub_ctx, path, level))
            walk(sub, sub_ctx, path, min(level + 1, 4))

    walk(root, root_ctx, "ctxmt", 2)
    return "\n".join(out)


# ---- recipes -----------------------------------------------------------------------------------------------------
def _is_section(value) -> bool:
    from pydantic import BaseModel

    return isinstance(value, type) and issubclass(value, BaseModel)


def _type_name(annotation) -> str:
    """A recipe author's reading of a field type: ``int``, ``"a" | "b"``, ``null | int``, ``tuple[float, float]``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        return " | ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if _is_section(annotation):
        return annotation.__name__
    return getattr(annotation, "__name__", str(annotation))


def _yaml_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return value if value else '""'
    return str(value)


def _default(field) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        made = field.default_factory()
        return f"(a {type(made).__name__})" if _is_section(type(made)) else _yaml_value(made)
    if field.default is PydanticUndefined:
        return "(required)"
    return _yaml_value(field.default)


def _bounds(field) -> str:
    """The numeric bounds and pattern of a field, from its metadata (``ge=0, lt=1`` -> ``≥ 0, < 1``)."""
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    found = []
    for item in field.metadata:
        for attr, sign in signs.items():
            value = getattr(item, attr, None)
            if value is not None:
                found.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern is not None:
            found.append(f"matches {pattern}")
    return ", ".join(found)


def _sections_below(cls, seen: list) -> None:
    """``cls`` and every recipe section class its fields name, depth first, each once."""
    if cls in seen:
        return
    seen.append(cls)
    for field in cls.model_fields.values():
        stack = [field.annotation]
        while stack:
            annotation = stack.pop()
            if _is_section(annotation):
                _sections_below(annotation, seen)
            stack.extend(typing.get_args(annotation))


def recipe_classes() -> list[type]:
    """Every config class of the recipe schema: the recipe, its sections, each family's model config and the
    classes their fields name (``ShiftPair``, ``PSEConfig``), found by walking the field types."""
    from ctxmt_cli.config import FAMILY_CONFIGS, Recipe

    seen: list = [Recipe]
    for cls in FAMILY_CONFIGS.values():              # the families in FAMILIES order, before the walk meets them
        _sections_below(cls, seen)
    seen.remove(Recipe)
    _sections_below(Recipe, seen)
    return [Recipe] + [cls for cls in seen if cls is not Recipe]


def _field_rows(cls, names) -> list[str]:
    rows = ["| field | type | default | bounds | description |", "|---|---|---|---|---|"]
    for name in names:
        field = cls.model_fields[name]
        rows.append(f"| {_code(name)} | {_code(_type_name(field.annotation))} | {_code(_default(field))} | "
                    f"{_text(_bounds(field))} | {_text(field.description or '')} |")
    return rows + [""]


def _doc(cls) -> list[str]:
    text = inspect.cleandoc(cls.__doc__ or "")
    return [_text(p) for p in text.split("\n\n") if p.strip()] + [""] if text else []


def recipe_reference() -> str:
    """Markdown for the recipe schema: one table per config class, every field with type, default, bounds and
    description; a family's table lists the fields it adds or redefines over the shared model fields."""
    from ctxmt_cli.config import FAMILY_CONFIGS, Recipe
    from ctxmt_cli.config_base import ModelBase

    out: list[str] = []
    families = set(FAMILY_CONFIGS.values())
    shared = ModelBase.model_fields
    named: list = []                                   # classes the families' fields name (ShiftPair, PSEConfig)
    for cls in families:
        _sections_below(cls, named)
    sections = [cls for cls in recipe_classes() if cls not in families and cls not in named]
    helpers = [cls for cls in recipe_classes() if cls in named and cls not in families]

    def table(cls) -> list[str]:
        heading = "The recipe (top level)" if cls is Recipe else f"`{cls.__name__}`"
        return [f"## {heading}", "", *_doc(cls), *_field_rows(cls, list(cls.model_fields))]

    for cls in sections:
        out += table(cls)
    out += ["## Model fields every family shares (`model:`)", "", *_doc(ModelBase),
            *_field_rows(ModelBase, list(shared))]
    for family, cls in FAMILY_CONFIGS.items():
        own = [name for name, field in cls.model_fields.items()
               if name not in shared or repr(field) != repr(shared[name])]
        out += [f"## `model.family: {family}` (`{cls.__name__}`)", "", *_doc(cls),
                "Fields it adds or redefines (the others are the shared ones above):", "",
                *_field_rows(cls, own)]
    for cls in helpers:
        out += table(cls)
    return "\n".join(out)


# ---- MkDocs ------------------------------------------------------------------------------------------------------
def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    """Replace each generated page's marker with its generated Markdown."""
    entry = PAGES.get(page.file.src_uri)
    if entry is None:
        return markdown
    marker, generator = entry
    if marker not in markdown:
        raise ValueError(f"{page.file.src_uri}: the marker {marker} is missing")
    return markdown.replace(marker, globals()[generator]())
