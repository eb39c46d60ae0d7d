"""Every number a recipe (or a corpus card) holds is finite and bounded, and the YAML loader refuses what no recipe
needs: a file too large, nesting too deep, aliases expanding too far or into themselves.

The schema walks find every numeric field by itself (every section of every family, numbers inside tuples and
unions included), so a field added later without bounds fails here, not in a user's run.
"""

from __future__ import annotations

import math
import re
import time
from typing import get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from ctxmt_cli import config as C
from ctxmt_cli import yaml_loader as Y
from ctxmt_cli.data import cards
from ctxmt_cli.errors import CtxmtError

#: values for the fields some sections require (every other field has a default)
REQUIRED = {"ShiftPair": {"src": 1, "tgt": 1}, "PSEConfig": {"d_se": 8}}
BOUNDS = {"less_than_equal", "less_than", "finite_number", "greater_than_equal", "greater_than"}


def _sections(cls: type, seen: list) -> list:
    """``cls`` and every section class its fields hold (through Optional, unions, tuples), each once."""
    if cls in seen:
        return seen
    seen.append(cls)
    for field in cls.model_fields.values():
        for kind in _leaves(field.annotation):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                _sections(kind, seen)
    return seen


def _leaves(annotation) -> list:
    """The plain types an annotation is made of (``tuple[float, float] | None`` -> [float, float, None])."""
    if get_origin(annotation) is not None and get_origin(annotation) is not type:
        if str(get_origin(annotation)).endswith("Literal"):
            return []
        return [leaf for arg in get_args(annotation) for leaf in _leaves(arg)]
    return [annotation]


def recipe_sections() -> list:
    found: list = []
    for cls in (C.Recipe, *C.FAMILY_CONFIGS.values()):
        _sections(cls, found)
    return found


def _numbers(cls) -> list[tuple[str, type, bool]]:
    """(field, int or float, inside a tuple) for every numeric slot of ``cls``'s own fields (bool aside)."""
    out = []
    for name, field in cls.model_fields.items():
        ann = field.annotation
        in_tuple = get_origin(ann) is tuple or any(get_origin(a) is tuple for a in get_args(ann))
        for kind in {k for k in _leaves(ann) if k in (int, float)}:
            out.append((name, kind, in_tuple))
    return out


def _refused(instance, name: str, value) -> set:
    """The error types when assigning ``value`` to ``instance.name`` (a union field: one per member); empty when it
    is accepted."""
    try:
        setattr(instance, name, value)
    except ValidationError as err:
        return {e["type"] for e in err.errors() if e["loc"][:1] == (name,)}
    return set()


NUMERIC = [(cls, name, kind, in_tuple) for cls in recipe_sections() for name, kind, in_tuple in _numbers(cls)]


def test_the_walk_finds_the_numbers_of_every_family():
    names = {f"{cls.__name__}.{name}" for cls, name, _, _ in NUMERIC}
    assert {"TrainConfig.lr", "TrainConfig.betas", "TrainConfig.seed", "ModelBase.d_model", "DecodeConfig.beam",
            "ConcatConfig.shift", "ShiftPair.src", "PSEConfig.d_se", "MbeConfig.group_tokens",
            "HanoiTConfig.q", "CachingConfig.pool_size"} <= names | {n.replace("SentenceConfig", "ModelBase")
                                                                      for n in names}
    assert len(NUMERIC) > 60


@pytest.mark.parametrize("cls,name,kind,in_tuple", NUMERIC, ids=[f"{c.__name__}.{n}" for c, n, _, _ in NUMERIC])
def test_every_number_of_the_schema_is_finite_and_bounded(cls, name, kind, in_tuple):
    instance = cls(**REQUIRED.get(cls.__name__, {}))
    width = len(getattr(instance, name)) if in_tuple else 0
    shaped = (lambda v: tuple([v] * width)) if in_tuple else (lambda v: v)
    huge = 10**30
    for value in (huge, -huge, *((math.inf, -math.inf, math.nan, 1e308) if kind is float else ())):
        assert _refused(instance, name, shaped(value)) & BOUNDS, f"{cls.__name__}.{name} accepts {value}"


def test_the_listed_values_are_refused_as_one_line_naming_the_key():
    cases = {("train", "lr"): math.inf, ("train", "betas"): [math.nan, math.inf], ("train", "seed"): -1,
             ("model", "d_model"): 10**9, ("decode", "lenpen"): math.inf, ("decode", "beam"): 10**9}
    for key, value in cases.items():
        raw = {key[0]: {key[1]: value}} if key[0] != "model" else {"model": {"family": "sentence", key[1]: value}}
        with pytest.raises(CtxmtError, match=rf"^r\.yaml: {key[0]}\.{key[1]}"):
            C.validate_recipe(raw, "r.yaml")
    with pytest.raises(CtxmtError, match=r"train\.seed: Input should be less than or equal to 4294967295"):
        C.validate_recipe({"train": {"seed": 2**65}}, "r.yaml")


