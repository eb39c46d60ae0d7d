"""The house measures: module and function sizes, the core's size, and family-flag checks outside the families.

    python .ci/house.py            # print every measure, what passes its goal and what passes its hard limit
    python .ci/house.py --check    # the same, exit 1 when a hard limit or a hard rule is broken (CI)

Sizes have a goal and a hard limit. The goals are a guideline: no module over 400 lines, no function over 50
lines, the core (``ctxmt_cli/core``) under 1,400 lines; the script lists what exceeds them, and code is written to
read well rather than cut to fit. ``--check`` fails only past the hard limits: a module over 600 lines, a function
over 80 lines, the core over 1,600 lines.

Hard rules (``--check`` fails on any breach): no function over 10 parameters (a Typer command's parameters are its
command-line options, which Typer reads from the signature: they are not counted; nor are the keyword-only options
of the Python API's calls in ``API_OPTIONS``, the same options by their library names); no code outside a family's
own folder (``ctxmt_cli/models/<family>/``) asks which family it runs through a family's flag (the attributes in
``FAMILY_FLAGS``); no library message spells a command-line flag (outside the command line's own rooms: it names
the option with ``ctxmt_cli.errors.option``, and the command line shows its flag). Lines are physical lines, as
``wc -l``.
"""

from __future__ import annotations

import ast
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ctxmt_cli"
#: the goals (a guideline: what exceeds them is listed) and the hard limits (``--check`` fails past them)
MODULE_LINES, FUNCTION_LINES, CORE_LINES = 400, 50, 1400
MODULE_LIMIT, FUNCTION_LIMIT, CORE_LIMIT = 600, 80, 1600
#: a hard rule
PARAMETERS = 10
#: a family's own flags: code that reads them outside the family's folder asks which family it runs
FAMILY_FLAGS = re.compile(r"\bbatch_scheme\s*\.\s*groups\b|\breads_target_concat\s*\(|\bfamily\s*=="
                          r"|\b(?:cfg|model)\s*\.\s*(?:bilingual|src_next_sentences)\b"
                          r"|getattr\s*\(\s*[\w.]*(?:cfg|model)\s*,\s*[\"'](?:bilingual|src_next_sentences)")


#: public calls of the Python API whose keyword-only parameters are the user's options (``beam``, ``nbest``…, None
#: = the recipe's), as a Typer command's are its flags: named at every call, they are not counted
API_OPTIONS = {"ctxmt_cli/api.py": ("translate", "translate_stream")}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def family_folders() -> list[Path]:
    """``ctxmt_cli/models/<family>/``: every folder of the models package (each one family)."""
    return [p for p in (PACKAGE / "models").iterdir() if p.is_dir() and p.name != "__pycache__"]


def function_sizes(path: Path) -> list[tuple[str, int, int]]:
    """Every function of ``path`` as (``module:line name``, its lines, its counted parameters)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        options = node.name in API_OPTIONS.get(str(path.relative_to(ROOT)), ())
        params = [p.arg for p in a.posonlyargs + a.args + ([] if options else a.kwonlyargs)
                  if p.arg not in ("self", "cls")]
        params += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        counted = 0 if _typer_command(node) else len(params)
        lines = node.end_lineno - min([node.lineno] + [d.lineno for d in node.decorator_list]) + 1
        found.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", lines, counted))
    return found


def _typer_command(node: ast.FunctionDef) -> bool:
    """Whether ``node`` declares command-line options (a default ``typer.Option(...)`` / ``typer.Argument(...)``)."""
    defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
    return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("Option", "Argument")
               for d in defaults)


def flag_checks() -> list[str]:
    """Lines outside the family folders reading a family flag; the recipe schema declares the flags and the inputs
    contract's defaults (``models/inputs.py``) read the window counts every recipe section has."""
    own = family_folders() + [PACKAGE / "models" / "inputs.py"]
    found = []
    for path in modules():
        if any(folder in path.parents or folder == path for folder in own) or path.name.startswith("config"):
            continue
        lines = path.read_text().splitlines()
        for number, code in _code_lines(path):
            if FAMILY_FLAGS.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number} {lines[number - 1].strip()}")
    return found


