"""The LM benchmark runs in its quick mode and prints one JSON line per architecture."""
import importlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_emits_json_lines(monkeypatch, capsys, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    bench = importlib.import_module("benchmarks.lm")
    out = tmp_path / "lm.jsonl"
    assert bench.main(["--quick", "--test-size", "30", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["arch"] for r in records] == ["decoder", "seq2seq"]
    for r in records:
        assert r["benchmark"] == "lm" and r["quick"] and r["test_pairs"] == 30
        assert 0.0 <= r["test_exact_match"] <= 1.0 and r["wall_s"] > 0
    assert out.read_text().strip().splitlines() == lines
