"""Multi-head attention on ``torch.nn.functional.scaled_dot_product_attention``.

Masks are boolean with True meaning "may attend". Shapes: ``B`` batch, ``T``
new (query) positions, ``S`` key positions (cached + new), ``C`` model width,
``H`` heads, ``D = C / H``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nnqs.nn.cache import AttentionCache


def _split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, c = x.shape  # (B, T, C) -> (B, H, T, D)
    return x.view(b, t, n_heads, c // n_heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d = x.shape  # (B, H, T, D) -> (B, T, C)
    return x.transpose(1, 2).reshape(b, t, h * d)


def build_mask(
    t: int, s: int, causal: bool, key_padding_mask: torch.Tensor | None, device: torch.device
) -> torch.Tensor | None:
    """Boolean attention mask ``(B or 1, 1, T, S)``, or None when nothing is masked.

    The T queries are the last T of the S positions (earlier ones are cached),
    so query i sits at absolute position ``s - t + i``. ``key_padding_mask`` is
    ``(B, S)``, True on real tokens. A query row with no allowed key (possible
    only for padding queries) is opened fully so the softmax stays finite.
    """
    mask = None
    if causal and t > 1:
        q_pos = torch.arange(s - t, s, device=device).unsqueeze(1)
        mask = (torch.arange(s, device=device).unsqueeze(0) <= q_pos).view(1, 1, t, s)
    if key_padding_mask is not None:
        pad = key_padding_mask.view(key_padding_mask.shape[0], 1, 1, s)
        mask = pad if mask is None else mask & pad
    if mask is not None:
        mask = mask | ~mask.any(dim=-1, keepdim=True)
    return mask


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool,
           dropout: float) -> torch.Tensor:
    """Attention of ``q`` (B, H, T, D) over ``k``, ``v`` (B, H, S, D) -> (B, H, T, D).

    ``scaled_dot_product_attention`` normally; under a functorch transform
    (vmap for per-sample gradients), which has no batching rule for SDPA's
    fused kernels, the same arithmetic written out (softmax(q k^T / sqrt(D)) v).
    """
    is_causal = mask is None and causal and q.shape[2] == k.shape[2] and q.shape[2] > 1
    if not torch._C._functorch.is_functorch_wrapped_tensor(q):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal)
    t, s = q.shape[2], k.shape[2]
    if is_causal:
        mask = build_mask(t, s, True, None, q.device)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return F.dropout(torch.softmax(scores, dim=-1), dropout) @ v


class SelfAttention(nn.Module):
    """Multi-head self-attention, causal or bidirectional, with an optional KV cache."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(
        self,
        x: torch.Tensor,
        causal: bool,
        key_padding_mask: torch.Tensor | None = None,
        cache: AttentionCache | None = None,
        layer: int = 0,
    ) -> torch.Tensor:
        """``x`` (B, T, C) -> (B, T, C). With ``cache``, keys/values are appended to it."""
        q, k, v = (_split_heads(z, self.n_heads) for z in self.qkv(x).chunk(3, dim=-1))
        if cache is not None:
            k, v = cache.update(layer, k, v)
        t, s = q.shape[2], k.shape[2]
        mask = build_mask(t, s, causal, key_padding_mask, x.device)
        y = attend(q, k, v, mask, causal, self.dropout if self.training else 0.0)
        return self.proj(_merge_heads(y))


class CrossAttention(nn.Module):
    """Multi-head attention from a decoder stream onto a fixed memory (encoder output)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``x`` (B, T, C), ``memory`` (B, M, C), ``memory_mask`` (B, M) True on real tokens."""
        q = _split_heads(self.q(x), self.n_heads)
        k, v = (_split_heads(z, self.n_heads) for z in self.kv(memory).chunk(2, dim=-1))
        mask = None
        if memory_mask is not None:
            mask = memory_mask.view(memory_mask.shape[0], 1, 1, memory_mask.shape[1])
        y = attend(q, k, v, mask, False, self.dropout if self.training else 0.0)
        return self.proj(_merge_heads(y))
