"""Recipe schema: typos, types, bounds and cross-field checks are one-line errors naming file and key."""

import warnings

import pytest
from pydantic import ValidationError

from ctxmt_cli.config import apply_overrides, dump_recipe, load_recipe, validate_recipe
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.concat.config import ShiftPair


def check_error(raw, *needles):
    with pytest.raises(CtxmtError) as err:
        validate_recipe(raw, "r.yaml")
    text = str(err.value)
    assert "\n" not in text and text.startswith("r.yaml")
    for needle in needles:
        assert needle in text, text
    return text


def test_defaults_and_presets():
    recipe = validate_recipe({"model": {"family": "concat", "preset": "base"}})
    assert (recipe.model.d_model, recipe.model.heads, recipe.model.encoder_layers) == (512, 8, 6)
    explicit = validate_recipe({"model": {"family": "sentence", "preset": "tiny", "d_model": 64}})
    assert explicit.model.d_model == 64 and explicit.model.ffn_dim == 512


def test_unknown_keys_name_the_path_and_suggest():
    check_error({"model": {"family": "concat", "sift": 3}}, "model.sift", "did you mean 'shift'")
    check_error({"trainn": {}}, "trainn", "did you mean 'train'")
    check_error({"train": {"warmup": 10}}, "train.warmup", "warmup_steps")


def test_wrong_types_and_ranges():
    check_error({"train": {"lr": "fast"}}, "train.lr")
    check_error({"model": {"family": "concat", "cd": 1.5}}, "model.cd")
    check_error({"model": {"family": "concat", "segment": "hot"}}, "model.segment")
    check_error({"model": {"family": "transformer"}}, "model")


def test_cross_field_checks():
    check_error({"model": {"family": "concat", "pse": {"d_se": 4}}}, "pse needs a segment")
    check_error({"model": {"family": "concat", "cd": 0.01, "tgt_context_sentences": 0}}, "tgt_context_sentences")
    check_error({"model": {"family": "sentence", "preset": None, "d_model": 30, "ffn_dim": 8, "heads": 4,
                           "encoder_layers": 1, "decoder_layers": 1}}, "divisible")
    check_error({"model": {"family": "concat", "segment": "onehot", "pse": {"d_se": 2}}}, "d_se")


def test_average_last_and_context_order():
    train = validate_recipe({"train": {"average_last": 8, "keep_checkpoints": 8}}).train
    assert (train.average_last, train.average_checkpoints) == (8, 0)
    check_error({"train": {"average_last": 8, "average_checkpoints": 4}}, "train", "set one of them to 0")
    check_error({"train": {"average_last": 12}}, "train", "keep_checkpoints >= 12", "it is 10")
    check_error({"train": {"average_last": -1}}, "train.average_last")
    model = validate_recipe({"model": {"family": "concat", "src_context_sentences": 1, "tgt_context_sentences": 0,
                                       "context_order": "random"}}).model
    assert model.context_order == "random"
    assert validate_recipe({"model": {"family": "concat"}}).model.context_order == "previous"
    check_error({"model": {"family": "concat", "context_order": "shuffled"}}, "model.context_order")
    check_error({"model": {"family": "concat", "src_context_sentences": 0, "tgt_context_sentences": 0,
                           "context_order": "random"}}, "context_order: random", "src_context_sentences")
    check_error({"model": {"family": "sentence", "context_order": "random"}}, "model.context_order")


def test_shift_forms():
    assert validate_recipe({"model": {"family": "concat", "shift": "auto"}}).model.shift == "auto"
    assert validate_recipe({"model": {"family": "concat", "shift": 8}}).model.shift == 8
    pair = validate_recipe({"model": {"family": "concat", "shift": {"src": 8, "tgt": 9}}}).model.shift
    assert pair == ShiftPair(src=8, tgt=9)


