"""Key/value cache for incremental (token-by-token) Transformer forwards.

Kept apart from the model: one entry per layer, each a pair of tensors of
shape ``(batch, heads, seq, head_dim)``. A sampler prunes and branches its
prefixes with :meth:`KVCache.select`, which gathers (and may repeat) batch rows.

:class:`AttentionCache` states the interface the attention and the core use
(``len``, ``batch_size``, ``update``, ``select``); :class:`KVCache` and
:class:`~nnqs.nn.branching_cache.BranchingKVCache` both implement it.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class AttentionCache(Protocol):
    """What :class:`~nnqs.nn.TransformerCore` needs of a KV cache."""

    def __len__(self) -> int:
        """Number of cached positions ``S`` (0 when empty)."""
        ...

    @property
    def batch_size(self) -> int:
        """Number of batch rows ``B`` (0 when empty)."""
        ...

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append keys/values ``(B, H, T, D)`` of ``layer``; return all ``(B, H, S + T, D)``."""
        ...

    def select(self, index: torch.Tensor) -> "AttentionCache":
        """A cache of batch rows ``index`` ``(B',)`` long (repeats allowed), same positions."""
        ...


class KVCache(AttentionCache):
    """Per-layer keys and values, ``[batch, heads, seq, head_dim]``."""

    def __init__(self, n_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers

    def __len__(self) -> int:
        """Number of cached positions (0 when empty)."""
        k = self.keys[0]
        return 0 if k is None else int(k.shape[2])

    @property
    def batch_size(self) -> int:
        k = self.keys[0]
        return 0 if k is None else int(k.shape[0])

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys/values ``(B, H, T, D)`` for ``layer``; return all ``(B, H, S, D)``."""
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=2)
            v = torch.cat([self.values[layer], v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def select(self, index: torch.Tensor) -> "KVCache":
        """A new cache holding batch rows ``index`` (LongTensor ``(B',)``; repeats allowed)."""
        out = KVCache(len(self.keys))
        out.keys = [None if k is None else k.index_select(0, index) for k in self.keys]
        out.values = [None if v is None else v.index_select(0, index) for v in self.values]
        return out

    def repeat_interleave(self, repeats: int) -> "KVCache":
        """Each batch row repeated ``repeats`` times in place order (row b -> rows b*r..b*r+r-1)."""
        index = torch.arange(self.batch_size, device=self._device()).repeat_interleave(repeats)
        return self.select(index)

    def _device(self) -> torch.device:
        k = self.keys[0]
        return torch.device("cpu") if k is None else k.device
