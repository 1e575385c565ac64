"""Run configuration: one frozen dataclass per run, from defaults, a TOML file and CLI flags.

Precedence: dataclass defaults < TOML file < explicit CLI flags. Unknown keys and
values of the wrong type are :class:`~nnqs.common.errors.UserError`. The resolved
config is saved with every result and checkpoint (:func:`config_to_toml`).
"""
from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from nnqs.common.errors import UserError

C = TypeVar("C")


def _check_type(name: str, value: Any, annotation: Any) -> Any:
    """Return ``value`` coerced to ``annotation`` (int -> float allowed), else raise UserError."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _check_type(name, value, arg)
            except UserError as exc:
                errors.append(str(exc))
        raise UserError(errors[0] if errors else f"config key {name!r}: bad value {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise UserError(f"config key {name!r} must be one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise UserError(f"config key {name!r} must be a list, got {value!r}")
        return tuple(value) if origin is tuple else list(value)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float, str, bool) and not (
        isinstance(value, annotation) and not (annotation is not bool and isinstance(value, bool))
    ):
        raise UserError(f"config key {name!r} must be {annotation.__name__}, got {value!r}")
    return value


def build_config(cls: type[C], toml_path: str | Path | None = None, overrides: dict | None = None) -> C:
    """Build ``cls`` (a frozen dataclass) from its defaults, a TOML file, then ``overrides``.

    ``overrides`` entries whose value is None are ignored (CLI flags not given).
    """
    values: dict[str, Any] = {}
    if toml_path is not None:
        values.update(read_toml(toml_path))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    for key, value in getattr(cls, "RETIRED", {}).items():  # a removed setting, kept by files of older runs
        if values.get(key, value) != value:
            raise UserError(f"config key {key} = {values[key]!r} is no longer supported (only {value!r} remains)")
        values.pop(key, None)
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise UserError(f"unknown config key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(fields))}")
    checked = {k: _check_type(k, v, hints[k]) for k, v in values.items()}
    try:
        cfg = cls(**checked)
    except (TypeError, ValueError) as exc:
        raise UserError(f"invalid config: {exc}") from None
    return cfg


def read_toml(path: str | Path) -> dict[str, Any]:
    """A flat TOML table as a dict; unreadable or malformed files are UserError."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise UserError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UserError(f"config file {path} nests arrays or tables too deeply") from None
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise UserError(f"config file {path}: tables are not supported ([{nested[0]}]); use flat keys")
    return data


def config_to_toml(cfg: Any) -> str:
    """The dataclass as flat TOML (None values are left out: they mean 'default')."""
    return tomli_w.dumps({k: v for k, v in config_to_dict(cfg).items() if v is not None})


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """Plain dict of primitives (for checkpoints loaded with weights_only=True)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cfg).items()}


THREADS_MAX = 1024  # bounds of the ``threads`` field of every run config (0: torch's default)


def check_threads(threads: int) -> None:
    """``threads`` must be in 0..THREADS_MAX (ValueError otherwise)."""
    if not 0 <= threads <= THREADS_MAX:
        raise ValueError(f"threads must be in 0..{THREADS_MAX}, got {threads}")


def apply_threads(threads: int) -> None:
    """Run the compute of this process on ``threads`` threads: torch's, and those of the BLAS and OpenMP
    libraries beside it (SciPy's OpenBLAS, whose ``ssyrk`` forms the SR step's Gram matrix, and PySCF's
    OpenMP), the ones loaded now through :mod:`threadpoolctl` and those loaded later through
    ``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS``. 0 leaves every library's default (all cores).

    torch's setting alone left SciPy's OpenBLAS on every core: a 2,048 x 34,725 ``ssyrk`` in a "one-thread" run
    took 3.37 s on two threads and 2.58 s on one with two other runs on the 2 cores."""
    if threads:
        import os

        import torch
        from threadpoolctl import threadpool_limits

        os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)
        threadpool_limits(threads)