def test_set_overrides_go_through_the_schema(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model:\n  family: concat\ntrain:\n  lr: 0.001\n")
    recipe = load_recipe(path, ["train.lr=5e-4", "model.shift=auto", "model.pse={d_se: 4}", "model.segment=learned"])
    assert recipe.train.lr == 5e-4 and recipe.model.pse.d_se == 4
    with pytest.raises(CtxmtError, match="model.shfit"):
        load_recipe(path, ["model.shfit=3"])
    with pytest.raises(CtxmtError, match="KEY.PATH=VALUE"):
        apply_overrides({}, ["train.lr"])
    with pytest.raises(CtxmtError, match="`overrides` 'train.lr=\\[1': the value is not valid YAML"):
        apply_overrides({}, ["train.lr=[1"])


def test_amp_off_is_a_choice_not_a_boolean(tmp_path):
    """YAML 1.2 booleans: 'off' (a choice of train.amp) stays a string in a file and in --set; true/false stay
    booleans."""
    path = tmp_path / "r.yaml"
    path.write_text("model:\n  family: sentence\ntrain:\n  amp: off\n  compile: false\n")
    assert load_recipe(path).train.amp == "off"
    recipe = load_recipe(path, ["train.amp=bf16", "train.amp=off", "train.compile=true"])
    assert recipe.train.amp == "off" and recipe.train.compile is True


BAD_RECIPE_FILES = [  # (file content; None = no file, "DIR" = a directory), message fragments
    (None, ["r.yaml", "not found"]),
    ("DIR", ["r.yaml", "is a directory, not a file"]),
    (b"model: [unclosed\n", ["r.yaml", "not valid YAML"]),
    (b"train:\n  lr: 1.0e-3\ntrain:\n  lr: 2.0e-3\n", ["r.yaml:3", "'train'", "twice", "first at line 1"]),
    (b"model:\n  family: concat\n  cd: 0.5\n  cd: 0.9\n", ["r.yaml:4", "'cd'", "twice", "line 3"]),
    (b"name: ok\ndescription: caf\xe9\n", ["r.yaml:2", "not UTF-8 text", "0xe9"]),
    (bytes(range(256)) * 4, ["r.yaml:2", "not UTF-8 text", "a recipe is a YAML text file"]),     # a binary file
    (b"", ["r.yaml", "the recipe is empty"]),
    (b"# only a comment\n\n# and another\n", ["r.yaml", "the recipe is empty"]),
    (b"- model\n- train\n", ["r.yaml", "a recipe must be a YAML mapping", "holds a list"]),
    (b"just a line\n", ["r.yaml", "a recipe must be a YAML mapping", "holds a str"]),
    (b"train:\n  threads: true\n", ["r.yaml", "train.threads: expected an integer, not true/false (got true)"]),
]


@pytest.mark.parametrize("content,needles", BAD_RECIPE_FILES)
def test_bad_recipe_files_are_one_line_naming_file_and_line(tmp_path, content, needles):
    path = tmp_path / "r.yaml"
    if content == "DIR":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(CtxmtError) as err:
        load_recipe(path)
    text = str(err.value)
    assert "\n" not in text
    assert ("fix the syntax" in text) == ("not valid YAML" in text)       # only a syntax error says so
    for needle in needles:
        assert needle in text, text


def test_a_merge_key_is_not_a_duplicate(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("x-lr: &lr\n  lr: 1.0e-3\ntrain:\n  <<: *lr\n  warmup_steps: 5\n")
    with pytest.raises(CtxmtError, match="unknown key 'x-lr'"):       # parsed fine; the schema refuses x-lr
        load_recipe(path)


def test_resolved_recipe_round_trips():
    recipe = validate_recipe({"model": {"family": "concat", "shift": {"src": 3, "tgt": 4}, "segment": "learned"}})
    import yaml
    again = validate_recipe(yaml.safe_load(dump_recipe(recipe)))
    assert again == recipe


@pytest.mark.parametrize("key, new", [("model.context_sentences", "src_context_sentences"),
                                      ("decode.batch_sentences", "batch_docs")])
def test_renamed_keys_name_their_new_name(key, new):
    section, name = key.split(".")
    raw = {"model": {"family": "caching"}, section: {name: 2}} if section == "decode" else \
        {"model": {"family": "caching", name: 2}}
    with pytest.raises(CtxmtError, match=f"unknown key '{key}' \\(renamed to '{new}'\\)"):
        validate_recipe(raw, "r.yaml")


@pytest.mark.parametrize("section, old, new, value", [("decode", "target_context", "target_mode", "generate"),
                                                      ("model", "target_context", "target_context_from", "reference")])
def test_moved_keys_are_read_under_their_new_name_with_a_warning(section, old, new, value, tmp_path):
    """A key that got a new name (one name per concept) still works under the old one, in a file and in --set;
    a stored recipe is read quietly; both names at once is an error."""
    model = {"family": "hanoit", "bilingual": True}
    raw = {"model": dict(model), section: {**({} if section == "decode" else model), old: value}}
    with pytest.warns(FutureWarning, match=f"r.yaml: {section}.{old} is now called {section}.{new}"):
        recipe = validate_recipe(raw, "r.yaml")
    assert getattr(getattr(recipe, section), new) == value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert validate_recipe(raw, "stored", stored=True) == recipe
    with pytest.warns(FutureWarning, match=f"`overrides` '{section}.{old}={value}'"):
        assert validate_recipe(apply_overrides({"model": dict(model)}, [f"{section}.{old}={value}"])) == recipe
    both = {"model": dict(model), section: {**raw[section], new: value}}
    with pytest.raises(CtxmtError, match=f"{section}.{old} is the old name of {section}.{new}, and both are given"):
        validate_recipe(both, "r.yaml")


@pytest.mark.parametrize("name, ours", [("context_prev", "src_context_sentences"),
                                        ("context_next", "src_next_sentences")])
def test_other_names_of_a_key_point_to_ctxmt_s(name, ours):
    """HanoiT's context sizes go by other names in descriptions of the paper; the error names ctxmt's."""
    with pytest.raises(CtxmtError, match=f"unknown key 'model.{name}' \\(ctxmt calls it '{ours}'\\)"):
        validate_recipe({"model": {"family": "hanoit", name: 1}}, "r.yaml")



BOOLEANS_AS_NUMBERS = [  # (--set, message fragment): lax pydantic would read true as 1 and false as 0
    ("train.threads=true", "train.threads: expected an integer"),
    ("train.lr=false", "train.lr: expected a number"),
    ("model.dropout=true", "model.dropout: expected a number"),
    ("train.betas=[true, 0.98]", "train.betas: expected a number"),
    ("data.max_tokens=false", "data.max_tokens: expected an integer"),
    ("model.shift=true", "model.shift: expected an integer"),
    ("model.pse={d_se: true}", "model.pse.d_se: expected an integer"),
    ("decode.beam=true", "decode.beam: expected an integer"),
]


@pytest.mark.parametrize("override, needle", BOOLEANS_AS_NUMBERS)
def test_a_boolean_is_never_a_number_and_the_error_names_the_set(override, needle, tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model:\n  family: concat\n  segment: learned\n")
    with pytest.raises(CtxmtError) as err:
        load_recipe(path, [override])
    assert str(err.value).startswith(f"`overrides` {override!r}: {needle}"), str(err.value)


def test_booleans_stay_booleans_and_numbers_numbers(tmp_path):
    recipe = validate_recipe({"model": {"family": "concat", "persistent": True, "dropout": 0, "shift": 3},
                              "train": {"threads": 2, "betas": [0, 0.98], "compile": False}})
    assert recipe.model.persistent is True and recipe.model.shift == 3 and recipe.train.betas == (0.0, 0.98)
    with pytest.raises(ValidationError, match="expected an integer, not true/false"):
        recipe.train.threads = True                                  # assignment is validated too
    with pytest.raises(CtxmtError, match=r"r\.yaml: model\.heads: expected an integer"):
        validate_recipe({"model": {"family": "hanoit", "heads": True}}, "r.yaml")


def test_an_error_in_a_value_the_file_gave_names_the_file_not_a_set(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("train:\n  lr: -1\n")
    with pytest.raises(CtxmtError, match=rf"^{path}: train\.lr: "):
        load_recipe(path, ["train.seed=3"])
    with pytest.raises(CtxmtError, match=rf"^{path} with `overrides` 'model.cd=0.5': model: cd < 1"):
        load_recipe(path, ["train.lr=1", "model.family=concat", "model.tgt_context_sentences=0", "model.cd=0.5"])
