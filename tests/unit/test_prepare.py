"""The prepare pipeline: every format end to end, atomicity, refusal, truncation, meta."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ctxmt_cli.data.formats import iter_parallel_documents
from ctxmt_cli.data.prepare import PrepareSpec, PrepareWarning, SplitInput, prepare_corpus, resolve_split_input
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.data.tokenize import Tokenizer
from ctxmt_cli.errors import CtxmtError

FIX = Path(__file__).parents[1] / "fixtures" / "corpora"
CASES = {  # format -> (prefix or file, src_lang, tgt_lang)
    "text": (FIX / "text/news", "en", "de"),
    "jsonl": (FIX / "jsonl/corpus.jsonl", "en", "fr"),
    "iwslt-tags": (FIX / "iwslt/train.tags.en-de", "en", "de"),
    "iwslt-xml": (FIX / "iwslt/IWSLT17.TED.dev2010.en-de", "en", "de"),
    "voita": (FIX / "voita/train", "en", "ru"),
    "maruf": (FIX / "maruf/concatenated_en2de_train", "en", "de"),    # Maruf et al.'s PREFIX_L.txt names
}


def spec_for(fmt: str, out: Path, **kw) -> PrepareSpec:
    path, s, t = CASES[fmt]
    splits = kw.pop("splits", None) or {"train": resolve_split_input(fmt, path, s, t)}
    return PrepareSpec(fmt=fmt, splits=splits, src_lang=s, tgt_lang=t, out=out,
                       vocab_size=kw.pop("vocab_size", 300), **kw)


def copy_text_corpus(tmp_path: Path, name: str = "c") -> Path:
    for lang in ("en", "de"):
        shutil.copy(FIX / f"text/news.{lang}", tmp_path / f"{name}.{lang}")
    return tmp_path / name


def test_resolve_split_input(tmp_path):
    p = tmp_path / "train"
    assert resolve_split_input("text", p, "en", "de").src == Path(f"{p}.en")
    assert resolve_split_input("text", p, "en", "de").docids is None
    Path(f"{p}.docids").write_text("a\n")
    assert resolve_split_input("text", p, "en", "de").docids == Path(f"{p}.docids")
    assert resolve_split_input("voita", p, "en", "ru").tgt == Path(f"{p}.ru")
    assert resolve_split_input("iwslt-xml", p, "en", "de").tgt == Path(f"{p}.de.xml")
    j = resolve_split_input("jsonl", p, "en", "de")
    assert j.src == j.tgt == p


def test_resolve_maruf_names(tmp_path):
    p = tmp_path / "concatenated_en2de_dev"
    dotted = SplitInput(Path(f"{p}.en"), Path(f"{p}.de"))
    assert resolve_split_input("maruf", p, "en", "de") == dotted          # nothing there: the usual names
    Path(f"{p}_de.txt").write_text("<d>\n")
    own = resolve_split_input("maruf", p, "en", "de")
    assert own == SplitInput(Path(f"{p}_en.txt"), Path(f"{p}_de.txt"))   # a missing _en.txt is then named
    with pytest.raises(CtxmtError, match=r"--train: source file not found: .*concatenated_en2de_dev_en\.txt; "
                                         r"for maruf, --train PATH means PATH\.en and PATH\.de, else .*PATH_en\.txt"):
        prepare_corpus(PrepareSpec(fmt="maruf", splits={"train": own}, src_lang="en", tgt_lang="de",
                                   out=tmp_path / "out"))
    Path(f"{p}.de").write_text("<d>\n")
    assert resolve_split_input("maruf", p, "en", "de") == dotted          # PATH.L first, as the other formats


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_every_format_round_trips(tmp_path, fmt):
    out = tmp_path / "prep"
    meta = prepare_corpus(spec_for(fmt, out))
    inp = resolve_split_input(fmt, *CASES[fmt])
    docs = list(iter_parallel_documents(fmt, inp.src, inp.tgt, inp.docids))
    data = PreparedData(out)
    split = data.split("train")
    assert meta["splits"]["train"]["documents"] == split.n_documents == len(docs)
    assert split.n_sentences == sum(len(d) for d in docs)
    tok = data.tokenizer
    for (start, end), doc in zip(split.documents(), docs, strict=True):
        assert end - start == len(doc)
        for i, (src, tgt) in zip(range(start, end), doc, strict=True):
            assert split.src(i).tolist() == tok.encode_src(src)
            # SentencePiece's ids hold no runs of spaces (an IWSLT segment may: it is kept as published)
            assert tok.decode_tgt(split.tgt(i)) == " ".join(tgt.split())


def test_layout_and_meta(tmp_path):
    out = tmp_path / "prep"
    prefix = copy_text_corpus(tmp_path)
    splits = {name: resolve_split_input("text", prefix, "en", "de") for name in ("train", "valid")}
    meta = prepare_corpus(spec_for("text", out, splits=splits))
    names = {p.name for p in out.iterdir()}
    assert names == {".ctxmt-output.json", "meta.json", "spm.model", "spm.vocab"} | {
        f"{s}.{part}" for s in ("train", "valid")
        for part in ("src.bin", "tgt.bin", "src.idx", "tgt.idx", "docs")} | {"valid.ref.txt"}
    assert meta == PreparedData(out).meta
    assert meta["format_version"] == 1 and meta["joint"] is True and meta["moses"] is False
    assert meta["spm"] == {"src": "spm.model", "tgt": "spm.model"}
    assert meta["specials"] == {"pad": 0, "unk": 1, "bos": 2, "eos": 3, "brk": 4}
    assert meta["dtype"] == "uint16" and meta["truncated"] == {"train": 0, "valid": 0}
    assert list(meta["splits"]) == ["train", "valid"]
    assert meta["splits"]["train"]["sentences"] == 6 and meta["splits"]["train"]["documents"] == 3
    assert meta["source"]["format"] == "text"
    assert meta["tokenizer_fingerprint"] == Tokenizer.load(out).fingerprint()
    assert not any(p.name.startswith(".prep") for p in tmp_path.iterdir())


def test_evaluation_splits_keep_their_raw_references(tmp_path):
    """BLEU scores the references as the corpus wrote them: characters the vocabulary cannot spell and spacing
    detokenization cannot restore survive, Moses-tokenized for tokenized BLEU on a --moses split."""
    from ctxmt_cli.evaluate.translation import split_documents

    prefix = copy_text_corpus(tmp_path)
    odd = "Der Preis stieg um 5 °C  – «laut» Kritikern."          # °, «», a double space: not in the vocabulary
    lines = Path(f"{prefix}.de").read_text(encoding="utf-8").split("\n")
    lines[1] = odd
    Path(f"{prefix}.de").write_text("\n".join(lines), encoding="utf-8")
    splits = {name: resolve_split_input("text", prefix, "en", "de") for name in ("train", "test")}
    out = tmp_path / "prep"
    prepare_corpus(spec_for("text", out, splits=splits, moses=True))
    data = PreparedData(out)
    raw = [x for x in lines if x.strip()]
    _, refs = split_documents(data, "test")
    assert [s for doc in refs for s in doc] == raw
    assert data.tokenizer.decode_tgt(data.split("test").tgt(1).tolist()) != odd   # what ids alone would give
    _, tokenized = split_documents(data, "test", tokenized=True)
    assert [s for doc in tokenized for s in doc] == [data.tokenizer.pretokenize(x, "tgt") for x in raw]
    assert not (out / "train.ref.txt").exists()
    (out / "test.ref.txt").write_text("one line\n", encoding="utf-8")
    with pytest.raises(CtxmtError, match="re-run `ctxmt prepare --force`"):
        split_documents(data, "test")


def test_mean_lengths_match_recomputation(tmp_path):
    out = tmp_path / "prep"
    meta = prepare_corpus(spec_for("text", out, moses=True))
    tok = Tokenizer.load(out)
    pairs = [p for d in iter_parallel_documents("text", FIX / "text/news.en",
                                                FIX / "text/news.de") for p in d]
    expect_src = np.mean([len(tok.encode_src(s)) for s, _ in pairs])
    expect_tgt = np.mean([len(tok.encode_tgt(t)) for _, t in pairs])
    assert meta["mean_sentence_length"]["src"] == pytest.approx(expect_src)
    assert meta["mean_sentence_length"]["tgt"] == pytest.approx(expect_tgt)
    split = PreparedData(out).split("train")
    assert meta["mean_sentence_length"]["src"] == pytest.approx(split.src_lengths.mean())


def test_separate_models_with_moses(tmp_path):
    out = tmp_path / "prep"
    meta = prepare_corpus(spec_for("text", out, joint=False, moses=True))
    assert meta["spm"] == {"src": "spm.src.model", "tgt": "spm.tgt.model"}
    assert (out / "spm.src.model").is_file() and (out / "spm.tgt.model").is_file()
    assert not (out / "spm.model").exists()
    data = PreparedData(out)
    tok = data.tokenizer
    assert not tok.joint and tok.moses and tok.brk_id == 4
    split = data.split("train")
    assert tok.decode_src(split.src(0)) == "The committee met on Monday."
    assert tok.decode_tgt(split.tgt(2)) == "Kritiker sagen, er sei zu klein."


def test_refuses_existing_dir_and_force_replaces_only_a_prepared_dataset(tmp_path):
    out = tmp_path / "prep"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    with pytest.raises(CtxmtError, match=r"prep already exists; pass `force` to overwrite"):
        prepare_corpus(spec_for("text", out))
    with pytest.raises(CtxmtError, match=r"prep is not a prepared dataset \(no .ctxmt-output.json listing the files "
                                         r"ctxmt wrote\)"):
        prepare_corpus(spec_for("text", out, force=True))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert (out / "keep.txt").read_text() == "precious"
    prepared = tmp_path / "prepared"
    prepare_corpus(spec_for("text", prepared))
    prepare_corpus(spec_for("text", prepared, force=True))               # a prepared dataset is replaced whole
    (prepared / "train.src.bin").write_bytes(b"edited since")             # a file changed since is not ctxmt's
    with pytest.raises(CtxmtError, match=r"holds .*train.src.bin, which has changed since ctxmt wrote it"):
        prepare_corpus(spec_for("text", prepared, force=True))
    assert (prepared / "train.src.bin").read_bytes() == b"edited since"
    (prepared / "train.src.bin").unlink()                                 # one it wrote and that is gone: fine
    prepare_corpus(spec_for("text", prepared, force=True))
    assert (prepared / "train.src.bin").stat().st_size > 0
    (prepared / "notes.bin").write_bytes(b"a user's file")              # anything ctxmt did not write stops it
    with pytest.raises(CtxmtError, match=r"holds .*notes.bin, which is not a file ctxmt wrote"):
        prepare_corpus(spec_for("text", prepared, force=True))
    assert (prepared / "notes.bin").read_bytes() == b"a user's file" and (prepared / "meta.json").is_file()
    (prepared / "notes.bin").unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prep", "prepared"]


def test_failure_midway_leaves_nothing(tmp_path):
    prefix = copy_text_corpus(tmp_path)
    bad = copy_text_corpus(tmp_path, "bad")
    Path(f"{bad}.de").write_bytes(Path(f"{bad}.de").read_bytes().replace("ü".encode(), b"\xfc"))
    splits = {"train": resolve_split_input("text", prefix, "en", "de"),
              "valid": resolve_split_input("text", bad, "en", "de")}
    out = tmp_path / "prep"
    with pytest.raises(CtxmtError, match=r"bad\.de:5: not valid UTF-8"):
        prepare_corpus(spec_for("text", out, splits=splits))
    assert not out.exists()
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
    # with --force an existing output survives the failure unchanged
    out.mkdir()
    (out / "keep.txt").write_text("old")
    with pytest.raises(CtxmtError):
        prepare_corpus(spec_for("text", out, splits=splits, force=True))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_inputs_validated_before_writing(tmp_path):
    prefix = copy_text_corpus(tmp_path)
    out = tmp_path / "sub" / "prep"
    missing = {"train": resolve_split_input("text", prefix, "en", "de"),
               "valid": resolve_split_input("text", tmp_path / "nope", "en", "de")}
    with pytest.raises(CtxmtError, match=r"--valid: source file not found: .*nope\.en"):
        prepare_corpus(spec_for("text", out, splits=missing))
    with open(f"{prefix}.de", "a", encoding="utf-8") as f:
        f.write("Noch eine Zeile.\n")
    with pytest.raises(CtxmtError, match=r"--train: line counts differ .*has 8, .*has 9 lines"):
        prepare_corpus(spec_for("text", out, splits={"train": missing["train"]}))
    assert not (tmp_path / "sub").exists()
    with pytest.raises(CtxmtError, match="no train split"):
        prepare_corpus(spec_for("text", out, splits={"valid": missing["train"]}))


def test_truncation_warns_once_per_split(tmp_path):
    prefix = copy_text_corpus(tmp_path)
    splits = {name: resolve_split_input("text", prefix, "en", "de") for name in ("train", "test")}
    out = tmp_path / "prep"
    with pytest.warns(PrepareWarning) as record:
        meta = prepare_corpus(spec_for("text", out, splits=splits, max_sentence_tokens=4))
    messages = [str(w.message) for w in record if issubclass(w.category, PrepareWarning)]
    assert len(messages) == 2
    assert messages[0].startswith("train: 6 sentence pair(s) longer than 4 tokens")
    assert f"first at {prefix}.en:1" in messages[0] and messages[1].startswith("test: 6")
    assert meta["truncated"] == {"train": 6, "test": 6}
    split = PreparedData(out).split("train")
    assert split.src_lengths.max() <= 4 and split.tgt_lengths.max() <= 4
    seen: list[str] = []
    prepare_corpus(spec_for("text", tmp_path / "p2", max_sentence_tokens=4), warn=seen.append)
    assert len(seen) == 1


def test_extra_user_symbols_survive_moses(tmp_path):
    out = tmp_path / "prep"
    meta = prepare_corpus(spec_for("text", out, moses=True, user_symbols=("<brk>", "<mask>")))
    assert meta["user_symbols"] == ["<brk>", "<mask>"]
    tok = PreparedData(out).tokenizer
    assert tok.encode_src("It <mask> approved <brk> it.").count(5) == 1
    with pytest.raises(CtxmtError, match="user_symbols must start with <brk>"):
        prepare_corpus(spec_for("text", tmp_path / "p2", user_symbols=("<mask>",)))


@pytest.mark.slow
def test_memory_stays_bounded_for_a_million_pairs(tmp_path):
    n = 1_000_000
    words = np.array("the a cat dog sat ran on in red big mat house".split())
    rng = np.random.default_rng(0)
    with open(tmp_path / "big.en", "w") as fe, open(tmp_path / "big.de", "w") as fd:
        for start in range(0, n, 10_000):
            idx = rng.integers(0, len(words), (10_000, 4))
            lines = [" ".join(row) for row in words[idx]]
            for k, line in enumerate(lines):
                sep = "\n\n" if (start + k) % 10 == 9 else "\n"
                fe.write(line + sep)
                fd.write(line.upper() + sep)
    spec = PrepareSpec(fmt="text", splits={"train": resolve_split_input(
        "text", tmp_path / "big", "en", "de")}, src_lang="en", tgt_lang="de",
        out=tmp_path / "prep", vocab_size=200)
    tracemalloc.start()
    try:
        meta = prepare_corpus(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    arrays = sum(p.stat().st_size for p in (tmp_path / "prep").glob("train.*"))
    assert meta["splits"]["train"]["sentences"] == n
    assert peak < 1.5 * arrays, f"peak {peak / 2**20:.1f} MiB vs arrays {arrays / 2**20:.1f} MiB"
