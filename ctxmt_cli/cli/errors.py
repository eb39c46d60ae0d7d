"""How the ``ctxmt`` command line reports what a user got wrong: one line on stderr, exit code 2, no traceback.

Shared by every command module of :mod:`ctxmt_cli.cli`: a :class:`CtxmtError`, an OS error the
user can fix (a full disk, a permission) and a bad option value (click's usage error, which would
otherwise print a usage box) all become ``ctxmt: error: ...``. While a command runs, warnings (Python's and the
``ctxmt_cli`` loggers') become ``ctxmt: warning: ...`` lines on stderr, never mixed into stdout.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import warnings
from pathlib import Path

import typer

from ctxmt_cli.errors import CtxmtError, OptionError, named, one_line, use_option_names
from ctxmt_cli.paths import USER_ERRNOS, os_error_line
from ctxmt_cli.signals import interruption, stop_signals

# click's usage error, whether typer uses click itself or its own copy of it
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _given_value(argv: list[str], opts: list[str]) -> str | None:
    """The value the command line gave an option (its last occurrence), for the error line."""
    found = None
    for i, arg in enumerate(argv):
        for opt in opts:
            if arg == opt and i + 1 < len(argv):
                found = argv[i + 1]
            elif opt.startswith("--") and arg.startswith(opt + "="):
                found = arg.split("=", 1)[1]
    return found


def _subcommand(ctx) -> str | None:
    """The command below the program name (``recipes list`` for ``ctxmt recipes list``), None at the top."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(reversed(names)) or None


def usage_error_line(err, argv: list[str]) -> str:
    """One line for a bad command line: the command, the option and the value given, what is wrong."""
    sub = _subcommand(err.ctx)
    param = getattr(err, "param", None)
    if type(err) is typer.BadParameter and param is not None and param.param_type_name == "option":
        value = _given_value(argv, param.opts)
        message = err.message.removeprefix("Value error, ").rstrip(".")     # typer's wording of a Literal miss
        what = f"{max(param.opts, key=len)}{'' if value is None else ' ' + value}: {message}"
    else:                                                   # missing or unknown options, unknown commands
        what = err.format_message().replace("Value error, ", "").rstrip(".")
    where = f"{sub}: " if sub else ""
    return one_line(f"ctxmt: error: {where}{what}; see ctxmt {sub + ' ' if sub else ''}--help")


