"""The shared Transformer core (no physics, no digits)."""
from nnqs.nn.cache import AttentionCache, KVCache
from nnqs.nn.core import CoreConfig, TransformerCore

__all__ = ["AttentionCache", "CoreConfig", "KVCache", "TransformerCore"]
