"""The one exception type for errors a user can cause.

The CLI catches :class:`CtxmtError`, prints its message as one line and exits
with code 2. Messages say what went wrong, where (file, line, key path) and how
to fix it. This module imports nothing heavy so every layer may raise it.

Library code never spells a command-line flag: a message names an option with :func:`option` (``option("force")``),
which the library shows as the option's own name (`` `force` ``, a keyword argument or recipe key) and the command
line as the running command's flag (``--force``): a command installs its way of naming options
(:func:`use_option_names`) while it runs, and :func:`named` renders a message (an error's ``str``, a warning) the
way of the moment.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: the marks around an option's name inside a message (see :func:`option`)
MARK = "\ue000"                                  # a private-use character: no text holds it
_NAMED = re.compile(f"{MARK}([A-Za-z_][A-Za-z0-9_]*){MARK}")


def option(name: str) -> str:
    """An option named inside an error message: `` `name` `` for the library, the command's flag on the command line."""
    return f"{MARK}{name}{MARK}"


def library_name(name: str) -> str:
    """How the library shows an option named in a message: the keyword argument or recipe key, quoted."""
    return f"`{name}`"


_name_of: Callable[[str], str] = library_name


def use_option_names(name_of: Callable[[str], str]) -> Callable[[str], str]:
    """Show the options named in messages as ``name_of(option)`` from now on (the command line: its flags);
    returns the previous way, to restore."""
    global _name_of
    previous, _name_of = _name_of, name_of
    return previous


def named(text: str) -> str:
    """``text`` (a message, a warning) with its options shown as the caller sees them (:func:`use_option_names`)."""
    return _NAMED.sub(lambda m: _name_of(m.group(1)), text)


#: what ``str.splitlines`` breaks a line at besides a newline: a file name or a key holding one would break the
#: message in two, so it is shown escaped (``\x1e``)
_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` as one line: newlines become spaces, every other line break its escape."""
    return _BREAKS.sub(lambda m: ascii(m.group())[1:-1], text.replace("\n", " ")).strip()


class CtxmtError(Exception):
    """A user-caused error with a one-line, actionable message (options in it named by :func:`option`)."""

    exit_code = 2

    def __init__(self, message: str):
        self.template = one_line(message)
        super().__init__(self.template)

    def __str__(self) -> str:
        return named(self.template)


class OptionError(CtxmtError):
    """A value chosen for an option is refused. ``option`` names it as the library does (a keyword argument or
    recipe key: ``beam``, ``group_sentences``) and the message reads ``beam=0: give a beam size >= 1``; the command
    line shows the same error under its own flag (``--beam 0: ...``, :func:`ctxmt_cli.cli.errors.error_line`), so
    only the CLI names flags."""

    def __init__(self, option: str, value, problem: str):
        self.option, self.value, self.problem = option, value, one_line(problem)
        super().__init__(f"{option}{'' if value is None else '=' + repr(value)}: {self.problem}")

    def with_flag(self, flag: str) -> str:
        """The message under the command line's ``flag`` for the option (None: an option given, its value aside)."""
        return one_line(f"{flag}{'' if self.value is None else ' ' + str(self.value)}: {named(self.problem)}")

    def __reduce__(self):
        # pickled by its three fields (a worker process may raise one): ``args`` holds only the message
        return type(self), (self.option, self.value, self.problem)
