"""The built wheel is self-contained: every recipe, every corpus card, every benchmark, the LICENSE and one version
number.

Builds the wheel offline (``pip wheel . --no-deps --no-build-isolation``, the installed setuptools) from a copy of
the project, so the checkout gets no build/ folder; a few seconds.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import ctxmt_cli
from tests.integration.conftest import ROOT

PACKAGE = ROOT / "ctxmt_cli"
RECIPES = ROOT / "recipes"
CARDS = ROOT / "data"


def _setuptools_version() -> tuple[int, ...]:
    setuptools = pytest.importorskip("setuptools")
    return tuple(int(part) for part in setuptools.__version__.split(".")[:2] if part.isdigit())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    if _setuptools_version() < (77,):
        pytest.skip("building needs setuptools >= 77 (the SPDX license string); pyproject.toml asks for it")
    src, dist = tmp_path_factory.mktemp("project"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("ctxmt_cli", "recipes"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (src / "data").mkdir()
    for card in CARDS.glob("*.yaml"):                   # the cards, never a prepared dataset of data/NAME/
        shutil.copy(card, src / "data" / card.name)
    (src / "data" / "prepared").mkdir()                 # a prepared dataset beside them must stay behind
    (src / "data" / "prepared" / "meta.yaml").write_text("{}\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                             "--no-index", "-q", "-w", str(dist)], cwd=src, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    [built] = dist.glob("ctxmt-*.whl")
    return zipfile.ZipFile(built)


def _shipped(folder: Path, pattern: str) -> set[str]:
    """The wheel names of ``folder``'s files: the package's own, and the top-level recipes/ inside the package."""
    inside = "ctxmt_cli/" + ("recipes" if folder == RECIPES else folder.relative_to(PACKAGE).as_posix())
    return {f"{inside}/{p.relative_to(folder).as_posix()}" for p in folder.rglob(pattern) if p.is_file()}


def test_the_wheel_carries_every_recipe_and_benchmark(wheel):
    """The top-level recipes/ folder ships inside the package (setup.py's build hook), every file of it."""
    names = set(wheel.namelist())
    recipes = _shipped(RECIPES, "*.yaml") | _shipped(RECIPES, "*.sh") | _shipped(RECIPES, "*.py")
    assert len(recipes) > 150 and recipes <= names
    assert _shipped(RECIPES, "*") == recipes                         # nothing else lies in recipes/ to forget
    benchmarks = _shipped(PACKAGE / "benchmarks", "*.py")
    assert "ctxmt_cli/benchmarks/train.py" in benchmarks and benchmarks <= names
    assert not any(n.startswith("tests/") for n in names)


def test_the_wheel_carries_every_corpus_card(wheel):
    """The top-level data/*.yaml cards ship inside the package as ctxmt_cli/corpora/NAME.yaml, and nothing else of
    data/ (a prepared dataset written there stays behind)."""
    names = set(wheel.namelist())
    cards = {f"ctxmt_cli/corpora/{p.name}" for p in CARDS.glob("*.yaml")}
    assert len(cards) >= 11 and cards <= names
    assert {n for n in names if n.startswith("ctxmt_cli/corpora/")} == cards


def test_the_wheel_metadata_has_one_version_and_the_license(wheel):
    version = ctxmt_cli.__version__
    meta = email.message_from_bytes(wheel.read(f"ctxmt-{version}.dist-info/METADATA"))
    assert meta["Name"] == "ctxmt" and meta["Version"] == version
    assert meta["License-Expression"] == "MIT"
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL"))
    assert {"Homepage", "Repository", "Issues"} <= set(urls)
    license_text = wheel.read(f"ctxmt-{version}.dist-info/licenses/LICENSE").decode()
    assert license_text == (ROOT / "LICENSE").read_text(encoding="utf-8")
    entry_points = wheel.read(f"ctxmt-{version}.dist-info/entry_points.txt").decode()
    assert "ctxmt = ctxmt_cli.cli:main" in entry_points


def test_the_installed_wheel_lists_every_recipe_outside_a_checkout(wheel, tmp_path):
    """Installed from the wheel and run where no checkout is, ``ctxmt recipes list`` finds every recipe and
    ``ctxmt data list`` every corpus card."""
    target = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                             str(target), wheel.filename], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}

    def python(*args: str) -> subprocess.CompletedProcess:
        """The installed wheel's Python, run outside the checkout."""
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)

    where = python("-c", "import ctxmt_cli.recipe_catalog as c; print(c.RECIPES_DIR)")
    assert where.stdout.strip() == str(target / "ctxmt_cli" / "recipes"), where.stdout + where.stderr
    listed = python("-m", "ctxmt_cli", "recipes", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"{len(list(RECIPES.rglob('*.yaml')))} recipes;" in listed.stderr     # the count line goes to stderr
    where = python("-c", "import ctxmt_cli.data.cards as c; print(c.CARDS_DIR)")
    assert where.stdout.strip() == str(target / "ctxmt_cli" / "corpora"), where.stdout + where.stderr
    cards = python("-m", "ctxmt_cli", "data", "list")
    assert cards.returncode == 0, cards.stderr
    assert f"{len(list(CARDS.glob('*.yaml')))} corpus cards;" in cards.stderr
    assert "europarl_enfr" in cards.stdout and "data/europarl_enfr_8k" in cards.stdout
