"""The encoder-only masked LM (BERT-style) on the shared :class:`TransformerCore`, bidirectional.

It reads one sequence ``question answer`` (the A5 tokens, no role markers) with full
(non-causal) self-attention; padding is masked in attention and in the loss.

* Training (:meth:`EncoderLM.loss`): BERT's rule (:mod:`nnqs.lm.masking`) corrupts 15% of
  the real tokens of question and answer; cross entropy on those positions only. Three rows
  in four (``answer_mask_prob``) are answering rows instead: the question intact, the whole
  answer masked, as at answering time.
* Answering (:meth:`EncoderLM.fill`): the answer's BOS is given and its other slots
  start as ``[MASK]``; they are filled either all at once in one parallel pass
  (``parallel``) or one per pass, the most confident open slot first (``iterative``,
  mask-predict). Slots after the first EOS become PAD, as in generation.
* ``answer_logits`` (token accuracy): every answer slot after BOS masked, one pass.

The same interface as the two other models (``loss``, ``answer_logits``), plus
``fill`` instead of the KV-cached ``start``/``extend``: :func:`nnqs.lm.generate.generate`
calls it for this architecture.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nnqs.lm.data import Batch
from nnqs.lm.masking import mask_tokens
from nnqs.lm.models import ModelConfig, _core_config, _mask_or_none, masked_cross_entropy
from nnqs.lm.tokenizer import BOS, EOS, INPUT_VOCAB_SIZE, MASK, PAD, VOCAB_SIZE
from nnqs.nn import TransformerCore

FILL_ORDERS = ("iterative", "parallel")
DEFAULT_FILL = "parallel"  # measured against iterative on trained models: see benchmarks/RESULTS.md


class EncoderLM(nn.Module):
    """Bidirectional encoder over ``question answer`` with a token head (input ids include [MASK])."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        core = dataclasses.replace(_core_config(cfg, causal=False, cross=False), vocab_size=INPUT_VOCAB_SIZE)
        self.core = TransformerCore(core)
        self.head = nn.Linear(cfg.d_model, VOCAB_SIZE)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(B, L, V)`` at every position of ``tokens`` ``(B, L)``; ``mask`` (B, L) True on real tokens."""
        return self.head(self.core(tokens, key_padding_mask=mask))

    @staticmethod
    def pack(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The sequences ``question answer``, right padded with PAD (padding inside a batch squeezed out).

        Returns ids ``(B, L)``, the real-token mask ``(B, L)``, and ``answer_pos`` ``(B, La)``:
        where each answer token sits (``L`` for padded answer slots).
        """
        q, qm, a, am = batch.questions, batch.question_mask, batch.answers, batch.answer_mask
        nq, n_real = qm.sum(1), qm.sum(1) + am.sum(1)
        length = int(n_real.max())
        seq = torch.full((q.shape[0], length + 1), PAD, dtype=torch.long, device=q.device)  # last column: a bin
        seq.scatter_(1, torch.where(qm, torch.cumsum(qm.long(), 1) - 1, length), q)
        a_pos = torch.where(am, nq.unsqueeze(1) + torch.cumsum(am.long(), 1) - 1, length)
        seq.scatter_(1, a_pos, a)
        real = torch.arange(length, device=q.device).unsqueeze(0) < n_real.unsqueeze(1)
        return seq[:, :length], real, a_pos

    def loss(self, batch: Batch, generator: torch.Generator | None = None, answer_mask_prob: float = 0.0
             ) -> torch.Tensor:
        """Masked-LM cross entropy over the corrupted positions only (15%, 80/10/10, never PAD);
        with probability ``answer_mask_prob`` a row is an answering row instead: question intact,
        answer slots after BOS all masked (:func:`nnqs.lm.masking.mask_tokens`)."""
        seq, real, a_pos = self.pack(batch)
        span = None
        if answer_mask_prob > 0:
            span = torch.zeros((seq.shape[0], seq.shape[1] + 1), dtype=torch.bool, device=seq.device)
            span = span.scatter(1, a_pos[:, 1:], batch.answer_mask[:, 1:])[:, :-1]
        inputs, chosen = mask_tokens(seq, real, generator, span=span, span_prob=answer_mask_prob)
        return masked_cross_entropy(self(inputs, _mask_or_none(real)), seq, chosen)

    def answer_logits(self, batch: Batch) -> torch.Tensor:
        """Logits ``(B, La - 1, V)`` for ``answers[:, 1:]``, all those slots masked, one parallel pass."""
        seq, real, a_pos = self.pack(batch)
        is_slot = torch.zeros((seq.shape[0], seq.shape[1] + 1), dtype=torch.bool, device=seq.device)
        is_slot.scatter_(1, a_pos[:, 1:], batch.answer_mask[:, 1:])  # padded slots land in the last column
        logits = self(seq.masked_fill(is_slot[:, :-1], MASK), _mask_or_none(real))
        slots = a_pos[:, 1:].clamp(max=seq.shape[1] - 1)  # only padded answer slots are clamped
        return logits.gather(1, slots.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))

    def fill(self, questions: torch.Tensor, n_slots: int, order: str = DEFAULT_FILL, pick=None) -> torch.Tensor:
        """Answers ``(B, 1 + n_slots)`` for unpadded ``questions`` ``(B, Lq)``: BOS, then the filled slots.

        ``pick(logits (N, V)) -> ids (N,)`` chooses a token (argmax when None); ``order`` is
        ``parallel`` (all slots from one pass) or ``iterative`` (one pass per slot, the open slot
        whose top probability is highest first).
        """
        pick = pick or (lambda logits: logits.argmax(dim=-1))
        b, lq, dev = questions.shape[0], questions.shape[1], questions.device
        seq = torch.cat([questions, torch.full((b, 1), BOS, dtype=torch.long, device=dev),
                         torch.full((b, n_slots), MASK, dtype=torch.long, device=dev)], dim=1)
        rows = torch.arange(b, device=dev)
        if order == "parallel":
            logits = self(seq)[:, lq + 1:]
            seq[:, lq + 1:] = pick(logits.reshape(b * n_slots, -1)).view(b, n_slots)
        else:
            open_slots = torch.ones((b, n_slots), dtype=torch.bool, device=dev)
            for _ in range(n_slots):
                logits = self(seq)[:, lq + 1:]
                confidence = torch.softmax(logits.float(), dim=-1).amax(dim=-1).masked_fill(~open_slots, -1.0)
                slot = confidence.argmax(dim=1)
                seq[rows, lq + 1 + slot] = pick(logits[rows, slot])
                open_slots[rows, slot] = False
        answer = seq[:, lq:]
        is_eos = answer == EOS
        after_eos = (torch.cumsum(is_eos.long(), dim=1) - is_eos.long()) > 0
        return answer.masked_fill(after_eos, PAD)
