"""LM stop rules judged on held-out evidence: each training runs its full step budget, and at every
validation the model is also scored on the first 2,000 validation pairs and on a fresh test file.

``python -m benchmarks.lm_stop_rule [--quick] [--arch decoder seq2seq encoder] [--seeds 0 1 2] [--threads N]
[--set FIELD=VALUE ...] [--out FILE]`` (``--set``: TrainConfig fields other than the defaults, e.g. ``n_layers=3``)

The learning-rate schedule depends only on the step budget, so a rule that stops at step s leaves
the model exactly as it was at step s of the full run: every rule is judged offline on one curve.
Per training, one JSON line: the curve (step, seconds of training, validation exact match on the
first 2,000 and on all ``val_size`` pairs, fresh-test exact match and token accuracy), then for each
rule its stop step, seconds and fresh-test exact match. Rules: ``val2000_twice`` (the rule of the
version before: 1.0 on 2,000 validation pairs at two validations in a row), ``val3000_twice`` (1.0 on
3,000 pairs, twice: zero errors in 3,000 bounds the error rate below 1e-3 at 95% confidence, the rule
of three), ``val3000_once`` and ``full`` (no early stop). The fresh test file (2,000 pairs of another
seed) excludes every training question, as ``benchmarks.lm``'s does.
"""
from __future__ import annotations

import ast
import dataclasses
import time

import torch

from benchmarks.common import benchmark_parser, emit, software
from benchmarks.lm import QUICK, TEST_SEED
from nnqs.lm.data import Pairs, encode_pairs, generate_pairs
from nnqs.lm.evaluate import evaluate
from nnqs.lm.train import TrainConfig, train

OLD_VAL = 2000  # the validation size of the version before


def rule_stops(curve: list[dict], key: str, times: int) -> dict | None:
    """The curve point where ``key`` first reached 1.0 at ``times`` validations in a row (None: never)."""
    run = 0
    for point in curve:
        run = run + 1 if point[key] >= 1.0 else 0
        if run >= times:
            return point
    return None


def judge(curve: list[dict]) -> dict:
    """Stop step, seconds and fresh-test exact match of each rule on one training's ``curve``."""
    rules = {"val2000_twice": ("val2000_exact", 2), "val3000_twice": ("val_exact", 2), "val3000_once": ("val_exact", 1)}
    out = {}
    for name, (key, times) in rules.items():
        point = rule_stops(curve, key, times)
        reached, point = point is not None, point or curve[-1]  # never reached: the whole budget
        out[name] = {"step": point["step"], "train_s": point["train_s"], "test_exact": point["test_exact"],
                     "reached": reached}
    last = curve[-1]
    out["full"] = {"step": last["step"], "train_s": last["train_s"], "test_exact": last["test_exact"], "reached": True}
    return out


def curve_of(cfg: TrainConfig, test: Pairs) -> tuple[list[dict], dict]:
    """Train ``cfg`` without early stop; the curve of validation and fresh-test scores, and the result."""
    test_batch = encode_pairs(test)
    curve: list[dict] = []
    extra = {"s": 0.0}

    def score(result, run) -> None:  # after nnqs.lm.train.validate: a new record at a validation step
        if not run.history or run.history[-1].step != run.step or (curve and curve[-1]["step"] == run.step):
            return
        t0 = time.perf_counter()
        head = evaluate(run.model, run.val_batch.select(torch.arange(min(OLD_VAL, len(run.val_batch)))))
        fresh = evaluate(run.model, test_batch)
        run.model.train()
        record = run.history[-1]
        curve.append({"step": run.step, "train_s": round(record.elapsed_s - extra["s"], 2),
                      "val_exact": record.val_exact_match, "val2000_exact": head.exact_match,
                      "test_exact": fresh.exact_match, "test_token_accuracy": fresh.token_accuracy})
        extra["s"] += time.perf_counter() - t0

    run = train(cfg, [score])
    return curve, run.result()


def overrides(items: list[str]) -> dict:
    """``["lr=0.01", "d_ff=None"]`` -> ``{"lr": 0.01, "d_ff": None}``: TrainConfig fields to override."""
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name not in fields or name in ("arch", "seed", "target_exact", "threads"):
            raise SystemExit(f"--set: expected FIELD=VALUE with a TrainConfig field, got {item!r}")
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[name] = text
    return out


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("lm_stop_rule", __doc__, "toy sizes (seconds), for CI")
    archs = ["decoder", "seq2seq", "encoder"]
    parser.add_argument("--arch", nargs="+", default=archs, choices=archs)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--set", nargs="+", default=[], metavar="FIELD=VALUE",
                        help="override TrainConfig defaults, e.g. --set lr=0.01 steps=1500")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    for arch in args.arch:
        for seed in args.seeds:
            fields = {"target_exact": 0.0, **(QUICK if args.quick else {}), **overrides(args.set)}
            cfg = TrainConfig(arch=arch, seed=seed, threads=args.threads or 0, **fields)
            train_questions = set(generate_pairs(cfg.train_size, cfg.seed).questions)
            test = generate_pairs(100 if args.quick else 2000, TEST_SEED, exclude=train_questions)
            curve, result = curve_of(cfg, test)
            emit({"benchmark": "lm_stop_rule", "quick": args.quick, "arch": arch, "seed": seed,
                  "val_size": cfg.val_size, "steps": cfg.steps, "eval_every": cfg.eval_every,
                  "rules": judge(curve), "curve": curve, "n_parameters": result["n_parameters"],
                  "config": dataclasses.asdict(cfg), **software()}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
