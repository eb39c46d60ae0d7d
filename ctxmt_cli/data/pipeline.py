"""``ctxmt prepare``: from the command line's options to a prepared dataset directory.

Real corpora go through :func:`prepare_corpus`; ``synthetic`` first generates the
discourse benchmark (raw text + contrastive sets, kept under ``OUT/raw``) and
then prepares it the same way.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from ctxmt_cli.data.clean import CleanRules
from ctxmt_cli.data.formats import FORMATS as CORPUS_FORMATS
from ctxmt_cli.data.prepare import (
    Counter,
    PrepareSpec,
    SplitInput,
    check_prepare_output,
    prepare_corpus,
    prepare_into,
    resolve_split_input,
)
from ctxmt_cli.data.store import write_meta
from ctxmt_cli.errors import CtxmtError, named, option
from ctxmt_cli.replacing import build_dir

FORMATS = ("synthetic", *CORPUS_FORMATS)


def prepare_synthetic(out: Path, *, seed: int = 1, docs: int = 2000, force: bool = False, vocab_size: int = 400,
                      progress: Callable[[str], None] | None = None,
                      warn: Callable[[str], None] | None = None, count: Counter | None = None) -> dict:
    """Generate the synthetic benchmark and prepare it into ``out`` (raw files and test sets in ``out/raw``);
    ``progress``, ``warn`` and ``count`` as :func:`~ctxmt_cli.data.prepare.prepare_corpus` takes them.

    BPE keeps the artificial words whole at a small vocabulary (unigram splits them), so windows stay short.
    """
    from ctxmt_cli.synthetic import generate_benchmark

    out = Path(out)
    check_prepare_output(out, force)
    generated = {}

    def build(tmp: Path) -> dict:
        raw = tmp / "raw"
        generated["manifest"] = generate_benchmark(raw, seed=seed, docs=docs)
        splits = {name: SplitInput(raw / f"{name}.src", raw / f"{name}.tgt") for name in ("train", "valid", "test")}
        spec = PrepareSpec(fmt="text", splits=splits, src_lang="src", tgt_lang="tgt", out=out,
                           vocab_size=vocab_size, spm_type="bpe", seed=seed, force=force)
        meta = prepare_into(spec, tmp, progress, warn, count)
        meta["source"] = {"format": "synthetic", "seed": seed, "docs": docs, "raw": "raw",
                          "manifest": "raw/manifest.json"}
        write_meta(tmp, meta)
        return meta

    meta = build_dir(out, "prepare synthetic", build, force=force)
    if progress is not None:
        sizes = ", ".join(f"{k}: {v['sentences']} pairs" for k, v in meta["splits"].items())
        progress(f"wrote {out} ({sizes})")
    return meta | {"manifest": generated["manifest"]}


def prepare_from_cli(fmt: str, out: Path, paths: dict[str, Path | None], *, docs: int = 2000,
                     progress: Callable[[str], None] | None = None, count: Counter | None = None,
                     **options) -> dict:
    """Dispatch ``ctxmt prepare FORMAT``: the corpus splits at ``paths`` into ``out``; ``options``: the fields of
    :class:`~ctxmt_cli.data.prepare.PrepareSpec` the command line gives (``docs``: the synthetic benchmark's
    document count); ``progress`` and ``count``: the command's progress log (status lines, pairs per split). Data
    warnings are printed as one line each on stderr."""
    if fmt not in FORMATS:
        raise CtxmtError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "synthetic":             # its generated vocabulary is small: 400 subwords at most, by design
        return prepare_synthetic(out, seed=options.get("seed", 1), docs=docs, force=options.get("force", False),
                                 vocab_size=min(options.get("vocab_size", 8000), 400), warn=_warn,
                                 progress=progress, count=count)
    if paths.get("train") is None:
        raise CtxmtError(f"ctxmt prepare {fmt} needs {option('train')} PATH (and optionally "
                         f"{option('valid')}/{option('test')})")
    src_lang, tgt_lang = options.get("src_lang", "src"), options.get("tgt_lang", "tgt")
    splits = {name: resolve_split_input(fmt, path, src_lang, tgt_lang)
              for name, path in paths.items() if path is not None}
    spec = PrepareSpec(fmt=fmt, splits=splits, out=out, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta = prepare_corpus(spec, progress, warn=_warn, count=count)
    sizes = meta["vocab_size"]
    vocab_size = spec.vocab_size
    # SentencePiece stops at what the corpus supports (hard_vocab_limit off)
    if spec.spm is None and spec.vocab_from is None and min(sizes.values()) < vocab_size:
        got = (str(sizes["src"]) if sizes["src"] == sizes["tgt"]
               else f"{sizes['src']} (source) / {sizes['tgt']} (target)")
        _warn(f"{option('vocab_size')} {vocab_size}: the train split supports only {got} subwords, so the vocabulary "
              f"is that small, not {vocab_size}; a larger corpus gives more")
    return meta


def summary_lines(out: Path, meta: dict, clean: CleanRules) -> list[str]:
    """What ``ctxmt prepare`` prints when done: the splits and vocabulary, and what cleaning dropped."""
    from ctxmt_cli.data.prepare import dropped_summary

    sizes = ", ".join(f"{name}: {info['sentences']} sentences / {info['documents']} docs"
                      for name, info in meta["splits"].items())
    lines = [f"prepared {out} ({sizes}; vocab {meta['vocab_size']['src']}/{meta['vocab_size']['tgt']})"]
    if clean.active and "clean" in meta:
        lines.append(f"cleaned train: {dropped_summary(meta['clean']['dropped'])}")
    return lines


def _warn(message: str) -> None:
    """A data warning: one line on stderr, so stdout stays the command's result."""
    print(f"ctxmt: warning: {named(message)}", file=sys.stderr)
