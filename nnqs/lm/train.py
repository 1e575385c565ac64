"""Teacher-forced training of an arithmetic LM, with periodic validation.

The defaults fit the task's budget of 5,000 generated training pairs: a small
model (d_model 64, 2 layers per core), AdamW (lr 3e-3, weight decay 0.1) with
warmup and cosine decay over 3,000 steps of 256 pairs. On two CPU threads that
takes a few minutes and gives exact match >= 0.998 on held-out questions for
both architectures (1.0 in the reference runs). The validation set is
generated with a different seed (``seed + VAL_SEED_OFFSET``) and excludes
every training question. The loop is short: :func:`train_step` does one optimizer
step; logging, checkpointing and progress are hooks (:class:`Hooks`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from nnqs.common.errors import UserError
from nnqs.lm.data import Batch, Pairs, encode_pairs, generate_pairs, load_pairs
from nnqs.lm.evaluate import Metrics, evaluate
from nnqs.lm.models import ArithmeticLM, ModelConfig, build_model, n_parameters
from nnqs.nn.schedule import warmup_cosine

VAL_SEED_OFFSET = 1_000_003


@dataclass(frozen=True)
class TrainConfig:
    """One LM training run (saved as ``config.toml`` and in the checkpoint)."""

    arch: Literal["decoder", "seq2seq"] = "decoder"
    data: str | None = None  # a training file in the A5 format; None: generate train_size pairs
    train_size: int = 5000
    val_size: int = 2000
    seed: int = 0
    steps: int = 3000
    batch_size: int = 256
    lr: float = 3e-3
    min_lr_ratio: float = 0.05  # the cosine schedule ends at lr * min_lr_ratio
    warmup_steps: int = 200
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None
    dropout: float = 0.0
    eval_every: int = 250
    device: str = "cpu"

    def __post_init__(self) -> None:
        positive = ("train_size", "val_size", "steps", "batch_size", "d_model", "n_layers", "n_heads", "eval_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not (self.lr > 0 and 0 <= self.min_lr_ratio <= 1 and self.weight_decay >= 0 and 0 <= self.dropout < 1):
            raise ValueError("need lr > 0, 0 <= min_lr_ratio <= 1, weight_decay >= 0, 0 <= dropout < 1")
        if self.warmup_steps < 0 or self.grad_clip <= 0 or (self.d_ff is not None and self.d_ff < 1):
            raise ValueError("need warmup_steps >= 0, grad_clip > 0, d_ff >= 1")
        if not all(math.isfinite(x) for x in (self.lr, self.weight_decay, self.grad_clip)):
            raise ValueError("lr, weight_decay and grad_clip must be finite")
        if not 0 <= self.seed < 2**63 - VAL_SEED_OFFSET:
            raise ValueError(f"seed must be in 0..2**63-{VAL_SEED_OFFSET + 1}, got {self.seed}")


def model_config(cfg: TrainConfig) -> ModelConfig:
    return ModelConfig(cfg.arch, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.dropout)


def make_datasets(cfg: TrainConfig) -> tuple[Pairs, Pairs]:
    """Training pairs (from ``cfg.data`` or generated) and a disjoint, differently seeded validation set."""
    train = load_pairs(cfg.data) if cfg.data is not None else generate_pairs(cfg.train_size, cfg.seed)
    val = generate_pairs(cfg.val_size, cfg.seed + VAL_SEED_OFFSET, exclude=set(train.questions))
    return train, val


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to ``cfg.lr``, then cosine decay to ``cfg.lr * cfg.min_lr_ratio`` at ``cfg.steps``."""
    return cfg.lr * warmup_cosine(step, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices and embeddings, none on biases and LayerNorm gains."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98))


def batch_indices(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless mini-batches of row indices: shuffled epochs, the last short batch dropped if n allows."""
    size = min(batch_size, n)
    while True:
        order = torch.randperm(n, generator=generator)
        for start in range(0, n - size + 1, size):
            yield order[start : start + size]


def train_step(model: ArithmeticLM, opt: torch.optim.Optimizer, batch: Batch, lr: float, grad_clip: float) -> float:
    """One teacher-forced AdamW step at learning rate ``lr``; returns the loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    loss = model.loss(batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return float(loss.detach())


@dataclass(frozen=True)
class EvalRecord:
    """One validation point: mean training loss since the last one, and the metrics."""

    step: int
    train_loss: float
    lr: float
    val_exact_match: float
    val_token_accuracy: float
    elapsed_s: float


@dataclass
class Hooks:
    """Callbacks of the loop: after each step ``(step, loss, elapsed_s)``; after each validation."""

    on_step: list[Callable[[int, float, float], None]] = field(default_factory=list)
    on_eval: list[Callable[["TrainRun", EvalRecord], None]] = field(default_factory=list)


@dataclass
class TrainRun:
    """The state of a run: what the hooks see and what :func:`train` returns."""

    cfg: TrainConfig
    model: ArithmeticLM
    optimizer: torch.optim.AdamW
    train_pairs: Pairs
    val_pairs: Pairs
    step: int = 0
    history: list[EvalRecord] = field(default_factory=list)
    wall_s: float = 0.0

    def result(self) -> dict:
        """The run summary written to ``result.json``."""
        last = self.history[-1]
        return {
            "arch": self.cfg.arch, "steps": self.step, "n_parameters": n_parameters(self.model),
            "train_pairs": len(self.train_pairs), "val_pairs": len(self.val_pairs),
            "val_exact_match": last.val_exact_match, "val_token_accuracy": last.val_token_accuracy,
            "final_train_loss": last.train_loss, "wall_s": round(self.wall_s, 3),
            "threads": torch.get_num_threads(), "seed": self.cfg.seed,
        }


def _validate(run: TrainRun, val: Batch, losses: list[float], elapsed: float) -> EvalRecord:
    metrics: Metrics = evaluate(run.model, val)
    mean_loss = sum(losses) / max(len(losses), 1)
    lr = lr_at(run.step - 1, run.cfg)
    return EvalRecord(run.step, mean_loss, lr, metrics.exact_match, metrics.token_accuracy, elapsed)


def train(
    cfg: TrainConfig, hooks: Hooks | None = None, restore: Callable[[TrainRun], None] | None = None,
) -> TrainRun:
    """Train the model ``cfg`` describes; validate every ``cfg.eval_every`` steps and at the end.

    ``restore(run)`` (resuming) puts a checkpoint's model, optimizer, step, history and RNG
    state into the fresh run; the batches then continue from that step exactly.
    """
    hooks = hooks or Hooks()
    device = _device(cfg.device)
    train_pairs, val_pairs = make_datasets(cfg)
    train_batch, val_batch = encode_pairs(train_pairs).to(device), encode_pairs(val_pairs).to(device)
    with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the global RNG
        torch.manual_seed(cfg.seed)
        model = build_model(model_config(cfg)).to(device)
    run = TrainRun(cfg, model, make_optimizer(model, cfg), train_pairs, val_pairs)
    batches = batch_indices(len(train_batch), cfg.batch_size, torch.Generator().manual_seed(cfg.seed))
    if restore is not None:
        restore(run)
        for _ in range(run.step):  # the batches already trained on
            next(batches)
    losses: list[float] = []
    start = time.perf_counter() - run.wall_s
    model.train()
    for step in range(run.step, cfg.steps):
        batch = train_batch.select(next(batches).to(device))
        losses.append(train_step(model, run.optimizer, batch, lr_at(step, cfg), cfg.grad_clip))
        run.step = step + 1
        for hook in hooks.on_step:
            hook(run.step, losses[-1], time.perf_counter() - start)
        if run.step % cfg.eval_every == 0 or run.step == cfg.steps:
            record = _validate(run, val_batch, losses, time.perf_counter() - start)
            run.history.append(record)
            losses = []
            run.wall_s = time.perf_counter() - start
            for hook in hooks.on_eval:
                hook(run, record)
    run.wall_s = time.perf_counter() - start
    return run


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise UserError(f"bad device {name!r}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r} requested but CUDA is not available")
    return device
