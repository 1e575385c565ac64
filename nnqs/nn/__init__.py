"""The shared Transformer core (no physics, no digits)."""
from nnqs.nn.cache import KVCache
from nnqs.nn.core import CoreConfig, TransformerCore

__all__ = ["CoreConfig", "KVCache", "TransformerCore"]
