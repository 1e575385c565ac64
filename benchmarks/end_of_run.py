"""The end of a run at 48-52 qubits: the core's side numbers and the reported energy (JSON lines).

    python -m benchmarks.end_of_run [--system H2O/cc-pvdz] [--threshold 3e-4] [--fit-steps 300]
                                    [--threads 1] [--out FILE]
    python -m benchmarks.end_of_run --quick     # LiH, a tiny core (run by the test suite)

A selected-CI teacher of ``--threshold`` is grown from HF and the benchmarks' fixed model fitted to it
for ``--fit-steps`` float32 Adam steps (1,024-row minibatches); its set is the core. Timed in one run:

* ``core_energies`` (``e_core``, ``e_core_pt2``, ``e_subspace``) as it was, each of the three
  enumerating the core's connections (``t_core_by_connections``), and from H on the core that a run
  already holds (``t_core_from_matrix``; building that matrix, which a run does anyway:
  ``t_core_matrix_build``), with the largest difference of the numbers;
* the reported energy (10^12 fresh samples, the exact local energy) at the default bound on its unique
  configurations (:func:`nnqs.vmc.estimates.final_unique_max`) and at ``FINAL_UNIQUE_MAX`` alone (the
  bound before the connections counted), with their unique counts and standard errors.
"""
from __future__ import annotations

import sys
import time

import torch

from benchmarks.common import benchmark_parser, emit, software


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def record(system: str, threshold: float, fit_steps: int, threads: int) -> dict:
    from benchmarks.vmc_step import fixed_model, load
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.estimates import FINAL_UNIQUE_MAX, final_energy, final_unique_max
    from nnqs.vmc.pretrain import fit_to_vector
    from nnqs.vmc.sci import selected_ci
    from nnqs.vmc.selection import CoreHamiltonian, core_energies

    ham = load(system)
    compact = CompactHamiltonian.from_molecular(ham)
    wf = fixed_model(ham)
    sci, t_teacher = _timed(lambda: selected_ci(compact, wf.hf_config().unsqueeze(0), threshold, 65536))
    _, t_fit = _timed(lambda: fit_to_vector(wf, sci.configs, sci.coefficients, fit_steps, 2e-3, dtype=torch.float32,
                                            batch=1024))
    core = sci.configs
    old, t_old = _timed(lambda: core_energies(wf, compact, core))
    matrix, t_build = _timed(lambda: CoreHamiltonian(compact, core))
    new, t_new = _timed(lambda: core_energies(wf, compact, core, core_ham=matrix))
    line = {"benchmark": "end_of_run", "system": system, "n_orbitals": ham.n_orbitals, "n_core": len(core),
            "connected_per_config": compact.n_connected, "teacher_threshold": threshold, "fit_steps": fit_steps,
            "t_teacher": round(t_teacher, 2), "t_fit": round(t_fit, 2), "t_core_by_connections": t_old,
            "t_core_matrix_build": t_build, "t_core_from_matrix": t_new,
            "core_max_difference": max(abs(old[k] - new[k]) for k in old), **new}
    for name, bound in (("default", final_unique_max(compact)), ("unique_max_only", FINAL_UNIQUE_MAX)):
        est, seconds = _timed(lambda: final_energy(wf, compact, 10**12, torch.Generator().manual_seed(0),
                                                   unique_max=bound))
        line[f"final_{name}"] = {"unique_max": bound, "n_unique": est.n_unique, "seconds": seconds,
                                 "energy": est.energy, "stderr_mha": 1e3 * est.stderr}
    return {**line, "threads": threads, **software()}


def main(argv: list[str] | None = None) -> list[dict]:
    from nnqs.common.config import apply_threads

    parser = benchmark_parser("end_of_run", __doc__, "LiH, a core of a few configurations (what the test suite runs)")
    parser.add_argument("--system", default="H2O/cc-pvdz")
    parser.add_argument("--threshold", type=float, default=3e-4)
    parser.add_argument("--fit-steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    apply_threads(args.threads)
    line = record("LiH", 1e-2, 20, args.threads) if args.quick else record(args.system, args.threshold,
                                                                           args.fit_steps, args.threads)
    emit(line, args.out)
    return [line]


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
