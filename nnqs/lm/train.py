"""Teacher-forced training of an arithmetic LM, with periodic validation.

The defaults fit the task's budget of 5,000 generated training pairs: a small
model (d_model 64, 2 layers per core), AdamW (lr 3e-3, weight decay 0.1) with
warmup and cosine decay (the LambdaLR schedule of :mod:`nnqs.common.schedule`) over
at most 3,000 steps of 256 pairs, stopping once validation exact match reached
``target_exact`` (1.0) at two validations in a row; a run that ends its steps with validation
near the target but below ``tail_exact`` (from ``tail_from`` = 0.95 up to 0.999) goes on at the final
learning rate until a validation reaches it (at most ``tail_steps`` more). Figures per architecture:
benchmarks/RESULTS.md. The validation set is generated with a different seed
(``seed + VAL_SEED_OFFSET``) and excludes every training question. The loop is the
shared skeleton (:func:`nnqs.common.loop.step_loop`): :func:`lm_step` does one
optimizer step; validation, history, checkpoints and progress are callbacks.
"""
# Over 300 lines: the config, the run state, the step and the stop rule of one training belong together.
from __future__ import annotations

import dataclasses
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Iterable, Literal

import torch
from torch import nn

from nnqs.common.config import check_threads
from nnqs.common.errors import UserError
from nnqs.common.guard import DivergenceGuard
from nnqs.common.interrupt import StopSignal
from nnqs.common.loop import Callback, LoopState, honour_stop, step_loop
from nnqs.lm.data import Batch, Pairs, encode_pairs, generate_pairs, load_pairs
from nnqs.lm.evaluate import evaluate
from nnqs.lm.models import ModelConfig, n_parameters
from nnqs.lm.build import ArithmeticLM, build_model
from nnqs.common.schedule import warmup_cosine

VAL_SEED_OFFSET = 1_000_003
LR_MAX = 1e6  # far above any useful rate, far below float32's 3.4e38


@dataclass(frozen=True)
class TrainConfig:
    """One LM training run (saved as ``config.toml`` and in the checkpoint)."""

    arch: Literal["decoder", "seq2seq", "encoder"] = "decoder"
    data: str | None = None  # a training file in the A5 format; None: generate train_size pairs
    train_size: int = 5000
    val_size: int = 3000  # 1.0 on 3,000 pairs: error rate below 1e-3 at 95% confidence (rule of three)
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
    checkpoint_every: int = 250
    checkpoint_seconds: float = 60.0  # also checkpoint when this much time passed since the last one (0: off)
    threads: int = 0  # CPU threads of torch, BLAS and OpenMP (0: every core; nnqs.common.config.apply_threads)
    answer_mask_prob: float = 0.75  # encoder: share of answering rows (question intact, answer slots all masked)
    target_exact: float = 1.0  # stop once validation exact match >= this at two evaluations in a row (0: off)
    # Past ``steps``, while the last validation is in [tail_from, tail_exact), go on at the final learning rate
    # for up to tail_steps more, stopping at the first validation that reaches tail_exact (0 or target_exact 0:
    # off); a run further from the target needs other settings, not more steps at the floor. seq2seq seed 2 on
    # 2 threads ended its 3,000 steps at validation 0.995 and 0.9925 on a fresh file (benchmarks/RESULTS.md).
    tail_steps: int = 1500
    tail_exact: float = 0.999
    tail_from: float = 0.95

    def __post_init__(self) -> None:
        positive = ("train_size", "val_size", "steps", "batch_size", "d_model", "n_layers", "n_heads", "eval_every",
                    "checkpoint_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        for name, ok, rule in (
            ("lr", 0 < self.lr <= LR_MAX, f"a number > 0 and at most {LR_MAX:g} (AdamW's float32 update overflows above)"),
            ("min_lr_ratio", 0 <= self.min_lr_ratio <= 1, "in 0..1"),
            ("weight_decay", 0 <= self.weight_decay < math.inf, "a finite number >= 0"),
            ("dropout", 0 <= self.dropout < 1, "in [0, 1)"),
            ("grad_clip", 0 < self.grad_clip < math.inf, "a finite number > 0"),
            ("warmup_steps", self.warmup_steps >= 0, ">= 0"),
            ("d_ff", self.d_ff is None or self.d_ff >= 1, ">= 1"),
            ("checkpoint_seconds", 0 <= self.checkpoint_seconds <= 10**9, "in 0..1e9"),
            ("target_exact", 0 <= self.target_exact <= 1, "in 0..1 (0: off)"),
            ("tail_steps", 0 <= self.tail_steps <= 10**9, "in 0..1e9 (0: off)"),
            ("tail_exact", 0 <= self.tail_exact <= 1, "in 0..1"),
            ("tail_from", 0 <= self.tail_from <= self.tail_exact, "in 0..tail_exact"),
            ("answer_mask_prob", 0 <= self.answer_mask_prob <= 1, "in 0..1"),
        ):
            if not ok:
                raise ValueError(f"{name} must be {rule}, got {getattr(self, name)}")
        check_threads(self.threads)
        if not 0 <= self.seed < 2**63 - VAL_SEED_OFFSET:
            raise ValueError(f"seed must be in 0..2**63-{VAL_SEED_OFFSET + 1}, got {self.seed}")
        check_device(self.device)


