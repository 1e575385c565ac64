"""`nnqs lm ...` end to end through nnqs.cli.main: run files, eval, generate, one-line errors."""
import csv
import json
import re

import pytest

from nnqs.cli import main
from nnqs.lm.data import generate_pairs, save_pairs

TINY = ["--steps", "20", "--eval-every", "10", "--d-model", "16", "--n-layers", "1", "--batch-size", "32",
        "--train-size", "200", "--val-size", "50", "--no-progress"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "run"
    assert main(["lm", "train", "--arch", "seq2seq", *TINY, "--out", str(out), "--json"]) == 0
    return out


def test_train_writes_the_run_files(run_dir):
    for name in ("checkpoint.pt", "result.json", "config.toml", "history.csv", "curve.png", "train.json"):
        assert (run_dir / name).is_file(), name
    result = json.loads((run_dir / "result.json").read_text())
    for key in ("val_exact_match", "val_token_accuracy", "train_pairs", "wall_s", "arch", "steps", "n_parameters"):
        assert key in result
    assert result["arch"] == "seq2seq" and result["steps"] == 20 and result["train_pairs"] == 200
    rows = list(csv.DictReader((run_dir / "history.csv").open()))
    assert [int(r["step"]) for r in rows] == [10, 20]
    assert "d_model = 16" in (run_dir / "config.toml").read_text()


def test_train_json_is_the_last_stdout_line_and_progress_goes_to_stderr(tmp_path, capsys):
    tiny = [a for a in TINY if a != "--no-progress"]
    argv = ["lm", "train", *tiny, "--steps", "10", "--out", str(tmp_path / "r")]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["arch"] == "decoder" and result["steps"] == 10
    last = captured.err.strip().splitlines()[-1]  # the progress line both modes share
    assert re.match(r"100%\|#+\| 10/10 \[\d\d:\d\d<00:00, +[\d.]+(step/s|s/step), loss [\d.]+ \| val exact", last), last


def test_train_from_a_config_file_with_flag_override(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("steps = 4\neval_every = 2\nd_model = 8\nn_layers = 1\ntrain_size = 50\nval_size = 10\n")
    argv = ["lm", "train", "--config", str(cfg), "--steps", "6", "--no-progress", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    assert "steps = 6" in (tmp_path / "r" / "config.toml").read_text()


def test_eval_and_generate(run_dir, tmp_path, capsys):
    data = tmp_path / "test.json"
    exclude = str(run_dir / "train.json")
    assert main(["lm", "data", "--n", "40", "--seed", "9", "--exclude", exclude, "--out", str(data)]) == 0
    capsys.readouterr()
    assert main(["lm", "eval", "--ckpt", str(run_dir), "--data", str(data), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    from nnqs.lm.checkpoint import load_lm
    from nnqs.lm.data import load_pairs
    from nnqs.lm.evaluate import evaluate_reference

    twin = evaluate_reference(load_lm(run_dir)[0], load_pairs(data))  # one pair at a time, answers as text
    assert (metrics["exact_match"], metrics["token_accuracy"], metrics["pairs"]) == (
        twin.exact_match, twin.token_accuracy, 40)
    question = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"
    assert main(["lm", "generate", "--ckpt", str(run_dir), question, "--temperature", "0.8", "--top-k", "5"]) == 0
    answer = capsys.readouterr().out.strip()
    assert answer.startswith("BOS") and len(answer.splitlines()) == 1


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "question",
    ["BOS NEGATIVE 30 times NEGATIVE 34 EOS", "BOS NEGATIVE 30 subtract EOS", "BOS NEGATIVE 300 add POSITIVE 01 EOS"],
)
def test_generate_rejects_malformed_questions(run_dir, question, capsys):
    assert main(["lm", "generate", "--ckpt", str(run_dir), question]) == 2
    err = _one_line_error(capsys)
    assert "malformed" in err or "unknown token" in err


def test_corrupt_checkpoint_exits_2(tmp_path, capsys):
    (tmp_path / "checkpoint.pt").write_bytes(b"this is not a checkpoint")
    data = tmp_path / "d.json"
    save_pairs(data, generate_pairs(5, 0))
    assert main(["lm", "eval", "--ckpt", str(tmp_path), "--data", str(data)]) == 2
    assert "corrupt" in _one_line_error(capsys)


def test_bad_data_file_for_eval_exits_2(run_dir, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"inp_expression": ["BOS POSITIVE 01 add POSITIVE 02 EOS"]}')
    assert main(["lm", "eval", "--ckpt", str(run_dir), "--data", str(bad)]) == 2
    assert "missing key" in _one_line_error(capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["lm", "data", "--n", "-3", "--out", "x.json"],
        ["lm", "data", "--n", "20000", "--out", "x.json"],
        ["lm", "train", "--steps", "0", "--out", "r"],
        ["lm", "train", "--lr", "1e300", "--warmup-steps", "0", "--out", "r"],
        ["lm", "train", "--data", "missing.json", "--out", "r"],
        ["lm", "train", "--d-model", "30", "--n-heads", "4", "--out", "r"],
        ["lm", "train", "--config", "missing.toml", "--out", "r"],
        ["lm", "generate", "--ckpt", "no_such_dir", "BOS POSITIVE 01 add POSITIVE 02 EOS"],
        ["lm", "generate", "--ckpt", "r", "--temperature", "-1", "BOS POSITIVE 01 add POSITIVE 02 EOS"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    _one_line_error(capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["lm"],
        ["lm", "train"],
        ["lm", "train", "--steps", "x", "--out", "r"],
        ["lm", "train", "--arch", "rnn", "--out", "r"],
    ],
)
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    _one_line_error(capsys)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "enc"
    assert main(["lm", "train", "--arch", "encoder", *TINY, "--out", str(out), "--json"]) == 0
    return out


def test_encoder_arch_trains_evaluates_and_generates_like_the_others(encoder_dir, tmp_path, capsys):
    result = json.loads((encoder_dir / "result.json").read_text())
    assert result["arch"] == "encoder" and result["steps"] == 20 and result["target_exact"] == 1.0
    assert {"steps_to_target", "seconds_to_target", "stopped_at", "stopped_early"} <= set(result)
    rows = list(csv.DictReader((encoder_dir / "history.csv").open()))
    assert [int(r["step"]) for r in rows] == [10, 20]
    data = tmp_path / "test.json"
    save_pairs(data, generate_pairs(30, 9))
    capsys.readouterr()
    for fill in ([], ["--fill", "parallel"], ["--fill", "iterative"]):
        assert main(["lm", "eval", "--ckpt", str(encoder_dir), "--data", str(data), "--json", *fill]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert metrics["pairs"] == 30 and 0 <= metrics["exact_match"] <= 1
    question = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"
    assert main(["lm", "generate", "--ckpt", str(encoder_dir), question, "--fill", "parallel"]) == 0
    assert capsys.readouterr().out.startswith("BOS")


def test_fill_on_a_non_encoder_checkpoint_and_unknown_encoder_option_exit_2(run_dir, capsys):
    question = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"
    assert main(["lm", "generate", "--ckpt", str(run_dir), question, "--fill", "parallel"]) == 2
    assert "--fill" in _one_line_error(capsys)
    with pytest.raises(SystemExit) as info:
        main(["lm", "train", "--arch", "encoder", "--mask-ratio", "0.3", "--out", "r"])
    assert info.value.code == 2 and "--mask-ratio" in _one_line_error(capsys)
