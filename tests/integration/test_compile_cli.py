"""``ctxmt translate --compile`` (``api.load(compile=True)``, ctxmt_cli.models.compiled): a trained concatenation
model (a decoder reading a forced target prefix) translates the same documents to the same text compiled as
eager (slow: ``-m slow``; the default run compiles in tests/unit/test_compiled.py), and what cannot be compiled
is refused in one line."""

from __future__ import annotations

import pytest

from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.test_api import write_checkpoint
from tests.unit.train_fixtures import prepare_tiny


@pytest.mark.slow          # about 90 s on one thread: each kind of step input (first sentence, forced prefix) compiles
def test_a_compiled_decoder_translates_as_the_eager_one(concat_checkpoint, two_documents, tmp_path):
    outputs = {}
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        result = run_cli("translate", two_documents, "-c", concat_checkpoint, "--device", "cpu", "-o",
                         tmp_path / f"{name}.txt", *extra)
        assert result.exit_code == 0, result.output
        outputs[name] = (tmp_path / f"{name}.txt").read_text()
        assert ("compiling the decoder layers" in result.stderr) == bool(extra)
        assert "torch.compile failed" not in result.stderr                 # compiled, no fallback
    assert outputs["compiled"] == outputs["eager"]


def test_what_cannot_be_compiled_is_refused_in_one_line(tmp_path):
    docs = tmp_path / "docs.txt"
    docs.write_text("a b\n")
    ckpt = write_checkpoint(prepare_tiny(tmp_path), "sentence", tmp_path / "sentence.pt", {"family": "sentence"})
    assert_user_error(run_cli("translate", docs, "-c", ckpt, "--compile", "--quantize", "int8", "-o",
                              tmp_path / "out.txt"), "--compile", "--quantize")
    exported = tmp_path / "ct2"
    result = run_cli("export", "ctranslate2", "-c", ckpt, "-o", exported)
    assert result.exit_code == 0, result.output
    assert_user_error(run_cli("translate", docs, "-c", exported, "--engine", "ctranslate2", "--compile"),
                      "--compile", "the ctranslate2 engine")
    assert not (tmp_path / "out.txt").exists()