def test_a_union_field_names_the_bound_its_value_misses():
    with pytest.raises(CtxmtError, match=r"^r\.yaml: model\.shift: Input should be greater than or equal to 0 "
                                         r"\(got -3\)$"):
        C.validate_recipe({"model": {"family": "concat", "shift": -3}}, "r.yaml")
    with pytest.raises(CtxmtError, match=r"^r\.yaml: model\.shift\.tgt: Field required$"):
        C.validate_recipe({"model": {"family": "concat", "shift": {"src": 2}}}, "r.yaml")


def test_corpus_cards_bound_their_counts():
    classes = [c for c in vars(cards).values() if isinstance(c, type) and issubclass(c, cards.CardSection)]
    for cls in classes:
        for name, _, _ in _numbers(cls):
            limits = [m for m in cls.model_fields[name].metadata if hasattr(m, "le") or hasattr(m, "lt")]
            assert limits, f"{cls.__name__}.{name} has no upper bound"


# ---- the YAML loader ------------------------------------------------------------------------------------------

def _bomb(levels: int = 9, fan: int = 9) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * fan)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _load(text: str):
    return yaml.load(text, Loader=C.UniqueKeyLoader)


def test_an_alias_bomb_is_refused_in_well_under_a_second():
    started = time.perf_counter()
    with pytest.raises(Y.YamlLimitError, match="more than 100,000 values once its aliases are expanded"):
        _load(_bomb())
    assert time.perf_counter() - started < 1.0


def test_nesting_is_refused_at_the_limit_not_by_the_stack():
    _load("[" * Y.MAX_DEPTH + "]" * Y.MAX_DEPTH)                       # at the limit: read
    for depth in (Y.MAX_DEPTH + 1, 3000, 100_000):
        with pytest.raises(Y.YamlLimitError, match=f"nested more than {Y.MAX_DEPTH} levels deep"):
            _load("[" * depth + "]" * depth)
    with pytest.raises(Y.YamlLimitError, match="nested more than"):
        _load("a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30)


def test_a_self_referring_alias_is_refused():
    for text in ("a: &a [*a]", "a: &a {b: *a}", "a: &a\n  b: [1, {c: *a}]\n"):
        with pytest.raises(Y.YamlLimitError, match="contains itself through an alias"):
            _load(text)


def test_ordinary_anchors_merges_and_shared_aliases_still_load():
    text = "base: &b {lr: 0.001, seed: 3}\ntrain:\n  <<: *b\n  seed: 4\nboth: [*b, *b, *b]\n"
    assert _load(text)["train"] == {"lr": 0.001, "seed": 4}
    chain = "\n".join([f"k{i}: &k{i} [1, 2]" if i == 0 else f"k{i}: &k{i} [*k{i - 1}]" for i in range(50)])
    assert _load(chain)["k49"] is not None


def test_files_beyond_the_limits_are_one_line_naming_the_file(tmp_path):
    cases = {"bomb.yaml": (_bomb(), "more than 100,000 values"),
             "deep.yaml": ("train: " + "[" * 3000 + "]" * 3000 + "\n", "nested more than 64 levels deep"),
             "self.yaml": ("train: &t\n  x: [*t]\n", "contains itself"),
             "big.yaml": ("# padding\n" * 120_000, "larger than 1,024 KiB")}
    for name, (text, needle) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(CtxmtError) as caught:
            C.load_recipe(path)
        line = str(caught.value)
        assert line.startswith(str(path)) and needle in line and "\n" not in line, line


def test_set_values_are_bounded_too():
    with pytest.raises(CtxmtError, match="the value is nested more than 64 levels deep"):
        C.parse_override("train.betas=" + "[" * 500 + "]" * 500)
    with pytest.raises(CtxmtError, match="more than 100,000 values"):
        C.parse_override("train.betas=" + _bomb().replace("\n", ", ").join("{}"))
    with pytest.raises(CtxmtError, match="a key path of 100 parts"):
        C.parse_override(".".join(["a"] * 100) + "=1")
    with pytest.raises(CtxmtError, match="larger than 1,024 KiB"):
        C.parse_override("name=" + "x" * (Y.MAX_BYTES + 1))
    assert C.parse_override("train.betas=[0.9, 0.98]") == (["train", "betas"], [0.9, 0.98])


def test_the_union_walk_sees_through_optional_and_tuples():
    assert set(_leaves(None | int | tuple[float, float])) == {type(None), int, float}


def test_the_python_api_gets_the_decode_keys_bounds_too():
    from ctxmt_cli.decode.settings import DecodeSettings, check_settings
    from ctxmt_cli.errors import OptionError

    for field, value, needle in (("beam", 10**9, "less than or equal to 1024"), ("lenpen", math.inf, "finite"),
                                 ("lenpen", 1e308, "less than or equal to 5"), ("max_len_b", 10**12, "65536"),
                                 ("batch_docs", 10**9, "65536")):
        with pytest.raises(OptionError, match=rf"^{field}={re.escape(repr(value))}: Input should be .*{needle}"):
            check_settings(DecodeSettings(**{field: value}), [["a"]], None)
    assert check_settings(DecodeSettings(beam=1024, lenpen=5.0), [["a"]], None) == [()]
