"""Fuzzing LM inputs: questions for `nnqs lm generate` and data files for `nnqs lm eval`
give answers or metrics, or exit 2 with one line."""
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fuzz_support import FUZZ, TEXT, run_cli
from nnqs.cli import main
from nnqs.common.errors import UserError
from nnqs.lm.data import load_pairs
from nnqs.lm.tokenizer import VOCAB

WORD = st.one_of(st.sampled_from([*VOCAB, "30", "04", "300", "7", "times", "-1", "٣", ""]), TEXT)
QUESTION = st.one_of(TEXT, st.lists(WORD, max_size=10).map(" ".join))
GOOD = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "run"
    code, _ = run_cli(["lm", "train", "--steps", "2", "--eval-every", "2", "--d-model", "8", "--n-layers", "1",
                       "--n-heads", "2", "--train-size", "20", "--val-size", "5", "--batch-size", "8",
                       "--no-progress", "--out", str(out)])
    assert code == 0
    return str(out)


@FUZZ
@given(questions=st.lists(QUESTION, min_size=1, max_size=3),
       sampling=st.lists(st.sampled_from(["--temperature", "--top-k", "--top-p", "--seed", "0", "0.5", "1e-300",
                                          "nan", "inf", "-1", "3", "99999999999999999999"]), max_size=4))
@example(questions=[GOOD], sampling=["--temperature", "1e-300"])
@example(questions=[GOOD], sampling=["--seed", "99999999999999999999", "--temperature", "1"])
def test_generate_answers_or_one_line(ckpt, questions, sampling):
    code, _ = run_cli(["lm", "generate", "--ckpt", ckpt, *sampling, "--", *questions])
    if all(q == GOOD for q in questions) and not sampling:
        assert code == 0


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT, st.just(GOOD),
              st.just("BOS POSITIVE 04 EOS")),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["inp_expression", "out_expression", "x"]), inner,
                                            max_size=3)),
    max_leaves=12,
)
DATA = st.one_of(JSON.map(json.dumps), TEXT, st.just("[" * 5000 + "]" * 5000))


@FUZZ
@given(text=DATA)
@example(text=json.dumps({"inp_expression": [GOOD], "out_expression": ["BOS NEGATIVE 04 EOS"]}))
@example(text="[" * 5000 + "]" * 5000)
def test_data_files_load_or_refuse_with_one_line(ckpt, text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.json"
        path.write_text(text, encoding="utf-8")
        try:
            pairs = load_pairs(path)
            assert len(pairs) >= 1
        except UserError as exc:
            assert "\n" not in str(exc)
        run_cli(["lm", "eval", "--ckpt", ckpt, "--data", str(path)])


@pytest.mark.parametrize("knobs", [["--temperature", "1e-40"], ["--temperature", "1e-300"],
                                   ["--temperature", "1", "--top-p", "1e-300"], ["--top-p", "1e-300"]])
def test_vanishing_temperature_or_top_p_answers_greedily(ckpt, knobs, capsys):
    """Issue 11: these printed a bare "BOS" (NaN probabilities); now they give the greedy answer."""
    assert main(["lm", "generate", "--ckpt", ckpt, GOOD]) == 0
    greedy = capsys.readouterr().out
    assert greedy.startswith("BOS ") and len(greedy.split()) > 1
    assert main(["lm", "generate", "--ckpt", ckpt, *knobs, GOOD]) == 0
    assert capsys.readouterr().out == greedy