def _warning_line(text: str) -> str:
    return "ctxmt: warning: " + " ".join(named(str(text)).split())


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` while a command runs: one line on stderr (not the source line Python adds); a
    warning from another package names its category and origin."""
    where = "" if "ctxmt_cli" in Path(filename).parts else \
        f" ({getattr(category, '__name__', 'Warning')} from {Path(filename).name}:{lineno})"
    print(_warning_line(f"{message}{where}"), file=sys.stderr, flush=True)


class _WarningLines(logging.Handler):
    """ctxmt's log warnings as ``ctxmt: warning: ...`` lines on the stderr of the moment (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(_warning_line(record.getMessage()), file=sys.stderr, flush=True)


@contextlib.contextmanager
def warnings_on_stderr():
    """While a command runs, Python warnings and the ``ctxmt_cli`` loggers' warnings print one line each on stderr,
    so stdout carries only the command's output (translations, tables, JSON lines)."""
    logger, handler = logging.getLogger("ctxmt_cli"), _WarningLines(logging.WARNING)
    if any(isinstance(h, _WarningLines) for h in logger.handlers):        # already inside a command
        yield
        return
    propagate = logger.propagate
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        logger.addHandler(handler)
        logger.propagate = False
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate


class OneLineGroup(typer.core.TyperGroup):
    """The command group, printing a bad command line as one line (exit 2) instead of a usage box."""

    def main(self, args=None, *rest, **kwargs):
        self._argv = list(sys.argv[1:] if args is None else args)
        previous = use_option_names(flag_of)               # messages name options as the running command's flags
        try:
            with warnings_on_stderr(), stop_signals():     # SIGTERM and SIGHUP take Ctrl-C's path
                return super().main(self._argv, *rest, **kwargs)
        finally:
            use_option_names(previous)

    def _one_line(self, err) -> None:
        if type(err).__name__ == "NoArgsIsHelpError":             # `ctxmt` or `ctxmt translate` alone: help
            raise err
        typer.echo(usage_error_line(err, getattr(self, "_argv", [])), err=True)
        raise typer.Exit(code=CtxmtError.exit_code) from None

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as err:                                  # `ctxmt --bogus`
            self._one_line(err)

    def resolve_command(self, ctx, args):
        """The command ``args`` name, and its arguments with the spellings of earlier versions made current
        (:mod:`ctxmt_cli.cli.spellings`; not while the shell completes a word)."""
        from ctxmt_cli.cli.spellings import SpellingClash, respell

        name, command, rest = super().resolve_command(ctx, args)
        if command is None or ctx.resilient_parsing:
            return name, command, rest
        path = " ".join(filter(None, (_subcommand(ctx), name)))
        try:
            return name, command, respell(path, command, rest)
        except SpellingClash as err:
            raise UsageError(str(err), ctx=command.context_class(command, info_name=name, parent=ctx)) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as err:                                  # the command's options
            self._one_line(err)
        except KeyboardInterrupt as err:             # a command without user_errors: one line, not click's Aborted!
            interrupted(err)


def check_device(value: str) -> str:
    """``--device``: auto, cpu, cuda or cuda:N, checked before anything is loaded; a CUDA device this machine
    lacks is refused here too (:func:`ctxmt_cli.device.resolve_device`, the one place a name becomes a device)."""
    from ctxmt_cli.device import check_device_name, resolve_device

    try:
        check_device_name(value)
        if value.startswith("cuda"):
            resolve_device(value)
    except CtxmtError as err:            # "--device X: why"; the error line names the option and value itself
        problem = named(err.problem) if isinstance(err, OptionError) else str(err).partition(": ")[2]
        raise typer.BadParameter(problem) from None
    return value


def given_params(ctx) -> list:
    """The parameters of ``ctx`` the command line (not a default) set (by the enum's name: typer may bring its own
    copy of click, whose ParameterSource is another class)."""
    sources = {p.name: ctx.get_parameter_source(p.name) for p in ctx.command.params}
    return [p for p in ctx.command.params if getattr(sources[p.name], "name", None) == "COMMANDLINE"]


def option_spelling(ctx, param) -> str:
    """How the command line spelt an option: its long name, or the half of a flag pair it gave (``--separate``)."""
    if param.secondary_opts and ctx.params.get(param.name) is False:
        return max(param.secondary_opts, key=len)
    return max(param.opts, key=len)


def refuse_given(ctx, names, why: str) -> None:
    """Refuse the first option of ``names`` (parameter names) that the command line gave, a default being fine:
    one line, ``OPTION why; drop it`` (``why`` says what reads the option instead)."""
    for param in given_params(ctx):
        if param.name in names:
            raise CtxmtError(f"{option_spelling(ctx, param)} {why}; drop it")


def error_line(err: CtxmtError) -> str:
    """The message of ``err`` as the command line says it: an :class:`OptionError` under the running command's flag
    for that option (``--beam 0: ...``), when the command has one, and every option the message names
    (:func:`ctxmt_cli.errors.option`) as the command's flag."""
    if isinstance(err, OptionError):
        flag = flag_of(err.option, None)
        if flag is not None:
            return err.with_flag(flag)
    return str(err)


def flag_of(name: str, default: str | None = "") -> str | None:
    """The running command's flag for the library's option ``name`` (its longest spelling); ``default`` where the
    command has none ("" = the flag ``name`` would have: ``--name-with-dashes``)."""
    ctx = click_context()
    wanted = PARAMETER_OF.get(name, name)
    for param in [] if ctx is None else ctx.command.params:
        if param.name == wanted and param.param_type_name == "option":
            return max(param.opts, key=len)
    return "--" + wanted.strip("_").replace("_", "-") if default == "" else default


#: library option names whose command-line parameter is named otherwise (``--from`` is ``from_`` in Python; a
#: recipe's ``overrides`` are ``--set``; what the library calls the output is ``-o/--out``)
PARAMETER_OF = {"source": "from_", "overrides": "set_", "output": "out", "out_dir": "out"}


def click_context():
    """The running command's click context, or None outside a command (typer may bring its own copy of click: the
    context class's own package is the one that tracks it)."""
    import importlib

    core = next(c.__module__ for c in typer.Context.__mro__ if c.__module__.endswith(".core"))
    return importlib.import_module(core.removesuffix("core") + "globals").get_current_context(silent=True)


def user_errors(fn):
    """Turn CtxmtError, and an OS error the user can fix, into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CtxmtError as err:
            typer.echo(f"ctxmt: error: {error_line(err)}", err=True)
            raise typer.Exit(code=CtxmtError.exit_code) from None
        except OSError as err:
            if err.errno not in USER_ERRNOS:
                raise
            typer.echo(f"ctxmt: error: {os_error_line(err)}", err=True)
            raise typer.Exit(code=CtxmtError.exit_code) from None
        except KeyboardInterrupt as err:
            interrupted(err)

    return wrapper


def interrupted(err: KeyboardInterrupt) -> None:
    """Ctrl-C, SIGTERM or SIGHUP (:mod:`ctxmt_cli.signals`), the cleanups done: one line on stderr and exit
    ``128 + signal`` (130, 143, 129)."""
    stopped = interruption(err)
    typer.echo(named(stopped.line()), err=True)
    raise typer.Exit(code=stopped.exit_code) from None
