"""Arithmetic data: generation (checked with independent arithmetic), the A5 file format, batches."""
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from nnqs.cli import main
from nnqs.common.errors import UserError
from nnqs.lm import data
from nnqs.lm.tokenizer import PAD, encode_answer, encode_question


def _value(sign: str, digits: str) -> int:
    assert sign in ("POSITIVE", "NEGATIVE") and len(digits) == 2
    return -int(digits) if sign == "NEGATIVE" else int(digits)


def _check_pair(question: str, answer: str) -> None:
    """Independent arithmetic on the parsed operands."""
    bos, s1, n1, op, s2, n2, eos = question.split()
    assert (bos, eos) == ("BOS", "EOS") and op in ("add", "subtract")
    a, b = _value(s1, n1), _value(s2, n2)
    assert -49 <= a <= 49 and -49 <= b <= 49
    assert not (a == 0 and s1 == "NEGATIVE") and not (b == 0 and s2 == "NEGATIVE")
    result = a + b if op == "add" else a - b
    expected = f"BOS {'NEGATIVE' if result < 0 else 'POSITIVE'} {abs(result):02d} EOS"
    assert answer == expected, (question, answer)


def test_cli_data_round_trip_answers_are_correct(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["lm", "data", "--n", "500", "--seed", "3", "--out", str(out)]) == 0
    raw = json.loads(out.read_text())
    assert set(raw) == {"inp_expression", "out_expression"}
    pairs = data.load_pairs(out)
    assert len(pairs) == 500 and len(set(pairs.questions)) == 500
    for q, a in zip(pairs.questions, pairs.answers):
        _check_pair(q, a)
    assert data.generate_pairs(500, 3) == pairs
    assert data.generate_pairs(500, 4).questions != pairs.questions



def test_a_path_of_bytes_that_are_not_utf8_prints_back_as_given(tmp_path, monkeypatch):
    """A terminal in an en_US.UTF-8 locale: Python's stdout is strict there (surrogateescape in C.UTF-8)."""
    import io
    import os
    import sys

    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8", errors="strict"))
    out = os.fsdecode(os.fsencode(tmp_path) + b"/\xff.json")
    assert main(["lm", "data", "--n", "3", "--out", out]) == 0
    sys.stdout.flush()
    assert raw.getvalue().endswith(b"/\xff.json\n") and data.load_pairs(out)

def test_the_a5_example():
    assert data.question_text(-30, "subtract", -34) == "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"
    assert data.answer_text(-30, "subtract", -34) == "BOS POSITIVE 04 EOS"
    assert data.answer_text(49, "add", 49) == "BOS POSITIVE 98 EOS"
    assert data.answer_text(-49, "subtract", 49) == "BOS NEGATIVE 98 EOS"
    assert data.answer_text(5, "subtract", 5) == "BOS POSITIVE 00 EOS"


def test_question_space_is_enumerated_once():
    seen = {data.question_operands(i) for i in range(data.N_QUESTIONS)}
    assert len(seen) == data.N_QUESTIONS == 19602


@given(st.integers(-49, 49), st.sampled_from(["add", "subtract"]), st.integers(-49, 49))
def test_every_pair_tokenises_to_fixed_shapes(a, op, b):
    q, ans = data.question_text(a, op, b), data.answer_text(a, op, b)
    assert len(encode_question(q)) == 9 and len(encode_answer(ans)) == 5
    _check_pair(q, ans)


def test_exclusion_and_exhaustion():
    train = data.generate_pairs(19000, 0)
    rest = data.generate_pairs(602, 1, exclude=set(train.questions))
    assert not set(rest.questions) & set(train.questions)
    with pytest.raises(UserError):
        data.generate_pairs(603, 1, exclude=set(train.questions))


GOOD_Q, GOOD_A = "BOS POSITIVE 01 add POSITIVE 02 EOS", "BOS POSITIVE 03 EOS"


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"inp_expression": [GOOD_Q]}), "missing key 'out_expression'"),
        (json.dumps({"inp_expression": [GOOD_Q, GOOD_Q], "out_expression": [GOOD_A]}), "2 questions but 1"),
        (json.dumps({"inp_expression": [GOOD_Q], "out_expression": ["BOS POSITIVE 03 XYZ"]}), "pair 0"),
        (json.dumps({"inp_expression": [GOOD_Q, "BOS POSITIVE 01 add EOS"], "out_expression": [GOOD_A] * 2}), "pair 1"),
        (json.dumps({"inp_expression": [1], "out_expression": [GOOD_A]}), "list of strings"),
        (json.dumps({"inp_expression": [], "out_expression": []}), "no pairs"),
    ],
)
def test_malformed_files_are_one_line_user_errors(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError) as info:
        data.load_pairs(path)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_missing_file_is_user_error(tmp_path):
    with pytest.raises(UserError):
        data.load_pairs(tmp_path / "nope.json")


def test_make_batch_right_pads_with_masks():
    batch = data.make_batch([[1, 2, 3], [4]], [[5, 6], [7, 8, 9]])
    assert batch.questions.tolist() == [[1, 2, 3], [4, PAD, PAD]]
    assert batch.question_mask.tolist() == [[True] * 3, [True, False, False]]
    assert batch.answers.tolist() == [[5, 6, PAD], [7, 8, 9]]
    sub = batch.select(torch.tensor([1]))
    assert sub.answers.tolist() == [[7, 8, 9]] and len(sub) == 1
