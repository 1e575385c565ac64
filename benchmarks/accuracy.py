"""Accuracy benchmark: VMC error vs exact energy and wall time per molecule (JSON lines).

    python -m benchmarks.accuracy [--molecules H2 LiH N2@1.4 ...] [--steps N] [--threads 1] [--out FILE]
                                  [--runs DIR]   # keep each run folder as DIR/NAME (default: temporary)
    python -m benchmarks.accuracy --collect C2=runs/C2 N2@1.4=runs/n2_curve/r1.4000   # lines of finished runs
    python -m benchmarks.accuracy --molecules N2 --set sr_momentum=0.99   # a changed setting, recorded
    python -m benchmarks.accuracy --quick      # toy size, seconds (run by the test suite)

Each run uses the ``nnqs vmc`` defaults (``--steps`` overrides the step count only).
``NAME@R`` is a catalog diatomic at bond length R Angstrom (N2@2.2), ``Hn@R`` a chain of n hydrogen
atoms R Angstrom apart (``--molecules chains``: the ten of ``CHAINS``). One JSON object per
system: molecule, bond, n_qubits, steps, energy, e_exact, error_mha, within_chemical_accuracy,
wall_s, n_parameters, threads, the unique set size (n_core, final_unique) and the side
numbers (e_teacher_sci, e_core, e_core_pt2, e_subspace, as errors in mHa).
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
import typing
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common import at_bond, benchmark_parser, emit
from hamiltonians import MoleculeSpec, get_spec
from nnqs.vmc.run import run_molecule
from nnqs.vmc.config import STEPS, VMCConfig, toy_config

TARGETS = ["LiH", "BeH2", "H2O", "NH3", "CH4", "C2", "N2", "N2@1.4", "N2@1.8", "N2@2.2", "N2@2.6"]
SIDE = ("e_teacher_sci", "e_core", "e_core_pt2", "e_subspace")


# Linear hydrogen chains, STO-3G (``Hn@R``: n atoms R Angstrom apart): strongly correlated when stretched,
# where CCSD(T) fails (Motta et al., Phys. Rev. X 7, 031059 (2017)).
CHAINS = ["H6@0.8", "H6@1.5", "H6@2.5", "H8@1.0", "H8@1.5", "H8@2.5", "H10@1.0", "H10@1.5", "H10@2.0", "H10@2.5"]


def system_spec(name: str) -> tuple[MoleculeSpec, float | None]:
    """A catalog molecule, ``NAME@R`` (the catalog diatomic NAME at bond length R Angstrom), or
    ``Hn@R`` with n > 2: a linear chain of n hydrogen atoms R Angstrom apart (STO-3G)."""
    if "@" not in name:
        return get_spec(name), None
    base, bond = name.split("@")
    if base.startswith("H") and base[1:].isdigit() and int(base[1:]) > 2:
        atoms = "; ".join(f"H 0 0 {i * float(bond):.6f}" for i in range(int(base[1:])))
        return MoleculeSpec(name=name, atom=atoms), float(bond)
    return at_bond(get_spec(base), float(bond), name), float(bond)


def measure(name: str, cfg: VMCConfig, runs: str | None = None) -> dict:
    spec, bond = system_spec(name)
    if runs is not None:
        r = run_molecule(spec, cfg, Path(runs) / name, overwrite=True, progress=False)
    else:
        with tempfile.TemporaryDirectory() as out:
            r = run_molecule(spec, cfg, out, progress=False)
    return record(name, bond, r, r["steps"], torch.get_num_threads())


def record(name: str, bond: float | None, r: dict, steps: int, threads: int) -> dict:
    """The benchmark line of one run's result dict ``r`` (``result.json``)."""
    side = {f"{k}_error_mha": 1000 * (r[k] - r["e_exact"]) for k in SIDE if r.get(k) is not None}
    return {
        "benchmark": "accuracy", "molecule": name, "bond": bond, "n_qubits": r["n_qubits"], "steps": steps,
        "n_core": r.get("n_core"), "final_unique": r["final_unique"], "e_ccsd_t": r["e_ccsd_t"], **side,
        "energy": r["energy"], "e_exact": r["e_exact"], "error_mha": r["error_mha"],
        "within_chemical_accuracy": abs(r["error_mha"]) <= 1.6, "wall_s": r["wall_s"],
        "n_parameters": r["n_parameters"], "pretrain_s": r.get("pretrain_s"), "threads": threads,
        "orbitals": r.get("orbitals"), "n_teacher": r.get("n_teacher"), "peak_rss_mb": r.get("peak_rss_mb"),
    }


