"""ctxmt_cli.tables: a table is drawn on a terminal and written as tab-separated lines anywhere else, so a pipe or
a log file never gets cells wrapped a word a line at 80 columns."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table

from ctxmt_cli.tables import print_table, table_lines

LONG = "phenomenon: anaphora 51.2  deixis 48.0  ellipsis 63.5  lexical_cohesion 70.1  " * 3


def _table() -> Table:
    table = Table(title="contrastive accuracy (%)", caption="ties: items whose correct candidate's score equals "
                  "another candidate's " * 2)
    for column in ("set", "n", "by"):
        table.add_column(column)
    table.add_row("[bold]voita[/bold]", "4000", LONG + "\ndistance: 1 60.0  2 58.1")
    table.add_row("scat", "14000", "aggregate")
    return table


def _printed(renderable, terminal: bool) -> str:
    stream = io.StringIO()
    print_table(renderable, Console(file=stream, force_terminal=terminal, width=80))
    return stream.getvalue()


def test_off_a_terminal_each_row_is_one_tab_separated_line():
    text = _printed(_table(), terminal=False)
    lines = text.splitlines()
    assert lines[0] == "# contrastive accuracy (%)" and lines[1] == "set\tn\tby"
    rows = [line.split("\t") for line in lines[2:4]]
    assert rows[0] == ["voita", "4000", LONG.strip() + "; distance: 1 60.0  2 58.1"]   # markup gone, one line
    assert rows[1] == ["scat", "14000", "aggregate"]
    assert lines[4].startswith("# ties: ") and len(lines) == 5
    assert all(len(line) > 80 for line in lines[2:3])                    # not cut to the console's 80 columns


def test_on_a_terminal_the_table_is_drawn():
    text = _printed(_table(), terminal=True)
    assert "┃" in text or "│" in text
    assert "\t" not in text


def test_a_group_keeps_its_order_and_separates_its_tables():
    text = _printed(Group(_table(), "between", _table()), terminal=False)
    lines = text.splitlines()
    assert lines.count("# contrastive accuracy (%)") == 2
    assert lines.index("between") < len(lines) - 1 and "" in lines


def test_cells_that_look_like_markup_but_are_not_are_kept():
    table = Table("path")
    table.add_row("runs/[/x]/checkpoint.pt")
    assert table_lines(table) == ["path", "runs/[/x]/checkpoint.pt"]
