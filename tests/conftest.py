import os
import sys
from pathlib import Path

import pytest
import torch

from nnqs.common.allocator import reuse_freed_memory

sys.path.insert(0, str(Path(__file__).parent))  # tests_support: oracles shared by tests
torch.set_num_threads(1)
reuse_freed_memory()  # as the nnqs command does; the whole suite then runs one way


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Every test (and subprocess) caches into a fresh folder, never ~/.cache/nnqs."""
    old = os.environ.get("NNQS_CACHE_DIR")
    os.environ["NNQS_CACHE_DIR"] = str(tmp_path_factory.mktemp("nnqs-cache"))
    yield
    if old is None:
        os.environ.pop("NNQS_CACHE_DIR", None)
    else:
        os.environ["NNQS_CACHE_DIR"] = old
