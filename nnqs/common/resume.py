"""Honest resume: the run folder's own ``config.toml`` is the source of truth.

* Options given with ``--resume`` that differ from the run's and cannot change mid-run
  (model shape, learning rate, seed, estimator, optimizer...) are refused in one line
  naming each, with the run's value and the given one.
* Options that may change (the mode's ``mutable`` set: ``steps`` to extend, ``threads``,
  the checkpoint cadence...) are applied, and recorded in ``config.toml`` by the caller.
  Options not given keep the run's values (``--resume`` alone keeps the run's ``steps``).
* The checkpoint must belong to the same run (its config agrees with ``config.toml`` on
  every fixed option) and must not lie beyond ``steps``. With no checkpoint yet the run
  starts again from step 0 -- the same seed gives the same history -- and says so.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Collection, TypeVar

import torch

from nnqs.common.checkpoint import load_checkpoint
from nnqs.common.config import build_config, config_to_dict, read_toml
from nnqs.common.console import note
from nnqs.common.errors import UserError
from nnqs.common.runfolder import RunFolder

C = TypeVar("C")


def given_keys(toml_path: str | Path | None, overrides: dict[str, Any]) -> set[str]:
    """The config keys the user set for this invocation (a --config file's keys and the flags given)."""
    keys = {k for k, v in overrides.items() if v is not None}
    return keys | (set(read_toml(toml_path)) if toml_path is not None else set())


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def saved_config(cls: type[C], folder: RunFolder, kind: str) -> C:
    """The run's config: its ``config.toml``, else the config stored in its checkpoint. A setting the saved run
    predates (``cls.ADDED``, absent from its file) takes the value that run ran with, not today's default."""
    if folder.config.is_file():
        try:
            data = read_toml(folder.config)
            return as_run(cls, build_config(cls, None, data), data)
        except UserError as exc:
            reason = str(exc).split("; valid keys")[0]
            raise UserError(f"the run in {folder.path} is not of kind {kind!r}, or its config.toml was edited "
                            f"({reason})") from None
    if folder.checkpoint.is_file():
        stored = load_checkpoint(folder.checkpoint, kind).get("config")
        if isinstance(stored, dict):
            return as_run(cls, build_config(cls, None, stored), stored)
    raise UserError(f"no config.toml in {folder.path}: the run's settings are unknown; start a new run")


def as_run(cls: type[C], cfg: C, saved: dict) -> C:
    """``cfg`` with each setting of ``cls.ADDED`` that ``saved`` lacks set to the value older runs ran with."""
    older = {k: v for k, v in getattr(cls, "ADDED", {}).items() if k not in saved}
    return dataclasses.replace(cfg, **older) if older else cfg


def resume_config(cls: type[C], folder: RunFolder, kind: str, given: C, keys: Collection[str],
                  mutable: Collection[str]) -> tuple[C, list[str]]:
    """The config of the resumed run and the changes made (``"steps 20 -> 40"``); see the module docstring."""
    saved = saved_config(cls, folder, kind)
    diffs = [(k, getattr(saved, k), getattr(given, k)) for k in sorted(keys) if getattr(saved, k) != getattr(given, k)]
    fixed = [f"{_flag(k)} (run: {old}, given: {new})" for k, old, new in diffs if k not in mutable]
    if fixed:
        raise UserError(f"--resume cannot change {', '.join(fixed)}: the run in {folder.path} keeps the settings "
                        "of its config.toml; to change them, start a new run in another --out")
    try:
        cfg = dataclasses.replace(saved, **{k: new for k, _, new in diffs})
    except (TypeError, ValueError) as exc:
        raise UserError(f"invalid config: {exc}") from None
    return cfg, [f"{k} {old} -> {new}" for k, old, new in diffs]


def resume_checkpoint(folder: RunFolder, kind: str, cfg: Any, mutable: Collection[str], *,
                      expect: dict[str, Any] | None = None, changes: Collection[str] = (),
                      map_location: str | torch.device = "cpu", quiet: bool = False) -> dict | None:
    """The checkpoint to continue from, checked against ``cfg`` and the entries of ``expect``
    (e.g. the VMC system, the LM vocabulary; a dict's ``"description"`` is its name, not part of
    its identity: an FCIDUMP named by another path, with the same integrals, is the same system);
    None if there is none yet. Unless ``quiet``,
    one note says where the run continues and what changed (``changes``)."""
    path = folder.checkpoint
    changed = f" (changed: {', '.join(changes)})" if changes else ""
    if not path.is_file():
        if not quiet:
            note(f"no checkpoint yet in {folder.path}: starting again from step 0{changed} "
                 "(the same seed gives the same history)")
        return None
    data = load_checkpoint(path, kind, map_location)
    if data.get("layout") == 1:
        raise UserError(f"checkpoint {path} comes from an older layout (format version 1) and cannot be resumed; "
                        "its model still loads for evaluation or a warm start; start a new run in another --out")
    step, steps = int(data.get("step", 0)), getattr(cfg, "steps")
    if step > steps:
        raise UserError(f"--steps {steps} is below the {step} steps the run in {folder.path} has done; "
                        f"give --steps {step} or more")
    stored = data.get("config") if isinstance(data.get("config"), dict) else {}
    now = config_to_dict(cfg)
    for key in (k for k in now if k in stored and k not in mutable and stored[k] != now[k]):
        raise UserError(f"checkpoint {path} belongs to another run: it has {key} = {stored[key]!r}, "
                        f"config.toml {key} = {now[key]!r}")
    for key, value in (expect or {}).items():
        if _identity(data.get(key)) != _identity(value):
            found = data.get(key)
            found = found.get("description", found) if isinstance(found, dict) else found
            raise UserError(f"checkpoint {path} is for another {key} ({str(found)[:80]})")
    if not quiet:
        note(f"resuming the run in {folder.path} at step {step} of {steps}{changed}")
    return data


def _identity(value: Any) -> Any:
    """What ``expect`` compares: a dict without its ``"description"`` (a name, e.g. a path)."""
    return {k: v for k, v in value.items() if k != "description"} if isinstance(value, dict) else value
