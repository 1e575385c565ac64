"""LM mode accuracy and speed: the three architectures at the default settings.

``python -m benchmarks.lm [--quick] [--arch decoder seq2seq] [--threads N] [--out FILE]``

For each architecture: train with the default :class:`~nnqs.lm.train.TrainConfig`
(5,000 generated training pairs; training stops once validation exact match reached
``target_exact`` twice in a row), then score a fresh test set (a different
seed, every training question excluded) with both metrics, and time greedy
generation over it with and without the KV cache (median by torch.utils.benchmark's
``blocked_autorange``). One JSON object per
architecture. For reference, EECS498 WI22 A5 reports 0.82 per-token
(teacher-forced) accuracy on this task. ``--quick`` is a toy-sized run that
only checks the pipeline. For the encoder-only masked LM both answering orders are
scored (``fill``); the default order's figures are the ``test_*`` fields.
"""
from __future__ import annotations

import torch

from benchmarks.common import benchmark_parser, emit, software, timed
from nnqs.lm.data import encode_pairs, generate_pairs
from nnqs.lm.encoder_lm import DEFAULT_FILL, FILL_ORDERS
from nnqs.lm.evaluate import evaluate
from nnqs.lm.generate import generate
from nnqs.lm.train import TrainConfig, train

QUICK = dict(train_size=200, val_size=50, steps=20, eval_every=10, d_model=16, n_layers=1, batch_size=32)
TEST_SEED = 20_220_405


def run_one(arch: str, quick: bool, test_size: int) -> dict:
    """Train one architecture, score it on a fresh test set; the JSON record."""
    cfg = TrainConfig(arch=arch, **(QUICK if quick else {}))
    run = train(cfg)
    test_pairs = generate_pairs(test_size, TEST_SEED, exclude=set(run.train_pairs.questions))
    test = encode_pairs(test_pairs)
    metrics = evaluate(run.model, test)
    fills = {}
    if arch == "encoder":
        for order in FILL_ORDERS:
            m = metrics if order == DEFAULT_FILL else evaluate(run.model, test, fill=order)
            fills[order] = {"exact_match": m.exact_match, "token_accuracy": m.token_accuracy}
    model = run.model.eval()
    # Training is one run, not repeatable: its wall_s is the run's own clock. Generation is timed by Timer.
    min_run_time = 0.0 if quick else 2.0
    t_cached, _, n_cached = timed(lambda: generate(model, test.questions), min_run_time)
    t_full, _, n_full = timed(lambda: generate(model, test.questions, use_cache=False), min_run_time)
    result = run.result()
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
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--test-size", type=int, default=None, help="fresh test pairs (2000; 100 with --quick)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    test_size = args.test_size or (100 if args.quick else 2000)
    for arch in args.arch:
        emit(run_one(arch, args.quick, test_size), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
