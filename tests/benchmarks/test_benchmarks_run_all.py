"""`make bench`'s driver runs the chosen benchmarks and files their lines per benchmark."""
import json

from benchmarks import run_all


def test_run_all_quick_writes_one_file_per_benchmark(tmp_path, capsys):
    assert run_all.main(["--quick", "--only", "sr_solve", "sampling", "--results", str(tmp_path)]) == 0
    files = sorted(p.name for p in (tmp_path / "quick").iterdir())
    assert files == ["sampling.jsonl", "sr_solve.jsonl"]
    for name in files:
        records = [json.loads(line) for line in (tmp_path / "quick" / name).read_text().splitlines()]
        assert records and all(r["benchmark"] == name.removesuffix(".jsonl") for r in records)
