"""Atomic checkpoints, loaded with ``torch.load(weights_only=True)``.

A checkpoint is a dict of tensors and primitives with a header
``{"format": "nnqs", "version": 1, "kind": "vmc" | "lm", ...}``. It is written to a
temporary file in the same folder, flushed, fsynced and renamed over the
target, so a crash at any moment leaves either the old or the new file, never
a torn one. Any file that cannot be read, or is not an nnqs checkpoint of the
expected kind, is refused with one :class:`~nnqs.common.errors.UserError` line.

Integrity: the file is the ``torch.save`` bytes followed by a fixed-size seal,
``b"\\nnnqs-sha256 " + hex SHA-256 of those bytes + b"\\n"``. Loading reads the
whole file, checks the seal (so a truncated, foreign or tampered file -- one
flipped byte anywhere -- is refused before anything is unpickled), then
unpickles the sealed bytes with ``weights_only=True``.
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from nnqs.common.errors import UserError

FORMAT = "nnqs"
VERSION = 1
SEAL_MAGIC = b"\nnnqs-sha256 "
SEAL_SIZE = len(SEAL_MAGIC) + 64 + 1


def atomic_write_bytes(path: str | Path, write: Any) -> None:
    """Call ``write(fileobj)`` on a temp file next to ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def save_checkpoint(path: str | Path, kind: str, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors, primitives, nested dicts/lists) atomically with a header."""
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
    """Load a checkpoint of ``kind`` safely; anything else is a one-line UserError."""
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
    if data.get("version") != VERSION:
        raise UserError(f"checkpoint {path} has format version {data.get('version')}, expected {VERSION}")
    if data.get("kind") != kind:
        raise UserError(f"checkpoint {path} is a {data.get('kind')!r} checkpoint, expected {kind!r}")
    return data
