"""Batched autoregressive sampling over *unique* prefixes with integer counts.

Instead of drawing ``n_samples`` sequences one by one, the sampler carries the
set of distinct prefixes together with how many of the requested samples share
each one. At orbital ``i`` every prefix's count is split multinomially over its
4 children with the model's conditionals (exact-zero probabilities give exactly
zero children) and zero-count children are dropped. The result is the set of
unique configurations with int64 counts summing to ``n_samples``; its size is
bounded by the support of P, not by ``n_samples`` (10^12 works).

With a KV cache each step feeds only the newest token of each surviving prefix;
the cache rows follow the prefixes (gathered, repeated for siblings). Everything
stays on the model's device; the only host sync per step is the frontier size.
When the frontier would exceed ``max_frontier`` rows it is split into chunks that
are finished depth-first, one after another, each with its own cache slice.

The model is used only through the :class:`~nnqs.vmc.protocols.SamplerModel` contract:
``n_orbitals``, ``device``, ``new_cache(branching=True)`` and
``next_log_conditional(prefix, n_up, n_dn, cache)``.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
import torch

from nnqs.common.errors import UserError
from nnqs.nn.cache import AttentionCache
from nnqs.vmc.protocols import SamplerModel

MAX_SAMPLES = 2**53  # counts are carried as float64 (exact integers up to 2^53)


@dataclass
class Frontier:
    """Unique prefixes of length ``i`` and their sample counts.

    ``cache`` holds positions ``0..i-1`` for the *parent* rows; ``rows`` ``(B,)``
    picks each prefix's parent row (None: already aligned). The gather is deferred
    to the next step so a depth-first chunk copies only its own rows.
    """

    prefix: torch.Tensor  # (B, i) long
    counts: torch.Tensor  # (B,) float64, exact non-negative integers
    n_up: torch.Tensor  # (B,) long, alpha electrons in the prefix
    n_dn: torch.Tensor  # (B,) long, beta electrons in the prefix
    cache: AttentionCache | None = None
    rows: torch.Tensor | None = None
    shared: bool = False  # the cache is shared with sibling chunks: never release it

    def __len__(self) -> int:
        return int(self.counts.shape[0])

    def aligned_cache(self) -> AttentionCache | None:
        if self.cache is None or self.rows is None:
            return self.cache
        return self.cache.select(self.rows)

    def chunks(self, size: int) -> list["Frontier"]:
        """Row chunks of at most ``size`` prefixes, sharing the parent cache."""
        rows = self.rows
        if rows is None and self.cache is not None:
            rows = torch.arange(len(self), device=self.counts.device)
        parts = [t.split(size) for t in (self.prefix, self.counts, self.n_up, self.n_dn)]
        row_parts = rows.split(size) if rows is not None else [None] * len(parts[0])
        return [Frontier(*fields, self.cache, r, shared=True) for *fields, r in zip(*parts, row_parts)]


class UniqueLimit(Exception):
    """A draw abandoned because it would hold more unique configurations than its ``max_unique``."""


def split_counts(
    counts: torch.Tensor, probs: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Multinomial split of integer ``counts`` ``(B,)`` over ``probs`` ``(B, K)`` -> ``(B, K)`` float64.

    Sequential conditional binomials: child ``s`` draws Binomial(remaining, p_s / sum_{t>=s} p_t).
    Exact in float64 up to 2^53; rows sum to ``counts``; ``p_s == 0`` gives exactly 0;
    ``probs`` need not be normalised. Reproducible from ``generator``.
    """
    probs = probs.double()
    tail = probs.flip(-1).cumsum(-1).flip(-1)  # tail[:, s] = p_s + tail[:, s + 1]
    q = torch.where(tail > 0, probs / tail.clamp(min=torch.finfo(torch.float64).tiny), 0.0).clamp(0.0, 1.0)
    remaining = counts.double()
    out = torch.empty_like(probs)
    for s in range(probs.shape[1] - 1):
        draw = torch.binomial(remaining, q[:, s], generator=generator)
        draw = torch.where(q[:, s] >= 1.0, remaining, draw.clamp(min=0.0).minimum(remaining))
        out[:, s] = draw
        remaining = remaining - draw
    out[:, -1] = remaining
    return out


