"""Accuracy benchmark: VMC error vs exact energy and wall time per molecule (JSON lines).

    python -m benchmarks.accuracy [--molecules H2 LiH ...] [--steps 300] [--threads 2] [--out FILE]
    python -m benchmarks.accuracy --quick      # toy size, seconds (run by the test suite)

One JSON object per molecule: molecule, n_qubits, steps, energy, e_exact,
error_mha, within_chemical_accuracy, wall_s, n_parameters, threads.
"""
from __future__ import annotations

import tempfile
from dataclasses import replace

import torch

from benchmarks.common import benchmark_parser, emit
from hamiltonians import get_spec
from nnqs.vmc.run import run_molecule
from nnqs.vmc.step import VMCConfig, toy_config

TARGETS = ["H2", "LiH", "BeH2", "H2O", "NH3", "N2"]


def measure(name: str, cfg: VMCConfig) -> dict:
    with tempfile.TemporaryDirectory() as out:
        r = run_molecule(get_spec(name), cfg, out, progress=False)
    return {
        "benchmark": "accuracy", "molecule": name, "n_qubits": r["n_qubits"], "steps": cfg.steps,
        "energy": r["energy"], "e_exact": r["e_exact"], "error_mha": r["error_mha"],
        "within_chemical_accuracy": abs(r["error_mha"]) <= 1.6, "wall_s": r["wall_s"],
        "n_parameters": r["n_parameters"], "threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = benchmark_parser("accuracy", __doc__, "H2, 20 steps, a tiny model")
    parser.add_argument("--molecules", nargs="+", default=TARGETS)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = VMCConfig(steps=args.steps, threads=args.threads)
    molecules = args.molecules
    if args.quick:
        cfg = replace(toy_config(20), threads=args.threads)
        molecules = ["H2"]
    records = []
    for name in molecules:
        records.append(measure(name, cfg))
        emit(records[-1], args.out)
    return records


if __name__ == "__main__":
    main()
