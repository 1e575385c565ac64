"""The arithmetic vocabulary and the text <-> token id conversion.

The first 16 ids are the EECS498 A5 vocabulary, in its order: digits ``0``..``9``
are ids 0..9, then ``POSITIVE`` 10, ``NEGATIVE`` 11, ``add`` 12, ``subtract`` 13,
``BOS`` 14, ``EOS`` 15. The decoder-only model needs three more: the role
markers ``<user>`` 16 and ``<assistant>`` 17, and ``PAD`` 18.

Text is whitespace separated words; a number word such as ``30`` is split into
one token per digit, so ``BOS NEGATIVE 30 subtract NEGATIVE 34 EOS`` is the
9-token question ``BOS NEGATIVE 3 0 subtract NEGATIVE 3 4 EOS`` and an answer
such as ``BOS POSITIVE 04 EOS`` is 5 tokens. Decoding joins digits back into
number words, so encode/decode round-trips A5's text exactly.
"""
from __future__ import annotations

import torch

from nnqs.common.errors import UserError

DIGITS = tuple(str(d) for d in range(10))
WORDS = ("POSITIVE", "NEGATIVE", "add", "subtract", "BOS", "EOS")
ROLES = ("<user>", "<assistant>", "PAD")
VOCAB: tuple[str, ...] = DIGITS + WORDS + ROLES
TOKEN_ID = {tok: i for i, tok in enumerate(VOCAB)}
VOCAB_SIZE = len(VOCAB)

# The encoder-only masked LM reads one more input id, [MASK]; it is not in VOCAB (it is never
# predicted, written or read from text), so the vocabulary of every checkpoint stays the same.
MASK = VOCAB_SIZE
MASK_TOKEN = "[MASK]"
INPUT_VOCAB_SIZE = VOCAB_SIZE + 1

POSITIVE, NEGATIVE = TOKEN_ID["POSITIVE"], TOKEN_ID["NEGATIVE"]
ADD, SUBTRACT = TOKEN_ID["add"], TOKEN_ID["subtract"]
BOS, EOS = TOKEN_ID["BOS"], TOKEN_ID["EOS"]
USER, ASSISTANT, PAD = TOKEN_ID["<user>"], TOKEN_ID["<assistant>"], TOKEN_ID["PAD"]

QUESTION_LEN = 9  # BOS sign d d op sign d d EOS
ANSWER_LEN = 5  # BOS sign d d EOS

_SIGN = {POSITIVE, NEGATIVE}
_OPS = {ADD, SUBTRACT}
_DIG = set(range(10))
QUESTION_SHAPE = ({BOS}, _SIGN, _DIG, _DIG, _OPS, _SIGN, _DIG, _DIG, {EOS})
ANSWER_SHAPE = ({BOS}, _SIGN, _DIG, _DIG, {EOS})
QUESTION_FORM = "BOS <sign> <dd> <add|subtract> <sign> <dd> EOS"
ANSWER_FORM = "BOS <sign> <dd> EOS"


def encode(text: str) -> list[int]:
    """Token ids of ``text``; an unknown word is a UserError."""
    if not isinstance(text, str):
        raise UserError(f"expected a string of tokens, got {type(text).__name__}")
    ids: list[int] = []
    for word in text.split():
        if word in TOKEN_ID:
            ids.append(TOKEN_ID[word])
        elif word.isascii() and word.isdigit():
            ids.extend(int(ch) for ch in word)
        else:
            raise UserError(f"unknown token {word!r} in {_clip(text)!r}")
    return ids


def decode(ids: list[int] | torch.Tensor) -> str:
    """Text of token ids, digits joined into number words (the inverse of :func:`encode`)."""
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    words: list[str] = []
    digit_run = False
    for i in ids:
        tok = VOCAB[int(i)]
        if tok in DIGITS and digit_run:
            words[-1] += tok
        else:
            words.append(tok)
        digit_run = tok in DIGITS
    return " ".join(words)


def _check_shape(ids: list[int], shape: tuple[set[int], ...], form: str, text: str) -> None:
    ok = len(ids) == len(shape) and all(i in allowed for i, allowed in zip(ids, shape))
    if not ok:
        raise UserError(f"malformed {_clip(text)!r}: expected the form {form!r}")


def encode_question(text: str) -> list[int]:
    """The 9 token ids of a question ``BOS <sign> <dd> <op> <sign> <dd> EOS``; else UserError."""
    ids = encode(text)
    _check_shape(ids, QUESTION_SHAPE, QUESTION_FORM, text)
    return ids


def encode_answer(text: str) -> list[int]:
    """The 5 token ids of an answer ``BOS <sign> <dd> EOS``; else UserError."""
    ids = encode(text)
    _check_shape(ids, ANSWER_SHAPE, ANSWER_FORM, text)
    return ids


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."
