"""VMC on H2, LiH, BeH2, H2O and N2 (STO-3G) against HF, CCSD(T) and exact energies.

    python examples/molecules_table.py [--steps 300] [--out runs/table] [--molecules H2 LiH ...]

Prints a table (energies in Hartree, error in mHa, wall time in seconds) and
writes each run's files under --out/<molecule>/ plus --out/table.json.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from hamiltonians import get_spec
from nnqs.vmc.run import run_molecule
from nnqs.vmc.config import VMCConfig, toy_config


def config(args: argparse.Namespace) -> VMCConfig:
    return toy_config(args.steps) if args.quick else VMCConfig(steps=args.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecules", nargs="+", default=["H2", "LiH", "BeH2", "H2O", "N2"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="runs/table")
    parser.add_argument("--quick", action="store_true", help="a tiny model and sample set (smoke test)")
    args = parser.parse_args()
    rows = []
    for name in args.molecules:
        cfg = config(args)
        rows.append({"molecule": name, **run_molecule(get_spec(name), cfg, Path(args.out) / name, overwrite=True)})
    header = f"{'molecule':<9}{'qubits':>7}{'HF':>15}{'CCSD(T)':>15}{'VMC':>15}{'exact':>15}{'err/mHa':>10}{'wall/s':>9}"
    print(header)
    for r in rows:
        cc = "n/a" if r["e_ccsd_t"] is None else f"{r['e_ccsd_t']:.6f}"
        print(f"{r['molecule']:<9}{r['n_qubits']:>7}{r['e_hf']:>15.6f}{cc:>15}{r['energy']:>15.6f}"
              f"{r['e_exact']:>15.6f}{r['error_mha']:>10.3f}{r['wall_s']:>9.1f}")
    Path(args.out, "table.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
