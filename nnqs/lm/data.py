"""Arithmetic question/answer pairs: generation, the A5 JSON format, padded batches.

A question ``a op b`` has operands ``a, b`` in -49..49 and ``op`` in
{add, subtract}; the answer is ``a + b`` or ``a - b`` (in -98..98). A number
is written as a sign word and two zero-padded digits, zero as ``POSITIVE 00``.
The whole question space has 99 * 2 * 99 = 19,602 members; question index
``i`` is ``a = i // 198 - 49``, ``op = (i // 99) % 2``, ``b = i % 99 - 49``.

The file format is A5's ``two_digit_op.json``: a JSON object with two equally
long lists of strings, ``inp_expression`` (questions) and ``out_expression``
(answers).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from nnqs.common.atomic import atomic_write_text
from nnqs.common.errors import UserError
from nnqs.lm.tokenizer import PAD, encode_answer, encode_question

MAX_OPERAND = 49
N_VALUES = 2 * MAX_OPERAND + 1
N_QUESTIONS = N_VALUES * 2 * N_VALUES
OPS = ("add", "subtract")
INPUT_KEY, OUTPUT_KEY = "inp_expression", "out_expression"


@dataclass(frozen=True)
class Pairs:
    """Question and answer texts, index-aligned."""

    questions: list[str]
    answers: list[str]

    def __post_init__(self) -> None:
        assert len(self.questions) == len(self.answers)

    def __len__(self) -> int:
        return len(self.questions)


def number_text(n: int) -> str:
    """``-4 -> 'NEGATIVE 04'``, ``0 -> 'POSITIVE 00'``."""
    assert -99 <= n <= 99, n
    return f"{'NEGATIVE' if n < 0 else 'POSITIVE'} {abs(n):02d}"


def question_text(a: int, op: str, b: int) -> str:
    return f"BOS {number_text(a)} {op} {number_text(b)} EOS"


def answer_text(a: int, op: str, b: int) -> str:
    """The answer, computed: ``a + b`` for add, ``a - b`` for subtract."""
    value = a + b if op == "add" else a - b
    return f"BOS {number_text(value)} EOS"


def question_operands(index: int) -> tuple[int, str, int]:
    """Operands of question ``index`` in ``[0, N_QUESTIONS)`` (see the module docstring)."""
    assert 0 <= index < N_QUESTIONS
    return index // (2 * N_VALUES) - MAX_OPERAND, OPS[(index // N_VALUES) % 2], index % N_VALUES - MAX_OPERAND


def generate_pairs(n: int, seed: int, exclude: set[str] | frozenset[str] = frozenset()) -> Pairs:
    """``n`` distinct random questions (not in ``exclude``) with their computed answers.

    Drawn without replacement by a ``torch.Generator`` seeded with ``seed``.
    """
    if n < 0:
        raise UserError(f"number of pairs must be >= 0, got {n}")
    if not 0 <= seed < 2**63:
        raise UserError(f"seed must be in 0..2**63-1, got {seed}")
    gen = torch.Generator().manual_seed(seed)
    questions, answers = [], []
    for index in torch.randperm(N_QUESTIONS, generator=gen).tolist():
        if len(questions) == n:
            break
        a, op, b = question_operands(index)
        q = question_text(a, op, b)
        if q not in exclude:
            questions.append(q)
            answers.append(answer_text(a, op, b))
    if len(questions) < n:
        raise UserError(f"only {len(questions)} distinct questions are available, {n} were asked for")
    return Pairs(questions, answers)


def save_pairs(path: str | Path, pairs: Pairs) -> None:
    """Write ``pairs`` in the A5 JSON format (atomically)."""
    data = {INPUT_KEY: pairs.questions, OUTPUT_KEY: pairs.answers}
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")


def load_pairs(path: str | Path) -> Pairs:
    """Read a file in the A5 JSON format, checking every question and answer.

    Anything malformed (unreadable, not JSON, a missing key, lists of unequal
    length, a bad token or shape) is a one-line :class:`UserError`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read data file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"data file {path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise UserError(f"data file {path} nests JSON too deeply") from None
    if not isinstance(data, dict):
        raise UserError(f"data file {path}: expected a JSON object with {INPUT_KEY!r} and {OUTPUT_KEY!r}")
    lists = []
    for key in (INPUT_KEY, OUTPUT_KEY):
        if key not in data:
            raise UserError(f"data file {path}: missing key {key!r}")
        value = data[key]
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise UserError(f"data file {path}: {key!r} must be a list of strings")
        lists.append(value)
    questions, answers = lists
    if len(questions) != len(answers):
        raise UserError(f"data file {path}: {len(questions)} questions but {len(answers)} answers")
    if not questions:
        raise UserError(f"data file {path} holds no pairs")
    for i, (q, a) in enumerate(zip(questions, answers)):
        try:
            encode_question(q)
            encode_answer(a)
        except UserError as exc:
            raise UserError(f"data file {path}, pair {i}: {exc}") from None
    return Pairs(list(questions), list(answers))


@dataclass(frozen=True)
class Batch:
    """Right-padded token ids and masks (True on real tokens).

    ``questions`` ``(B, Lq)``, ``answers`` ``(B, La)``; each answer starts with BOS.
    """

    questions: torch.Tensor
    question_mask: torch.Tensor
    answers: torch.Tensor
    answer_mask: torch.Tensor

    def __len__(self) -> int:
        return int(self.questions.shape[0])

    def select(self, index: torch.Tensor) -> "Batch":
        """Rows ``index`` (LongTensor ``(B',)``) of every tensor."""
        return Batch(*(t.index_select(0, index) for t in self._tensors()))

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(*(t.to(device) for t in self._tensors()))

    def _tensors(self) -> tuple[torch.Tensor, ...]:
        return self.questions, self.question_mask, self.answers, self.answer_mask


def pad_sequences(seqs: list[list[int]], length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists with PAD: ids ``(B, L)`` and mask ``(B, L)`` True on real tokens."""
    length = max((len(s) for s in seqs), default=0) if length is None else length
    ids = torch.full((len(seqs), length), PAD, dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.bool)
    for row, s in enumerate(seqs):
        assert len(s) <= length
        ids[row, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[row, : len(s)] = True
    return ids, mask


def make_batch(questions: list[list[int]], answers: list[list[int]]) -> Batch:
    """A :class:`Batch` from token id lists of any lengths."""
    q, qm = pad_sequences(questions)
    a, am = pad_sequences(answers)
    return Batch(q, qm, a, am)


def encode_pairs(pairs: Pairs) -> Batch:
    """Token ids of checked pairs (texts that fail the question/answer form are UserError)."""
    return make_batch([encode_question(q) for q in pairs.questions], [encode_answer(a) for a in pairs.answers])

