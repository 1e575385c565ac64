"""The allocator setting takes effect on glibc, can be refused, and its benchmark runs at toy size."""
import json
import platform

import pytest

from benchmarks import allocator as bench
from nnqs.common.allocator import reuse_freed_memory


def test_system_malloc_is_kept_on_request(monkeypatch):
    monkeypatch.setenv("NNQS_MALLOC", "system")
    assert reuse_freed_memory() is False


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_reuse_takes_effect_on_glibc(monkeypatch):
    monkeypatch.delenv("NNQS_MALLOC", raising=False)
    assert reuse_freed_memory() is True


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "alloc.jsonl"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    (r,) = records
    assert r["molecule"] == "H2" and r["seconds_system_malloc"] > 0 and r["seconds_reuse"] > 0
    assert r["peak_rss_mb_reuse"] > 0 and r["same_energy"] is True  # the allocator changes no number
