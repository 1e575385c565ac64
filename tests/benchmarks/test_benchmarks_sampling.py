"""The sampling benchmark runs at toy size; its JSON lines hold quantities checked against oracles."""
import json
import math

import pytest

from benchmarks import sampling

FIELDS = {"n_orbitals", "n_alpha", "n_beta", "n_samples", "unique", "seconds_cached", "seconds_uncached",
          "speedup", "identical_samples", "d_model", "n_layers", "n_heads", "threads", "device", "hf_prob",
          "hf_fraction", "timer"}  # fmt: skip


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "sampling.jsonl"
    assert sampling.main(["--quick", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["n_orbitals"] for r in records] == list(sampling.QUICK["orbitals"])
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    for r in records:
        assert FIELDS <= set(r)
        sector = math.comb(r["n_orbitals"], r["n_alpha"]) * math.comb(r["n_orbitals"], r["n_beta"])
        assert 0 < r["unique"] <= min(sector, r["n_samples"])
        assert r["identical_samples"] is True  # same seed: the cached and uncached draws agree at toy size
        # P(HF) at init is hf_prob (up to the random head's blur); binomial noise at 10^4 samples is 0.005
        assert r["hf_fraction"] == pytest.approx(r["hf_prob"], abs=0.03)
        assert r["speedup"] == pytest.approx(r["seconds_uncached"] / r["seconds_cached"], rel=1e-2)
        assert r["repeats_cached"] >= 1 and r["repeats_uncached"] >= 1
