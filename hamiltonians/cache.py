"""On-disk cache of PySCF results, so a repeated run does not redo SCF/CC/FCI work.

Layout: ``$NNQS_CACHE_DIR`` (default ``~/.cache/nnqs``) holds, per spec key and
kind, ``<key>.<kind>.json`` (scalars) and optionally ``<key>.<kind>.npz``
(arrays). Writes are atomic (temporary file + rename). Anything unreadable is
treated as a miss and recomputed; a cache that cannot be written is skipped.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np


def cache_dir() -> Path:
    """The cache folder: env ``NNQS_CACHE_DIR`` or ``~/.cache/nnqs``."""
    return Path(os.environ.get("NNQS_CACHE_DIR") or Path.home() / ".cache" / "nnqs")


def _path(key: str, kind: str, suffix: str) -> Path:
    return cache_dir() / f"{key}.{kind}.{suffix}"


def load(key: str, kind: str, arrays: bool = False) -> tuple[dict, dict[str, np.ndarray]] | None:
    """(scalars, arrays) stored under key/kind, or None if absent or corrupt."""
    try:
        meta = json.loads(_path(key, kind, "json").read_text())
        if not isinstance(meta, dict):
            return None
        data: dict[str, np.ndarray] = {}
        if arrays:
            with np.load(_path(key, kind, "npz"), allow_pickle=False) as npz:
                data = {name: npz[name] for name in npz.files}
        return meta, data
    except Exception:  # noqa: BLE001 - any damage to a cache entry means "recompute"
        return None


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(key: str, kind: str, meta: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
    """Store scalars (JSON-able) and arrays under key/kind; silently skip on OS errors."""
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        if arrays is not None:
            _atomic_write(_path(key, kind, "npz"), lambda f: np.savez(f, **arrays))
        text = json.dumps(meta, indent=1).encode()
        _atomic_write(_path(key, kind, "json"), lambda f: f.write(text))
    except OSError:
        pass
