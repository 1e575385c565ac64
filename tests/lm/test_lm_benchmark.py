"""The LM benchmark runs in its quick mode; its scores equal the slow evaluation twin's on the
model it trained, and its derived fields are consistent."""
import importlib
import json
from pathlib import Path

import pytest

from nnqs.lm.data import Pairs
from nnqs.lm.evaluate import evaluate_reference
from nnqs.lm.tokenizer import decode

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_emits_json_lines(monkeypatch, capsys, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    bench = importlib.import_module("benchmarks.lm")
    seen = []  # (model, test batch) of each evaluate call, to score again with the twin

    def spy(model, batch, *args, **kw):
        if kw.get("fill") is None:  # the default answering order gives the test_* fields
            seen.append((model, batch))
        return real_evaluate(model, batch, *args, **kw)

    real_evaluate = bench.evaluate
    monkeypatch.setattr(bench, "evaluate", spy)
    out = tmp_path / "lm.jsonl"
    assert bench.main(["--quick", "--test-size", "30", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["arch"] for r in records] == ["decoder", "seq2seq", "encoder"] and len(seen) == 3
    assert set(records[2]["fill"]) == {"iterative", "parallel"}
    for r, (model, batch) in zip(records, seen):
        assert r["benchmark"] == "lm" and r["quick"] and r["test_pairs"] == 30
        pairs = Pairs([decode(q) for q in batch.questions], [decode(a) for a in batch.answers])
        twin = evaluate_reference(model, pairs)
        assert (r["test_exact_match"], r["test_token_accuracy"]) == (twin.exact_match, twin.token_accuracy)
        assert r["s_per_step"] == pytest.approx(r["wall_s"] / r["steps"], abs=1e-5)
        assert min(r["generate_calls"]) >= 1
    assert out.read_text().strip().splitlines() == lines


def test_seeds_and_run_folders(monkeypatch, capsys, tmp_path):
    """``--seeds`` trains once per seed; ``--runs`` keeps each as the CLI's run folder, whose
    checkpoint scores what the record says on the same fresh pairs."""
    monkeypatch.syspath_prepend(str(ROOT))
    bench = importlib.import_module("benchmarks.lm")
    from nnqs.lm.checkpoint import load_lm
    from nnqs.lm.data import encode_pairs, generate_pairs, load_pairs

    runs = tmp_path / "runs"
    assert bench.main(["--quick", "--arch", "decoder", "--seeds", "3", "4", "--test-size", "20",
                       "--runs", str(runs)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["seed"] for r in records] == [3, 4]
    for r in records:
        folder = runs / f"decoder-{r['seed']}"
        assert json.loads((folder / "result.json").read_text())["steps"] == r["steps"]
        train_questions = set(load_pairs(folder / "train.json").questions)
        test = encode_pairs(generate_pairs(20, bench.TEST_SEED, exclude=train_questions))
        again = evaluate_reference(load_lm(folder)[0], Pairs([decode(q) for q in test.questions],
                                                             [decode(a) for a in test.answers]))
        assert (r["test_exact_match"], r["test_token_accuracy"]) == (again.exact_match, again.token_accuracy)
    assert (runs / "decoder-3" / "train.json").read_text() != (runs / "decoder-4" / "train.json").read_text()
