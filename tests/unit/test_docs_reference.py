"""The documentation's generated references (docs/hooks/reference.py) cover the whole CLI and recipe schema.

The hook's generators need neither MkDocs nor a build, so this runs without the docs extra: every command and
subcommand of the Typer app has its section in the CLI reference, and every field of every recipe config class
its row in the recipe reference.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "reference.py"


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_has_every_command(reference):
    import typer

    from ctxmt_cli.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="ctxmt")
    top = [name for name in root.list_commands(ctx) if not root.get_command(ctx, name).hidden]
    text = reference.cli_reference()
    paths = reference.cli_commands()
    assert set(top) <= set(paths)
    assert {"recipes list", "recipes show", "recipes copy", "export ctranslate2", "export safetensors"} <= set(paths)
    for path in paths:
        assert f"`ctxmt {path}`" in text, f"ctxmt {path} is missing from the CLI reference"
    for option in ("--target-mode", "--first-pass", "--log-format", "--install-completion"):
        assert option in text


def test_recipe_reference_has_every_field(reference):
    from ctxmt_cli.config import FAMILY_CONFIGS, DataConfig, DecodeConfig, Recipe, TrainConfig
    from ctxmt_cli.models.concat.config import PSEConfig, ShiftPair

    classes = reference.recipe_classes()
    for cls in (Recipe, DataConfig, TrainConfig, DecodeConfig, ShiftPair, PSEConfig, *FAMILY_CONFIGS.values()):
        assert cls in classes
    text = reference.recipe_reference()
    for cls in classes:
        for name in cls.model_fields:
            assert f"| `{name}` |" in text, f"{cls.__name__}.{name} is missing from the recipe reference"
    for family, cls in FAMILY_CONFIGS.items():
        assert f"`model.family: {family}` (`{cls.__name__}`)" in text
    assert '`"window_tokens" | "weight_sum"`' in text                  # Literal choices
    assert "| `cd` | `float` | `1.0` | ≥ 0.0, ≤ 1.0 |" in text                 # bounds


def test_hook_fills_only_its_pages(reference):
    class File:
        def __init__(self, uri):
            self.src_uri = uri

    class Page:
        def __init__(self, uri):
            self.file = File(uri)

    assert reference.on_page_markdown("text", Page("index.md"), None, None) == "text"
    filled = reference.on_page_markdown("# CLI\n\n<!-- ctxmt:cli-reference -->\n", Page("reference/cli.md"), None, None)
    assert "`ctxmt train`" in filled and "<!--" not in filled
    with pytest.raises(ValueError):
        reference.on_page_markdown("no marker", Page("reference/recipes.md"), None, None)
