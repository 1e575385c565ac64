"""The shared Transformer core: embeddings, pre-LayerNorm blocks, final norm.

It knows nothing of orbitals or digits: it maps token ids ``(B, T)`` to hidden
states ``(B, T, C)``. The wavefunction and the language models put their own
heads on top. One ``forward`` serves both the full parallel pass (training)
and the incremental pass over a :class:`~nnqs.nn.cache.KVCache` (sampling,
generation): with a cache, positions continue from ``len(cache)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nnqs.nn.attention import CrossAttention, SelfAttention
from nnqs.nn.cache import AttentionCache, KVCache


@dataclass(frozen=True)
class CoreConfig:
    """Shape of a Transformer core."""

    vocab_size: int
    max_len: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None  # MLP width; 4 * d_model when None
    dropout: float = 0.0
    causal: bool = True  # False: bidirectional encoder
    cross_attention: bool = False  # True: each block also attends to a memory


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Block(nn.Module):
    """Pre-LN block: self-attention, optional cross-attention, MLP, each residual."""

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        d_ff = cfg.d_ff or 4 * cfg.d_model
        self.ln_attn = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.ln_cross = nn.LayerNorm(cfg.d_model) if cfg.cross_attention else None
        self.cross = CrossAttention(cfg.d_model, cfg.n_heads, cfg.dropout) if cfg.cross_attention else None
        self.ln_mlp = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg.d_model, d_ff, cfg.dropout)
        self.causal = cfg.causal

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: torch.Tensor | None,
        cache: AttentionCache | None,
        layer: int,
        memory: torch.Tensor | None,
        memory_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x), self.causal, key_padding_mask, cache, layer)
        if self.cross is not None:
            assert memory is not None, "a cross-attention core needs a memory"
            x = x + self.cross(self.ln_cross(x), memory, memory_mask)
        return x + self.mlp(self.ln_mlp(x))


class TransformerCore(nn.Module):
    """Token + learned position embeddings, ``n_layers`` blocks, final LayerNorm."""

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(_init_weights)

    def new_cache(self) -> KVCache:
        return KVCache(self.cfg.n_layers)

    def forward(
        self,
        tokens: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        cache: AttentionCache | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Hidden states ``(B, T, C)`` for token ids ``tokens`` ``(B, T)``.

        ``key_padding_mask`` is ``(B, S)`` over all key positions (cached + new),
        True on real tokens. With ``cache`` the T tokens continue the cached
        sequence and their keys/values are appended to it.
        """
        start = len(cache) if cache is not None else 0
        t = tokens.shape[1]
        assert start + t <= self.cfg.max_len, f"sequence of {start + t} exceeds max_len {self.cfg.max_len}"
        pos = torch.arange(start, start + t, device=tokens.device)
        x = self.drop(self.tok_emb(tokens) + self.pos_emb(pos))
        for i, block in enumerate(self.blocks):
            x = block(x, key_padding_mask, cache, i, memory, memory_mask)
        return self.ln_f(x)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
