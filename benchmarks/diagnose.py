"""Where a VMC run's error lives: its network against the exact ground state on the whole sector (JSON lines).

    python -m benchmarks.diagnose --system N2 --runs runs/N2 runs/N2_other    # STO-3G catalog molecule
    python -m benchmarks.diagnose --system N2/sto-3g@2.2 --runs DIR            # at a bond length (Angstrom)
    python -m benchmarks.diagnose --quick     # a toy H2 run, diagnosed (run by the test suite)

For each run folder (its ``checkpoint.pt``: the network and, in core mode, the core), the
network's amplitudes are evaluated on every determinant of the N_alpha/N_beta sector and held
against the ground vector c of the sector's sparse Hamiltonian (:func:`hamiltonians.sector_hamiltonian`,
Lanczos), so nothing here is sampled or truncated. One JSON object per run (energies in mHa above
the exact ground energy):

- ``error_mha``: the network's exact variational energy <psi|H|psi> / <psi|psi>;
- ``error_exact_signs_mha``: the network's modulus with the exact signs (its own where c is a symmetry
  zero); ``error_exact_modulus_mha``:
  the exact modulus with the network's phases (which part of the error is modulus, which sign);
- ``infidelity``: 1 - |<c|psi>|^2; ``wrong_sign_weight`` / ``n_wrong_sign``: the exact weight of
  the determinants (of |c|^2 > 1e-12: not symmetry zeros) whose network sign, after the global
  phase, differs from c's;
- ``starved_weight`` / ``n_starved``: the exact weight of the determinants with |c|^2 > 1e-7 that
  the network holds below a tenth of it (a dead configuration stays dead under a strong SR shift);
  ``starved``: the ten heaviest of them as [|c|^2, |psi|^2, in core];
- ``outside_core_weight``: the exact weight outside the run's core (core mode), the part no
  Rayleigh quotient on the core can reach;
- ``error_starved_restored_mha``: the network with its starved determinants set to the exact
  amplitudes, at the network's own scale against c on the other determinants (what starvation costs); ``error_real_part_mha``: the real part of the network's
  wavefunction after the global phase (what the phases' departures from 0 and pi cost: the ground
  state of a real Hamiltonian is real, and the imaginary part only adds energy).
Sectors above ``MAX_SECTOR`` determinants are refused (the Lanczos vector and the network pass
over all of them are the cost).
"""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import benchmark_parser, emit, system_spec

MAX_SECTOR = 200_000
STARVED_MIN = 1e-7  # |c|^2 above which a configuration held at a tenth of it counts as starved
STARVED_FACTOR = 0.1


def ground_state(spec) -> tuple[float, np.ndarray, object, torch.Tensor]:
    """The sector's ground energy, vector (D,), sparse H and the determinants as tokens (D, n)."""
    from hamiltonians import build_hamiltonian, sector_dim, sector_hamiltonian
    from hamiltonians.exact import lowest_eigenpair
    from nnqs.vmc.configurations import occupations_to_tokens

    ham = build_hamiltonian(spec)
    size = sector_dim(ham.n_orbitals, ham.n_alpha, ham.n_beta)
    if size > MAX_SECTOR:
        raise SystemExit(f"{spec.name}: the sector holds {size:,} determinants, more than the {MAX_SECTOR:,} "
                         "this diagnosis enumerates")
    occupations, h = sector_hamiltonian(ham)
    e0, c = lowest_eigenpair(h)  # a seeded Lanczos start: the symmetry zeros' rounding is reproducible
    return e0, c, h, occupations_to_tokens(torch.from_numpy(occupations))


def rayleigh(h, vector: np.ndarray) -> float:
    return float(np.real(np.vdot(vector, h @ vector)) / np.vdot(vector, vector).real)


