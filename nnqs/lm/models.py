"""The arithmetic language models, all built on the shared :class:`TransformerCore`.

(The third, the encoder-only masked LM, is :class:`nnqs.lm.encoder_lm.EncoderLM`; :mod:`nnqs.lm.build`
builds any of the three.)

* :class:`DecoderLM` (decoder-only, the default): one causal sequence
  ``<user> question <assistant> answer``. The loss mask is 0 on the user turn
  (``<user>``, the question, ``<assistant>``) and 1 on the answer tokens.
* :class:`Seq2SeqLM` (A5's architecture): a bidirectional encoder over the
  question and a causal decoder with cross-attention over the encoder output;
  the decoder reads the answer without its last token and predicts the answer
  shifted by one.

Both expose the same interface, so training, evaluation and generation do not
care which one they hold: :meth:`loss`, :meth:`answer_logits` (teacher forced,
predicting ``answers[:, 1:]``), and for generation :meth:`start` / :meth:`extend`
(KV-cached) with :meth:`next_logits` as the slow no-cache twin. Every answer
starts with BOS, which generation feeds rather than samples, so both models are
scored on the same answer positions (sign, digits, EOS).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from nnqs.lm.data import Batch
from nnqs.lm.tokenizer import ASSISTANT, BOS, PAD, USER, VOCAB_SIZE
from nnqs.nn import CoreConfig, KVCache, TransformerCore


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of an arithmetic LM (saved in its checkpoint)."""

    arch: Literal["decoder", "seq2seq", "encoder"] = "decoder"
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None  # 4 * d_model when None
    dropout: float = 0.0
    max_len: int = 32  # positions per core; 16 are needed by the decoder, 9 by the encoder


