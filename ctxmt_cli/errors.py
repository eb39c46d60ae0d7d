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
