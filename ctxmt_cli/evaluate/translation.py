"""``ctxmt evaluate``: translate a prepared split (or read hypothesis files) and score it with sacrebleu.

Two ways in: ``--checkpoint CKPT [--checkpoint CKPT2]`` translates a prepared split as
documents through each family's document translator (sources, references and document
boundaries come from the split); ``--hyp H [--hyp H2] --ref R`` scores existing files
whose documents are separated by blank lines (or given by ``--docids FILE``). The first
system is the baseline of the significance tests. Every check on the command line and
the inputs runs before any decoding, and ``--out`` is written last, atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.data.store import REFERENCE_FILE
from ctxmt_cli.errors import CtxmtError, OptionError, named, option
from ctxmt_cli.evaluate.sweeps import draw_group_sweep, parse_contexts, parse_group_sentences, sweep_table
from ctxmt_cli.evaluate.text_files import (
    blank_lines,
    by_blank_lines,
    by_ids,
    check_aligned,
    read_lines,
    strip_trailing_blanks,
)
from ctxmt_cli.logs import CountLog
from ctxmt_cli.outputs import write_json
from ctxmt_cli.paths import check_output_file

#: seconds between two progress lines of ``evaluate --checkpoint`` (plain and json; the first and last always print)
PROGRESS_EVERY = 60.0


@dataclass
class EvalRequest:
    """What ``ctxmt evaluate`` was asked to do (the CLI's options, one field each)."""

    checkpoints: list[Path] = field(default_factory=list)
    split: str = "test"
    data: Path | None = None
    hyps: list[Path] = field(default_factory=list)
    ref: Path | None = None
    src: Path | None = None
    docids: Path | None = None
    lowercase: bool = False
    tokenize: str = "13a"
    document_level: bool = False
    significance: str | None = None
    samples: int | None = None
    seed: int = 12345
    comet: Path | None = None
    out: str | Path | None = None        # as given: a trailing slash names a folder, refused
    force: bool = False                     # replace an existing --out (and its PNG)
    beam: int | None = None              # decoding options (None: the checkpoint's recipe)
    lenpen: float | None = None
    target_mode: str | None = None
    warmup_sentences: int | None = None
    device: str = "cpu"
    context: str | None = None           # "K[,K...]": translate once per context size K
    group_sentences: str | None = None   # "N[,N...|all]": mbe, translate once per group size N
    first_pass: Path | None = None       # a model reading target context: the checkpoint whose translations it reads
    log_format: str | None = None        # --checkpoint: progress of each translation on stderr (None: by the stream)


@dataclass
class Corpus:
    """Aligned documents: each system's hypotheses, the references, the sources when known."""

    systems: dict[str, list[list[str]]]
    references: list[list[str]]
    sources: list[list[str]] | None
    has_documents: bool
    sweep_of: dict[str, tuple[str, str]] = field(default_factory=dict)   # system -> (checkpoint name, K or N)
    moses_tokenized: bool = False       # hypotheses and references are Moses-tokenized text
    decoding: dict[str, dict] = field(default_factory=dict)   # system -> its settings and counters (translated)


def _flat(documents) -> list[str]:
    return [sentence for doc in documents for sentence in doc]


# ---- translating a prepared split ---------------------------------------------------------------

def check_vocabulary(loaded, prepared, checkpoint) -> None:
    """Refuse a prepared directory whose vocabulary is not the checkpoint's."""
    if loaded.tokenizer.fingerprint() != prepared.tokenizer.fingerprint():
        raise CtxmtError(f"{checkpoint} was trained with another vocabulary than {prepared.dir}; "
                         "use the prepared data the model was trained on (or retrain)")


def split_documents(prepared, split: str, tokenized: bool = False):
    """Source documents and reference documents of a prepared split.

    References are the raw target text ``ctxmt prepare`` kept for the split (``REFERENCE_FILE``), as the
    corpus wrote it; ``tokenized``: Moses-tokenized, for tokenized BLEU on a ``--moses`` split. A split
    prepared without that file (the train split, or an older ctxmt) falls back to decoding its token ids,
    which loses what the vocabulary cannot spell."""
    store = prepared.split(split)
    tok = prepared.tokenizer
    ref_tok = tok.without_detokenizer() if tokenized else tok
    raw = _raw_references(prepared, split, store.n_sentences)
    sources, references = [], []
    for start, end in store.documents():
        sources.append([tok.decode_src(store.src(i).tolist()) for i in range(start, end)])
        if raw is None:
            references.append([ref_tok.decode_tgt(store.tgt(i).tolist()) for i in range(start, end)])
        else:
            references.append([tok.pretokenize(raw[i], "tgt") if tokenized else raw[i] for i in range(start, end)])
    return sources, references


def _raw_references(prepared, split: str, n: int) -> list[str] | None:
    """The split's raw target lines (None when it has none); a file that does not match the split is refused."""
    path = Path(prepared.dir) / REFERENCE_FILE.format(split=split)
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    if len(lines) != n:
        raise CtxmtError(f"{path} has {len(lines)} lines for {n} sentences of split {split!r}; "
                         f"re-run `ctxmt prepare --force`")
    return lines


def translate_sources(loaded, sources: list[list[str]], *, context: int | None = None,
                      group_sentences: int | None = None, tokenized: bool = False,
                      first_pass: list[list] | None = None, progress=None, stats=None,
                      **decoding) -> list[list[str]]:
    """Translate source documents with a loaded checkpoint and its recipe's decoding settings
    (``decoding``: ``beam``, ``lenpen``, ``target_mode``, the user's instead where not None; ``context`` K: K
    context sentences per side instead of the model's own, and K next sentences for a model that reads them;
    ``group_sentences`` N: mbe's groups of N sentences instead of whole documents; ``tokenized``: the
    Moses-tokenized output, not detokenized; ``first_pass``: a bilingual model's; ``progress(stats)``: called after
    every decoding step; ``stats``: a :class:`~ctxmt_cli.decode.settings.TranslationStats` to read afterwards)."""
    from ctxmt_cli.decode.settings import DecodeSettings
    from ctxmt_cli.decode.translator import translate_documents

    settings = DecodeSettings.from_recipe(loaded.recipe, context=context, group_sentences=group_sentences,
                                          **decoding)
    tokenizer = loaded.tokenizer.without_detokenizer() if tokenized else loaded.tokenizer
    return translate_documents(loaded.model, tokenizer, sources, settings, first_pass=first_pass, progress=progress,
                               stats=stats)


def translate_split(loaded, prepared, split: str, beam: int | None = None):
    """Translate a prepared split as documents; returns (hypothesis lines, reference lines)."""
    sources, references = split_documents(prepared, split)
    return _flat(translate_sources(loaded, sources, beam=beam)), _flat(references)



def _unique_names(paths) -> list[str]:
    # the same file given twice must still be two systems in the tables and the JSON
    names: list[str] = []
    for path in paths:
        name, k = str(path), 2
        while name in names:
            name, k = f"{path}#{k}", k + 1
        names.append(name)
    return names


def _translate_corpus(req: EvalRequest) -> Corpus:
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.decode.bilingual import split_first_passes
    from ctxmt_cli.models.families import inputs_of
    from ctxmt_cli.models.loading import load_model, torch_device

    device = torch_device(req.device)
    models = [load_model(ckpt, device=device) for ckpt in req.checkpoints]
    prepared = PreparedData(Path(req.data or models[0].recipe.data.path))
    prepared.split(req.split)  # an unknown split fails here, listing the available ones, before decoding
    for ckpt, loaded in zip(req.checkpoints, models, strict=True):
        check_vocabulary(loaded, prepared, ckpt)
    contexts, groups = parse_contexts(req.context), parse_group_sentences(req.group_sentences)
    names = _unique_names(req.checkpoints)
    for ckpt, loaded in zip(req.checkpoints, models, strict=True):    # a refused setting fails here, before decoding
        inputs = inputs_of(loaded.recipe.model)
        for k in contexts:
            inputs.context(k)
        try:
            inputs.check_groups(req.group_sentences)
        except OptionError as err:
            raise OptionError(err.option, err.value, f"{ckpt}: {err.problem}") from None
    # tokenized BLEU on a --moses split scores the Moses tokens the model writes, as the papers do
    tokenized = req.tokenize == "none" and prepared.tokenizer.moses
    sources, references = split_documents(prepared, req.split, tokenized)
    # a bilingual model's target context: --first-pass's translations, or the split's first-pass stream
    firsts = split_first_passes(models, req.checkpoints, prepared, req.split, sources, req.first_pass, req.device)
    # sentences translated per system on stderr (stdout keeps the scores)
    corpus = Corpus({}, references, sources, has_documents=True, moses_tokenized=tokenized)
    log = CountLog.on_stderr(req.log_format, "sentences", PROGRESS_EVERY)
    try:
        for name, loaded, first in zip(names, models, firsts, strict=True):
            for k in contexts:
                for n in groups:
                    label = None if k is None and req.group_sentences is None else \
                        (f"K={k}" if k is not None else f"N={'all' if n is None else n}")
                    _translate_system(corpus, req, log, (loaded, first, tokenized), name if label is None else
                                      f"{name} {label}", (k, n))
                    if label is not None:
                        corpus.sweep_of[f"{name} {label}"] = (name, label.split("=", 1)[1])
    finally:
        log.close()
    return corpus


def _translate_system(corpus: Corpus, req: EvalRequest, log, model: tuple, system: str, setting: tuple) -> None:
    """Translate the sources into ``corpus`` as ``system`` (``model``: the loaded checkpoint, its first pass and
    whether to keep Moses tokens; ``setting``: context K and group size N), then its decoding on the log."""
    from ctxmt_cli.decode.settings import TranslationStats

    (loaded, first, tokenized), (k, n), stats = model, setting, TranslationStats()
    corpus.systems[system] = translate_sources(
        loaded, corpus.sources, context=k, group_sentences=n, tokenized=tokenized, first_pass=first, stats=stats,
        progress=lambda counted: log.update(system, counted.sentences, counted.total), beam=req.beam,
        lenpen=req.lenpen, target_mode=req.target_mode, warmup_sentences=req.warmup_sentences)
    corpus.decoding[system] = stats.decoding()
    log.message(f"{system}: translated {stats.sentences} sentences {stats.summary()}", system=system,
                **corpus.decoding[system])


def _read_corpus(req: EvalRequest) -> Corpus:
    files = [(path, option("hyp")) for path in req.hyps] + ([(req.src, option("src"))] if req.src else [])
    ref_lines = read_lines(req.ref, option("ref"))
    texts = [(path, read_lines(path, role)) for path, role in files]
    if req.docids is not None:
        ids = [line.strip() for line in read_lines(req.docids, option("docids"))]
        for path, lines in [(req.ref, ref_lines), *texts]:
            if len(lines) != len(ids):
                raise CtxmtError(f"{path} has {len(lines)} lines but {option('docids')} {req.docids} has {len(ids)}; "
                                 "give one document id per line")
        group, has_docs = (lambda lines: by_ids(lines, ids)), True
    else:
        raw = [len(lines) for _, lines in texts]
        ref_count, ref_lines = len(ref_lines), strip_trailing_blanks(ref_lines)
        texts = [(path, strip_trailing_blanks(lines)) for path, lines in texts]
        for (path, lines), count in zip(texts, raw, strict=True):
            check_aligned(path, lines, req.ref, ref_lines, (count, ref_count))
        group, has_docs = by_blank_lines, bool(blank_lines(ref_lines))
    docs = [group(lines) for _, lines in texts]
    hyp_docs = docs[: len(req.hyps)]
    sources = docs[len(req.hyps)] if req.src else None
    return Corpus(dict(zip(_unique_names(req.hyps), hyp_docs, strict=True)), group(ref_lines), sources, has_docs)


# ---- scoring and reporting ----------------------------------------------------------------------

def _check_stdin(req: EvalRequest) -> None:
    """At most one input file is ``-`` (stdin holds one file)."""
    stdin = [role for role, paths in ((option("hyp"), req.hyps), (option("ref"), [req.ref]), (option("src"), [req.src]),
                                      (option("docids"), [req.docids])) for p in paths if str(p) == "-"]
    if len(stdin) > 1:
        raise CtxmtError(f"{' and '.join(stdin)} both read stdin (-); stdin holds one file: give the others as paths")


def _validate(req: EvalRequest) -> list[str]:
    """Every check that needs no model or file contents, in this order; returns the significance tests to run."""
    _check_inputs(req)
    _check_sweeps(req)
    if not req.hyps:
        _check_split_inputs(req)
    tests = _check_statistics(req)
    if req.out is not None:                                         # before any work: a file we may write
        _check_out(req)
    if req.comet is not None:
        _check_comet(req)
    return tests


def _check_inputs(req: EvalRequest) -> None:
    """Checkpoints or hypothesis files, not both; the reference the files need; the options only a checkpoint
    reads."""
    if req.hyps and req.checkpoints:
        raise CtxmtError(f"give either {option('checkpoint')} (translate a split) or {option('hyp')}/{option('ref')} "
                         "(score files), not both")
    if req.hyps and req.ref is None:
        raise CtxmtError(f"{option('hyp')} needs {option('ref')} REFERENCE_FILE")
    _check_stdin(req)
    for name, value, what in (("first_pass", req.first_pass, "gives a bilingual checkpoint its target context"),
                              ("context", req.context, "sets the context a checkpoint translates with")):
        if req.hyps and value is not None:
            raise CtxmtError(f"{option(name)} {what}; give it with {option('checkpoint')}, not {option('hyp')} files")


def _check_sweeps(req: EvalRequest) -> None:
    """The context sizes and sentence groups to sweep; a group sweep goes with checkpoints alone and draws its
    figure with matplotlib."""
    parse_contexts(req.context)
    parse_group_sentences(req.group_sentences)
    if req.group_sentences is not None and (req.hyps or req.context is not None):
        raise CtxmtError(f"{option('group_sentences')} sweeps how a checkpoint groups sentences; give it with "
                         f"{option('checkpoint')}, without {option('hyp')} and without {option('context')}")
    if req.group_sentences is not None and req.out is not None:
        from ctxmt_cli.figures import require_matplotlib

        require_matplotlib()                               # the Figure 4 PNG beside --out


def _check_split_inputs(req: EvalRequest) -> None:
    """Without hypothesis files: a checkpoint to translate the split, and none of the files' own options."""
    if req.ref is not None:
        raise CtxmtError(f"{option('ref')} needs at least one {option('hyp')} HYPOTHESIS_FILE")
    if not req.checkpoints:
        raise CtxmtError(f"give {option('checkpoint')} CKPT (to translate a prepared split) or {option('hyp')} H "
                         f"{option('ref')} R")
    if req.src is not None or req.docids is not None:
        raise CtxmtError(f"{option('src')} and {option('docids')} go with {option('hyp')}/{option('ref')}; a "
                         "prepared split has its own sources and documents")


def _check_statistics(req: EvalRequest) -> list[str]:
    """The BLEU tokenizer, the significance tests (returned), their seed and number of samples."""
    from ctxmt_cli.evaluate.bleu import check_tokenize
    from ctxmt_cli.evaluate.significance import check_seed, parse_tests

    check_tokenize(req.tokenize)
    tests = parse_tests(req.significance, len(req.hyps) + len(req.checkpoints))
    if tests:
        check_seed(req.seed)
    if req.samples is not None and req.samples < 1:
        raise OptionError("samples", req.samples, "give a positive number of resamples / trials")
    return tests


def _check_comet(req: EvalRequest) -> None:
    """COMET reads the sources (hypothesis files need ``src``) and a model that is installed and found."""
    if req.hyps and req.src is None:
        raise CtxmtError(f"{option('comet')} needs the source sentences: give {option('src')} SOURCE_FILE (aligned "
                         f"with {option('ref')})")
    from ctxmt_cli.evaluate.comet import require_comet, resolve_checkpoint

    require_comet()
    resolve_checkpoint(req.comet)


def _system_scores(corpus: Corpus, req: EvalRequest, comet: dict) -> tuple[dict, dict, list[str]]:
    from ctxmt_cli.evaluate.bleu import corpus_scores, document_scores, format_score

    refs = _flat(corpus.references)
    metrics, signatures, lines = {}, {}, []
    for i, (name, docs) in enumerate(corpus.systems.items()):
        scores = corpus_scores(_flat(docs), refs, lowercase=req.lowercase, tokenize=req.tokenize)
        if req.document_level:
            scores += document_scores(docs, corpus.references, lowercase=req.lowercase, tokenize=req.tokenize)
        metrics[name] = {s.name: s.score for s in scores}
        signatures.update({s.name: s.signature for s in scores})
        if len(corpus.systems) > 1:
            lines.append(f"== {name}" + (" (baseline)" if i == 0 else ""))
        lines += [format_score(s) for s in scores]
        if name in comet:
            metrics[name]["COMET"] = comet[name]
            signatures["COMET"] = f"model:{req.comet}"
            lines.append(f"COMET = {comet[name]:.4f}  (model:{req.comet})")
    return metrics, signatures, lines


def _comet_scores(corpus: Corpus, req: EvalRequest) -> dict:
    if req.comet is None:
        return {}
    from ctxmt_cli.evaluate.comet import comet_system_scores

    systems = {name: _flat(docs) for name, docs in corpus.systems.items()}
    gpus = 1 if str(req.device).startswith("cuda") else 0
    return comet_system_scores(req.comet, _flat(corpus.sources), systems, _flat(corpus.references), gpus=gpus)


def _significance(corpus: Corpus, req: EvalRequest, tests: list[str]) -> tuple[dict, list[str]]:
    from ctxmt_cli.evaluate.bleu import make_metrics
    from ctxmt_cli.evaluate.significance import format_paired, paired_test

    systems = [(name, _flat(docs)) for name, docs in corpus.systems.items()]
    results, lines = {}, []
    for test in tests:
        res = paired_test(systems, _flat(corpus.references), lambda: make_metrics(req.lowercase, req.tokenize),
                          test=test, samples=req.samples, seed=req.seed)
        results[test] = res.to_json()
        lines += format_paired(res)
    return results, lines


def _check_out(req: EvalRequest) -> None:
    """``--out`` (and the PNG beside it with ``group_sentences``): no input, no folder, not existing unless
    ``force``."""
    check_output_file(req.out, option("out"), force=req.force, make_parents=True, inputs=_inputs(req))
    if req.group_sentences is not None:
        check_output_file(Path(req.out).with_suffix(".group_sentences.png"), option("out"), force=req.force,
                          inputs=_inputs(req))


def _inputs(req: EvalRequest) -> list:
    """Every file ``req`` reads: ``--out`` must be none of them."""
    return [*req.checkpoints, *req.hyps, req.ref, req.src, req.docids, req.data, req.comet]


def _write_json(path: Path, payload: dict) -> None:
    write_json(path, payload)                      # temp file + rename: a crash never leaves half a file


def run_evaluate(req: EvalRequest) -> str:
    """Score the request's systems; returns the printed report and writes ``req.out`` (JSON) when set."""
    tests = _validate(req)
    corpus = _read_corpus(req) if req.hyps else _translate_corpus(req)
    if req.document_level and not corpus.has_documents:
        raise CtxmtError(f"{option('document_level')} needs document boundaries: blank lines between documents in "
                         f"{option('ref')} {req.ref} and every {option('hyp')}, or {option('docids')} FILE")
    metrics, signatures, lines = _system_scores(corpus, req, _comet_scores(corpus, req))
    significance, sig_lines = _significance(corpus, req, tests)
    by_setting, sweep_lines = sweep_table(corpus, metrics, req)
    payload = {"systems": list(corpus.systems), "metrics": metrics, "signatures": signatures,
               "significance": significance, "segments": len(_flat(corpus.references)),
               "documents": len(corpus.references) if corpus.has_documents else None,
               "moses_tokenized": corpus.moses_tokenized}
    if corpus.decoding:
        payload["decoding"] = corpus.decoding
    if corpus.moses_tokenized:
        lines.insert(0, named("text scored: Moses-tokenized hypotheses and references (the split was prepared with "
                              f"{option('moses')})"))
    if by_setting:
        payload["by_context" if req.group_sentences is None else "by_group_sentences"] = by_setting
    if req.out is not None:
        _write_json(req.out, payload)
        if req.group_sentences is not None:
            sweep_lines.append(f"figure: {draw_group_sweep(by_setting, req.out)}")
    return "\n".join(lines + sweep_lines + sig_lines)
