"""Build hook: the top-level ``recipes/`` folder ships inside the package, as ``ctxmt_cli/recipes/``, and the
corpus cards of the top-level ``data/`` folder (``data/*.yaml``) as ``ctxmt_cli/corpora/``.

Everything else is configured in pyproject.toml. A checkout (and an editable install) reads ``recipes/`` and
``data/`` where they lie (``ctxmt_cli.recipe_catalog.RECIPES_DIR``, ``ctxmt_cli.data.cards.CARDS_DIR``); a wheel
carries a copy under the package, so ``ctxmt recipes list`` and ``ctxmt data list`` work from an installed wheel
outside any checkout. Only the cards are copied from data/: prepared datasets written there stay behind.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
RECIPES = ROOT / "recipes"
SHIPPED = ("*.yaml", "*.sh", "*.py")
CARDS = ROOT / "data"


class BuildPyWithRecipes(build_py):
    """``build_py`` that also copies every recipe (YAML, and the scripts beside them) and every corpus card into
    the built package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return                                   # an editable install reads the checkout's folders directly
        package = Path(self.build_lib) / "ctxmt_cli"
        recipes = [path for pattern in SHIPPED for path in RECIPES.rglob(pattern)]
        _copy(recipes, RECIPES, package / "recipes")
        _copy(CARDS.glob("*.yaml"), CARDS, package / "corpora")   # the cards only: never a prepared data/NAME/


def _copy(paths, source: Path, target: Path) -> None:
    """Copy ``paths`` (files under ``source``) to the same places under ``target``."""
    for path in paths:
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, out)


setup(cmdclass={"build_py": BuildPyWithRecipes})
