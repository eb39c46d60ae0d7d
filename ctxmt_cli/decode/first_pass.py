"""First-pass streams: one side of a prepared split translated with a checkpoint and stored beside the split.

``ctxmt first-pass`` translates a split's source side (``--from src``, the default: a target-language stream
that can stand in for the split's target side, e.g. as DocRepair's or a two-pass model's first pass), its
target side with a reverse model (``--from tgt``), or another stream of the split (``--from NAME``). Documents
go through the document translator (:func:`~ctxmt_cli.decode.translator.translate_documents`, several
documents in parallel, each checkpoint with its own context) in chunks; after each chunk the translations
are appended to the stream (:class:`~ctxmt_cli.data.streams.StreamWriter`), so an interrupted run resumes at
the first untranslated chunk. The text the model writes is stored as is and encoded with the prepared
data's own SentencePiece model, exactly as ``ctxmt prepare`` encodes a corpus.

``ctxmt prepare docrepair`` (:func:`round_trip_corpus`) chains two of them — the target side through the
reverse model (beam search), that stream through the forward model (sampled by default, seeded per chunk of
documents, as Voita et al. 2019's public configuration; ``round_trip: beam`` for 1-best) — and builds the repair
corpus
(:mod:`ctxmt_cli.data.docrepair`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ctxmt_cli.data.docrepair import GROUP_SIZE, build_repair_corpus, group_bounds, reversed_tokenizer
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.data.streams import StreamWriter, check_stream_name
from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.errors import CtxmtError, OptionError
from ctxmt_cli.paths import check_not_input

OTHER = {"src": "tgt", "tgt": "src"}
#: how ``ctxmt prepare docrepair`` translates the back-translations forward: sampled (Voita et al. 2019's public
#: configuration, the default) or with beam search (1-best, as Morishita et al. 2021 describe their baseline)
ROUND_TRIPS = ("sample", "beam")


@dataclass(frozen=True)
class PassSettings:
    """How a stream is decoded: the checkpoint's recipe values unless given; ``chunk_docs`` documents per append."""

    beam: int | None = None
    batch_docs: int | None = None
    chunk_docs: int = 1024
    force: bool = False
    reuse: bool = False            # keep a finished stream written with the same plan (prepare docrepair)
    sample_seed: int | None = None   # sample the translations (seeded per chunk of documents) instead of beam


def checkpoint_identity(path: Path) -> dict:
    """What identifies a checkpoint file in a stream's plan: its resolved path, size and modification time."""
    path = Path(path).resolve()
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def check_direction(loaded, prepared: PreparedData, side_in: str, checkpoint: Path) -> None:
    """Refuse a checkpoint that does not translate ``side_in`` of ``prepared`` into the other side with the
    prepared data's vocabulary (a reverse model: the vocabulary with its sides swapped)."""
    tok = prepared.tokenizer if side_in == "src" else reversed_tokenizer(prepared.tokenizer)
    want = (prepared.meta[f"{side_in}_lang"], prepared.meta[f"{OTHER[side_in]}_lang"])
    got = (loaded.meta.get("src_lang"), loaded.meta.get("tgt_lang"))
    if got != want:
        raise CtxmtError(f"{checkpoint} translates {got[0]} → {got[1]}, but translating the {side_in} side of "
                         f"{prepared.dir} needs a {want[0]} → {want[1]} model")
    if loaded.tokenizer.fingerprint() != tok.fingerprint():
        hint = ("use the prepared data the model was trained on (or retrain)" if side_in == "src" else
                f"train the reverse model on `ctxmt prepare reverse --data {prepared.dir}`, which keeps the vocabulary")
        raise CtxmtError(f"{checkpoint} was trained with another vocabulary than {prepared.dir}; {hint}")


def _input(prepared: PreparedData, split: str, source: str):
    """(side of the input's ids, ids of sentence i, plan entry) of ``source``: a split side or a stream."""
    store = prepared.split(split)
    if source in ("src", "tgt"):
        return source, (store.src if source == "src" else store.tgt), {"input": source}
    stream = prepared.stream(split, check_stream_name(source))
    return stream.side, stream.sentence, {"input": source, "input_plan": stream.info.get("plan")}