#: token kinds that are not code: comments and strings (Python 3.12 splits an f-string into parts: its text is
#: FSTRING_MIDDLE, its fields stay code; 3.11 gives the whole f-string as one STRING)
SKIPPED = {tokenize.COMMENT, tokenize.ENCODING, tokenize.STRING} | (
    {tokenize.FSTRING_MIDDLE} if hasattr(tokenize, "FSTRING_MIDDLE") else set())


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of ``path`` without its comments, docstrings and string literals (a message may name a
    flag, as ``model.bilingual=true``, without reading it)."""
    text = path.read_text()
    prose = {n for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Expr)
             and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
             for n in range(node.lineno, node.end_lineno + 1)}
    code: dict[int, str] = {}
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type not in SKIPPED and tok.string.strip() and tok.start[0] not in prose:
                code[tok.start[0]] = code.get(tok.start[0], "") + " " + tok.string
    return [(n, re.sub(r"\s*\.\s*", ".", s)) for n, s in sorted(code.items())]


#: a command-line flag (``--beam``) inside a string
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: a string spelling a whole command line (``ctxmt first-pass --name X``: another command's usage), or the flag being
#: data (a command line parsed, a flag recorded), marked so on its line or the line above
COMMAND_LINE = re.compile(r"ctxmt [a-z][a-z-]* |`[^`]*--[a-z]")
DATA_MARK = "# a flag as data"
#: the command line's own code: its flags are its business (the server is launched by ``ctxmt serve``)
COMMAND_ROOMS = {"cli", "benchmarks", "serve"}


def flags_in_library_messages() -> list[str]:
    """Strings (not docstrings) outside the command line's rooms that spell a flag: library messages name options
    with ``ctxmt_cli.errors.option`` and let the command line show its flags."""
    found = []
    for path in modules():
        if COMMAND_ROOMS & set(path.relative_to(PACKAGE).parts[:1]):
            continue
        lines = path.read_text().splitlines()
        prose = {n for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Expr)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for n in range(node.lineno, node.end_lineno + 1)}
        with path.open("rb") as f:
            for tok in tokenize.tokenize(f.readline):
                if (tok.type == tokenize.STRING and tok.start[0] not in prose and FLAG.search(tok.string)
                        and not COMMAND_LINE.search(tok.string) and not _marked_as_data(lines, tok.start[0])):
                    found.append(f"{path.relative_to(ROOT)}:{tok.start[0]} {tok.string[:80]}")
    return found


def _marked_as_data(lines: list[str], number: int) -> bool:
    """Whether line ``number`` (1-based) or the line above carries ``DATA_MARK``."""
    return DATA_MARK in " ".join(lines[max(number - 2, 0):number])


def measure() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Every measure's breaches: (by goal, a guideline; by hard limit or rule, which ``--check`` enforces)."""
    sizes = {p: len(p.read_text().splitlines()) for p in modules()}
    core = sum(n for p, n in sizes.items() if (PACKAGE / "core") in p.parents)
    print(f"core: {core} lines in {sum((PACKAGE / 'core') in p.parents for p in sizes)} modules")
    functions = [f for p in sizes for f in function_sizes(p)]

    def modules_over(limit: int) -> list[str]:
        return [f"{p.relative_to(ROOT)} ({n})" for p, n in sizes.items() if n > limit]

    def functions_over(limit: int) -> list[str]:
        return [f"{name} ({lines} lines)" for name, lines, _ in functions if lines > limit]

    goals = {
        f"modules over {MODULE_LINES} lines": modules_over(MODULE_LINES),
        f"functions over {FUNCTION_LINES} lines": functions_over(FUNCTION_LINES),
        f"core over {CORE_LINES} lines": [f"ctxmt_cli/core ({core})"] if core >= CORE_LINES else [],
    }
    hard = {
        f"modules over {MODULE_LIMIT} lines": modules_over(MODULE_LIMIT),
        f"functions over {FUNCTION_LIMIT} lines": functions_over(FUNCTION_LIMIT),
        f"core over {CORE_LIMIT} lines": [f"ctxmt_cli/core ({core})"] if core > CORE_LIMIT else [],
        f"functions over {PARAMETERS} parameters": [f"{name} ({params} parameters)" for name, _, params in functions
                                                    if params > PARAMETERS],
        "family-flag checks outside models/<family>/": flag_checks(),
        "flags spelled in library messages": flags_in_library_messages(),
    }
    return goals, hard


def report(title: str, measures: dict[str, list[str]]) -> int:
    """Print ``measures`` under ``title``; the number of measures with a breach."""
    print(title)
    for measure_name, breaches in measures.items():
        print(f"  {measure_name}: {len(breaches)}")
        for b in breaches:
            print(f"    {b}")
    return sum(bool(breaches) for breaches in measures.values())


def main(argv: list[str]) -> int:
    goals, hard = measure()
    report("goals (a guideline):", goals)
    broken = report("hard limits and rules (--check fails on any):", hard)
    return 1 if broken and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
