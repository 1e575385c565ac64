"""What an LM run leaves in its folder, and how a checkpoint is read back.

Before training: ``DIR/config.toml``. After every validation (a training
hook): ``DIR/checkpoint.pt`` (kind ``"lm"``: model state and hyperparameters,
optimizer state, step, run config, vocabulary, history and RNG state, enough for
``nnqs lm train --resume`` to continue exactly) and ``DIR/history.csv`` (one
row per validation). At the end: ``DIR/curve.png`` (loss and validation
accuracy against step), ``DIR/train.json`` (the training pairs in the A5
format, so a later test set can exclude them) and ``DIR/result.json``.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Callable, TextIO

import torch

from nnqs.common.checkpoint import atomic_write_bytes, atomic_write_text, load_checkpoint, save_checkpoint
from nnqs.common.config import config_to_dict, config_to_toml
from nnqs.common.errors import UserError
from nnqs.lm.data import save_pairs
from nnqs.lm.models import ArithmeticLM, ModelConfig, build_model
from nnqs.lm.tokenizer import VOCAB
from nnqs.lm.train import EvalRecord, Hooks, TrainRun

KIND = "lm"
HISTORY_FIELDS = [f.name for f in dataclasses.fields(EvalRecord)]


def save_lm_checkpoint(path: str | Path, run: TrainRun) -> None:
    """Write the run's model, optimizer, step, config and vocabulary (atomically)."""
    payload = {
        "model_state": run.model.state_dict(),
        "model_config": config_to_dict(run.model.cfg),
        "optimizer": run.optimizer.state_dict(),
        "step": run.step,
        "config": config_to_dict(run.cfg),
        "vocabulary": list(VOCAB),
        "history": [dataclasses.asdict(r) for r in run.history],
        "wall_s": run.wall_s,
        "torch_rng": torch.get_rng_state(),
    }
    save_checkpoint(path, KIND, payload)


# Settings a resumed run must share with its checkpoint (they fix the data, batches and model shape).
RESUME_KEYS = ("arch", "data", "train_size", "val_size", "seed", "batch_size", "d_model", "n_layers", "n_heads", "d_ff")


def resume_from(out: str | Path, cfg) -> Callable[[TrainRun], None]:
    """A ``restore`` for :func:`nnqs.lm.train.train` from the checkpoint in run folder ``out``.

    The checkpoint must come from a run with the same data, seed and model shape (else UserError).
    """
    path = Path(out) / "checkpoint.pt"
    ckpt = load_checkpoint(path, KIND)
    if ckpt.get("vocabulary") != list(VOCAB):
        raise UserError(f"checkpoint {path} was written with a different vocabulary")
    saved = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else {}
    now = config_to_dict(cfg)
    for key in RESUME_KEYS:
        if saved.get(key) != now[key]:
            raise UserError(f"checkpoint {path} was trained with {key}={saved.get(key)!r}, this run has "
                            f"{key}={now[key]!r}; resume with the same settings")

    def restore(run: TrainRun) -> None:
        try:
            run.model.load_state_dict(ckpt["model_state"])
            run.optimizer.load_state_dict(ckpt["optimizer"])
            run.history = [EvalRecord(**r) for r in ckpt["history"]]
            run.step, run.wall_s = int(ckpt["step"]), float(ckpt["wall_s"])
            torch.set_rng_state(ckpt["torch_rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
            raise UserError(f"checkpoint {path} cannot be resumed ({reason})") from None

    return restore


def load_lm(path: str | Path, device: torch.device | str = "cpu") -> tuple[ArithmeticLM, dict]:
    """The model of an LM checkpoint (file or run folder), in eval mode, and the raw checkpoint."""
    ckpt = load_checkpoint(path, KIND, map_location=device)
    if ckpt.get("vocabulary") != list(VOCAB):
        raise UserError(f"checkpoint {path} was written with a different vocabulary")
    try:
        cfg = ModelConfig(**ckpt["model_config"])
        model = build_model(cfg)
        model.load_state_dict(ckpt["model_state"])
    except (KeyError, TypeError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise UserError(f"checkpoint {path} does not hold a valid LM ({reason})") from None
    return model.to(device).eval(), ckpt


def history_csv(history: list[EvalRecord]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=HISTORY_FIELDS, lineterminator="\n")
    writer.writeheader()
    for record in history:
        writer.writerow(dataclasses.asdict(record))
    return buf.getvalue()


def plot_curve(path: str | Path, history: list[EvalRecord], title: str) -> None:
    """Training loss (log scale) and validation accuracies against step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r.step for r in history]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(steps, [r.train_loss for r in history], marker=".")
    ax_loss.set(xlabel="step", ylabel="training loss (answer tokens)", yscale="log", title=title)
    ax_acc.plot(steps, [r.val_exact_match for r in history], marker=".", label="exact match")
    ax_acc.plot(steps, [r.val_token_accuracy for r in history], marker=".", label="token accuracy")
    ax_acc.set(xlabel="step", ylabel="validation", ylim=(0, 1.02), title="held-out validation")
    ax_acc.legend(loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, lambda fh: fh.write(buf.getvalue()))


def write_run_files(out: Path, run: TrainRun) -> None:
    """History, then checkpoint (called after every validation; both atomic, so a crash
    leaves a history at least as long as the checkpoint, and a resume rewrites it from there)."""
    atomic_write_text(out / "history.csv", history_csv(run.history))
    save_lm_checkpoint(out / "checkpoint.pt", run)


def finish_run_folder(out: Path, run: TrainRun) -> dict:
    """After training: the training pairs, the curve and ``result.json``; returns the result."""
    save_pairs(out / "train.json", run.train_pairs)
    plot_curve(out / "curve.png", run.history, f"{run.cfg.arch} LM")
    result = run.result()
    atomic_write_text(out / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def start_run_folder(out: Path, run_cfg) -> None:
    """Create ``out`` and write ``config.toml`` before training starts."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "config.toml", config_to_toml(run_cfg))


class ProgressLine:
    """A one-line progress bar on ``stream`` (stderr), rewritten with ``\\r``."""

    def __init__(self, total: int, stream: TextIO | None = None, every: int = 10) -> None:
        self.total, self.stream, self.every = total, stream or sys.stderr, every
        self.last: EvalRecord | None = None

    def _write(self, step: int, loss: float, elapsed: float, end: str = "") -> None:
        val = "" if self.last is None else (
            f" | val exact {self.last.val_exact_match:.4f} token {self.last.val_token_accuracy:.4f}"
        )
        self.stream.write(f"\rstep {step}/{self.total} loss {loss:.4f}{val} | {elapsed / step:.3f} s/step{end}")
        self.stream.flush()

    def on_step(self, step: int, loss: float, elapsed: float) -> None:
        if step % self.every == 0:
            self._write(step, loss, elapsed)

    def on_eval(self, run: TrainRun, record: EvalRecord) -> None:
        self.last = record
        self._write(record.step, record.train_loss, record.elapsed_s, "\n" if record.step == self.total else "")


def run_hooks(out: Path, total: int, progress: bool = True) -> Hooks:
    """The standard hooks: run files after each validation, and a progress line."""
    hooks = Hooks(on_eval=[lambda run, record: write_run_files(out, run)])
    if progress:
        bar = ProgressLine(total)
        hooks.on_step.append(bar.on_step)
        hooks.on_eval.append(bar.on_eval)
    return hooks
