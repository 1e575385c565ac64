"""LM mode accuracy and speed: the three architectures at the default settings.

``python -m benchmarks.lm [--quick] [--arch decoder seq2seq] [--seeds 0 1 2] [--threads N] [--runs DIR] [--out FILE]``

For each architecture: train with the default :class:`~nnqs.lm.train.TrainConfig`
(5,000 generated training pairs; training stops once validation exact match reached
``target_exact`` twice in a row), then score a fresh test set (a different
seed, every training question excluded) with both metrics, and time greedy
generation over it with and without the KV cache (median by torch.utils.benchmark's
``blocked_autorange``). One JSON object per
architecture. For reference, EECS498 WI22 A5 reports 0.82 per-token
(teacher-forced) accuracy on this task. ``--quick`` is a toy-sized run that
only checks the pipeline. For the encoder-only masked LM both answering orders are
scored (``fill``); the default order's figures are the ``test_*`` fields. With ``--runs DIR``
each training runs as ``nnqs lm train`` does (run folder ``DIR/ARCH-SEED`` with its checkpoints,
history and ``train.json``), so the folders can be evaluated, shown and timed again from the CLI.
"""
from __future__ import annotations

from pathlib import Path

import torch

from benchmarks.common import benchmark_parser, emit, software, timed
from nnqs.common.runfolder import claim
from nnqs.lm.checkpoint import load_lm
from nnqs.lm.data import encode_pairs, generate_pairs, load_pairs
from nnqs.lm.encoder_lm import DEFAULT_FILL, FILL_ORDERS
from nnqs.lm.evaluate import evaluate
from nnqs.lm.generate import generate
from nnqs.lm.run import train_in_folder
from nnqs.lm.train import TrainConfig, train

QUICK = dict(train_size=200, val_size=50, steps=20, eval_every=10, d_model=16, n_layers=1, batch_size=32)
TEST_SEED = 20_220_405


def train_one(cfg: TrainConfig, runs: Path | None):
    """Train ``cfg``: in memory, or as ``nnqs lm train`` in the run folder ``runs/ARCH-SEED``.
    Returns (model, training questions, result dict)."""
    if runs is None:
        run = train(cfg)
        return run.model, run.train_pairs.questions, run.result()
    path = runs / f"{cfg.arch}-{cfg.seed}"
    with claim(path, "overwrite") as folder:
        result = train_in_folder(cfg, folder, progress=False)
    return load_lm(path)[0], load_pairs(path / "train.json").questions, result


def run_one(arch: str, quick: bool, test_size: int, seed: int = 0, runs: Path | None = None, threads: int = 0
            ) -> dict:
    """Train one architecture (seed ``seed``), score it on a fresh test set; the JSON record."""
    cfg = TrainConfig(arch=arch, seed=seed, threads=threads, **(QUICK if quick else {}))
    model, train_questions, result = train_one(cfg, runs)
    test_pairs = generate_pairs(test_size, TEST_SEED, exclude=set(train_questions))
    test = encode_pairs(test_pairs)
    metrics = evaluate(model, test)
    fills = {}
    if arch == "encoder":
        for order in FILL_ORDERS:
            m = metrics if order == DEFAULT_FILL else evaluate(model, test, fill=order)
            fills[order] = {"exact_match": m.exact_match, "token_accuracy": m.token_accuracy}
    model = model.eval()
    # Training is one run, not repeatable: its wall_s is the run's own clock. Generation is timed by Timer.
    min_run_time = 0.0 if quick else 2.0
    t_cached, _, n_cached = timed(lambda: generate(model, test.questions), min_run_time)
    t_full, _, n_full = timed(lambda: generate(model, test.questions, use_cache=False), min_run_time)
    return {
        "benchmark": "lm", "quick": quick, **result,
        "s_per_step": round(result["wall_s"] / result["steps"], 5),
        "test_pairs": metrics.n_pairs, "test_exact_match": metrics.exact_match,
        "test_token_accuracy": metrics.token_accuracy, **({"fill": fills} if fills else {}),
        "generate_cached_s": round(t_cached, 4), "generate_no_cache_s": round(t_full, 4),
        "generate_calls": [n_cached, n_full], "timer": "torch.utils.benchmark.Timer.blocked_autorange",
        **software(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("lm", __doc__, "toy sizes (seconds), for CI")
    archs = ["decoder", "seq2seq", "encoder"]
    parser.add_argument("--arch", nargs="+", default=archs, choices=archs)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="training seeds, one run each (default 0)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--runs", default=None, help="keep each training as a run folder DIR/ARCH-SEED")
    parser.add_argument("--test-size", type=int, default=None, help="fresh test pairs (2000; 100 with --quick)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    test_size = args.test_size or (100 if args.quick else 2000)
    runs = None if args.runs is None else Path(args.runs)
    for arch in args.arch:
        for seed in args.seeds:
            emit(run_one(arch, args.quick, test_size, seed, runs, args.threads or 0), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
