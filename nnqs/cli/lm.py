"""`nnqs lm`: the arithmetic language model on the shared Transformer core.

    nnqs lm data --n 2000 --seed 7 --out test.json [--exclude runs/d/train.json]
    nnqs lm train --arch decoder|seq2seq|encoder [--data FILE | --train-size 5000] --out DIR [--resume | --overwrite] [--json]
    nnqs lm eval --ckpt DIR --data FILE [--json]
    nnqs lm generate --ckpt DIR "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS" [--temperature T] [--fill ORDER]
    nnqs lm show --ckpt DIR "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS" [--out attention.png]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from nnqs.cli.run_options import add_run_arguments, run_mode, signals_for
from nnqs.common.config import build_config
from nnqs.common.errors import UserError
from nnqs.lm.train import TrainConfig

# (flag, config key, type, help) of the training hyperparameters exposed as flags
TRAIN_FLAGS = (
    ("--arch", "arch", str, "decoder (decoder-only), seq2seq (encoder-decoder) or encoder (masked LM)"),
    ("--steps", "steps", int, "optimizer steps"),
    ("--seed", "seed", int, "seed of data, initialisation and batches"),
    ("--val-size", "val_size", int, "held-out validation pairs"),
    ("--batch-size", "batch_size", int, "pairs per step"),
    ("--lr", "lr", float, "peak learning rate (warmup, then cosine decay)"),
    ("--warmup-steps", "warmup_steps", int, "linear warmup steps"),
    ("--weight-decay", "weight_decay", float, "AdamW weight decay"),
    ("--d-model", "d_model", int, "model width"),
    ("--n-layers", "n_layers", int, "Transformer blocks (per core)"),
    ("--n-heads", "n_heads", int, "attention heads"),
    ("--d-ff", "d_ff", int, "MLP width (default 4 * d_model)"),
    ("--dropout", "dropout", float, "dropout rate"),
    ("--eval-every", "eval_every", int, "steps between validations"),
    ("--device", "device", str, "torch device: cpu, cuda or cuda:N"),
    ("--checkpoint-every", "checkpoint_every", int, "steps between checkpoints"),
    ("--checkpoint-seconds", "checkpoint_seconds", float, "seconds between checkpoints as well (0: off)"),
    ("--threads", "threads", int, "CPU threads of torch, BLAS and OpenMP (0: every core)"),
    ("--answer-mask-prob", "answer_mask_prob", float, "encoder: share of answering rows (question intact, whole answer masked)"),
    ("--target-exact", "target_exact", float, "stop once validation exact match reaches this twice in a row (0: off)"),
    ("--tail-steps", "tail_steps", int, "past --steps, while validation is below --tail-exact: at most this many "
                                        "more steps at the final learning rate (0: off)"),
    ("--tail-exact", "tail_exact", float, "the validation exact match that ends the tail"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("lm", help="arithmetic language model (decoder-only, encoder-decoder or masked LM)")
    actions = parser.add_subparsers(dest="lm_command", metavar="ACTION")
    actions.required = True
    _register_data(actions)
    _register_train(actions)
    _register_eval(actions)
    _register_generate(actions)
    _register_show(actions)


def _register_data(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("data", help="write a seeded arithmetic data set (A5 JSON format)")
    p.add_argument("--n", type=int, required=True, help="number of distinct question/answer pairs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument("--exclude", help="a data file whose questions must not appear (e.g. DIR/train.json)")
    p.set_defaults(func=cmd_data)


def _register_train(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("train", help="train an LM with teacher forcing")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--data", help="training file (A5 JSON format)")
    source.add_argument("--train-size", dest="train_size", type=int, help="generated training pairs (default 5000)")
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for flag, key, kind, text in TRAIN_FLAGS:
        choices = ("decoder", "seq2seq", "encoder") if key == "arch" else None
        p.add_argument(flag, dest=key, type=kind, choices=choices, help=f"{text} (default {defaults[key]})")
    p.add_argument("--config", help="TOML file of training settings (flags override it)")
    p.add_argument("--out", required=True, help="run folder (one run per folder)")
    add_run_arguments(p)
    p.set_defaults(func=cmd_train)


def _register_eval(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("eval", help="exact match and token accuracy of a checkpoint on a data file")
    p.add_argument("--ckpt", required=True, help="run folder or checkpoint file")
    p.add_argument("--data", required=True, help="data file (A5 JSON format)")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--json", action="store_true", help="print the metrics as one JSON line")
    _add_fill(p)
    p.set_defaults(func=cmd_eval)


def _register_generate(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("generate", help="answer questions with a trained LM")
    p.add_argument("questions", nargs="+", metavar="QUESTION", help='e.g. "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"')
    p.add_argument("--ckpt", required=True, help="run folder or checkpoint file")
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy")
    p.add_argument("--top-k", dest="top_k", type=int, help="sample among the k most likely tokens")
    p.add_argument("--top-p", dest="top_p", type=float, help="nucleus sampling mass")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling generator")
    _add_fill(p)
    p.set_defaults(func=cmd_generate)


def _register_show(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("show", help="attention maps (PNG) and top-3 token probabilities of one answer")
    p.add_argument("question", metavar="QUESTION", help='e.g. "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"')
    p.add_argument("--ckpt", required=True, help="run folder or checkpoint file")
    p.add_argument("--out", help="PNG file (default: attention.png next to the checkpoint)")
    _add_fill(p)
    p.set_defaults(func=cmd_show)


def _add_fill(p: argparse.ArgumentParser) -> None:
    from nnqs.lm.encoder_lm import DEFAULT_FILL, FILL_ORDERS

    p.add_argument("--fill", choices=FILL_ORDERS, help=f"encoder arch: fill the answer slots one per pass, most "
                   f"confident first (iterative), or all in one pass (parallel); default {DEFAULT_FILL}")


def _check_fill(fill: str | None, model: torch.nn.Module, ckpt: str) -> None:
    if fill is not None and model.cfg.arch != "encoder":
        raise UserError(f"--fill applies to encoder checkpoints only; {ckpt} holds a {model.cfg.arch} model")


def _set_threads(threads: int | None) -> None:
    from nnqs.common.config import apply_threads, check_threads

    if threads is not None:
        try:
            check_threads(threads)
        except ValueError as exc:
            raise UserError(f"--{exc}") from None
        apply_threads(threads)


def cmd_data(args: argparse.Namespace) -> int:
    from nnqs.lm.data import generate_pairs, load_pairs, save_pairs

    if Path(args.out).is_dir():
        raise UserError(f"--out {args.out} is a folder; give a file name (e.g. {Path(args.out) / 'data.json'})")
    exclude = set(load_pairs(args.exclude).questions) if args.exclude else set()
    pairs = generate_pairs(args.n, args.seed, exclude=exclude)
    save_pairs(args.out, pairs)
    print(f"wrote {len(pairs)} pairs to {args.out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from nnqs.common.resume import given_keys, resume_config
    from nnqs.common.runfolder import claim
    from nnqs.lm.run import MUTABLE, train_in_folder

    overrides = {key: getattr(args, key) for _, key, _, _ in TRAIN_FLAGS}
    overrides.update(data=args.data, train_size=args.train_size)
    cfg = build_config(TrainConfig, args.config, overrides)
    out = Path(args.out)
    with claim(out, run_mode(args)) as folder:
        changes = []
        if args.resume:
            cfg, changes = resume_config(TrainConfig, folder, "lm", cfg, given_keys(args.config, overrides), MUTABLE)
        with signals_for(out) as stop:
            result = train_in_folder(cfg, folder, resume=args.resume, progress=not args.no_progress, stop=stop,
                                     changes=changes)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{cfg.arch}: val exact match {result['val_exact_match']:.4f}, "
              f"val token accuracy {result['val_token_accuracy']:.4f}, "
              f"{result['steps']} steps in {result['wall_s']:.1f} s -> {out}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from nnqs.lm.checkpoint import load_lm
    from nnqs.lm.data import encode_pairs, load_pairs
    from nnqs.lm.evaluate import evaluate

    _set_threads(args.threads)
    model, _ = load_lm(args.ckpt)
    _check_fill(args.fill, model, args.ckpt)
    pairs = load_pairs(args.data)
    metrics = evaluate(model, encode_pairs(pairs), fill=args.fill)
    result = {"exact_match": metrics.exact_match, "token_accuracy": metrics.token_accuracy, "pairs": metrics.n_pairs}
    if args.json:
        print(json.dumps({**result, "ckpt": str(args.ckpt), "data": str(args.data)}))
    else:
        for key, value in result.items():
            print(f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from nnqs.lm.checkpoint import load_lm
    from nnqs.lm.generate import Sampling, answer_to_text, generate
    from nnqs.lm.tokenizer import encode_question

    sampling = Sampling(args.temperature, args.top_k, args.top_p)
    questions = torch.tensor([encode_question(q) for q in args.questions], dtype=torch.long)
    model, _ = load_lm(args.ckpt)
    _check_fill(args.fill, model, args.ckpt)
    if not 0 <= args.seed < 2**63:
        raise UserError(f"--seed must be in 0..2**63-1, got {args.seed}")
    generator = torch.Generator().manual_seed(args.seed)
    answers = generate(model, questions, sampling, generator, fill=args.fill)
    for row in answers:
        print(answer_to_text(row))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from nnqs.lm.checkpoint import load_lm
    from nnqs.lm.show import check_question, explain, plot_attention
    from nnqs.lm.tokenizer import decode

    model, _ = load_lm(args.ckpt)
    _check_fill(args.fill, model, args.ckpt)
    q = check_question(args.question, model)
    ckpt = Path(args.ckpt)
    out = Path(args.out) if args.out else (ckpt if ckpt.is_dir() else ckpt.parent) / "attention.png"
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; give a file name (e.g. {out / 'attention.png'})")
    result = explain(model, q, args.fill)
    question, answer = decode(result.question), decode(result.answer)
    plot_attention(out, result.maps, f"{model.cfg.arch}: {question} -> {answer}")
    print(f"question: {question}")
    print(f"answer:   {answer}")
    for where, top in result.steps:
        print(f"{where:>16}: " + "   ".join(f"{tok} {p:.3f}" for tok, p in top))
    print(f"attention maps ({len(result.maps)} attention layers x {model.cfg.n_heads} heads) -> {out}")
    return 0
