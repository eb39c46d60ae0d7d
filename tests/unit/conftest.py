"""Fixtures shared by unit-test modules."""

import pytest
import torch

from tests.unit.tiny_text import tokenizer  # noqa: F401 (fixture: a real SentencePiece model on tiny text)
from tests.unit.train_fixtures import _restore_threads, prepared  # noqa: F401 (fixtures of the training tests)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of tiny models: on a shared 2-core machine threads only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
