"""``ctxmt export ctranslate2`` (ctxmt_cli.export.ct2_export, ct2_folder): what CTranslate2 cannot compute is
refused with one line naming the option and its value, and nothing is written; an existing folder needs --force;
the folder holds SentencePiece pieces as vocabularies, the SentencePiece model(s) and ctxmt.json; a CTranslate2
user translates it with the SentencePiece model alone and gets ctxmt's translation."""

from __future__ import annotations

import json

import ctranslate2
import pytest
import sentencepiece as spm

from ctxmt_cli import api
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.export.ct2_export import export_ctranslate2, position_table, refusal
from ctxmt_cli.export.ct2_folder import read_metadata
from ctxmt_cli.models.concat.config import ConcatConfig
from tests.unit.ct2_fixtures import CONCAT, SENTENCE, TINY, prepare_per_side, read_documents, write_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


@pytest.fixture(scope="module")
def documents(prepared) -> list[list[str]]:
    """Four documents of 3, 1, 5 and 4 sentences (several in one step, windows of every size)."""
    return read_documents(prepared)

REFUSED = {   # model section -> what the one line names
    "caching": ({"family": "caching", "src_context_sentences": 1}, "model.family=caching: CTranslate2's Transformer "
                "has no context memory"),
    "mbe": ({"family": "mbe"}, "model.family=mbe: "),
    "hanoit": ({"family": "hanoit", "encoder_layers": 2}, "model.family=hanoit: "),
    "shift": ({**CONCAT, "shift": 5}, "model.shift=5: CTranslate2 numbers positions along the whole sequence"),
    "shift-auto": ({**CONCAT, "shift": "auto"}, "model.shift={src: "),                 # resolved from the data
    "shift-per-window": ({**CONCAT, "shift": "per-window"}, "model.shift=per-window: "),
    "onehot": ({**CONCAT, "segment": "onehot"}, "model.segment=onehot: CTranslate2 has no segment embeddings; "
               "export a concat model trained with model.segment: null"),
    "sinusoidal": ({**CONCAT, "segment": "sinusoidal"}, "model.segment=sinusoidal: "),
    "learned": ({**CONCAT, "segment": "learned"}, "model.segment=learned: "),
    "pse": ({**CONCAT, "segment": "learned", "pse": {"d_se": 8}}, "model.pse.d_se=8: CTranslate2 has no "
            "position-segment embeddings"),
    "persistent": ({**CONCAT, "persistent": True}, "model.persistent=true: CTranslate2 adds position codes once"),
    "bilingual": ({**CONCAT, "tgt_context_sentences": 0, "bilingual": True, "target_context_from": "reference"},
                  "model.bilingual=true: a CTranslate2 model reads source windows alone"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_ctranslate2_cannot_compute_is_refused_and_nothing_written(name, prepared, tmp_path):
    model, line = REFUSED[name]
    ckpt = write_checkpoint(prepared, tmp_path / "m.pt", model)
    with pytest.raises(CtxmtError, match="^cannot export .*m.pt to CTranslate2: ") as err:
        export_ctranslate2(ckpt, tmp_path / "out")
    assert line in str(err.value) and "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]                # no folder, no temporary one


def test_what_only_weights_the_training_loss_or_leaves_positions_plain_is_exported():
    for fields in ({}, {"cd": 0.01}, {"shift": 0}, {"shift": {"src": 0, "tgt": 0}}, {"context_order": "random"},
                   {"normalize_before": False}, {"tgt_context_sentences": 0}, {"share_embeddings": "none"}):
        assert refusal(ConcatConfig(**TINY, **{**CONCAT, **fields})) is None, fields


def test_an_existing_folder_needs_force(prepared, tmp_path):
    ckpt = write_checkpoint(prepared, tmp_path / "m.pt", SENTENCE)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(CtxmtError, match="`out_dir` .*out already exists; pass `force` to overwrite it"):
        export_ctranslate2(ckpt, out)
    with pytest.raises(CtxmtError, match="`out_dir` .*out is not a model folder ctxmt exported"):
        export_ctranslate2(ckpt, out, force=True)                         # a user's folder: never deleted
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    (out / "mine.txt").unlink()
    export_ctranslate2(ckpt, out, force=True)                             # an empty one is simply used
    export_ctranslate2(ckpt, out, force=True)                             # and ctxmt's own export replaced
    assert (out / "model.bin").is_file() and (out / ".ctxmt-output.json").is_file()
    with pytest.raises(CtxmtError, match="holds the input"):                  # --force would delete it
        export_ctranslate2(ckpt, tmp_path, force=True)
    with pytest.raises(CtxmtError, match="m.pt is also an input"):
        export_ctranslate2(ckpt, tmp_path / "m.pt", force=True)
    with pytest.raises(CtxmtError, match="quantization='int4': choose one of float32, int8"):
        export_ctranslate2(ckpt, tmp_path / "q", quantization="int4")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt", "out"]


def test_the_folder_holds_sentencepiece_pieces_and_ctxmt_metadata(prepared, tmp_path):
    ckpt = write_checkpoint(prepared, tmp_path / "m.pt", CONCAT)
    meta = export_ctranslate2(ckpt, tmp_path / "out", quantization="int8")
    loaded = api.load(ckpt, device="cpu").loaded
    tok = loaded.tokenizer
    assert (tmp_path / "out" / "sentencepiece.model").read_bytes() == tok.to_state()["src_model"]
    vocab = json.loads((tmp_path / "out" / "shared_vocabulary.json").read_text(encoding="utf-8"))
    assert vocab[:5] == ["<blank>", "<unk>", "<s>", "</s>", "<brk>"] and vocab[tok.brk_id] == "<brk>"
    assert vocab[5:] == [tok.piece(i) for i in range(5, tok.src_vocab_size)]
    config = json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8"))
    assert config["add_source_eos"] is True and config["decoder_start_token"] == "<s>"
    assert meta == read_metadata(tmp_path / "out")
    assert meta["family"] == "concat" and meta["quantization"] == "int8" and meta["ctxmt_version"]
    assert (meta["model"]["src_context_sentences"], meta["model"]["tgt_context_sentences"]) == (2, 2)
    assert meta["window"] == {"max_window_tokens": loaded.recipe.data.max_window_tokens, "separator": "<brk>",
                              "positions": position_table(loaded.recipe)}
    assert meta["decode"] == loaded.recipe.decode.model_dump(mode="json")
    assert (meta["tokenizer"]["src_lang"], meta["tokenizer"]["tgt_lang"]) == ("src", "tgt")


def test_per_side_vocabularies_get_one_sentencepiece_model_each(prepared, tmp_path):
    ckpt = write_checkpoint(prepare_per_side(tmp_path, prepared.parent / "raw"), tmp_path / "m.pt", SENTENCE)
    export_ctranslate2(ckpt, tmp_path / "out")
    tok = api.load(ckpt, device="cpu").loaded.tokenizer
    state = tok.to_state()
    assert (tmp_path / "out" / "source.spm.model").read_bytes() == state["src_model"]
    assert (tmp_path / "out" / "target.spm.model").read_bytes() == state["tgt_model"]
    for side, name in (("src", "source"), ("tgt", "target")):
        vocab = json.loads((tmp_path / "out" / f"{name}_vocabulary.json").read_text(encoding="utf-8"))
        size = tok.src_vocab_size if side == "src" else tok.tgt_vocab_size
        assert vocab[5:] == [tok.piece(i, side) for i in range(5, size)]


def test_a_ctranslate2_user_translates_with_the_sentencepiece_model_alone(prepared, documents, tmp_path):
    ckpt = write_checkpoint(prepared, tmp_path / "m.pt", SENTENCE)
    export_ctranslate2(ckpt, tmp_path / "out")
    ours = [s for d in api.load(ckpt, device="cpu").translate(documents, beam=1) for s in d.translations]
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "out" / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(tmp_path / "out"), intra_threads=1)
    pieces = [sp.encode(s, out_type=str) for d in documents for s in d]
    # ctxmt's decoding: at most max_len_a * n + max_len_b tokens (1.0, 3 here); <brk>, <s>, <blank> never generated
    theirs = [sp.decode(r.hypotheses[0]) for p in pieces for r in translator.translate_batch(
        [p], beam_size=1, max_decoding_length=len(p) + 3, suppress_sequences=[["<brk>"], ["<s>"], ["<blank>"]])]
    assert theirs == ours
