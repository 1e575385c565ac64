"""The fuzzing round at toy size: every case classified, the counts add up, and no bug."""
import json
import random

from benchmarks import fuzz_inputs
from benchmarks.fuzz import family_sizes, main
from benchmarks.fuzz_run import OUTCOMES, Result, classify

FAMILIES = ["flags", "files", "folders"]


def test_quick_fuzz_round_classifies_every_case_and_finds_no_bug(tmp_path, capsys):
    log = tmp_path / "cases.jsonl"
    *families, total = main(["--quick", "--log", str(log)])
    cases = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["family"] for r in families] == FAMILIES and total["family"] == "total"
    assert all(case["outcome"] in OUTCOMES for case in cases)
    for record in families:
        mine = [case for case in cases if case["family"] == record["family"]]
        assert record["cases"] == len(mine) == sum(record[o] for o in OUTCOMES) > 0
    assert total["cases"] == len(cases) == sum(total[o] for o in OUTCOMES) == 48
    assert total["ran"] > 0 and total["refused"] > 0  # both sides of the contract were reached
    bugs = [(case["argv"], case["why"], case["stderr"]) for case in cases if case["outcome"] == "bug"]
    assert not bugs, bugs
    assert len(capsys.readouterr().out.strip().splitlines()) == 4  # one line per family and the total


def test_outcomes_follow_the_one_line_contract():
    error = "nnqs: error: FCIDUMP 'F' line 3: the value is not finite (nan or inf)"
    assert classify(Result(2, "", error + "\n", 0.1)).outcome == "refused"
    assert classify(Result(1, "", "nnqs: note: rebuilt history.csv\n" + error, 0.1)).outcome == "refused"
    assert classify(Result(2, "", error + "\n" + error, 0.1)).why == "2 lines on stderr"
    traceback = "Traceback (most recent call last):\n  File x\nValueError: no\n"
    assert classify(Result(1, "", traceback, 0.1)).why == "traceback"
    assert classify(Result(3, "", error, 0.1)).why == "exit code 3"
    assert classify(Result(2, "", "something went wrong", 0.1)).outcome == "bug"
    assert classify(Result(None, "", "", 60.0)).why == "no answer within 60 s"
    assert classify(Result(-11, "", "", 0.1)).why == "killed by SIGSEGV"
    assert classify(Result(0, "out", "", 0.1), lambda out: None).outcome == "ran"
    assert classify(Result(0, "out", "", 0.1), lambda out: "energy nan").why == "exit 0 but energy nan"


def test_cases_are_drawn_from_the_seed_alone():
    text = " &FCI NORB=1,NELEC=2,MS2=0,\n  ORBSYM=1,\n  ISYM=1,\n &END\n 0.5 1 1 1 1\n-1.0 1 1 0 0\n 0.1 0 0 0 0\n"
    for draw in (lambda rng: fuzz_inputs.fcidump(rng, text), fuzz_inputs.xyz, fuzz_inputs.lm_data,
                 lambda rng: fuzz_inputs.toml(rng, ["steps", "lr"])):
        assert [draw(random.Random(7)) for _ in range(3)] == [draw(random.Random(7)) for _ in range(3)]
    assert family_sizes(500, ("flags", "files", "folders", "signals", "disk full")) == {
        "flags": 210, "files": 150, "folders": 70, "signals": 35, "disk full": 35}
    assert sum(family_sizes(48, tuple(FAMILIES)).values()) == 48