@dataclass
class GenState:
    """What generation carries between steps: the decoder's KV cache (and the encoder memory)."""

    cache: KVCache
    memory: torch.Tensor | None = None


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy over positions where ``mask`` is True. ``logits`` (B, T, V), others (B, T)."""
    return F.cross_entropy(logits[mask], targets[mask])


def _mask_or_none(mask: torch.Tensor) -> torch.Tensor | None:
    """Drop an all-True padding mask so attention can take its unmasked fast path."""
    return None if bool(mask.all()) else mask


def _column(value: int, batch: int, device: torch.device) -> torch.Tensor:
    return torch.full((batch, 1), value, dtype=torch.long, device=device)


def _core_config(cfg: ModelConfig, causal: bool, cross: bool) -> CoreConfig:
    return CoreConfig(
        vocab_size=VOCAB_SIZE, max_len=cfg.max_len, d_model=cfg.d_model, n_layers=cfg.n_layers,
        n_heads=cfg.n_heads, d_ff=cfg.d_ff, dropout=cfg.dropout, causal=causal, cross_attention=cross,
    )


class DecoderLM(nn.Module):
    """Decoder-only LM over ``<user> question <assistant> answer``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.core = TransformerCore(_core_config(cfg, causal=True, cross=False))
        self.head = nn.Linear(cfg.d_model, VOCAB_SIZE)

    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Next-token logits ``(B, T, V)`` for ``tokens`` ``(B, T)``; ``mask`` (B, S) True on real tokens."""
        return self.head(self.core(tokens, key_padding_mask=mask, cache=cache))

    @staticmethod
    def pack(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The sequences ``<user> q <assistant> a``, right padded with PAD.

        Returns ids ``(B, L)``, the padding mask ``(B, L)`` and ``is_answer``
        ``(B, L)``, True where the token is an answer token. Padding inside
        ``questions`` is squeezed out, so a row packs the same however it was padded.
        """
        q, qm, a, am = batch.questions, batch.question_mask, batch.answers, batch.answer_mask
        b, dev = q.shape[0], q.device
        nq, na = qm.sum(1), am.sum(1)
        n_real = 2 + nq + na
        length = int(n_real.max())
        seq = torch.full((b, length + 1), PAD, dtype=torch.long, device=dev)  # last column: a bin
        is_answer = torch.zeros((b, length + 1), dtype=torch.bool, device=dev)
        seq[:, 0] = USER
        q_pos = 1 + torch.cumsum(qm.long(), 1) - 1
        seq.scatter_(1, torch.where(qm, q_pos, length), q)
        seq[torch.arange(b, device=dev), 1 + nq] = ASSISTANT
        a_pos = (2 + nq).unsqueeze(1) + torch.cumsum(am.long(), 1) - 1
        a_pos = torch.where(am, a_pos, length)
        seq.scatter_(1, a_pos, a)
        is_answer.scatter_(1, a_pos, am)
        mask = torch.arange(length, device=dev).unsqueeze(0) < n_real.unsqueeze(1)
        return seq[:, :length], mask, is_answer[:, :length] & mask

    def loss(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced cross entropy on the answer tokens only (the user turn is masked out)."""
        seq, mask, is_answer = self.pack(batch)
        logits = self(seq[:, :-1], _mask_or_none(mask[:, :-1]))
        return masked_cross_entropy(logits, seq[:, 1:], is_answer[:, 1:])

    def answer_logits(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced logits ``(B, La - 1, V)`` predicting ``batch.answers[:, 1:]``."""
        seq, mask, _ = self.pack(batch)
        logits = self(seq[:, :-1], _mask_or_none(mask[:, :-1]))
        first = 2 + batch.question_mask.sum(1)  # where each answer's BOS sits
        idx = first.unsqueeze(1) + torch.arange(batch.answers.shape[1] - 1, device=seq.device)
        idx = idx.clamp(max=logits.shape[1] - 1)  # only padded answer slots are clamped
        return logits.gather(1, idx.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))

    def _prompt(self, questions: torch.Tensor, answer_prefix: torch.Tensor | None) -> torch.Tensor:
        b, dev = questions.shape[0], questions.device
        parts = [_column(USER, b, dev), questions, _column(ASSISTANT, b, dev)]
        parts.append(_column(BOS, b, dev) if answer_prefix is None else answer_prefix)
        return torch.cat(parts, dim=1)

    def start(self, questions: torch.Tensor) -> tuple[GenState, torch.Tensor]:
        """Prefill the cache with ``<user> q <assistant> BOS``; logits ``(B, V)`` of the next token.

        ``questions`` ``(B, Lq)`` hold no padding.
        """
        cache = self.core.new_cache()
        logits = self(self._prompt(questions, None), cache=cache)
        return GenState(cache), logits[:, -1]

    def extend(self, state: GenState, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row ``(B,)`` through the cache; logits ``(B, V)`` of the next token."""
        return self(tokens.unsqueeze(1), cache=state.cache)[:, -1]

    def next_logits(self, questions: torch.Tensor, answer_prefix: torch.Tensor) -> torch.Tensor:
        """No-cache reference: re-run the whole prefix; logits ``(B, V)`` after ``answer_prefix`` (B, k)."""
        return self(self._prompt(questions, answer_prefix))[:, -1]


class Seq2SeqLM(nn.Module):
    """Encoder-decoder: bidirectional encoder over the question, causal decoder with cross-attention."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = TransformerCore(_core_config(cfg, causal=False, cross=False))
        self.decoder = TransformerCore(_core_config(cfg, causal=True, cross=True))
        self.head = nn.Linear(cfg.d_model, VOCAB_SIZE)

    def encode(self, questions: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Encoder memory ``(B, Lq, C)``."""
        return self.encoder(questions, key_padding_mask=mask)

    def decode(
        self,
        tokens: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Decoder logits ``(B, T, V)`` for answer tokens ``(B, T)`` attending to ``memory``."""
        hidden = self.decoder(tokens, key_padding_mask=mask, cache=cache, memory=memory, memory_mask=memory_mask)
        return self.head(hidden)

    def answer_logits(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced logits ``(B, La - 1, V)``: input ``answers[:, :-1]``, target ``answers[:, 1:]``."""
        q_mask = _mask_or_none(batch.question_mask)
        memory = self.encode(batch.questions, q_mask)
        a_mask = _mask_or_none(batch.answer_mask[:, :-1])
        return self.decode(batch.answers[:, :-1], memory, q_mask, a_mask)

    def loss(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced cross entropy over the real answer targets."""
        logits = self.answer_logits(batch)
        return masked_cross_entropy(logits, batch.answers[:, 1:], batch.answer_mask[:, 1:])

    def start(self, questions: torch.Tensor) -> tuple[GenState, torch.Tensor]:
        """Encode ``questions`` (B, Lq), feed BOS to the decoder; logits ``(B, V)`` of the next token."""
        memory = self.encode(questions)
        cache = self.decoder.new_cache()
        logits = self.decode(_column(BOS, questions.shape[0], questions.device), memory, cache=cache)
        return GenState(cache, memory), logits[:, -1]

    def extend(self, state: GenState, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row ``(B,)`` through the decoder cache; logits ``(B, V)``."""
        return self.decode(tokens.unsqueeze(1), state.memory, cache=state.cache)[:, -1]

    def next_logits(self, questions: torch.Tensor, answer_prefix: torch.Tensor) -> torch.Tensor:
        """No-cache reference: encode and decode the whole ``answer_prefix`` (B, k) again."""
        return self.decode(answer_prefix, self.encode(questions))[:, -1]


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
