"""LM checkpoints: the shared schema (:mod:`nnqs.common.checkpoint`) plus the vocabulary.

:func:`save_lm_checkpoint` writes a run (model, optimizer, schedule, step, RNG and batch
position, pending losses, validation history, config); :func:`restore_lm` puts it back
into a fresh :class:`~nnqs.lm.train.TrainRun` for an exact resume; :func:`load_lm` reads
the model alone, for ``nnqs lm eval`` and ``nnqs lm generate``.
"""
from __future__ import annotations

from pathlib import Path

import torch

from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.common.config import config_to_dict
from nnqs.common.errors import UserError
from nnqs.common.loop import load_model_weights, restore_state, state_payload
from nnqs.lm.models import ModelConfig
from nnqs.lm.build import ArithmeticLM, build_model
from nnqs.lm.tokenizer import VOCAB
from nnqs.lm.train import TrainRun

KIND = "lm"


def save_lm_checkpoint(path: str | Path, run: TrainRun, history: dict) -> None:
    """Write ``run`` atomically; ``history``: the history writer's state (rows written so far)."""
    payload = state_payload(run, run.cfg, config_to_dict(run.model.cfg), history)
    save_checkpoint(path, KIND, {**payload, "vocabulary": list(VOCAB)})


def check_vocabulary(ckpt: dict, path: str | Path) -> None:
    if ckpt.get("vocabulary") != list(VOCAB):
        raise UserError(f"checkpoint {path} was written with a different vocabulary")


def restore_lm(ckpt: dict, run: TrainRun, path: str | Path) -> None:
    """Continue ``run`` (fresh, of the same config) from checkpoint ``ckpt`` read from ``path``."""
    check_vocabulary(ckpt, path)
    restore_state(ckpt, run, path)


def load_lm(path: str | Path, device: torch.device | str = "cpu") -> tuple[ArithmeticLM, dict]:
    """The model of an LM checkpoint (file or run folder), in eval mode, and the raw checkpoint."""
    ckpt = load_checkpoint(path, KIND, map_location=device)
    check_vocabulary(ckpt, path)
    try:
        model = build_model(ModelConfig(**ckpt["model_config"]))
    except (KeyError, TypeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise UserError(f"checkpoint {path} does not hold a valid LM ({reason})") from None
    if not isinstance(ckpt.get("model"), dict) or not ckpt["model"]:
        raise UserError(f"checkpoint {path} does not hold a valid LM (no model weights)")
    load_model_weights(model, ckpt["model"], path)
    return model.to(device).eval(), ckpt
