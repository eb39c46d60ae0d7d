"""``ctxmt serve`` on the command line: --help, one-line refusals (missing checkpoint, bad options, an address in
use, options the model does not read, a bilingual model without --first-pass, missing server packages), and a real
server process: the listening line, a translation over HTTP, Ctrl-C stops it cleanly."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.test_api import write_checkpoint
from tests.unit.train_fixtures import prepare_tiny


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny random checkpoints: a concatenation model, an mbe model and a bilingual hanoit."""
    root = tmp_path_factory.mktemp("serve-cli")
    prepared = prepare_tiny(root)
    specs = {"concat": {"family": "concat", "src_context_sentences": 1, "tgt_context_sentences": 1},
             "mbe": {"family": "mbe"},
             "bilingual": {"family": "hanoit", "bilingual": True, "encoder_layers": 2, "src_next_sentences": 1}}
    return {name: write_checkpoint(prepared, name, root / f"{name}.pt", spec) for name, spec in specs.items()}


def test_help_lists_the_options():
    result = run_cli("serve", "--help")
    assert result.exit_code == 0
    for option in ("--checkpoint", "--host", "--port", "--device", "--max-documents", "--max-batch-docs",
                   "--max-sentences", "--max-sentence-chars", "--batch-wait-ms", "--beam", "--first-pass"):
        assert option in result.output


def test_refusals_are_one_line(models, tmp_path):
    assert_user_error(run_cli("serve", "-c", tmp_path / "missing.pt", "--port", 0), "checkpoint not found")
    assert_user_error(run_cli("serve"), "--checkpoint")
    assert_user_error(run_cli("serve", "-c", models["concat"], "--port", 70000), "--port")
    assert_user_error(run_cli("serve", "-c", models["concat"], "--device", "gpu"), "--device gpu")
    assert_user_error(run_cli("serve", "-c", models["concat"], "--max-documents", 0), "--max-documents")
    assert_user_error(run_cli("serve", "-c", models["concat"], "--port", 0, "--group-sentences", 2),
                      "--group-sentences 2", "does not read sentence groups")
    assert_user_error(run_cli("serve", "-c", models["concat"], "--port", 0, "--max-document-sentences", 9),
                      "--max-document-sentences 9")
    assert_user_error(run_cli("serve", "-c", models["bilingual"], "--port", 0, "--device", "cpu"), "--first-pass")
    assert_user_error(run_cli("serve", "-c", models["concat"], "--port", 0, "--first-pass", models["concat"]),
                      "reads no target context")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert_user_error(run_cli("serve", "-c", models["concat"], "--port", port),
                          f"cannot listen on 127.0.0.1:{port}", "--port")


@pytest.mark.parametrize("package", ["starlette", "uvicorn"])
def test_a_missing_server_package_is_one_line(package, models, monkeypatch):
    monkeypatch.setitem(sys.modules, package, None)                    # `import uvicorn` raises ImportError
    assert_user_error(run_cli("serve", "-c", models["concat"]), package, "pip install 'ctxmt[serve]'")


@pytest.mark.parametrize("weights", ["float32", "int8"])
def test_a_server_process_translates_and_stops_on_ctrl_c(models, weights):
    quantize = ["--quantize", weights] if weights == "int8" else []
    process = subprocess.Popen([sys.executable, "-m", "ctxmt_cli", "serve", "-c", str(models["mbe"]), "--port", "0",
                                "--device", "cpu", "--group-sentences", "2", "--log-format", "json", *quantize],
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+) \(mbe model \S+" + (", int8" if quantize else ";"),
                          line)
        assert found, line
        url = found.group(1)
        request = urllib.request.Request(url + "/translate", method="POST",
                                         data=json.dumps({"doc_id": "d", "sentences": ["a b", "c"]}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            body = json.loads(response.read())
        assert len(body["translations"]) == 2 and body["context"] == "new"
        with urllib.request.urlopen(url + "/health", timeout=60) as response:
            health = json.loads(response.read())
        assert health["family"] == "mbe" and health["documents"] == 1 and "unfinished group" in health["keeps"]
    finally:
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    assert process.returncode == 0, rest
    assert "Traceback" not in rest
    listening = json.loads(line)                   # --log-format json: the server's lines are JSON objects too
    assert listening["kind"] == "message" and listening["url"] == url


def test_importing_the_server_modules_loads_no_torch_or_server_package():
    code = ("import sys, ctxmt_cli.cli.serve, ctxmt_cli.serve.app, ctxmt_cli.serve.engine, ctxmt_cli.serve.server; "
            "print([m for m in ('torch', 'starlette', 'uvicorn') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"
