"""Checkpoints of both modes: one schema, sealed, written atomically, loaded with ``weights_only=True``.

Schema (format version 2), the same keys for VMC and LM:

==============  ==============================================================
``format``      ``"nnqs"``; ``version``: 2; ``kind``: ``"vmc"`` or ``"lm"``
``model``       the model's state dict
``model_config`` the keyword arguments that rebuild the model
``optimizer``   optimizer state dict; ``scheduler``: the LambdaLR state dict
``step``        steps completed
``rng``         ``{"torch": global CPU RNG state, "generator": the run's generator state, ...}``
``config``      the run config (a dict of primitives)
``history``     ``{"fields": [...], "rows": [[str, ...], ...]}``: history.csv as written so far
``extras``      the mode's counters (VMC: requested samples; LM: losses since the last validation)
==============  ==============================================================

plus one key per mode: ``system`` (VMC: what the integrals are) or ``vocabulary`` (LM).
Checkpoints of the older layout (version 1: VMC ``model``/``hparams``, LM
``model_state``/``model_config``) still load for their weights (:func:`load_checkpoint`
maps them to the keys above and marks them ``layout = 1``); resuming one is refused in
one line (:func:`nnqs.common.resume.check_resumable`).

Integrity: the file is the ``torch.save`` bytes followed by a fixed-size seal,
``b"\\nnnqs-sha256 " + hex SHA-256 of those bytes + b"\\n"``. Loading reads the
whole file, checks the seal (so a truncated, foreign or tampered file -- one
flipped byte anywhere -- is refused before anything is unpickled), then
unpickles the sealed bytes with ``weights_only=True``.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import torch

from nnqs.common.atomic import atomic_write_bytes
from nnqs.common.errors import UserError

FORMAT = "nnqs"
VERSION = 2
OLD_VERSIONS = (1,)
SEAL_MAGIC = b"\nnnqs-sha256 "
SEAL_SIZE = len(SEAL_MAGIC) + 64 + 1
SCHEMA_KEYS = ("model", "model_config", "optimizer", "scheduler", "step", "rng", "config", "history", "extras")


def save_checkpoint(path: str | Path, kind: str, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors, primitives, nested dicts/lists) atomically with a header and a seal."""
    data = {"format": FORMAT, "version": VERSION, "kind": kind, **payload}
    buf = io.BytesIO()
    torch.save(data, buf)
    body = buf.getvalue()
    seal = SEAL_MAGIC + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n"
    atomic_write_bytes(path, lambda fh: (fh.write(body), fh.write(seal)))


def _sealed_body(path: Path) -> bytes:
    """The checkpoint bytes of ``path`` after checking the SHA-256 seal at its end."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    body, seal = raw[:-SEAL_SIZE], raw[-SEAL_SIZE:]
    if len(raw) <= SEAL_SIZE or not seal.startswith(SEAL_MAGIC) or not seal.endswith(b"\n"):
        raise UserError(f"checkpoint {path} is corrupt or not an nnqs checkpoint "
                        "(no integrity seal at its end: truncated, or written by another program)")
    if hashlib.sha256(body).hexdigest().encode("ascii") != seal[len(SEAL_MAGIC):-1]:
        raise UserError(f"checkpoint {path} is corrupt or was modified (SHA-256 does not match its seal)")
    return body


def load_checkpoint(path: str | Path, kind: str, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint of ``kind`` (file or run folder) safely; anything else is a one-line UserError."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.is_file():
        raise UserError(f"no checkpoint at {path}")
    body = _sealed_body(path)
    try:
        data = torch.load(io.BytesIO(body), map_location=map_location, weights_only=True)
    except Exception as exc:  # truncated zip, pickle refused by weights_only, bit rot...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"checkpoint {path} is corrupt or not an nnqs checkpoint ({reason[:120]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"checkpoint {path} is not an nnqs checkpoint")
    if data.get("version") not in (VERSION, *OLD_VERSIONS):
        raise UserError(f"checkpoint {path} has format version {data.get('version')!r}, expected {VERSION}")
    if data.get("kind") != kind:
        raise UserError(f"checkpoint {path} is a {data.get('kind')!r} checkpoint, expected {kind!r}")
    return _upgrade_v1(data) if data["version"] == 1 else data


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """An older-layout checkpoint under this schema's key names (weights only: ``layout = 1``)."""
    data = dict(data, layout=1)
    if "model_state" in data:  # LM: model_state / model_config / torch_rng
        data["model"] = data.pop("model_state")
    if "hparams" in data:  # VMC: model / hparams / generator / torch_rng
        data["model_config"] = data.pop("hparams")
    return data
