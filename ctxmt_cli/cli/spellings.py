"""The command line's option convention, and the spellings of earlier versions it still reads for one release.

The convention (docs/commands/index.md, checked over the whole app by ``tests/integration/test_options_cli.py``):

- ``-c/--checkpoint`` names the model a command runs or reads (repeated where it reads several: ``evaluate``,
  ``average``); a checkpoint in another role is named by that role (``--init-from``, ``--first-pass``, ``--repair``,
  ``--reverse``/``--forward``, ``--vocab-from``);
- ``-o/--out`` names what a command writes, file or folder; a second output is named by what it holds
  (``cxmi --per-sentence``);
- ``--json`` means "print JSON on stdout instead of the table", nothing else; a data file is named by what it is
  (``--testset-json``, ``--hyp``, ``--ref``);
- positional arguments are what a command works through (documents, a recipe, a test set, run folders), never a
  checkpoint or an output;
- ``--log-format plain|rich|json`` on every command that runs a model (those with ``--device``).

:data:`DEPRECATED` lists, per command, the spellings that broke it and what they are now. Each group of the app
(:class:`~ctxmt_cli.cli.errors.OneLineGroup`) rewrites a command's arguments with :func:`respell` before click
parses them, so an old spelling does exactly what the new one does, with one ``ctxmt: warning:`` line on stderr.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

#: when the old spellings stop being read
GOES = "the old spelling goes in the next release"


@dataclass(frozen=True)
class OldSpellings:
    """How one command was spelt before the convention.

    ``flags``: old flag -> new flag. ``positionals``: what each positional argument of the old command line became,
    in order (an option's flag, or None where it is still an argument); with ``repeat``, every argument from the
    last slot on becomes that option (``average CKPT...``).
    """

    flags: dict[str, str] = field(default_factory=dict)
    positionals: tuple[str | None, ...] = ()
    repeat: bool = False

    def target(self, slot: int) -> str | None:
        """The option the ``slot``-th positional argument became, or None where it is still an argument."""
        if slot < len(self.positionals):
            return self.positionals[slot]
        return self.positionals[-1] if self.repeat and self.positionals else None


_TARGET_MODE = {"--target-context": "--target-mode"}
_CONTRASTIVE = OldSpellings(flags={"--json": "--testset-json"})
_EXPORT = OldSpellings(positionals=("--checkpoint", "--out"))

#: command path -> its old spellings (read for one release, each with a warning line)
DEPRECATED: dict[str, OldSpellings] = {
    "translate": OldSpellings(flags={"--output": "--out", **_TARGET_MODE}),
    "evaluate": OldSpellings(flags=_TARGET_MODE),
    "average": OldSpellings(flags={"--output": "--out"}, positionals=("--checkpoint",), repeat=True),
    "inspect": OldSpellings(positionals=("--checkpoint",)),
    "contrastive": _CONTRASTIVE,
    "score-contrastive": _CONTRASTIVE,
    "export ctranslate2": _EXPORT,
    "export safetensors": _EXPORT,
    "recipes copy": OldSpellings(positionals=(None, "--out")),
}


class SpellingClash(ValueError):
    """An old positional argument given beside the option it became (which of the two would win is a guess)."""


def respell(path: str, command, args: list[str]) -> list[str]:
    """``args`` of command ``path`` (a click command) with every old spelling of :data:`DEPRECATED` replaced by the
    new one, each kind of replacement announced by one warning (``warnings_on_stderr`` prints it as a line)."""
    old = DEPRECATED.get(path)
    if old is None:
        return args
    args = _flags(path, old.flags, args)
    return _positionals(path, command, old, args) if old.positionals else args


def _flags(path: str, renamed: dict[str, str], args: list[str]) -> list[str]:
    """``args`` with each renamed flag (``--old`` or ``--old=value``, before any ``--``) under its new name."""
    out, announced = [], set()
    for k, arg in enumerate(args):
        if arg == "--":
            return out + args[k:]
        flag, eq, value = arg.partition("=")
        if flag in renamed:
            if flag not in announced:
                # stacklevel 1: the warning is ctxmt's own, shown without a source location
                warnings.warn(f"{flag} is now called {renamed[flag]} (read as such; {GOES})", FutureWarning,
                              stacklevel=1)
                announced.add(flag)
            arg = renamed[flag] + eq + value
        out.append(arg)
    return out


def _takes_value(command) -> set[str]:
    """The flags of ``command``'s options that read the next argument as their value."""
    return {opt for p in command.params if p.param_type_name == "option" and not getattr(p, "is_flag", False)
            and not getattr(p, "count", False) for opt in (*p.opts, *p.secondary_opts)}


def _pieces(command, args: list[str]) -> list[tuple[bool, list[str]]]:
    """``args`` cut as click will read them: (True, [argument]) for a positional argument, (False, tokens) for an
    option with its value, a flag, or ``--`` (after which everything is an argument)."""
    valued, pieces, k = _takes_value(command), [], 0
    while k < len(args):
        arg = args[k]
        if arg == "--":
            return pieces + [(False, [arg])] + [(True, [rest]) for rest in args[k + 1:]]
        if arg.startswith("-") and len(arg) > 1:
            width = 2 if "=" not in arg and arg in valued and k + 1 < len(args) else 1
            pieces.append((False, args[k:k + width]))
            k += width
        else:
            pieces.append((True, [arg]))
            k += 1
    return pieces


def _positionals(path: str, command, old: OldSpellings, args: list[str]) -> list[str]:
    """Move the positional arguments that became options behind their flags (one warning for them all)."""
    out, moved, slot = [], [], 0
    for is_argument, tokens in _pieces(command, args):
        target = old.target(slot) if is_argument else None
        slot += is_argument
        if target is None:
            out += tokens
        else:
            moved.append((target, tokens[0]))
            out += [target, tokens[0]]
    if moved:
        for target in dict.fromkeys(t for t, _ in moved):
            _check_once(command, target, args, [v for t, v in moved if t == target])
        given = " ".join(v for _, v in moved)
        warnings.warn(f"ctxmt {path} {given}: {'these arguments are' if len(moved) > 1 else 'this argument is'} now "
                      f"{' '.join(f'{t} {v}' for t, v in moved)} (read as such; {GOES})", FutureWarning,
                      stacklevel=1)
    return out


def _check_once(command, target: str, args: list[str], values: list[str]) -> None:
    """Refuse an old positional argument beside the option it became, unless the option takes several values."""
    param = next(p for p in command.params if target in p.opts)
    if getattr(param, "multiple", False):
        return
    given = [a for a in args if a.partition("=")[0] in param.opts]
    if given:
        raise SpellingClash(f"{values[0]} as an argument and {given[0].partition('=')[0]} name the same "
                            f"{target.lstrip('-')}: give {target} once")
