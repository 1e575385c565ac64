"""Shared helpers for benchmarks: the command line every benchmark starts from, JSON-lines
output, the software fields of a record, and timing (:func:`timed`, on torch.utils.benchmark)."""
from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any, Callable, TextIO


def benchmark_parser(name: str, doc: str, quick_help: str) -> argparse.ArgumentParser:
    """``python -m benchmarks.NAME`` with ``--quick`` (toy size: what the test suite runs) and ``--out``."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    return parser


def at_bond(spec, bond: float, name: str):
    """The diatomic MoleculeSpec ``spec`` with its two atoms ``bond`` Angstrom apart on z, named ``name``."""
    import dataclasses

    atoms = [line.split()[0] for line in spec.atom.replace(";", "\n").splitlines() if line.strip()]
    return dataclasses.replace(spec, name=name, atom=f"{atoms[0]} 0 0 0; {atoms[1]} 0 0 {float(bond)}")


# Active spaces (orbitals, electrons) of the systems past FCI: their 1s orbitals frozen.
FROZEN = {("N2", "6-31g"): (16, 10), ("N2", "cc-pvdz"): (26, 10)}


def system_spec(name: str):
    """``NAME/BASIS[@R]`` -> MoleculeSpec: a catalog molecule in a basis (STO-3G without one), the
    diatomic at bond length R Angstrom with ``@R``; the systems of ``FROZEN`` with their 1s frozen."""
    from hamiltonians import get_spec

    molecule, _, rest = name.partition("/")
    basis, _, bond = (rest or "sto-3g").partition("@")
    spec = get_spec(molecule, basis=basis, active=FROZEN.get((molecule, basis.lower())))
    return at_bond(spec, float(bond), name) if bond else spec


def history_rows(history: Path) -> list[dict[str, str]]:
    """The rows of a run's history.csv (none if it is missing: a run stopped before its first step)."""
    import csv

    if not Path(history).is_file():
        return []
    with open(history) as fh:
        return list(csv.DictReader(fh))


def step_seconds(row: dict[str, str]) -> float:
    """The wall time of a step from its history row: ``t_sample + t_local + t_grad``."""
    return float(row["t_sample"]) + float(row["t_local"]) + float(row["t_grad"])


def software() -> dict[str, str]:
    """The fields every record carries about where it ran."""
    import torch

    return {"torch": torch.__version__, "machine": platform.machine()}


def emit(record: dict[str, Any], path: str | Path | None = None, stream: TextIO | None = None) -> None:
    """Write ``record`` as one JSON object per line to ``stream`` (stdout) and append it to ``path``."""
    line = json.dumps(record, sort_keys=False)
    print(line, file=stream or sys.stdout, flush=True)
    if path is not None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def timed(fn: Callable[[], Any], min_run_time: float = 0.0) -> tuple[float, Any, int]:
    """Median seconds per call of ``fn`` by :class:`torch.utils.benchmark.Timer`, the last
    result, and the number of timed calls.

    ``blocked_autorange``: its block-size estimate runs ``fn`` at least once first (the
    warm-up); then blocks of calls are timed until ``min_run_time`` seconds were spent (at
    least one block). Accelerators are synchronised around each block; the torch thread
    count in force is kept.
    """
    import torch
    from torch.utils.benchmark import Timer

    last: list[Any] = [None]
    timer = Timer("last[0] = fn()", globals={"fn": fn, "last": last}, num_threads=torch.get_num_threads())
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    return measurement.median, last[0], len(measurement.times) * measurement.number_per_run
