"""The teacher fit's cost and quality against its rows per step and its steps (JSON lines).

    python -m benchmarks.teacher_fit [--system H8@1.5] [--fits 4096:1200 1024:1200 1024:2400]
                                     [--models 32x2x64 64x2x64 32x2x64x2] [--lr 5e-3] [--decays 0.05 1]
                                     [--draws modulus weight] [--threads 1] [--out FILE]
    python -m benchmarks.teacher_fit --quick     # H6 at 1.5 A, tiny fits (run by the test suite)

The system is a name of ``benchmarks.accuracy`` (a catalog molecule, ``NAME@R``, or the hydrogen chain
``Hn@R``) or ``NAME/BASIS[@R]`` (``benchmarks.common.system_spec``: N2/6-31g and N2/cc-pvdz with 1s
frozen). Its selected-CI teacher is grown once, as a run grows it (``VMCConfig`` defaults, orbitals
included). Each fit ``ROWS:STEPS`` starts from the same freshly initialised network and takes STEPS Adam
steps from ``--lr`` (float32 copy, as a run does) on minibatches of ROWS rows drawn from the teacher
(every row when ROWS is at least the teacher's size), once per ``--decays`` (the rate's cosine floor, a
fraction of ``--lr``) and ``--draws`` (the cross-entropy rows by |c| or by |c|^2); the defaults are a
run's minibatch fit (``VMCConfig.pretrain_lr_sampled``, ``pretrain_decay``, ``pretrain_draw``). One record per fit: its seconds and final loss, and
the energy of the fitted network above the teacher's (``e_above_teacher_mha``), by enumeration of the
whole sector when it holds at most ``ENUMERATE_MAX`` configurations, else on the teacher's set (the
network's Rayleigh quotient there, as the first VMC step sees it; ``energy_on``). Each fit is repeated for
each network of ``--models`` (``DxLxH[xA]``: d_model, layers, phase-head width, attention heads, 4 unless given).

What fails in a fit (:func:`split`): on the teacher's set, the energy of the network's vector
(``e_set_mha``), of the network's modulus with the teacher's signs (``e_modulus_mha``), of the teacher's
modulus with the network's signs (``e_sign_mha``), all above the teacher; the teacher's weight on rows
whose sign the network has wrong (``wrong_sign_weight``) and 1 - overlap^2 with the teacher.
"""
from __future__ import annotations

import itertools
import sys
import time

import torch

from benchmarks.common import benchmark_parser, emit, software

ENUMERATE_MAX = 200_000


def sector_energy(wf, ham) -> float | None:
    """The network's exact energy (Hartree): its Rayleigh quotient on the whole sector, enumerated; None
    when the sector holds more than ``ENUMERATE_MAX`` configurations (then its energy on the teacher's set,
    :func:`split`, stands for it)."""
    from nnqs.vmc.configurations import all_configurations, in_sector, sector_size
    from nnqs.vmc.selection import CoreHamiltonian, unique_union

    if sector_size(wf.n_orbitals, wf.n_alpha, wf.n_beta) > ENUMERATE_MAX:
        return None
    configs = all_configurations(wf.n_orbitals)
    configs = unique_union(configs[in_sector(configs, wf.n_alpha, wf.n_beta)])
    with torch.no_grad():
        log_psi = wf.log_psi(configs, chunk_size=8192)
    e_loc = CoreHamiltonian(ham, configs).local_energies(ham, configs, log_psi).real
    weight = torch.exp(2 * (log_psi.real - log_psi.real.max()))
    return float((weight * e_loc).sum() / weight.sum())


def split(wf, matrix, coefficients: torch.Tensor, teacher_energy: float, configs: torch.Tensor) -> dict:
    """What the fitted network ``wf`` gets wrong on the teacher's set ``configs`` (module docstring), with
    H on the set ``matrix`` (scipy, in the set's order) and the teacher's ``coefficients``."""
    import numpy as np

    with torch.no_grad():
        log_psi = wf.log_psi(configs, chunk_size=8192)
    psi = torch.exp(log_psi - log_psi.real.max()).real.numpy()  # the real ansatz: a real vector
    c = coefficients.double().numpy()
    psi = psi * (1.0 if psi @ c >= 0 else -1.0)  # the global sign is free

    def above(v) -> float:
        return 1e3 * (float(v @ (matrix @ v) / (v @ v)) - teacher_energy)

    c2 = c**2 / (c @ c)
    return {"e_set_mha": above(psi), "e_modulus_mha": above(np.abs(psi) * np.sign(c)),
            "e_sign_mha": above(np.abs(c) * np.sign(psi)), "wrong_sign_weight": float(c2[np.sign(psi) != np.sign(c)].sum()),
            "infidelity": 1 - float((psi @ c) ** 2 / ((psi @ psi) * (c @ c)))}


def teacher_for(name: str):
    """(Hamiltonian, compact Hamiltonian, selected-CI teacher) of a system, grown as a run grows it."""
    from benchmarks.accuracy import system_spec as catalog_spec
    from benchmarks.common import system_spec
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.run import hamiltonian_for, make_wavefunction
    from nnqs.vmc.sci import selected_ci

    cfg = VMCConfig()
    spec = system_spec(name) if "/" in name else catalog_spec(name)[0]
    ham, _ = hamiltonian_for(spec, cfg.orbitals, cfg.teacher_threshold, False)
    compact = CompactHamiltonian.from_molecular(ham, "cpu")
    start = make_wavefunction(ham, cfg)
    return ham, compact, selected_ci(compact, start.hf_config().unsqueeze(0), cfg.teacher_threshold, cfg.teacher_max)


