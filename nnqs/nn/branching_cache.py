"""A KV cache for tree-shaped decoding: rows branch and die at every step.

The plain :class:`~nnqs.nn.KVCache` appends with ``torch.cat`` and branches with
``index_select``: two fresh full-size copies of the history per step, each in
newly allocated (page-faulting) memory. During sampling the history is copied
every step anyway (children inherit their parent's rows), so this cache fuses
the two: ``select`` is lazy, and the next ``update`` gathers the parent rows and
appends the new position in a single pass, writing into recycled buffers from a
:class:`BufferPool`. The result per layer is a contiguous ``(B, H, S, D)``
tensor, as the attention expects.

Lifetime: a cache reads its parent's buffers during its first update; after that
the parent may be :meth:`~BranchingKVCache.release`-d (inference only, under no_grad), returning its buffers to
the pool. A parent that will be branched again later (depth-first chunks) is
simply not released.
"""
from __future__ import annotations

import torch

from nnqs.nn.cache import AttentionCache


class BufferPool:
    """Recycled flat storages; a "slot" is one flat tensor per layer for keys and one for values."""

    def __init__(self, headroom: float = 1.5, max_free: int = 2) -> None:
        self.free: list[list[torch.Tensor]] = []
        self.headroom = headroom
        self.max_free = max_free

    def acquire(self, n_tensors: int, numel: int, like: torch.Tensor) -> list[torch.Tensor]:
        """A slot of ``n_tensors`` flat tensors with at least ``numel`` elements each."""
        for i, slot in enumerate(self.free):
            if slot[0].numel() >= numel and slot[0].dtype == like.dtype and slot[0].device == like.device:
                return self.free.pop(i)
        size = int(numel * self.headroom) + 1
        return [like.new_empty(size) for _ in range(n_tensors)]

    def release(self, slot: list[torch.Tensor]) -> None:
        self.free.append(slot)
        if len(self.free) > self.max_free:
            self.free.sort(key=lambda s: s[0].numel())
            self.free.pop(0)  # drop the smallest


class BranchingKVCache(AttentionCache):
    """Per-layer keys and values ``(B, H, S, D)`` with lazy, fused branch-and-append.

    Implements :class:`~nnqs.nn.cache.AttentionCache` (``update``, ``len``, ``batch_size``,
    ``select``) so :class:`~nnqs.nn.TransformerCore` uses it unchanged.
    """

    def __init__(self, n_layers: int, pool: BufferPool | None = None) -> None:
        self.n_layers = n_layers
        self.pool = pool if pool is not None else BufferPool()
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.slot: list[torch.Tensor] | None = None
        self.parent: BranchingKVCache | None = None  # rows still to gather from, when pending
        self.rows: torch.Tensor | None = None
        self._length = 0
        self._rows_count = 0
        self._old_slot: list[torch.Tensor] | None = None

    def __len__(self) -> int:
        """Number of cached positions."""
        return self._length

    @property
    def batch_size(self) -> int:
        return self._rows_count

    def select(self, index: torch.Tensor) -> "BranchingKVCache":
        """A new cache of batch rows ``index`` ``(B',)`` (repeats allowed); copied at its next update."""
        out = BranchingKVCache(self.n_layers, self.pool)
        out.parent, out.rows = self, index
        out._length, out._rows_count = self._length, int(index.shape[0])
        return out

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``k``, ``v`` ``(B', H, T, D)`` at the end of ``layer``; return all ``(B', H, S, D)``.

        Inference only: the buffers are written in place, outside autograd.
        """
        assert not k.requires_grad, "BranchingKVCache is for inference: run under torch.no_grad()"
        source = self.parent if self.parent is not None else self
        old_k, old_v = source.keys[layer], source.values[layer]
        b, h, t, d = k.shape
        length = 0 if old_k is None else old_k.shape[2]
        if layer == 0:
            self._old_slot = self.slot if self.parent is None else None
            self.slot = self.pool.acquire(2 * self.n_layers, b * h * (length + t) * d, k)
        new_k = self.slot[2 * layer][: b * h * (length + t) * d].view(b, h, length + t, d)
        new_v = self.slot[2 * layer + 1][: b * h * (length + t) * d].view(b, h, length + t, d)
        for old, new, x in ((old_k, new_k, k), (old_v, new_v, v)):
            if length and self.rows is not None:
                torch.index_select(old, 0, self.rows, out=new[:, :, :length])
            elif length:
                new[:, :, :length].copy_(old)
            new[:, :, length:].copy_(x)
        self.keys[layer], self.values[layer] = new_k, new_v
        if layer == self.n_layers - 1:
            self._finish_update(length + t, b)
        return new_k, new_v

    def _finish_update(self, length: int, rows: int) -> None:
        if self._old_slot is not None:
            self.pool.release(self._old_slot)
        self._old_slot = None
        self.parent, self.rows = None, None
        self._length, self._rows_count = length, rows

    def release(self) -> None:
        """Return this cache's buffers to the pool; the cache must not be read afterwards."""
        if self.slot is not None:
            self.pool.release(self.slot)
        self.slot = None
        self.keys = [None] * self.n_layers
        self.values = [None] * self.n_layers