def _decode_settings(loaded, settings: PassSettings) -> DecodeSettings:
    """The checkpoint's recipe settings, with the beam and documents per batch where given, sampling if asked."""
    dec = DecodeSettings.from_recipe(loaded.recipe, beam=settings.beam, batch_docs=settings.batch_docs)
    return replace(dec, sample_seed=settings.sample_seed)


def chunk_seed(seed: int, start: int) -> int:
    """The sampling seed of the chunk of documents beginning at ``start``: a resumed stream samples its remaining
    chunks exactly as an uninterrupted run would."""
    return int(np.random.SeedSequence([seed, start]).generate_state(1)[0])


def _plan_record(dec: DecodeSettings) -> dict:
    """What a stream's plan records of its decoding (a finished stream is reused only under the same plan)."""
    return {"beam": dec.beam, "sample_seed": dec.sample_seed, "lenpen": dec.lenpen, "max_len_a": dec.max_len_a,
            "max_len_b": dec.max_len_b,
            "target_context": dec.target_mode, "src_context": dec.src_context_sentences,
            "tgt_context": dec.tgt_context_sentences, "max_window_tokens": dec.max_window_tokens}


def write_first_pass(prepared: PreparedData, split: str, name: str, loaded, checkpoint: Path, *, source: str = "src",
                     settings: PassSettings = PassSettings(), say: Callable[[str], None] = lambda _: None,
                     progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Translate ``source`` of ``split`` with ``loaded`` (the model of ``checkpoint``) into stream ``name``;
    returns the stream's ``.stream.json`` record. Resumes an unfinished stream of the same plan.

    ``say(line)`` receives notes; ``progress(task, done, total)`` the documents done (first at the start, so a
    resumed run's rate counts only its own documents; default: a ``say`` line per chunk)."""
    side_in, read, origin = _checked_input(prepared, split, name, loaded, checkpoint, source)
    side_out, dec = OTHER[side_in], _decode_settings(loaded, settings)
    plan = {"split": split, **origin, "side": side_out, "checkpoint": checkpoint_identity(checkpoint),
            "decode": _plan_record(dec)}
    writer = StreamWriter(prepared.dir, split, name, prepared.meta["dtype"], plan)
    for path in writer.files():                      # --force deletes them: never the checkpoint read
        check_not_input(path, [checkpoint], f"stream {name!r} file")
    done = writer.start(force=settings.force, reuse=settings.reuse)
    if done is None:
        say(f"{split}.{name}: reusing the finished stream (same checkpoint and settings)")
        return writer.finished_info()
    docs = list(prepared.split(split).documents())
    if done:
        say(f"{split}.{name}: resuming after {done} of {len(docs)} documents")
    if progress is None:
        def progress(task: str, n: int, total: int) -> None:
            if n > done:
                say(f"{task}: {n}/{total} documents")

    progress(f"{split}.{name}", done, len(docs))
    to_text = prepared.tokenizer.decode_src if side_in == "src" else prepared.tokenizer.decode_tgt
    for start in range(done, len(docs), settings.chunk_docs):
        chunk = docs[start:start + settings.chunk_docs]
        texts = [[to_text(read(i).tolist()) for i in range(a, b)] for a, b in chunk]
        chunk_dec = dec if dec.sample_seed is None else replace(dec, sample_seed=chunk_seed(dec.sample_seed, start))
        _append_translations(writer, loaded, texts, chunk_dec, prepared.tokenizer, side_out)
        progress(f"{split}.{name}", start + len(chunk), len(docs))
    language = prepared.meta[f"{side_out}_lang"]
    return writer.finish({"side": side_out, "language": language, "input": source, "checkpoint": str(checkpoint)})


def _checked_input(prepared: PreparedData, split: str, name: str, loaded, checkpoint: Path, source: str) -> tuple:
    """``source``'s side, reader and origin record (:func:`_input`), once the stream name, the direction and the
    model (one reading no first pass itself) are checked."""
    from ctxmt_cli.models.families import inputs_of

    check_stream_name(name)
    if source == name:
        raise OptionError("source", source, "it names the stream being written; translate another side or stream")
    side_in, read, origin = _input(prepared, split, source)
    check_direction(loaded, prepared, side_in, checkpoint)
    if inputs_of(loaded.recipe.model).target_concat:
        raise CtxmtError(f"{checkpoint} is a {loaded.recipe.model.family} model reading target context, which "
                         "itself reads a first pass; write the stream with a sentence-level checkpoint")
    return side_in, read, origin


def _append_translations(writer: StreamWriter, loaded, texts: list[list[str]], dec: DecodeSettings, tok,
                         side_out: str) -> None:
    """Translate the documents ``texts`` and append them to the stream: text and token ids (of ``side_out``)."""
    from ctxmt_cli.decode.translator import translate_documents

    outputs = translate_documents(loaded.model, loaded.tokenizer, texts, dec)
    flat = tok.encode_batch([line for doc in outputs for line in doc], side_out)
    ids, k = [], 0
    for doc in outputs:
        ids.append(flat[k:k + len(doc)])
        k += len(doc)
    writer.append(ids, outputs)


@dataclass
class RoundTrip:
    """``ctxmt prepare docrepair``'s inputs: the prepared data, splits, the two models and the grouping."""

    data: Path
    out: Path
    reverse: Path
    forward: Path
    splits: tuple[str, ...] = ("train", "valid")
    group_size: int = GROUP_SIZE
    stride: int | None = None
    prefix: str = "docrepair"
    device: str = "cpu"
    round_trip: str = "sample"     # the forward pass: sampled (Voita et al.'s public configuration) or beam
    seed: int = 1                  # the sampling seed


def round_trip_corpus(job: RoundTrip, settings: PassSettings, say: Callable[[str], None] = lambda _: None,
                      progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Round-trip translate the target side of every split (reverse model, then forward model) into streams
    ``{prefix}-back`` and ``{prefix}-rt`` beside the splits, then write the repair corpus to ``job.out``.

    Every check (splits, output, both checkpoints' directions and vocabularies) runs before any translation;
    finished streams of the same plan are reused, so a re-run after an interruption translates only what is
    missing (``settings.force`` translates everything again and replaces ``job.out``).
    """
    from ctxmt_cli.data.prepare import check_prepare_output
    from ctxmt_cli.models.loading import load_model, torch_device

    group_bounds(job.group_size, job.group_size, job.stride)             # size/stride checked before any work
    if job.round_trip not in ROUND_TRIPS:
        raise OptionError("round_trip", job.round_trip, f"choose one of {', '.join(ROUND_TRIPS)}")
    check_prepare_output(Path(job.out), settings.force, [job.data, job.reverse, job.forward])
    prepared = PreparedData(Path(job.data))
    for split in job.splits:
        prepared.split(split)
    device = torch_device(job.device)
    models = {}
    for role, path, side_in in (("reverse", job.reverse, "tgt"), ("forward", job.forward, "src")):
        models[role] = load_model(path, device=device)
        check_direction(models[role], prepared, side_in, path)
    back, rt = f"{check_stream_name(job.prefix)}-back", f"{job.prefix}-rt"
    records = {}
    for split in job.splits:
        first = write_first_pass(prepared, split, back, models["reverse"], job.reverse, source="tgt",
                                 settings=_reusing(settings), say=say, progress=progress)
        forward = replace(_reusing(settings), sample_seed=job.seed if job.round_trip == "sample" else None)
        second = write_first_pass(prepared, split, rt, models["forward"], job.forward, source=back,
                                  settings=forward, say=say, progress=progress)
        records[split] = {"back": first["plan"], "round_trip": second["plan"]}
    say(f"writing the repair corpus to {job.out}")
    return build_repair_corpus(prepared, {split: rt for split in job.splits}, Path(job.out), group_size=job.group_size,
                               stride=job.stride, force=settings.force, provenance={"streams": records})


def _reusing(settings: PassSettings) -> PassSettings:
    return replace(settings, reuse=not settings.force)