def records(name: str, fits: list[tuple[int, int]], lr: float, threads: int, models: list[tuple[int, int, int, int]],
            decays: list[float], draws: list[str]) -> list[dict]:
    """One record per network of ``models``, fit of ``fits``, rate floor of ``decays`` and draw of ``draws``
    (``main`` gives a run's minibatch fit as the defaults)."""
    import dataclasses

    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.pretrain import fit_to_vector
    from nnqs.vmc.run import make_wavefunction
    from nnqs.vmc.selection import set_hamiltonian

    t0 = time.perf_counter()
    ham, compact, sci = teacher_for(name)
    teacher_s = time.perf_counter() - t0
    matrix = set_hamiltonian(compact, sci.configs)
    lines = []
    for d_model, n_layers, phase_hidden, n_heads in models:
        cfg = dataclasses.replace(VMCConfig(), d_model=d_model, n_layers=n_layers, phase_hidden=phase_hidden,
                                  n_heads=n_heads)
        for (rows, steps), decay, by in itertools.product(fits, decays, draws):
            wf = make_wavefunction(ham, cfg)
            t0 = time.perf_counter()
            loss = fit_to_vector(wf, sci.configs, sci.coefficients, steps, lr, dtype=torch.float32, batch=rows,
                                 seed=cfg.seed, whole=rows, decay=decay, by_modulus=by == "modulus")
            seconds = time.perf_counter() - t0
            parts, exact = split(wf, matrix, sci.coefficients, sci.energy, sci.configs), sector_energy(wf, compact)
            lines.append({"benchmark": "teacher_fit", "system": name, "n_teacher": len(sci.configs), "teacher_s": teacher_s,
                          "d_model": d_model, "n_layers": n_layers, "phase_hidden": phase_hidden, "n_heads": n_heads,
                          "parameters": sum(p.numel() for p in wf.parameters()), "rows": rows, "steps": steps,
                          "lr": lr, "decay": decay if rows < len(sci.configs) else 1.0,  # a fit of every row keeps lr
                          "draw": by, "fit_s": seconds, "loss": loss,
                          "energy_on": "teacher set" if exact is None else "sector",
                          "e_above_teacher_mha": parts["e_set_mha"] if exact is None else 1e3 * (exact - sci.energy),
                          **parts, "threads": threads, **software()})
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def parse_fits(items: list[str]) -> list[tuple[int, int]]:
    """``ROWS:STEPS`` items -> [(rows, steps)]; ValueError on a malformed one."""
    fits = []
    for item in items:
        rows, sep, steps = item.partition(":")
        if not sep or not rows.isdigit() or not steps.isdigit() or int(rows) < 1 or int(steps) < 1:
            raise ValueError(item)
        fits.append((int(rows), int(steps)))
    return fits


def parse_models(items: list[str]) -> list[tuple[int, int, int, int]]:
    """``DxLxH[xA]`` items -> [(d_model, layers, phase-head width, attention heads)] (A: the run's 4 unless
    given; it must divide D); ValueError on a malformed one."""
    from nnqs.vmc.config import VMCConfig

    models = []
    for item in items:
        parts = item.split("x")
        if len(parts) not in (3, 4) or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(item)
        sizes = [int(p) for p in parts] + [VMCConfig().n_heads] * (4 - len(parts))
        if sizes[0] % sizes[3]:
            raise ValueError(item)
        models.append(tuple(sizes))
    return models


def main(argv: list[str] | None = None) -> list[dict]:
    from nnqs.common.config import apply_threads
    from nnqs.vmc.config import VMCConfig

    parser = benchmark_parser("teacher_fit", __doc__, "H6 at 1.5 A, fits of 30 and 60 steps (what the test suite runs)")
    parser.add_argument("--system", default="H8@1.5")
    parser.add_argument("--fits", nargs="+", default=["4096:1200", "1024:1200", "1024:2400"], metavar="ROWS:STEPS")
    parser.add_argument("--models", nargs="+", default=["32x2x64"], metavar="DxLxH[xA]",
                        help="networks: d_model x layers x phase-head width [x attention heads] (default: the run's 32x2x64x4)")
    cfg = VMCConfig()
    parser.add_argument("--lr", type=float, default=cfg.pretrain_lr_sampled,
                        help="peak learning rate (default: a run's for a minibatch fit)")
    parser.add_argument("--decays", nargs="+", type=float, default=[cfg.pretrain_decay], metavar="F",
                        help="the fit's learning rate falls along a cosine to F x lr (1: constant)")
    parser.add_argument("--draws", nargs="+", choices=["weight", "modulus"], default=[cfg.pretrain_draw],
                        help="the cross-entropy rows drawn by |c|^2 (weight) or by |c| (modulus, reweighted)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        fits = parse_fits(["64:30", "64:60"] if args.quick else args.fits)
    except ValueError as exc:
        parser.error(f"--fits takes ROWS:STEPS items of positive integers, got {exc}")
    try:
        models = parse_models(args.models)
    except ValueError as exc:
        parser.error(f"--models takes DxLxH[xA] items of positive integers (A dividing D), got {exc}")
    apply_threads(args.threads)
    lines = records("H6@1.5" if args.quick else args.system, fits, args.lr, args.threads, models, args.decays, args.draws)
    for line in lines:
        emit(line, args.out)
    return lines


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
