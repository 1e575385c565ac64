"""The sampling benchmark runs at toy size and prints parseable JSON lines."""
import json

from benchmarks import sampling

FIELDS = {"n_orbitals", "n_alpha", "n_beta", "n_samples", "unique", "seconds_cached", "seconds_uncached",
          "speedup", "identical_samples", "d_model", "n_layers", "n_heads", "threads", "device"}  # fmt: skip


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "sampling.jsonl"
    assert sampling.main(["--quick", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["n_orbitals"] for r in records] == list(sampling.QUICK["orbitals"])
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    for r in records:
        assert FIELDS <= set(r)
        assert isinstance(r["identical_samples"], bool)
        assert 0 < r["unique"] <= r["n_samples"] and r["seconds_cached"] > 0 and r["speedup"] > 0