def check_device(name: str) -> None:
    """The LM runs on ``cpu``, ``cuda`` or ``cuda:N`` (ValueError otherwise, e.g. for meta or mps)."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {name!r}")


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


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (weight decay on matrices and embeddings, none on biases and LayerNorm gains) and
    its warmup-cosine LambdaLR schedule (the rate of step s is :func:`lr_at`)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: warmup_cosine(s, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio))
    return opt, sched


class BatchSampler:
    """Endless mini-batches of row indices: shuffled epochs (one ``randperm`` of ``generator``
    each), the last short batch dropped if n allows. Its position is saved in checkpoints."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator) -> None:
        self.n, self.size, self.generator = n, min(batch_size, n), generator
        self.order: torch.Tensor | None = None
        self.position = 0

    def next(self) -> torch.Tensor:
        """The next batch ``(size,)`` of row indices."""
        if self.order is None or self.position + self.size > self.n:
            self.order, self.position = torch.randperm(self.n, generator=self.generator), 0
        self.position += self.size
        return self.order[self.position - self.size : self.position]

    def state_dict(self) -> dict:
        return {"order": self.order, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.order, self.position = state["order"], int(state["position"])


def train_step(model: ArithmeticLM, opt: torch.optim.Optimizer, batch: Batch, grad_clip: float,
               generator: torch.Generator | None = None, answer_mask_prob: float = 0.0) -> tuple[float, float]:
    """One step at the optimizer's current rate; returns (loss, gradient norm before clipping).

    ``generator`` draws the masks of the masked LM (the other objectives draw nothing)."""
    if getattr(model.cfg, "arch", None) == "encoder":
        loss = model.loss(batch, generator, answer_mask_prob)
    else:
        loss = model.loss(batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return float(loss.detach()), float(grad_norm)


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
class LMStepResult:
    """What one training step measured (loss on answer tokens; ``lr``: the rate it used)."""

    step: int
    loss: float
    lr: float
    grad_norm: float
    t_step: float


@dataclass(kw_only=True)
class TrainRun(LoopState):
    """The state of a run: the loop state plus data, validation history and pending losses."""

    cfg: TrainConfig
    train_pairs: Pairs
    val_pairs: Pairs
    train_batch: Batch
    val_batch: Batch
    batches: BatchSampler
    history: list[EvalRecord] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # training losses since the last validation
    wall_s: float = 0.0  # training time before this process (resumed runs)
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        """Training seconds so far, over all processes of the run."""
        return time.perf_counter() - self.started

    def extras(self) -> dict:
        return {"batches": self.batches.state_dict(), "losses": list(self.losses), "wall_s": self.elapsed(),
                "records": [dataclasses.asdict(r) for r in self.history]}

    def load_extras(self, extras: dict) -> None:
        self.batches.load_state_dict(extras["batches"])
        self.losses = [float(x) for x in extras["losses"]]
        self.history = [EvalRecord(**r) for r in extras["records"]]
        self.wall_s = float(extras["wall_s"])

    def first_target(self) -> EvalRecord | None:
        """The first validation whose exact match reached ``cfg.target_exact`` (None if none did or it is off)."""
        target = self.cfg.target_exact
        return next((r for r in self.history if target > 0 and r.val_exact_match >= target), None)

    def reached_target(self) -> bool:
        """The stop rule: the last two validations both reached ``cfg.target_exact`` (> 0)."""
        target, last = self.cfg.target_exact, self.history[-2:]
        return target > 0 and len(last) == 2 and all(r.val_exact_match >= target for r in last)

    def step_limit(self) -> int:
        """The step the run ends at: ``cfg.steps``, or, once there with the last validation in
        ``[cfg.tail_from, cfg.tail_exact)``, up to ``cfg.tail_steps`` more (the tail ends at the validation
        that reaches ``cfg.tail_exact``)."""
        cfg = self.cfg
        if self.step < cfg.steps or not cfg.tail_steps or not cfg.target_exact or not self.history:
            return cfg.steps
        at_steps = next((r for r in self.history if r.step == cfg.steps), None)
        if at_steps is None or not cfg.tail_from <= at_steps.val_exact_match < cfg.tail_exact:
            return cfg.steps  # no tail (also for a run resumed past its steps with other settings)
        if self.history[-1].val_exact_match >= cfg.tail_exact:
            return min(self.step, cfg.steps + cfg.tail_steps)
        return cfg.steps + cfg.tail_steps

    def finished(self) -> bool:
        return self.reached_target() or self.step >= self.step_limit()

    def result(self) -> dict:
        """The run summary written to ``result.json``."""
        last, first = self.history[-1], self.first_target()
        return {
            "arch": self.cfg.arch, "steps": self.step, "n_parameters": n_parameters(self.model),
            "train_pairs": len(self.train_pairs), "val_pairs": len(self.val_pairs),
            "val_exact_match": last.val_exact_match, "val_token_accuracy": last.val_token_accuracy,
            "final_train_loss": last.train_loss, "wall_s": round(self.wall_s, 3),
            "threads": torch.get_num_threads(), "seed": self.cfg.seed,
            "target_exact": self.cfg.target_exact,
            "steps_to_target": None if first is None else first.step,
            "seconds_to_target": None if first is None else round(first.elapsed_s, 3),
            "stopped_at": self.step, "stopped_early": self.step < self.cfg.steps,
            "tail_steps_run": max(0, self.step - self.cfg.steps),
        }


def start_run(cfg: TrainConfig) -> TrainRun:
    """A fresh run of ``cfg``: data, seeded model (the global RNG untouched), optimizer, schedule, batches."""
    device = _device(cfg.device)
    train_pairs, val_pairs = make_datasets(cfg)
    with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the global RNG
        torch.manual_seed(cfg.seed)
        model = build_model(model_config(cfg)).to(device)
    opt, sched = make_optimizer(model, cfg)
    generator = torch.Generator().manual_seed(cfg.seed)
    train_batch = encode_pairs(train_pairs).to(device)
    return TrainRun(model=model, opt=opt, sched=sched, generator=generator, cfg=cfg, train_pairs=train_pairs,
                    val_pairs=val_pairs, train_batch=train_batch, val_batch=encode_pairs(val_pairs).to(device),
                    batches=BatchSampler(len(train_batch), cfg.batch_size, generator))


def lm_step(run: TrainRun) -> LMStepResult:
    """One optimizer step on the next batch, then the schedule's step."""
    t0 = time.perf_counter()
    batch = run.train_batch.select(run.batches.next().to(run.train_batch.questions.device))
    lr = run.opt.param_groups[0]["lr"]
    loss, grad_norm = train_step(run.model, run.opt, batch, run.cfg.grad_clip, run.generator,
                                 run.cfg.answer_mask_prob)
    run.sched.step()
    return LMStepResult(run.step, loss, lr, grad_norm, time.perf_counter() - t0)


def validate(result: LMStepResult, run: TrainRun) -> None:
    """The first callback: keep the loss; every ``eval_every`` steps and at the end, validate."""
    run.losses.append(result.loss)
    if run.step % run.cfg.eval_every == 0 or run.step in (run.cfg.steps, run.cfg.steps + run.cfg.tail_steps):
        metrics = evaluate(run.model, run.val_batch)
        mean_loss = sum(run.losses) / max(len(run.losses), 1)
        run.history.append(EvalRecord(run.step, mean_loss, result.lr, metrics.exact_match, metrics.token_accuracy,
                                      run.elapsed()))
        run.losses = []


def train(
    cfg: TrainConfig, callbacks: Iterable[Callback] = (), *, run: TrainRun | None = None,
    guard: DivergenceGuard | None = None, stop: StopSignal | None = None, save=None,
) -> TrainRun:
    """Train the model ``cfg`` describes (or continue ``run``, e.g. restored from a checkpoint);
    validate every ``cfg.eval_every`` steps and at the end; stop early once the last two
    validations reached ``cfg.target_exact``. ``stop``/``save``: see :func:`nnqs.common.loop.step_loop`."""
    run = start_run(cfg) if run is None else run
    run.started = time.perf_counter() - run.wall_s
    run.model.train()
    # The loop runs from one validation to the next, so the stop rule is checked after each; a
    # signal between two of them waits too (it was lost work: no checkpoint, exit at once).
    with stop.deferred() if stop is not None else nullcontext():
        while not run.finished():
            end = min(run.step_limit(), (run.step // cfg.eval_every + 1) * cfg.eval_every)
            step_loop(run, lm_step, end, [validate, *callbacks], guard, stop, save)
        honour_stop(run, stop, save)  # a signal after the last segment's boundary check
    if save is not None:
        save(run)  # the final checkpoint (a saver saves a step once)
    run.wall_s = run.elapsed()
    return run


def _device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r} requested but CUDA is not available")
    return device
