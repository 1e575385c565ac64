"""N2 dissociation curve (STO-3G): VMC against FCI, HF and CCSD(T).

    python examples/n2_dissociation.py [--out runs/n2_curve] [--bonds 1.1 1.4 ...]

Rows already in --out/curve.json at other bond lengths are kept, so a curve can be
built in parts. Each bond length is an independent ``nnqs vmc`` run with the default settings (no warm
start, nothing tuned per geometry). Writes --out/curve.json and --out/curve.png (energies,
and errors against FCI on a log scale with the chemical-accuracy band).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from hamiltonians import MoleculeSpec
from nnqs.vmc.run import run_molecule
from nnqs.vmc.step import VMCConfig, toy_config

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
    bottom.set_yscale("symlog", linthresh=1)
    top.set_ylabel("energy (Ha)")
    bottom.set_ylabel("E - E_FCI (mHa)")
    bottom.set_xlabel("N-N bond length (Angstrom)")
    top.legend()
    top.set_title("N2 / STO-3G dissociation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def earlier_rows(path: Path, bonds: list[float]) -> list[dict]:
    """Rows of an earlier curve in the same folder at other bond lengths (a curve can be built in parts)."""
    if not path.is_file():
        return []
    return [row for row in json.loads(path.read_text()) if all(abs(row["bond"] - b) > 1e-9 for b in bonds)]


def config(args: argparse.Namespace) -> VMCConfig:
    if args.quick:
        return toy_config(args.steps or 5)
    return VMCConfig() if args.steps is None else VMCConfig(steps=args.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="VMC steps (default: the nnqs vmc default)")
    parser.add_argument("--out", default="runs/n2_curve")
    parser.add_argument("--bonds", type=float, nargs="+", default=BONDS)
    parser.add_argument("--quick", action="store_true", help="a tiny model and sample set (smoke test)")
    args = parser.parse_args()
    out = Path(args.out)
    rows = earlier_rows(out / "curve.json", args.bonds)
    for bond in args.bonds:
        spec = MoleculeSpec(name=f"N2_{bond:.4f}", atom=f"N 0 0 0; N 0 0 {bond}")
        run_dir = out / f"r{bond:.4f}"
        result = run_molecule(spec, config(args), run_dir, overwrite=True, progress=False)  # a rerun replaces
        rows = sorted(rows + [{"bond": bond, **result}], key=lambda row: row["bond"])
        print(f"r = {bond:.4f} A  VMC {result['energy']:.6f}  FCI {result['e_exact']:.6f}  "
              f"error {result['error_mha']:+.3f} mHa  ({result['wall_s']:.0f} s)", flush=True)
        (out / "curve.json").write_text(json.dumps(rows, indent=2) + "\n")  # kept current: a long run never loses points
    (out / "curve.json").write_text(json.dumps(rows, indent=2) + "\n")
    plot(out / "curve.png", rows)


if __name__ == "__main__":
    main()
