"""Test setup: without a GPU, generated kernels run through Triton's interpreter on the CPU."""
import os

import pytest

import tempfile

os.environ.setdefault("SOLDER_AUTOTUNE", "0")
# each pytest run compiles into its own cache: a test that patches Solder must not be served
# a graph compiled without the patch in an earlier run
os.environ.setdefault("SOLDER_CACHE_DIR", tempfile.mkdtemp(prefix="solder-test-cache-"))
try:
    import torch
    _HAS_CUDA = torch.cuda.is_available()
except Exception:  # pragma: no cover
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
else:
    # the same tests run on the GPU: tensors they create land there
    torch.set_default_device("cuda")
# the "solder" backend is registered on import (an installed checkout also registers it through
# its entry point; one run from PYTHONPATH does not)
import solder  # noqa: E402,F401


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_slow = pytest.mark.skip(reason="slow on the CPU interpreter: use --runslow")
    for item in items:
        if "gpu" in item.keywords and not _HAS_CUDA:
            item.add_marker(skip_gpu)
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(skip_slow)


@pytest.fixture
def device():
    return "cuda" if _HAS_CUDA else "cpu"


@pytest.fixture(autouse=True)
def _reset_dynamo():
    import torch._dynamo
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
