"""The learning-rate schedule both training modes use."""
from __future__ import annotations

import math


def warmup_cosine(step: int, warmup: int, total: int, floor: float) -> float:
    """Factor on the peak learning rate at ``step``: linear warmup over ``warmup`` steps to 1,
    then cosine decay to ``floor`` at ``total`` steps (and ``floor`` after)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
