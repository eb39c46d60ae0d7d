"""ctxmt_cli.device: --device names and the one function that turns them into a torch.device."""

from __future__ import annotations

import pytest
import torch

from ctxmt_cli.device import check_device_name, resolve_device
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.loading import torch_device

CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_names_ctxmt_runs_on(name):
    assert check_device_name(name) == name


@pytest.mark.parametrize("name", ["gpu", "CPU", "cuda:", "cuda:x", "mps", "cuda0", ""])
def test_other_names_are_one_line(name):
    with pytest.raises(CtxmtError, match="auto | cpu | cuda | cuda:N"):
        check_device_name(name)


def test_auto_is_cuda_when_present_else_cpu():
    assert resolve_device("auto").type == ("cuda" if CUDA else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")             # a torch.device passes through
    assert torch_device("auto") == resolve_device("auto")                         # the loader's name for it


@pytest.mark.skipif(CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("name", ["cuda", "cuda:0"])
def test_cuda_without_cuda_is_refused(name):
    with pytest.raises(CtxmtError, match=f"device='{name}': CUDA is not available on this machine"):
        resolve_device(name)


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_devices_by_index_and_local_rank():
    count = torch.cuda.device_count()
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("auto", local_rank=count) == torch.device("cuda", 0)   # modulo the device count
    assert resolve_device(f"cuda:{count - 1}") == torch.device("cuda", count - 1)
    with pytest.raises(CtxmtError, match=f"this machine has {count} CUDA device"):
        resolve_device(f"cuda:{count}")
