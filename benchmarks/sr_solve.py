"""The SR direction: one 2U x 2U solve vs the modulus and phase blocks solved apart.

``python -m benchmarks.sr_solve [--quick] [--out FILE] [--threads T]``
``python -m benchmarks.sr_solve --run DIR (--molecule H2O | --geometry "...") [--basis 6-31g] [--repeats 3]``

For the complex wavefunction of a catalog molecule (``ansatz="complex"``; N2 STO-3G: 20 qubits,
32,973 parameters) and U configurations drawn from it, times
``sr_direction(..., split=True)`` (two U x U blocks: the separate phase head
moves no modulus parameter) against ``split=False`` (the full 2U x 2U Gram
matrix), in the same process; prints one JSON line per U with both times, the
speedup and the largest difference between the two directions (they are the
same vector up to rounding), and the time of the per-sample Jacobian that feeds
them. Times are medians by torch.utils.benchmark's ``blocked_autorange``
(``min_run_time`` seconds of calls after a warm-up call).

``--run DIR``: the model and core of a saved core-mode run (its ``checkpoint.pt``; the molecule
named again by ``--molecule``/``--basis``, or ``--geometry``; the run's integrals from its ``hamiltonian.npz``), the step's system as the run builds it
(weights |psi|^2 on the core, its Rayleigh-quotient local energies; above ``VMCConfig.sr_exact_max``
configurations the step's subsample of ``VMCConfig.sr_rows`` rows; the split Jacobian of the float32
pass network; ``--rows``: subsamples of these expected sizes instead): the time of the Jacobian and the median of ``--repeats`` directions, solved both ways
in the same process: the float64 Gram matrix solved directly (``seconds_solve_float64``) and the
float32 Gram matrix preconditioning float64 CG (``seconds_solve_mixed``, the default from
``nnqs.vmc.sr.MIXED_ROWS`` rows), with the largest difference of the two directions relative to
the largest entry, at ``--shift`` (default: the run default).
"""
from __future__ import annotations

import os

import torch

from benchmarks.common import benchmark_parser, emit, software, timed
from hamiltonians import MoleculeSpec, build_hamiltonian, get_spec
from nnqs.vmc.run import make_wavefunction
from nnqs.vmc.sr import SR_SHIFT, per_sample_jacobian, sr_direction
from nnqs.vmc.config import VMCConfig

FULL = dict(molecule="N2", sizes=(256, 512, 1024), min_run_time=2.0)
QUICK = dict(molecule="LiH", sizes=(16, 32), min_run_time=0.0)


def run_one(molecule: str, u: int, min_run_time: float, threads: int) -> dict:
    ham = build_hamiltonian(get_spec(molecule))
    wf = make_wavefunction(ham, VMCConfig(ansatz="complex"))  # the real ansatz has no phase block to split off
    with torch.no_grad():  # spread the model so that U distinct configurations exist
        for p in wf.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    configs, _ = wf.sample(10**9, generator=torch.Generator().manual_seed(0))
    configs = configs[:u]
    t_jacobian, jacobian, n_jacobian = timed(lambda: per_sample_jacobian(wf, configs), min_run_time)
    g = torch.Generator().manual_seed(1)
    weights = torch.rand(len(configs), generator=g, dtype=torch.float64)
    weights /= weights.sum()
    local = torch.complex(torch.randn(len(configs), generator=g, dtype=torch.float64),
                          0.1 * torch.randn(len(configs), generator=g, dtype=torch.float64))  # fmt: skip
    t_split, split, n_split = timed(lambda: sr_direction(jacobian, local, weights, 0.0, 1e-2), min_run_time)
    t_full, full, n_full = timed(lambda: sr_direction(jacobian, local, weights, 0.0, 1e-2, split=False), min_run_time)
    return {
        "benchmark": "sr_solve", "molecule": molecule, "unique": len(configs), "parameters": jacobian.shape[1],
        "seconds_split": round(t_split, 6), "seconds_full": round(t_full, 6), "speedup": round(t_full / t_split, 3),
        "max_difference": float((split - full).abs().max()), "direction_norm": float(full.norm()),
        "seconds_jacobian": round(t_jacobian, 6), "calls_jacobian": n_jacobian,
        "calls_split": n_split, "calls_full": n_full, "timer": "torch.utils.benchmark.Timer.blocked_autorange",
        "threads": threads, **software(),
    }  # fmt: skip


