"""Tokenizer: A5's vocabulary order, digit-by-digit numbers, strict question/answer shapes."""
import pytest

from nnqs.common.errors import UserError
from nnqs.lm import tokenizer as tk


def test_a5_vocabulary_order_then_extra_tokens():
    assert [tk.TOKEN_ID[str(d)] for d in range(10)] == list(range(10))
    a5 = {"POSITIVE": 10, "NEGATIVE": 11, "add": 12, "subtract": 13, "BOS": 14, "EOS": 15}
    assert {w: tk.TOKEN_ID[w] for w in a5} == a5
    assert {tk.USER, tk.ASSISTANT, tk.PAD} == {16, 17, 18}
    assert tk.VOCAB_SIZE == 19


def test_question_is_nine_tokens_digit_by_digit_and_round_trips():
    text = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"
    ids = tk.encode_question(text)
    assert ids == [14, 11, 3, 0, 13, 11, 3, 4, 15]
    assert tk.decode(ids) == text
    assert tk.encode_question("BOS NEGATIVE 3 0 subtract NEGATIVE 3 4 EOS") == ids
    assert tk.encode_answer("BOS POSITIVE 04 EOS") == [14, 10, 0, 4, 15]


@pytest.mark.parametrize(
    "text",
    [
        "BOS NEGATIVE 30 times NEGATIVE 34 EOS",  # unknown token
        "BOS NEGATIVE 30 subtract NEGATIVE 34",  # too short
        "BOS NEGATIVE 300 subtract NEGATIVE 34 EOS",  # three digits
        "BOS add 30 subtract NEGATIVE 34 EOS",  # operator where a sign belongs
        "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS EOS",  # too long
        "BOS NEGATIVE -3 subtract NEGATIVE 34 EOS",  # minus sign
        "",
    ],
)
def test_malformed_question_is_one_line_user_error(text):
    with pytest.raises(UserError) as info:
        tk.encode_question(text)
    assert "\n" not in str(info.value)


def test_answer_shape_is_checked():
    with pytest.raises(UserError):
        tk.encode_answer("BOS POSITIVE 4 EOS")
    with pytest.raises(UserError):
        tk.encode_answer("BOS NEGATIVE 30 add POSITIVE 01 EOS")
