"""The one exception type for errors a user can cause.

The CLI catches :class:`CtxmtError`, prints its message as one line and exits
with code 2. Messages say what went wrong, where (file, line, key path) and how
to fix it. This module imports nothing heavy so every layer may raise it.
"""


class CtxmtError(Exception):
    """A user-caused error with a one-line, actionable message."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(message.replace("\n", " ").strip())


class OptionError(CtxmtError):
    """A value chosen for an option is refused. ``option`` names it as the library does (a keyword argument or
    recipe key: ``beam``, ``group_sentences``) and the message reads ``beam=0: give a beam size >= 1``; the command
    line shows the same error under its own flag (``--beam 0: ...``, :func:`ctxmt_cli.cli.errors.error_line`), so
    only the CLI names flags."""

    def __init__(self, option: str, value, problem: str):
        self.option, self.value, self.problem = option, value, problem.replace("\n", " ").strip()
        super().__init__(f"{option}{'' if value is None else '=' + repr(value)}: {self.problem}")

    def with_flag(self, flag: str) -> str:
        """The message under the command line's ``flag`` for the option (None: an option given, its value aside)."""
        return f"{flag}{'' if self.value is None else ' ' + str(self.value)}: {self.problem}"
