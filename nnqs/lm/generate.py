"""Answer generation: greedy or sampled (temperature, top-k, top-p), with the KV cache.

:func:`generate` feeds each new token through the model's cache; with
``use_cache=False`` it re-runs the whole prefix every step instead (the slow,
obviously correct twin). Both draw their random numbers in the same order, so
for the same generator state they give the same tokens. Sampling uses one
uniform number per row and step and inverts the cumulative distribution, so
the draw depends only on the probabilities, not on kernel details.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from nnqs.common.errors import UserError
from nnqs.lm.build import ArithmeticLM
from nnqs.lm.tokenizer import ANSWER_LEN, BOS, EOS, PAD, decode


GREEDY_BELOW = 1e-4  # a temperature under this is greedy: logits / T would overflow float32 (NaN)


@dataclass(frozen=True)
class Sampling:
    """How the next token is picked. ``temperature < GREEDY_BELOW`` (0 included) is greedy
    (argmax); ``top_p`` keeps the smallest set of most likely tokens reaching mass ``top_p``,
    and always at least the most likely one."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise UserError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise UserError(f"top-k must be >= 1, got {self.top_k}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise UserError(f"top-p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW


GREEDY = Sampling()


def filtered_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Probabilities ``(B, V)`` after temperature, top-k and top-p (nucleus) filtering.

    Finite for every valid ``sampling``: the temperature is floored at ``GREEDY_BELOW`` and
    the most likely token always survives top-p.
    """
    logits = logits.float() / max(sampling.temperature, GREEDY_BELOW)
    if sampling.top_k is not None and sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p is not None and sampling.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass strictly above each token
        drop = before >= sampling.top_p
        drop[:, 0] = False  # the top token always stays (even for a top_p below float32's resolution)
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return probs / probs.sum(dim=-1, keepdim=True)


def pick_next(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> torch.Tensor:
    """Next token ids ``(B,)`` from logits ``(B, V)``; sampling draws ``B`` uniforms from ``generator``."""
    if sampling.greedy:
        return logits.argmax(dim=-1)
    probs = filtered_probs(logits, sampling)
    u = torch.rand(probs.shape[0], 1, generator=generator, device=probs.device)
    cdf = torch.cumsum(probs, dim=-1)
    choice = torch.searchsorted(cdf, u * cdf[:, -1:]).squeeze(1)
    # guard against the rounding edge: never land on a zero-probability token
    choice = choice.clamp(max=probs.shape[-1] - 1)
    bad = probs.gather(1, choice.unsqueeze(1)).squeeze(1) == 0
    return torch.where(bad, probs.argmax(dim=-1), choice)


@torch.no_grad()
def generate(
    model: ArithmeticLM,
    questions: torch.Tensor,
    sampling: Sampling = GREEDY,
    generator: torch.Generator | None = None,
    max_new_tokens: int = ANSWER_LEN - 1,
    use_cache: bool = True,
    fill: str | None = None,
) -> torch.Tensor:
    """Answers ``(B, 1 + n)`` for unpadded ``questions`` ``(B, Lq)``: BOS, then generated tokens.

    A row stops at its EOS (later slots are PAD); generation ends when every
    row has stopped or after ``max_new_tokens`` tokens. The encoder-only model has
    no cache: it fills ``max_new_tokens`` masked slots in the order ``fill``
    (``parallel`` or ``iterative``; its default when None), see :meth:`EncoderLM.fill`.
    """
    if hasattr(model, "fill"):
        order = {} if fill is None else {"order": fill}
        return model.fill(questions, max_new_tokens, pick=lambda logits: pick_next(logits, sampling, generator),
                          **order)
    b, dev = questions.shape[0], questions.device
    answer = [torch.full((b, 1), BOS, dtype=torch.long, device=dev)]
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    if use_cache:
        state, logits = model.start(questions)
    else:
        logits = model.next_logits(questions, answer[0])
    for step in range(max_new_tokens):
        token = torch.where(done, PAD, pick_next(logits, sampling, generator))
        answer.append(token.unsqueeze(1))
        done |= token == EOS
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        if use_cache:
            logits = model.extend(state, token)
        else:
            logits = model.next_logits(questions, torch.cat(answer, dim=1))
    return torch.cat(answer, dim=1)


def answer_to_text(tokens: torch.Tensor) -> str:
    """Text of one generated answer ``(L,)``, up to and including its EOS, without padding."""
    ids = [int(t) for t in tokens.tolist() if int(t) != PAD]
    if EOS in ids:
        ids = ids[: ids.index(EOS) + 1]
    return decode(ids)
