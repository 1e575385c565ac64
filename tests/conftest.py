import sys
from pathlib import Path

import torch

from nnqs.allocator import reuse_freed_memory

sys.path.insert(0, str(Path(__file__).parent))  # tests_support: oracles shared by tests
torch.set_num_threads(1)
reuse_freed_memory()  # as the nnqs command does; the whole suite then runs one way
