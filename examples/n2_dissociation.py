"""N2 dissociation curve (STO-3G): VMC against FCI, HF and CCSD(T).

    python examples/n2_dissociation.py [--out runs/n2_curve] [--bonds 1.1 1.4 ...] [--threads 1]

Each bond length is an independent ``nnqs vmc`` run with the default settings (no warm
start, nothing tuned per geometry) in its own run folder ``--out/rR.RRRR``. The curve is
collected from the ``result.json`` of every finished run folder under --out, so a curve can
be built in parts, and processes given disjoint ``--bonds`` can share one --out at the same
time (one per core, ``--threads 1``). Writes --out/curve.json and --out/curve.png (energies,
and errors against FCI on a log scale with the chemical-accuracy band) after each point.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from hamiltonians import MoleculeSpec
from nnqs.common.atomic import atomic_write_text
from nnqs.vmc.run import run_molecule
from nnqs.vmc.config import VMCConfig, toy_config

BONDS = [0.9, 1.0977, 1.4, 1.8, 2.2, 2.6]


def plot(path: Path, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = [row["bond"] for row in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    for key, label, style in (("e_exact", "FCI", "k-"), ("e_hf", "RHF", "C3--"), ("e_ccsd_t", "CCSD(T)", "C2-."),
                              ("energy", "VMC (Transformer)", "C0o")):
        values = [row[key] if row[key] is not None else np.nan for row in rows]
        top.plot(r, values, style, label=label)
        if key != "e_exact":
            bottom.plot(r, [1000 * (v - row["e_exact"]) for v, row in zip(values, rows)], style, label=label)
    bottom.axhspan(-1.6, 1.6, color="k", alpha=0.12, label="chemical accuracy")
    bottom.set_yscale("symlog", linthresh=0.01)  # log from 0.01 mHa: sub-mHa errors stay readable
    top.set_ylabel("energy (Ha)")
    bottom.set_ylabel("E - E_FCI (mHa)")
    bottom.set_xlabel("N-N bond length (Angstrom)")
    top.legend()
    top.set_title("N2 / STO-3G dissociation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run_folder(out: Path, bond: float) -> Path:
    return out / f"r{bond:.4f}"


def collected_rows(out: Path) -> list[dict]:
    """One row per finished run folder ``out/rR.RRRR`` (its ``result.json``), sorted by bond length."""
    rows = []
    for result in out.glob("r*/result.json"):
        try:
            bond = float(result.parent.name[1:])
        except ValueError:
            continue
        rows.append({"bond": bond, **json.loads(result.read_text())})
    return sorted(rows, key=lambda row: row["bond"])


def write_curve(out: Path) -> list[dict]:
    """curve.json (written atomically) and curve.png from every finished point under ``out``."""
    rows = collected_rows(out)
    atomic_write_text(out / "curve.json", json.dumps(rows, indent=2) + "\n")
    plot(out / "curve.png", rows)
    return rows


def config(args: argparse.Namespace) -> VMCConfig:
    base = toy_config(args.steps or 5) if args.quick else VMCConfig()
    if args.steps is not None:
        base = replace(base, steps=args.steps)
    return replace(base, threads=args.threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="VMC steps (default: the nnqs vmc default)")
    parser.add_argument("--out", default="runs/n2_curve")
    parser.add_argument("--bonds", type=float, nargs="+", default=BONDS)
    parser.add_argument("--threads", type=int, default=0, help="torch threads per run (0: torch's default)")
    parser.add_argument("--quick", action="store_true", help="a tiny model and sample set (smoke test)")
    args = parser.parse_args()
    out = Path(args.out)
    for bond in args.bonds:
        spec = MoleculeSpec(name=f"N2_{bond:.4f}", atom=f"N 0 0 0; N 0 0 {bond}")
        result = run_molecule(spec, config(args), run_folder(out, bond), overwrite=True, progress=False)  # a rerun replaces
        print(f"r = {bond:.4f} A  VMC {result['energy']:.6f}  FCI {result['e_exact']:.6f}  "
              f"error {result['error_mha']:+.3f} mHa  ({result['wall_s']:.0f} s)", flush=True)
        write_curve(out)  # kept current: a long run never loses points


if __name__ == "__main__":
    main()
