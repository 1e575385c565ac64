"""One LM training run in its run folder, end to end (``nnqs lm train``).

The folder (:mod:`nnqs.common.runfolder`: one run per folder, locked while it runs)
receives ``config.toml`` at the start; ``history.csv`` (one row per validation,
fsynced as written) and ``checkpoint.pt`` (every ``checkpoint_every`` steps, every
``checkpoint_seconds`` seconds, at the end and on SIGINT/SIGTERM) while training;
``events.log`` if a non-finite step was rolled back; at the end ``curve.png``,
``train.json`` (the training pairs in the A5 format, so a later test set can exclude
them) and ``result.json``.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from nnqs.common.atomic import atomic_write_text
from nnqs.common.config import apply_threads, config_to_toml
from nnqs.common.guard import DivergenceGuard, event_logger
from nnqs.common.history import HistoryWriter, new_history, resume_history
from nnqs.common.interrupt import StopSignal
from nnqs.common.loop import Checkpointer
from nnqs.common.progress import Progress
from nnqs.common.resume import resume_checkpoint
from nnqs.common.runfolder import RunFolder
from nnqs.lm.checkpoint import KIND, restore_lm, save_lm_checkpoint
from nnqs.lm.data import save_pairs
from nnqs.lm.plots import plot_curve
from nnqs.lm.tokenizer import VOCAB
from nnqs.lm.train import EvalRecord, LMStepResult, TrainConfig, TrainRun, start_run, train

HISTORY_FIELDS = tuple(f.name for f in dataclasses.fields(EvalRecord))
WALL_TIME_FIELDS = ("elapsed_s",)
# Options a resumed run may change (applied and recorded in config.toml); all others are fixed.
MUTABLE = ("steps", "threads", "checkpoint_every", "checkpoint_seconds", "target_exact", "tail_steps", "tail_exact",
           "device")


def train_in_folder(cfg: TrainConfig, folder: RunFolder, *, resume: bool = False, progress: bool = True,
                    stop: StopSignal | None = None, changes: list[str] | None = None) -> dict:
    """Train (or, with ``resume``, continue) the run of ``cfg`` in the claimed ``folder``; the result dict.

    ``changes``: what the resume changed (:func:`nnqs.common.resume.resume_config`), for its note."""
    apply_threads(cfg.threads)
    if not resume:
        atomic_write_text(folder.config, config_to_toml(cfg))
    run = start_run(cfg)
    ckpt = None
    if resume:
        ckpt = resume_checkpoint(folder, KIND, cfg, MUTABLE, expect={"vocabulary": list(VOCAB)}, changes=changes or (),
                                 map_location=run.train_batch.questions.device)
    if ckpt is not None:
        restore_lm(ckpt, run, folder.checkpoint)
    if resume:  # after the checks: a refused resume leaves config.toml as it was
        atomic_write_text(folder.config, config_to_toml(cfg))
    if ckpt is None:
        history = new_history(folder.history, HISTORY_FIELDS)
    else:
        history = resume_history(folder.history, ckpt["history"], HISTORY_FIELDS)
    checkpointer = Checkpointer(lambda r: save_lm_checkpoint(folder.checkpoint, r, history.state()),
                                cfg.checkpoint_every, cfg.checkpoint_seconds, cfg.steps + cfg.tail_steps)
    callbacks = [lambda result, r: _log_record(history, r), checkpointer]
    bar = Progress(cfg.steps, run.step) if progress else None
    if bar is not None:
        callbacks.append(lambda result, r: bar.update(r.step, progress_postfix(result, r), r.step_limit()))
    guard = DivergenceGuard(log=event_logger(folder.path / "events.log"), checkpoint=folder.checkpoint)
    try:
        run = train(cfg, callbacks, run=run, guard=guard, stop=stop, save=checkpointer.save_now)
    finally:
        history.close()
        if bar is not None:
            bar.close()
    return finish_run_folder(folder.path, run)


def _log_record(history: HistoryWriter, run: TrainRun) -> None:
    """Append the validation just made, if this step made one."""
    if len(history.rows) < len(run.history):
        history.append(dataclasses.asdict(run.history[-1]))


def progress_postfix(result: LMStepResult, run: TrainRun) -> str:
    """The LM measures shown after the progress bar."""
    val = "" if not run.history else (
        f" | val exact {run.history[-1].val_exact_match:.4f} token {run.history[-1].val_token_accuracy:.4f}")
    return f"loss {result.loss:.4f}{val}"


def finish_run_folder(out: Path, run: TrainRun) -> dict:
    """After training: the training pairs, the curve and ``result.json``; returns the result."""
    save_pairs(out / "train.json", run.train_pairs)
    plot_curve(out / "curve.png", run.history, f"{run.cfg.arch} LM")
    result = run.result()
    atomic_write_text(out / "result.json", json.dumps(result, indent=1) + "\n")
    return result
