"""LM mode end to end: the EECS498 A5 arithmetic task with both models on the shared core.

    python examples/lm_arithmetic.py [--steps 3000] [--out runs/lm_example]

Generates a training file and a held-out test file, trains the decoder-only
and the encoder-decoder model, scores both on the test file (whole-answer exact
match and A5's per-token accuracy) and answers a few questions with each. The
same steps on the command line::

    nnqs lm data --n 5000 --seed 0 --out train.json
    nnqs lm train --arch decoder --data train.json --out runs/decoder
    nnqs lm data --n 2000 --seed 1 --exclude train.json --out test.json
    nnqs lm eval --ckpt runs/decoder --data test.json
    nnqs lm generate --ckpt runs/decoder "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"

With the default 3,000 steps each model takes a few minutes on two CPU threads;
``--steps 600`` gives a quick look (lower accuracy).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from nnqs.common.runfolder import claim
from nnqs.lm.checkpoint import load_lm
from nnqs.lm.data import encode_pairs, generate_pairs, save_pairs
from nnqs.lm.evaluate import evaluate
from nnqs.lm.generate import Sampling, answer_to_text, generate
from nnqs.lm.run import train_in_folder
from nnqs.lm.tokenizer import encode_question
from nnqs.lm.train import TrainConfig

QUESTIONS = [
    "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS",
    "BOS POSITIVE 49 add POSITIVE 49 EOS",
    "BOS NEGATIVE 07 add POSITIVE 07 EOS",
    "BOS POSITIVE 12 subtract POSITIVE 45 EOS",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--out", default="runs/lm_example")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)

    train_pairs = generate_pairs(5000, seed=0)
    test_pairs = generate_pairs(2000, seed=1, exclude=set(train_pairs.questions))
    save_pairs(out / "train.json", train_pairs)
    save_pairs(out / "test.json", test_pairs)
    test = encode_pairs(test_pairs)
    questions = torch.tensor([encode_question(q) for q in QUESTIONS])

    for arch in ("decoder", "seq2seq"):
        cfg = TrainConfig(arch=arch, data=str(out / "train.json"), steps=args.steps)
        with claim(out / arch, "overwrite") as folder:  # the example's own folders: a rerun replaces them
            result = train_in_folder(cfg, folder)
        model, _ = load_lm(out / arch)
        metrics = evaluate(model, test)
        print(f"\n{arch}: {result['n_parameters']} parameters, {result['steps']} steps in {result['wall_s']:.0f} s")
        print(f"  held-out test ({metrics.n_pairs} pairs): exact match {metrics.exact_match:.4f}, "
              f"token accuracy {metrics.token_accuracy:.4f}")
        greedy = generate(model, questions)
        sampled = generate(model, questions, Sampling(temperature=1.0, top_k=3), torch.Generator().manual_seed(0))
        for q, g, s in zip(QUESTIONS, greedy, sampled):
            print(f"  {q}  ->  {answer_to_text(g)}   (sampled, T=1, top-k 3: {answer_to_text(s)})")
    print(f"\nrun folders (checkpoint, history.csv, curve.png, result.json) under {out}")


if __name__ == "__main__":
    main()
