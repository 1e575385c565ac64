"""BERT's masking rule, for the encoder-only masked LM and MLM pretraining of an encoder.

Each real (non-PAD) token is chosen with probability ``rate`` (15%); a chosen token is
replaced by ``[MASK]`` with probability 0.8, by a uniformly random vocabulary token
(any id but PAD and [MASK]) with probability 0.1, and left unchanged with probability
0.1. The loss falls on the chosen positions only.

Answering starts from an intact question and an answer whose slots are all ``[MASK]``,
which 15% masking almost never shows (0.15**4 of the answers). So, with probability
``span_prob``, a row is an *answering row* instead: its question is left intact and its
whole answer ``span`` is chosen and set to ``[MASK]``. An answering row's targets are then
determined by its input; had its question been corrupted by the 15% rule too (as an
earlier version did), a masked operand digit would leave the answer undetermined and its
loss pure noise (benchmarks/RESULTS.md: fresh exact match 0.982 / 0.963 / 0.9945 on seeds
0-2 before, 0.999 / 1.0 / 1.0 now, with three answering rows in four). All draws come from
the run's ``torch.Generator``, so a training run is seeded and resumes bit for bit.
"""
from __future__ import annotations

import torch

from nnqs.lm.tokenizer import MASK, PAD

MASK_RATE = 0.15
P_MASK, P_RANDOM = 0.8, 0.1  # the rest (0.1) keeps the token


def mask_tokens(
    tokens: torch.Tensor, real: torch.Tensor, generator: torch.Generator | None = None, rate: float = MASK_RATE,
    span: torch.Tensor | None = None, span_prob: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt ``tokens`` ``(B, L)`` by the 80/10/10 rule; returns (inputs ``(B, L)``, chosen ``(B, L)``).

    ``real`` ``(B, L)`` is True on real tokens; PAD is never chosen. If no token was
    chosen at all (a tiny batch), the first real token is, so the loss is defined.
    ``span`` ``(B, L)``: the answer slots; with probability ``span_prob`` a row is an answering
    row: its span all ``[MASK]`` and chosen, the rest of the row intact and not chosen.
    """
    dev = tokens.device
    u_choose = torch.rand(tokens.shape, generator=generator).to(dev)
    u_kind = torch.rand(tokens.shape, generator=generator).to(dev)
    random_ids = torch.randint(0, PAD, tokens.shape, generator=generator).to(dev)  # ids 0..PAD-1
    chosen = (u_choose < rate) & real
    if not bool(chosen.any()):
        first = torch.nonzero(real)[0]
        chosen[first[0], first[1]] = True
    inputs = torch.where(chosen & (u_kind < P_MASK), MASK, tokens)
    inputs = torch.where(chosen & (u_kind >= P_MASK) & (u_kind < P_MASK + P_RANDOM), random_ids, inputs)
    if span is not None and span_prob > 0:
        answering = (torch.rand(tokens.shape[0], generator=generator).to(dev) < span_prob).unsqueeze(1)
        whole = answering & span & real
        inputs = torch.where(answering, tokens, inputs).masked_fill(whole, MASK)
        chosen = torch.where(answering, whole, chosen)
    return inputs, chosen