def run_saved(run_dir: str, spec, repeats: int, threads: int, shift: float, rows: int | None = None) -> dict:
    import statistics
    import time

    import nnqs.vmc.sr as sr
    from nnqs.common.allocator import reuse_freed_memory
    from nnqs.common.checkpoint import load_checkpoint
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.draws import pass_network
    from nnqs.vmc.hamiltonian_file import folder_hamiltonian
    from nnqs.vmc.selection import CoreHamiltonian, set_weights, unique_union
    from nnqs.vmc.wavefunction import TransformerWavefunction

    reuse_freed_memory()  # as the command line does: no page faults on each call's buffers
    data = load_checkpoint(os.path.join(run_dir, "checkpoint.pt"), "vmc")
    wf = TransformerWavefunction(**data["model_config"])
    wf.load_state_dict(data["model"])
    ham = CompactHamiltonian.from_molecular(folder_hamiltonian(run_dir, spec)[0], wf.device)
    cfg = VMCConfig()
    configs = unique_union(data["extras"]["core"])
    net = pass_network(wf, cfg, len(configs))
    with torch.no_grad():
        log_psi = net.log_psi(configs, chunk_size=cfg.max_batch).to(torch.complex128)
    local = CoreHamiltonian(ham, configs).local_energies(ham, configs, log_psi)
    weights = set_weights(log_psi)
    energy = float((weights * local.real).sum())
    if rows is not None or cfg.subsampled(len(configs)):  # the step's rows (nnqs.vmc.step.sr_rows), or ``rows``
        sample = sr.subsample_rows(weights, rows or cfg.subsample_size(len(configs)), torch.Generator().manual_seed(1))
        configs, local, weights = configs[sample.index], local[sample.index], sample.weights
    start = time.perf_counter()
    jacobian = sr.split_jacobian(net, configs)
    t_jacobian = time.perf_counter() - start
    times, directions = {}, {}
    for name, mixed_rows in (("float64", 10**12), ("mixed", sr.MIXED_ROWS)):
        default, sr.MIXED_ROWS = sr.MIXED_ROWS, mixed_rows
        seconds = []
        for _ in range(repeats):  # sr_direction centres its Jacobian in place: a fresh copy per call
            copy = sr.SplitJacobian(jacobian.real.clone(), jacobian.real_columns, jacobian.imag.clone(),
                                    jacobian.imag_columns)
            start = time.perf_counter()
            directions[name] = sr.sr_direction(copy, local, weights, energy, shift, mixed=True)
            seconds.append(time.perf_counter() - start)
            del copy
        sr.MIXED_ROWS = default
        times[name] = statistics.median(seconds)
    scale = float(directions["float64"].abs().max())
    return {
        "benchmark": "sr_solve_run", "run": run_dir, "system": spec.name, "basis": spec.basis, "shift": shift,
        "core": len(data["extras"]["core"]), "rows": len(configs), "parameters": sum(p.numel() for p in wf.parameters()),
        "seconds_solve_float64": round(times["float64"], 3), "seconds_solve_mixed": round(times["mixed"], 3),
        "speedup": round(times["float64"] / times["mixed"], 3),
        "max_difference_relative": float((directions["mixed"] - directions["float64"]).abs().max()) / scale,
        "seconds_jacobian": round(t_jacobian, 3), "repeats": repeats, "timer": "median of time.perf_counter calls",
        "threads": threads, **software(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("sr_solve", __doc__, "LiH, tiny U, one timed call each (seconds)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--run", default=None, help="a saved core-mode run folder: the Jacobian and solve on its core")
    parser.add_argument("--shift", type=float, default=SR_SHIFT, help="with --run: the SR shift")
    parser.add_argument("--molecule", default="N2", help="with --run: the run's molecule")
    parser.add_argument("--basis", default="sto-3g", help="with --run: the run's basis")
    parser.add_argument("--geometry", default=None, help="with --run: the run's geometry (instead of --molecule)")
    parser.add_argument("--repeats", type=int, default=3, help="with --run: solves timed")
    parser.add_argument("--rows", type=int, nargs="+", default=None,
                        help="with --run: subsamples of these expected sizes instead of the step's rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.run is not None:
        spec = (MoleculeSpec(name="geometry", atom=args.geometry, basis=args.basis) if args.geometry
                else get_spec(args.molecule, basis=args.basis))
        for rows in args.rows or [None]:
            emit(run_saved(args.run, spec, args.repeats, args.threads, args.shift, rows), args.out)
        return 0
    size = QUICK if args.quick else FULL
    for u in size["sizes"]:
        emit(run_one(size["molecule"], u, size["min_run_time"], args.threads), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
