"""The reported energy of a saved run with its connected x' evaluated in float32 and in float64 (JSON lines).

    python -m benchmarks.connected_precision --run runs/N2 --molecule N2 --threads 1
    python -m benchmarks.connected_precision --run DIR --molecule H2O --basis 6-31g --unique-max 4096 --threads 1
    python -m benchmarks.connected_precision --quick      # a toy run trained here (seconds; the test suite)

One fresh draw of 10^12 samples from the run's model (at most ``--unique-max`` unique; seed 20240),
then the exact local energy of that one sample set in one process, with the network passes over
the connected x' in float32 (``connected_dtype = "float32"``, the default) and in float64
(``--repeats`` timed calls of each, alternating, after a warm-up call of each). The record has both energies, their difference against the sampling standard error,
the largest change of one local energy, and both times.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time

import torch

from benchmarks.common import benchmark_parser, emit, software
from hamiltonians import build_hamiltonian, get_spec
from nnqs.common.distributed import SingleProcess
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.local_energy import share_local_energy
from nnqs.vmc.draws import draw
from nnqs.vmc.estimates import FINAL_UNIQUE_MAX, estimate

DRAW_SEED = 20240


def compare(wf, ham: CompactHamiltonian, unique_max: int, repeats: int = 3, max_batch: int = 8192) -> dict:
    """Both precisions on one fresh draw of ``wf``: energies, standard error, median times of
    ``repeats`` calls each, taken in alternating order after one untimed warm-up call of each."""
    with torch.no_grad():
        configs, counts = draw(wf, 10**12, torch.Generator(wf.device).manual_seed(DRAW_SEED), unique_max)
        log_psi = wf.log_psi(configs)
    record, values = {"n_unique": len(configs), "repeats": repeats}, {}
    times = {"float32": [], "float64": []}
    for call in range(repeats + 1):
        for dtype in ("float32", "float64") if call % 2 else ("float64", "float32"):
            t0 = time.perf_counter()
            with torch.no_grad():
                values[dtype] = share_local_energy(wf, ham, configs, log_psi, "exact", max_batch, SingleProcess(),
                                                   dtype)[0]
            if call:
                times[dtype].append(time.perf_counter() - t0)
    for dtype in ("float32", "float64"):
        record[f"seconds_{dtype}"] = round(statistics.median(times[dtype]), 4)
        est = estimate(values[dtype], counts)
        record[f"energy_{dtype}"], record["stderr"] = est.energy, est.stderr
    difference = record["energy_float32"] - record["energy_float64"]
    record.update(difference=difference, difference_in_stderr=difference / max(record["stderr"], 1e-300),
                  max_local_energy_change=float((values["float32"] - values["float64"]).abs().max()),
                  speedup=round(record["seconds_float64"] / max(record["seconds_float32"], 1e-9), 2))
    return record


def from_run(run_dir: str, molecule: str, basis: str):
    """The float64 model of a saved run and its system's Hamiltonian."""
    from nnqs.common.checkpoint import load_checkpoint
    from nnqs.vmc.wavefunction import TransformerWavefunction

    data = load_checkpoint(os.path.join(run_dir, "checkpoint.pt"), "vmc")
    wf = TransformerWavefunction(**data["model_config"])
    wf.load_state_dict(data["model"])
    return wf.eval(), CompactHamiltonian.from_molecular(build_hamiltonian(get_spec(molecule, basis=basis)))


def toy_model():
    """A few AdamW steps of a tiny model on LiH: a state that is not the initial one."""
    from nnqs.vmc.vmc_loop import new_state, one_vmc_step
    from nnqs.vmc.run import make_wavefunction
    from nnqs.vmc.config import toy_config

    cfg = dataclasses.replace(toy_config(5), optimizer="adamw", selection="samples", lr=1e-2)
    mol = build_hamiltonian(get_spec("LiH"))
    ham = CompactHamiltonian.from_molecular(mol)
    state = new_state(make_wavefunction(mol, cfg), cfg)
    for _ in range(cfg.steps):
        one_vmc_step(state, ham, cfg)
        state.step += 1
    return state.wf.eval(), ham


def main(argv: list[str] | None = None) -> list[dict]:
    parser = benchmark_parser("connected_precision", __doc__, "a toy LiH model trained for 5 steps (seconds)")
    parser.add_argument("--run", default=None, help="a saved run folder (its checkpoint.pt)")
    parser.add_argument("--molecule", default="N2", help="the run's molecule")
    parser.add_argument("--basis", default="sto-3g", help="the run's basis")
    parser.add_argument("--unique-max", type=int, default=FINAL_UNIQUE_MAX, help="most unique samples of the draw")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per precision (median)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick or args.run is None:
        (wf, ham), source = toy_model(), "toy"
        args.molecule, args.basis = "LiH", "sto-3g"
    else:
        (wf, ham), source = from_run(args.run, args.molecule, args.basis), args.run
    record = {"benchmark": "connected_precision", "run": source, "molecule": args.molecule, "basis": args.basis,
              **compare(wf, ham, 64 if args.quick else args.unique_max, 1 if args.quick else args.repeats), "threads": torch.get_num_threads(),
              **software()}
    emit(record, args.out)
    return [record]


if __name__ == "__main__":
    main()
