"""The family catalog (ctxmt_cli.family_catalog): a family is its folder and one line there. Every line resolves to
its three classes; the recipe schema, ``FAMILIES`` and the command line's family choices are the catalog's names;
reading a recipe imports each family's ``config.py`` alone (no torch, no model); a line joined at run time is all
a family needs, and leaves as it came."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from ctxmt_cli import config
from ctxmt_cli.config_base import ModelBase
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.family_catalog import CATALOG, PACKAGED, FamilyEntry, family_class, join, leave
from ctxmt_cli.models.families import FAMILIES, add_family, build_model, remove_family
from ctxmt_cli.models.inputs import Inputs

ROOT = Path(__file__).resolve().parents[2]
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}
#: the toy family's line, as it would stand in CATALOG (tests/toy_family/: config.py and model.py, plain inputs)
TOY_LINE = FamilyEntry("prevsrc", config="tests.toy_family.config:PrevSrcConfig",
                       model="tests.toy_family.model:PrevSrc")


def schema_families() -> set[str]:
    """The family names of the recipe schema's model union."""
    members = get_args(get_args(config.ModelConfig)[0])                 # Annotated[Union[...], discriminator]
    return {get_args(cls.model_fields["family"].annotation)[0] for cls in members}


@pytest.fixture
def toy_line():
    join(TOY_LINE)
    yield
    leave("prevsrc")


@pytest.mark.parametrize("name", PACKAGED)
def test_every_line_resolves_to_its_three_classes(name):
    cfg = family_class(name, "config")
    assert issubclass(cfg, ModelBase) and cfg.model_fields["family"].default == name
    assert issubclass(family_class(name, "model"), EncoderDecoder)
    assert issubclass(family_class(name, "inputs"), Inputs)
    assert FAMILIES[name] == (family_class(name, "model"), family_class(name, "inputs"))


def test_the_schema_families_and_the_cli_choices_are_the_catalogs_names():
    from ctxmt_cli.cli.package import Family

    assert list(CATALOG) == list(PACKAGED) == list(FAMILIES) == list(config.FAMILY_CONFIGS)
    assert schema_families() == set(CATALOG)
    assert [f.value for f in Family] == list(PACKAGED)


def test_reading_a_recipe_imports_each_familys_config_alone():
    """No torch and no model or inputs module: a family's classes above its config are imported when first asked for
    (here, the toy family's line joined the way a line of the catalog stands)."""
    code = ("import sys\n"
            "from ctxmt_cli.family_catalog import FamilyEntry, join, CATALOG\n"
            f"join(FamilyEntry(**{TOY_LINE.__dict__!r}))\n"
            "from ctxmt_cli.config import validate_recipe\n"
            "for name in CATALOG:\n"
            "    assert validate_recipe({'model': {'family': name}}).model.family == name\n"
            "print(' '.join(m for m in sys.modules if m.startswith(('ctxmt_cli.models', 'tests', 'torch'))))\n")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=ROOT).stdout.split())
    configs = {f"ctxmt_cli.models.{name}.config" for name in PACKAGED} | {"tests.toy_family.config"}
    packages = {"ctxmt_cli.models", "tests", "tests.toy_family"} | {f"ctxmt_cli.models.{name}" for name in PACKAGED}
    assert loaded == configs | packages


def test_one_line_is_all_a_family_needs(toy_line):
    from tests.toy_family.model import PrevSrc

    recipe = config.validate_recipe({"model": {**TINY, "family": "prevsrc", "src_context_sentences": 2}})
    assert "prevsrc" in schema_families() and FAMILIES["prevsrc"] == (PrevSrc, Inputs)
    model = build_model(recipe.model, VocabInfo(src_size=20, tgt_size=20))
    assert type(model) is PrevSrc and model.cfg.src_context_sentences == 2
    join(TOY_LINE)                                                      # the same line again: nothing changes
    leave("prevsrc")
    assert "prevsrc" not in FAMILIES and "prevsrc" not in schema_families()
    with pytest.raises(CtxmtError, match="model"):
        config.validate_recipe({"model": {"family": "prevsrc"}})


def test_a_taken_name_a_packaged_family_and_a_wrong_path_are_one_line_each(toy_line):
    from tests.toy_family.config import PrevSrcConfig
    from tests.toy_family.model import PrevSrc

    with pytest.raises(CtxmtError, match="'concat': a family of that name is already in the catalog"):
        join(FamilyEntry("concat", config=TOY_LINE.config, model=TOY_LINE.model))
    with pytest.raises(CtxmtError, match="'sentence' ships with ctxmt"):
        remove_family("sentence")
    assert "sentence" in FAMILIES
    add_family(PrevSrcConfig, PrevSrc)                                  # the classes of the line: the same family
    leave("prevsrc")
    with pytest.raises(CtxmtError, match="its config class 'tests.toy_family.config:Missing' does not import"):
        join(FamilyEntry("prevsrc", config="tests.toy_family.config:Missing", model=TOY_LINE.model))
    assert "prevsrc" not in CATALOG and schema_families() == set(PACKAGED)
    join(FamilyEntry("prevsrc", config=TOY_LINE.config, model="tests.toy_family.model:Missing"))
    with pytest.raises(CtxmtError) as err:
        FAMILIES["prevsrc"]
    assert "\n" not in str(err.value) and "its model class 'tests.toy_family.model:Missing' does not import" in \
        str(err.value)


def test_a_config_without_a_family_name_is_refused():
    class Nameless(ModelBase):
        """No family literal."""

    with pytest.raises(CtxmtError, match="Nameless: its 'family' field has no default"):
        add_family(Nameless, EncoderDecoder)