def _step(model: SamplerModel, frontier: Frontier, generator: torch.Generator | None) -> Frontier:
    """Extend every prefix by one orbital, splitting counts and dropping zero-count children."""
    cache = frontier.aligned_cache()
    logp = model.next_log_conditional(frontier.prefix, frontier.n_up, frontier.n_dn, cache)  # (B, 4)
    if cache is not frontier.cache and not frontier.shared and hasattr(frontier.cache, "release"):
        frontier.cache.release()  # the parent rows were gathered by the forward: recycle them
    children = split_counts(frontier.counts, logp.double().exp(), generator).flatten()  # (4B,)
    index = children.nonzero().squeeze(1)  # the one host sync of the step
    parent, state = index // 4, index % 4
    return Frontier(
        prefix=torch.cat([frontier.prefix[parent], state.unsqueeze(1)], dim=1),
        counts=children[index],
        n_up=frontier.n_up[parent] + (state & 1),
        n_dn=frontier.n_dn[parent] + (state >> 1),
        cache=cache,
        rows=parent,
    )


def _check_args(model: SamplerModel, n_samples: int, generator: torch.Generator | None, max_frontier: int) -> int:
    try:
        n_samples = operator.index(n_samples)
    except TypeError:
        raise UserError(f"n_samples must be an integer, got {n_samples!r}") from None
    if not 1 <= n_samples <= MAX_SAMPLES:
        raise UserError(f"n_samples must be in 1..2**53, got {n_samples}")
    if max_frontier < 1:
        raise UserError(f"max_frontier must be >= 1, got {max_frontier}")
    if generator is not None and generator.device.type != model.device.type:
        raise UserError(f"generator is on {generator.device}, the model on {model.device}")
    return n_samples


def sample_unique(
    model: SamplerModel,
    n_samples: int,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    max_frontier: int = 2**16,
    max_unique: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n_samples`` configurations from ``model``; return them deduplicated.

    Returns ``configs`` ``(U, n)`` long (unique, lexicographically ordered, tokens 0..3)
    and ``counts`` ``(U,)`` int64 with ``counts.sum() == n_samples``. ``use_cache=False``
    re-runs the whole prefix every step (the slow reference; same generator stream).
    ``max_frontier`` bounds the prefixes processed at once (depth-first beyond it).
    ``max_unique`` (0: off): raise :class:`UniqueLimit` as soon as more than that many prefixes
    are alive. Every live prefix carries at least one sample, so it ends as at least one unique
    configuration: the draw is abandoned exactly when its result would hold more than
    ``max_unique``, before the frontier (and its caches) grows any further.
    """
    n_samples = _check_args(model, n_samples, generator, max_frontier)
    device = model.device
    zeros = torch.zeros(1, dtype=torch.long, device=device)
    root = Frontier(
        prefix=torch.zeros(1, 0, dtype=torch.long, device=device),
        counts=torch.full((1,), float(n_samples), dtype=torch.float64, device=device),
        n_up=zeros,
        n_dn=zeros,
        cache=model.new_cache(branching=True) if use_cache else None,
    )
    done: list[Frontier] = []
    stack = [root]
    settled = 1  # prefixes alive outside the current frontier: on the stack (the root) and done
    with torch.no_grad():
        while stack:
            frontier = stack.pop()
            settled -= len(frontier)
            while frontier.prefix.shape[1] < model.n_orbitals:
                frontier = _step(model, frontier, generator)
                if max_unique and settled + len(frontier) > max_unique:
                    raise UniqueLimit(max_unique)
                if len(frontier) > max_frontier:
                    first, *rest = frontier.chunks(max_frontier)
                    stack.extend(reversed(rest))
                    settled += sum(len(f) for f in rest)
                    frontier = first
            done.append(frontier)
            settled += len(frontier)
    configs = torch.cat([f.prefix for f in done])
    counts = torch.cat([f.counts for f in done]).long()
    return configs, counts
