"""Build hook: the top-level ``recipes/`` folder ships inside the package, as ``ctxmt_cli/recipes/``.

Everything else is configured in pyproject.toml. A checkout (and an editable install) reads ``recipes/`` where it
lies (``ctxmt_cli.recipe_catalog.RECIPES_DIR``); a wheel carries a copy under the package, so ``ctxmt recipes
list`` works from an installed wheel outside any checkout.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RECIPES = Path(__file__).resolve().parent / "recipes"
SHIPPED = ("*.yaml", "*.sh")


class BuildPyWithRecipes(build_py):
    """``build_py`` that also copies every recipe (YAML, and the scripts beside them) into the built package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return                                   # an editable install reads the checkout's recipes/ directly
        target = Path(self.build_lib) / "ctxmt_cli" / "recipes"
        for pattern in SHIPPED:
            for path in RECIPES.rglob(pattern):
                out = target / path.relative_to(RECIPES)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)


setup(cmdclass={"build_py": BuildPyWithRecipes})