def collect(item: str) -> dict:
    """``NAME=FOLDER``: the line of a finished run folder (``nnqs vmc`` or an example), read from its
    ``result.json`` and ``config.toml``; the run must have used the defaults but for steps and threads."""
    import tomllib

    name, _, folder = item.partition("=")
    config = tomllib.loads((Path(folder) / "config.toml").read_text())
    # TOML has no None: a field whose default is None is left out of config.toml
    missing = [f.name for f in dataclasses.fields(VMCConfig) if f.name not in config and f.default is not None]
    if missing:
        raise SystemExit(f"{folder} was run by an older version (its config.toml lacks {', '.join(missing)})")
    differs = {k: v for k, v in config.items() if k not in ("steps", "threads") and getattr(VMCConfig(), k, v) != v}
    if differs:
        raise SystemExit(f"{folder} did not run with the defaults: {differs}")
    return record(name, system_spec(name)[1], json.loads((Path(folder) / "result.json").read_text()),
                  int(config.get("steps", STEPS)), int(config.get("threads", 0)))


def parse_settings(items: list[str]) -> dict:
    """``FIELD=VALUE`` pairs -> VMCConfig fields, each VALUE converted to its field's default's type."""
    defaults, settings = VMCConfig(), {}
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not hasattr(defaults, field):
            raise SystemExit(f"--set {item!r}: expected FIELD=VALUE with a VMCConfig field")
        kind = type(getattr(defaults, field))
        if kind is type(None):  # a field whose default is None (steps, lr_final): the type it is annotated with
            kind = int if int in typing.get_args(typing.get_type_hints(VMCConfig)[field]) else float
        if kind is bool:
            settings[field] = value.lower() in ("1", "true", "yes")
        elif kind is int:
            settings[field] = int(float(value))  # 1e12 as well as 1000000000000
        else:
            settings[field] = kind(value)
    return settings


def main(argv: list[str] | None = None) -> list[dict]:
    parser = benchmark_parser("accuracy", __doc__, "H2, 20 steps, a tiny model")
    parser.add_argument("--molecules", nargs="+", default=TARGETS)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", default=None, help="keep each run folder as RUNS/NAME (replaced if present)")
    parser.add_argument("--set", nargs="+", metavar="FIELD=VALUE", default=[],
                        help="run with these VMCConfig fields changed (recorded in each line as 'settings')")
    parser.add_argument("--collect", nargs="+", metavar="NAME=FOLDER", default=None,
                        help="no runs: the lines of finished default-settings run folders")
    args = parser.parse_args(argv)
    if args.collect:
        records = [collect(item) for item in args.collect]
        for line in records:
            emit(line, args.out)
        return records
    torch.set_num_threads(args.threads)
    cfg = VMCConfig(threads=args.threads) if args.steps is None else VMCConfig(steps=args.steps, threads=args.threads)
    molecules = [m for name in args.molecules for m in (CHAINS if name == "chains" else [name])]
    if args.quick:
        cfg = replace(toy_config(20), pretrain_steps=300, threads=args.threads)
        molecules = ["H2"]
    settings = parse_settings(args.set)
    cfg = replace(cfg, **settings)
    records = []
    for name in molecules:
        records.append(measure(name, cfg, args.runs))
        if settings:
            records[-1]["settings"] = settings
        emit(records[-1], args.out)
    return records


if __name__ == "__main__":
    main()
