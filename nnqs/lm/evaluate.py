"""The two metrics: whole-answer exact match and A5's per-token accuracy.

(For the encoder-only masked LM, "generated" means its answer slots filled from [MASK]
and "teacher forced" means all answer slots after BOS masked, one parallel pass.)

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
from nnqs.lm.build import ArithmeticLM
from nnqs.lm.encoder_lm import DEFAULT_FILL
from nnqs.lm.tokenizer import ANSWER_LEN, BOS, EOS, MASK, PAD, decode, encode_answer, encode_question


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
def evaluate(model: ArithmeticLM, batch: Batch, chunk: int = 2048, fill: str | None = None) -> Metrics:
    """Both metrics over ``batch`` (questions unpadded), in chunks of ``chunk`` rows.

    ``fill``: the encoder-only model's answering order (see :func:`nnqs.lm.generate.generate`)."""
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
            generated = generate(model, part.questions, max_new_tokens=max_new, fill=fill)
            n_exact += int(_matches(generated, part.answers, part.answer_mask).sum())
    finally:
        model.train(was_training)
    n = len(batch)
    return Metrics(n_exact / max(n, 1), n_correct / max(n_tokens, 1), n)


@torch.no_grad()
def evaluate_reference(model: ArithmeticLM, pairs: Pairs, fill: str | None = None) -> Metrics:
    """Oracle for :func:`evaluate`: a plain loop over ``pairs``, re-running the whole prefix
    (``model.next_logits``) for every token; exact match compares the decoded answer text.
    For the encoder-only model: :func:`_encoder_reference`."""
    if hasattr(model, "fill"):
        return _encoder_reference(model, pairs, fill or DEFAULT_FILL)
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


def _encoder_reference(model, pairs: Pairs, fill: str) -> Metrics:
    """The encoder-only model's oracle, one pair at a time: ``question BOS [MASK]*4`` through the
    plain forward; token accuracy from that one pass, exact match after filling the slots in
    ``fill`` order (``parallel``: all from the first pass; ``iterative``: most confident first)."""
    was_training = model.training
    model.eval()
    n_exact, n_correct, n_tokens = 0, 0, 0
    try:
        for question, answer in zip(pairs.questions, pairs.answers):
            q, reference = encode_question(question), encode_answer(answer)
            seq = q + [BOS] + [MASK] * (len(reference) - 1)
            logits = model(torch.tensor([seq]))[0]
            for j in range(1, len(reference)):
                n_correct += int(logits[len(q) + j].argmax()) == reference[j]
                n_tokens += 1
            open_slots = list(range(len(q) + 1, len(seq)))
            while open_slots:
                logits = model(torch.tensor([seq]))[0]
                if fill == "parallel":
                    seq[len(q) + 1:] = [int(logits[t].argmax()) for t in open_slots]
                    break
                best = max(open_slots, key=lambda t: float(torch.softmax(logits[t].float(), dim=-1).max()))
                seq[best] = int(logits[best].argmax())
                open_slots.remove(best)
            filled = seq[len(q):]
            n_exact += decode(filled[: filled.index(EOS) + 1] if EOS in filled else filled) == answer
    finally:
        model.train(was_training)
    return Metrics(n_exact / max(len(pairs), 1), n_correct / max(n_tokens, 1), len(pairs))
