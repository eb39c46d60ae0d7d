"""How every table of ctxmt reaches the user: :func:`print_table`.

On a terminal a table is drawn by rich, as wide as the terminal allows. Anywhere else (a pipe, a file, a
scheduler's log) rich would squeeze it to 80 columns and wrap its cells a word a line, so it is written as
tab-separated values instead: the title as a ``# title`` line, the header, one line per row (a cell's own line
breaks become ``; ``), the caption as a ``# caption`` line. ``cut``, ``awk`` and spreadsheets read it as it is.
This module imports nothing heavy (rich, inside the function).
"""

from __future__ import annotations

#: what a cell's line breaks become in a tab-separated row
BREAK = "; "


def print_table(renderable, console=None) -> None:
    """Print ``renderable`` (a rich ``Table``, or a ``Group`` of tables and other renderables) on ``console``
    (default: a console on stdout): drawn on a terminal, each table as tab-separated lines elsewhere."""
    from rich.console import Console, Group
    from rich.table import Table

    console = console or Console()
    if console.is_terminal:
        console.print(renderable)
        return
    parts = renderable.renderables if isinstance(renderable, Group) else [renderable]
    for n, part in enumerate(parts):
        if not isinstance(part, Table):
            console.print(part)
            continue
        lines = ([""] if n else []) + table_lines(part)           # a blank line between two tables
        console.file.write("".join(line + "\n" for line in lines))   # as they are: rich would expand the tabs
        console.file.flush()


def table_lines(table) -> list[str]:
    """A rich table as tab-separated lines: ``# title``, the header (when shown), the rows, ``# caption``."""
    columns = table.columns
    lines = [f"# {_plain(table.title)}"] if table.title else []
    if table.show_header:
        lines.append("\t".join(_plain(column.header) for column in columns))
    cells = [list(column.cells) for column in columns]
    for row in range(table.row_count):
        lines.append("\t".join(_plain(cells[k][row]) if row < len(cells[k]) else "" for k in range(len(columns))))
    if table.caption:
        lines.append(f"# {_plain(table.caption)}")
    return lines


def _plain(cell: object | None) -> str:
    """A cell's text without its markup, on one line, without tabs."""
    from rich.errors import MarkupError
    from rich.text import Text

    if cell is None:
        return ""
    try:
        text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
    except MarkupError:                        # brackets that are not markup: rich would fail on them too
        text = str(cell)
    return BREAK.join(part.strip() for part in text.splitlines() if part.strip()).replace("\t", " ")
