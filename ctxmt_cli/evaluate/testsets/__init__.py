"""Contrastive test-set readers, one module per publisher, behind one plain dict.

``READERS[kind](path, **options) -> list[TestSet]``; a spec ``KIND`` with
``--data PATH`` or ``KIND:PATH`` picks the reader. Adding a set: one module,
one line here, its tests.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet, scores_lines

# kind -> "module:function"; modules are imported on use so one reader's dependencies never slow another
READERS = {
    "voita": "ctxmt_cli.evaluate.testsets.voita:read_voita",
    "contrapro": "ctxmt_cli.evaluate.testsets.contrapro:read_contrapro",
    "lopes": "ctxmt_cli.evaluate.testsets.lopes:read_lopes",
    "scat": "ctxmt_cli.evaluate.testsets.scat:read_scat",
    "synthetic": "ctxmt_cli.evaluate.testsets.generic:read_synthetic",
    "jsonl": "ctxmt_cli.evaluate.testsets.generic:read_jsonl",
}

__all__ = ["READERS", "ContrastiveItem", "TestSet", "load_testsets", "scores_lines"]


def load_testsets(spec: str, data: Path | None = None, **options) -> list[TestSet]:
    """The sets named by ``spec`` (``KIND`` or ``KIND:PATH``; ``data`` is the path when not in the spec)."""
    kind, _, where = spec.partition(":")
    if kind not in READERS:
        raise CtxmtError(f"unknown test set {spec!r}: choose one of {', '.join(READERS)} (e.g. voita {option('data')} "
                         "DIR or jsonl:PATH)")
    path = Path(where) if where else data
    if path is None:
        raise CtxmtError(f"test set {kind!r} needs its files: give {kind}:PATH or {option('data')} PATH")
    # a file prefix (scat:DIR/highlighted.test) is fine
    if not path.exists() and not any(path.parent.glob(path.name + ".*")):
        raise CtxmtError(f"{kind} test set not found: {path}")
    module, _, function = READERS[kind].partition(":")
    return getattr(import_module(module), function)(path, **options)
