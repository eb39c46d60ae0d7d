"""The built wheel is self-contained: every recipe, every benchmark, the LICENSE and one version number.

Builds the wheel offline (``pip wheel . --no-deps --no-build-isolation``, the installed setuptools) from a copy of
the project, so the checkout gets no build/ folder; a few seconds.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile

import pytest

import ctxmt_cli
from tests.integration.conftest import ROOT

PACKAGE = ROOT / "ctxmt_cli"


def _setuptools_version() -> tuple[int, ...]:
    setuptools = pytest.importorskip("setuptools")
    return tuple(int(part) for part in setuptools.__version__.split(".")[:2] if part.isdigit())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    if _setuptools_version() < (77,):
        pytest.skip("building needs setuptools >= 77 (the SPDX license string); pyproject.toml asks for it")
    src, dist = tmp_path_factory.mktemp("project"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(PACKAGE, src / "ctxmt_cli", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                             "--no-index", "-q", "-w", str(dist)], cwd=src, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    [built] = dist.glob("ctxmt-*.whl")
    return zipfile.ZipFile(built)


def _shipped(folder: str, pattern: str) -> set[str]:
    return {f"ctxmt_cli/{p.relative_to(PACKAGE).as_posix()}" for p in (PACKAGE / folder).rglob(pattern)}


def test_the_wheel_carries_every_recipe_and_benchmark(wheel):
    names = set(wheel.namelist())
    recipes = _shipped("recipes", "*.yaml") | _shipped("recipes", "*.sh")
    assert len(recipes) > 150 and recipes <= names
    assert {p for p in _shipped("recipes", "*") if (ROOT / p).is_file()} <= names      # no other file left behind
    benchmarks = _shipped("benchmarks", "*.py")
    assert "ctxmt_cli/benchmarks/train.py" in benchmarks and benchmarks <= names
    assert not any(n.startswith("tests/") for n in names)


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