def diagnose(run: str | Path, e0: float, c: np.ndarray, h, configs: torch.Tensor) -> dict:
    """The record of one run folder against the ground state ``(e0, c)`` on ``configs``."""
    from nnqs.common.checkpoint import load_checkpoint
    from nnqs.common.errors import UserError
    from nnqs.common.loop import load_model_weights
    from nnqs.vmc.keys import lookup, pack, unique_keys
    from nnqs.vmc.wavefunction import TransformerWavefunction

    try:
        data = load_checkpoint(run, "vmc")
        wf = TransformerWavefunction(**data["model_config"])
        load_model_weights(wf, data["model"], run)
    except UserError as exc:
        raise SystemExit(str(exc)) from None
    if wf.n_orbitals != configs.shape[1]:
        raise SystemExit(f"{run}: a network of {wf.n_orbitals} orbitals, not of this system's {configs.shape[1]}")
    with torch.no_grad():
        log_psi = wf.log_psi(configs, chunk_size=8192).to(torch.complex128)
    parts, starved = compare(torch.exp(log_psi - log_psi.real.max()).numpy(), c, h, e0)
    weight, held = c**2, parts.pop("held")
    core = data.get("extras", {}).get("core")
    in_core = np.zeros(len(c), dtype=bool)
    if core is not None:
        in_core = (lookup(unique_keys(pack(core.cpu()))[0], pack(configs)) >= 0).numpy()
    heaviest = np.flatnonzero(starved)[np.argsort(-weight[starved])][:10]
    return {
        "benchmark": "diagnose", "run": str(run), "step": int(data["step"]), "n_sector": len(c), "e_exact": e0,
        **parts,
        "starved": [[float(weight[i]), float(held[i]), bool(in_core[i])] for i in heaviest],
        "n_core": None if core is None else len(core),
        "outside_core_weight": None if core is None else float(weight[~in_core].sum()),
    }


def compare(psi: np.ndarray, c: np.ndarray, h, e0: float) -> tuple[dict, np.ndarray]:
    """The network-free part of a record: a wavefunction ``psi`` (D,), any norm and global phase,
    against the normalised ground vector ``c`` of ``h`` (energy ``e0``). Returns the record's energy
    and weight fields (and ``held``, |psi|^2 after normalisation) and the starved mask."""
    psi = psi / np.linalg.norm(psi)
    overlap = np.vdot(c, psi)
    psi = psi * np.conj(overlap) / abs(overlap)  # the global phase that makes <c|psi> real and positive
    weight, held = c**2, np.abs(psi) ** 2
    nonzero = weight > 1e-12  # not a symmetry zero of c (whose sign is rounding)
    wrong = (np.sign(psi.real) != np.sign(c)) & nonzero
    starved = (weight > STARVED_MIN) & (held < STARVED_FACTOR * weight)
    rest = ~starved
    scale = np.vdot(c[rest], psi[rest]).real / np.vdot(c[rest], c[rest])  # psi's size against c on the rest
    return {
        "error_mha": 1000 * (rayleigh(h, psi) - e0),
        "error_exact_signs_mha": 1000 * (rayleigh(h, np.abs(psi) * np.where(nonzero, np.sign(c), np.sign(psi.real))) - e0),
        "error_exact_modulus_mha": 1000 * (rayleigh(h, np.abs(c) * np.exp(1j * np.angle(psi))) - e0),
        "infidelity": float(1.0 - abs(overlap) ** 2),
        "wrong_sign_weight": float(weight[wrong].sum()), "n_wrong_sign": int(wrong.sum()),
        "starved_weight": float(weight[starved].sum()), "n_starved": int(starved.sum()),
        "error_starved_restored_mha": 1000 * (rayleigh(h, np.where(starved, scale * c, psi)) - e0),
        "error_real_part_mha": 1000 * (rayleigh(h, psi.real) - e0),
        "held": held,
    }, starved


def quick_run(folder: Path) -> Path:
    """A toy core-mode run on H2 (seconds), its folder."""
    from hamiltonians import get_spec
    from nnqs.vmc.run import run_molecule
    from nnqs.vmc.config import toy_config

    run_molecule(get_spec("H2"), replace(toy_config(10), final_samples=10**12), folder / "H2", progress=False)
    return folder / "H2"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = benchmark_parser("diagnose", __doc__, "a toy H2 run, diagnosed")
    parser.add_argument("--system", default="N2", help="NAME[/BASIS[@R]] (default N2, STO-3G)")
    parser.add_argument("--runs", nargs="+", default=[], help="run folders of that system")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        runs, name = args.runs, args.system
        if args.quick:
            runs, name = [quick_run(Path(tmp))], "H2"
        if not runs:
            parser.error("give --runs (or --quick)")
        e0, c, h, configs = ground_state(system_spec(name))
        records = []
        for run in runs:
            records.append({"system": name, **diagnose(run, e0, c, h, configs)})
            emit(records[-1], args.out)
    return records


if __name__ == "__main__":
    main()
