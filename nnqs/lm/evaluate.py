"""The two metrics: whole-answer exact match and A5's per-token accuracy.

* ``exact_match``: the fraction of questions whose answer, generated greedily
  with the KV cache and stopped at EOS, equals the reference answer exactly.
* ``token_accuracy`` (A5's metric): teacher forced, the fraction of answer
  positions after BOS (sign, two digits, EOS) whose argmax is the reference token.

:func:`evaluate_reference` is the slow, obviously-correct twin used as a test oracle:
one pair at a time, the no-cache forward, answers compared as text.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from nnqs.lm.data import Batch, Pairs
from nnqs.lm.generate import generate
from nnqs.lm.models import ArithmeticLM
from nnqs.lm.tokenizer import ANSWER_LEN, BOS, EOS, PAD, decode, encode_answer, encode_question


@dataclass(frozen=True)
class Metrics:
    exact_match: float
    token_accuracy: float
    n_pairs: int


def _matches(generated: torch.Tensor, answers: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
    """Row-wise equality ``(B,)`` of generated answers and PAD-masked references (any widths)."""
    ref = answers.masked_fill(~answer_mask, PAD)
    width = max(generated.shape[1], ref.shape[1])
    gen = torch.nn.functional.pad(generated, (0, width - generated.shape[1]), value=PAD)
    ref = torch.nn.functional.pad(ref, (0, width - ref.shape[1]), value=PAD)
    return (gen == ref).all(dim=1)


@torch.no_grad()
def evaluate(model: ArithmeticLM, batch: Batch, chunk: int = 2048) -> Metrics:
    """Both metrics over ``batch`` (questions unpadded), in chunks of ``chunk`` rows."""
    was_training = model.training
    model.eval()
    n_exact, n_correct, n_tokens = 0, 0, 0
    try:
        for start in range(0, len(batch), chunk):
            part = batch.select(torch.arange(start, min(start + chunk, len(batch)), device=batch.questions.device))
            pred = model.answer_logits(part).argmax(dim=-1)
            mask = part.answer_mask[:, 1:]
            n_correct += int(((pred == part.answers[:, 1:]) & mask).sum())
            n_tokens += int(mask.sum())
            max_new = part.answers.shape[1] - 1
            generated = generate(model, part.questions, max_new_tokens=max_new)
            n_exact += int(_matches(generated, part.answers, part.answer_mask).sum())
    finally:
        model.train(was_training)
    n = len(batch)
    return Metrics(n_exact / max(n, 1), n_correct / max(n_tokens, 1), n)


@torch.no_grad()
def evaluate_reference(model: ArithmeticLM, pairs: Pairs) -> Metrics:
    """Oracle for :func:`evaluate`: a plain loop over ``pairs``, re-running the whole prefix
    (``model.next_logits``) for every token; exact match compares the decoded answer text."""
    was_training = model.training
    model.eval()
    n_exact, n_correct, n_tokens = 0, 0, 0
    try:
        for question, answer in zip(pairs.questions, pairs.answers):
            q = torch.tensor([encode_question(question)])
            reference = encode_answer(answer)
            for j in range(1, len(reference)):  # teacher forced: the reference prefix in, one token out
                predicted = int(model.next_logits(q, torch.tensor([reference[:j]]))[0].argmax())
                n_correct += predicted == reference[j]
                n_tokens += 1
            generated = [BOS]
            while len(generated) < ANSWER_LEN and generated[-1] != EOS:  # greedy, up to EOS
                generated.append(int(model.next_logits(q, torch.tensor([generated]))[0].argmax()))
            n_exact += decode(generated) == answer
    finally:
        model.train(was_training)
    return Metrics(n_exact / max(len(pairs), 1), n_correct / max(n_tokens, 1), len(pairs))
