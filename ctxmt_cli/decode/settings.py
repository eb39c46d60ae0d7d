"""How documents are translated: the settings of one call, built from a checkpoint's recipe and the user's options
in one place (:meth:`DecodeSettings.from_recipe`), checked before anything is decoded, and the counters a call
keeps (:class:`TranslationStats`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ctxmt_cli.errors import CtxmtError, OptionError

MODES = ("prefix", "generate")


@dataclass
class TranslationStats:
    """Counters of one translation call (also handed to ``progress`` after every step)."""

    documents: int = 0
    sentences: int = 0            # sentences translated so far (empty lines excluded)
    total: int = 0                # sentences to translate
    empty: int = 0                # empty source lines (empty output)
    steps: int = 0                # batched beam searches (fallback re-decodes excluded)
    fallbacks: int = 0            # generate mode: wrong separator count, re-decoded in prefix mode
    truncated: int = 0            # sentences longer than the window limit, cut to fit
    dropped: int = 0              # lead-in sentences translated only as target context, then dropped
    written: int = 0              # tokens of the best hypothesis of every search row, </s> included (generate: windows)
    seconds: float = 0.0
    settings: DecodeSettings | None = None   # what the counted calls decoded with (the last one's)

    def count(self, found: list) -> list:
        """Count the tokens the hypotheses ``found`` wrote (:attr:`written`); returns them."""
        self.written += sum(len(hyp.tokens) + 1 for hyp in found)
        return found

    def decoding(self) -> dict:
        """The settings and counters a user checks a translation by (``evaluate``'s results.json, per system)."""
        s = self.settings
        named = {} if s is None else {"beam": s.beam, "lenpen": s.lenpen, "target_mode": s.target_mode}
        if s is not None and s.warmup_sentences is not None:
            named.update(warmup_sentences=s.warmup_sentences, dropped=self.dropped)
        return {**named, "sentences": self.sentences, "fallbacks": self.fallbacks, "tokens_written": self.written,
                "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        """The same as one line for stderr: time, beam, length penalty, target mode and, in generate mode (or
        wherever there were any), the windows decoded again in prefix mode."""
        s, text = self.settings, f"in {self.seconds:.1f} s"
        if s is None:
            return text
        text += f", beam {s.beam}, length penalty {s.lenpen:g}, target mode {s.target_mode}"
        if s.warmup_sentences is not None:      # 0 dropped: the model reads no earlier translation (or generate mode)
            text += f"; pieces with a lead-in of {s.warmup_sentences}: {self.dropped} sentences translated and dropped"
        if s.target_mode == "generate" or self.fallbacks:
            text += (f"; {self.fallbacks} of {self.sentences} generated windows without the expected separators, "
                     "decoded again in prefix mode")
        return text


@dataclass(frozen=True, kw_only=True)
class DecodeSettings:
    """How documents are translated (built by keyword: :meth:`from_recipe` from a checkpoint's recipe).

    ``src_context_sentences`` / ``tgt_context_sentences``: previous sentences in each window; ``beam``,
    ``lenpen``; the longest output ``max_len_a`` × source length + ``max_len_b``; ``target_mode``: the
    target context forced as a ``prefix`` or the whole window ``generate``d; ``batch_docs`` documents decoded in
    parallel; windows of at most ``max_window_tokens``; ``cache``: a family translating with a document memory
    encodes each sentence once (False: re-encode the windows, for checks); ``group_sentences`` / ``group_order``:
    a family reading sentence groups (mbe) translates each document in groups of that many sentences (None: the
    whole document), others refuse them; ``src_next_sentences``: next source sentences in each window (None:
    the model's own; a model reading none refuses more); ``nbest``: translations kept per sentence (at most
    ``beam``; more than one needs the ``prefix`` mode); ``sample_seed``: None = beam search, else each output
    token is *sampled* from the model's distribution with a generator seeded so (``beam`` and ``lenpen`` unused);
    ``warmup_sentences``: a model reading its earlier translations translates each document in one piece (None)
    or in pieces side by side, each translating that many sentences before it first and dropping them
    (:mod:`ctxmt_cli.decode.pieces`).
    """

    src_context_sentences: int = 0
    tgt_context_sentences: int = 0
    beam: int = 4
    lenpen: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10
    target_mode: str = "prefix"
    batch_docs: int = 64
    max_window_tokens: int = 1024
    cache: bool = True
    group_sentences: int | None = None
    group_order: str = "consecutive"
    src_next_sentences: int | None = None
    nbest: int = 1
    sample_seed: int | None = None
    warmup_sentences: int | None = None

    @classmethod
    def from_recipe(cls, recipe, *, context: int | None = None, beam: int | None = None,
                    lenpen: float | None = None, target_mode: str | None = None,
                    batch_docs: int | None = None, nbest: int | None = None,
                    warmup_sentences: int | None = None, group_sentences: int | None = None,
                    group_order: str | None = None) -> DecodeSettings:
        """The settings of a checkpoint's ``recipe`` (its decode section, window limit and family context), with
        the user's choices where given: None is "not given" (the recipe's value, or this class's default for
        ``nbest`` and ``group_order``, which no recipe key holds); any other value is taken as it is, 0 included,
        and refused by :func:`check_settings` where it cannot work. ``context`` K: K context sentences (and K next
        ones for a model reading them) instead of the model's own; ``group_sentences``: None = the whole document
        is one group. The other fields keep their defaults (``dataclasses.replace`` changes them)."""
        from ctxmt_cli.models.families import inputs_of

        dec, inputs = recipe.decode, inputs_of(recipe.model)
        src_context, tgt_context = inputs.context(context)
        return cls(
            src_context_sentences=src_context, tgt_context_sentences=tgt_context,
            src_next_sentences=None if context is None else inputs.resized_next(context),
            beam=_given_or(beam, dec.beam), lenpen=_given_or(lenpen, dec.lenpen),
            max_len_a=dec.max_len_a, max_len_b=dec.max_len_b,
            target_mode=_given_or(target_mode, dec.target_mode), batch_docs=_given_or(batch_docs, dec.batch_docs),
            warmup_sentences=_given_or(warmup_sentences, dec.warmup_sentences),
            max_window_tokens=recipe.data.max_window_tokens,
            nbest=_given_or(nbest, cls.nbest), group_sentences=group_sentences,   # cls.x: the field's default
            group_order=_given_or(group_order, cls.group_order),
        )

    def resolved(self, inputs) -> DecodeSettings:
        """These settings with the next sentences the model reads filled in (``inputs``: its inputs contract)."""
        return replace(self, src_next_sentences=inputs.next_sentences(self.src_next_sentences))


def _given_or(value, default):
    """``value`` where the caller gave one (0 and False included), else ``default``."""
    return default if value is None else value


def _check_bounds(s: DecodeSettings) -> None:
    """The numbers of ``s`` within the bounds of the recipe's ``decode`` keys (declared once, in the schema): a
    caller of the Python API gets the refusal the command line and a recipe get (``beam=10**9``, ``lenpen=inf``)."""
    from pydantic import ValidationError

    from ctxmt_cli.config import DecodeConfig

    names = ("beam", "lenpen", "max_len_a", "max_len_b", "batch_docs")
    try:
        DecodeConfig(**{name: getattr(s, name) for name in names})
    except ValidationError as err:
        first = err.errors()[0]
        name = str(first["loc"][0])
        raise OptionError(name, getattr(s, name), first["msg"].removeprefix("Value error, ")) from None


def check_settings(s: DecodeSettings, documents: Sequence[Sequence[str]], given) -> list[Sequence]:
    """Refuse settings that cannot work (one line each); each document's given translations (none: empty)."""
    if s.target_mode not in MODES:
        raise OptionError("target_mode", s.target_mode, "choose prefix or generate")
    if s.max_window_tokens < 2:
        raise OptionError("max_window_tokens", s.max_window_tokens, "give a window of 2 tokens or more")
    if s.batch_docs < 1:
        raise OptionError("batch_docs", s.batch_docs, "give 1 or more documents decoded in parallel")
    if s.warmup_sentences is not None and s.warmup_sentences < 0:
        raise OptionError("warmup_sentences", s.warmup_sentences, "give 0 or more sentences (None: whole documents)")
    if s.beam < 1:                      # before the n-best check, which would blame nbest for it
        raise OptionError("beam", s.beam, "give a beam size >= 1")
    _check_bounds(s)
    if not 1 <= s.nbest <= s.beam:
        raise OptionError("nbest", s.nbest, f"an n-best list holds at most the beam's {s.beam} translations; give "
                          f"a beam of {max(s.nbest, 1)} or more (and an n-best size >= 1)")
    if s.sample_seed is not None and s.nbest > 1:
        raise OptionError("nbest", s.nbest, "sampling draws one translation per sentence; give 1")
    if s.nbest > 1 and s.target_mode == "generate":
        raise OptionError("nbest", s.nbest, "n-best lists need the target mode prefix (generate mode rewrites the "
                          "context)")
    if given is None:
        return [()] * len(documents)
    if len(given) != len(documents):
        raise CtxmtError(f"given target context for {len(given)} documents, but {len(documents)} documents given")
    for d, (doc, fixed) in enumerate(zip(documents, given, strict=True)):
        if len(fixed) > len(doc):
            raise CtxmtError(f"document {d + 1}: {len(fixed)} given target sentences for {len(doc)} source "
                             "sentences; give at most one translation per source sentence")
    if s.target_mode == "generate" and any(given):
        raise OptionError("target_mode", "generate", "given target context is forced as the decoder prefix: use "
                          "prefix (generate mode writes the context itself)")
    return list(given)
