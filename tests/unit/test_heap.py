"""The C-heap setting every ctxmt command starts with: freed tensor memory reused, not mapped again page by page."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from ctxmt_cli import heap

GLIBC = heap._glibc() is not None
app_module = importlib.import_module("ctxmt_cli.cli.app")   # the module (the package exports the app)

#: a fresh process runs a beam-4 search twice (32 sentences x 12 steps of the ``small`` model, 16k vocabulary:
#: logits of 8 MB a step, key/value caches of a few MB reordered every step) and prints the page faults of the
#: second run, with the setting (``keep``) or glibc's default
SEARCH = textwrap.dedent("""
    import resource, sys, torch
    from ctxmt_cli.config import validate_recipe
    from ctxmt_cli.core.batch import Batch, VocabInfo
    from ctxmt_cli.decode.search import beam_search
    from ctxmt_cli.heap import keep_freed_memory
    from ctxmt_cli.models.families import build_model
    print(keep_freed_memory() if sys.argv[1] == "keep" else "default")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model(validate_recipe({"model": {"family": "sentence", "preset": "small"}}).model,
                        VocabInfo(16000, 16000)).eval()
    batch = Batch(src=torch.randint(10, 16000, (32, 20)))
    run = lambda: beam_search(model, batch, beam=4, max_len=12, min_len=12)
    run()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    run()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(mode: str, **env: str) -> tuple[str, int]:
    """(what keep_freed_memory returned, or "default"; page faults of the second search) in a fresh process."""
    environ = {k: v for k, v in os.environ.items() if heap.user_chose_allocator({k: v}) is None} | env
    out = subprocess.run([sys.executable, "-c", SEARCH, mode], capture_output=True, text=True, check=True,
                         env=environ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.parametrize(("environ", "chosen"), [
    ({}, None),
    ({"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt"}, None),
    ({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}, "LD_PRELOAD"),
    ({"LD_PRELOAD": "  "}, None),                                           # set but empty: nothing preloaded
    ({"MALLOC_ARENA_MAX": "2"}, "MALLOC_ARENA_MAX"),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, "MALLOC_TRIM_THRESHOLD_"),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, "GLIBC_TUNABLES"),
    ({"GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=512"}, None),       # tunables of something else
])
def test_the_users_own_allocator_setting_is_found(environ, chosen):
    assert heap.user_chose_allocator(environ) == chosen


@pytest.mark.skipif(not GLIBC, reason="the heap thresholds are glibc's")
def test_a_search_reuses_freed_memory_instead_of_new_pages():
    default, faults = _faults("default")
    if faults < 1000:
        pytest.skip(f"glibc's default gave only {faults} page faults here: nothing for the setting to save")
    mode, kept = _faults("keep")
    assert mode == "True"
    assert kept * 4 < faults                                                # measured 257 against 7,393


@pytest.mark.skipif(not GLIBC, reason="the heap thresholds are glibc's")
def test_the_users_choice_wins():
    mode, _ = _faults("keep", MALLOC_ARENA_MAX="4")
    assert mode == "False"                                                  # nothing set


def test_every_command_starts_with_the_setting(monkeypatch):
    calls = []
    monkeypatch.setattr(app_module, "keep_freed_memory", lambda: calls.append(1) or True)
    result = CliRunner().invoke(app_module.app, ["translate", "--help"])
    assert result.exit_code == 0 and calls == [1]
