"""Cost of a VMC step and of the local energy, by system size (JSON lines).

    python -m benchmarks.vmc_step [--systems LiH H2O N2 H2O/6-31g H2O/cc-pvdz] [--threads 2] [--out FILE]
    python -m benchmarks.vmc_step --quick      # toy size, seconds (run by the test suite)
    python -m benchmarks.vmc_step --ablation --systems N2 H2O/6-31g --threads 1
    python -m benchmarks.vmc_step --scaling-only --systems N2 H2O/6-31g H2O/cc-pvdz --threads 1
    python -m benchmarks.vmc_step --tree --systems N2 H2O/6-31g H2O/cc-pvdz --threads 1
    python -m benchmarks.vmc_step --tree --systems H2O/cc-pvdz --tree-teacher 256 --tree-limit 0 --repeats 1
    python -m benchmarks.vmc_step --reselect --systems H2O/6-31g N2/cc-pvdz --threads 1 --repeats 1

Two records per system (``--ablation``: only the third):

* ``"vmc_step"``: a fixed model (d_model 32, 2 layers) and sample count; median
  seconds per step split into sampling / local energy / gradient (SR), unique
  samples, unique connected configurations, peak resident memory.
* ``"local_energy_scaling"``: the local energy (``--estimator``) of a fixed set of U random
  sector configurations (the same U for every system), so the growth with the
  number of orbitals is measured at a fixed unique-sample count (median seconds by
  torch.utils.benchmark's ``blocked_autorange``), x' through the prefix tree (the default)
  and by plain passes in the same run; the last record fits the exponent of time ~ n_orbitals^p.
* ``"tree_evaluation"`` (``--tree``): log psi of the teacher set's external space (the core
  selection's work) by plain passes, through the prefix tree, and through it in float32.
* ``"core_reselection"`` (``--reselect``): one re-selection of the core (``select_core``, the
  first-order rule) from the selected-CI teacher's set, with the model fitted to it for
  ``--reselect-fit`` float32 steps, timed in one run with the float32 prefix-tree ranker cut
  below the threshold (the default) and not cut; whether the two cores are the same, and the
  time of the external space and of its diagonal on their own.
* ``"local_energy_ablation"``: the exact local energy of the model's own samples, timed in one
  run with and without the symmetry-zero cutoff and the pass-size bound, with the speedup and
  the largest difference of the local energies.
"""
from __future__ import annotations

import dataclasses
import math
import resource
import statistics
import time

import torch

from benchmarks.common import benchmark_parser, emit, system_spec, timed
from hamiltonians import build_hamiltonian
from nnqs.vmc.vmc_loop import new_state
import nnqs.vmc.local_energy as le
from nnqs.vmc.compact_hamiltonian import ELEMENT_CUTOFF, CompactHamiltonian
from nnqs.vmc.local_energy import local_energy
from nnqs.vmc.prefix_tree import TREE_ROWS, TreeLogPsi
from nnqs.vmc.config import STEPS, VMCConfig
from nnqs.vmc.step import vmc_step
from nnqs.vmc.wavefunction import TransformerWavefunction, hf_bias_for

SYSTEMS = ["LiH", "H2O", "N2", "H2O/6-31g", "H2O/cc-pvdz"]
HF_PROB = 0.7  # P(HF) at init of the recorded results (runs start at VMCConfig.hf_prob = 0.95)


def load(system: str):
    """The Hamiltonian of ``NAME[/BASIS]`` (:func:`benchmarks.common.system_spec`: N2/cc-pvdz has its 1s frozen)."""
    return build_hamiltonian(system_spec(system))


def random_sector_configs(n: int, n_alpha: int, n_beta: int, count: int, seed: int) -> torch.Tensor:
    """``count`` random configurations of the sector (uniform over occupied sets), (count, n)."""
    g = torch.Generator().manual_seed(seed)
    alpha = torch.rand(count, n, generator=g).argsort(1)[:, :n_alpha]
    beta = torch.rand(count, n, generator=g).argsort(1)[:, :n_beta]
    tokens = torch.zeros(count, n, dtype=torch.long)
    tokens.scatter_add_(1, alpha, torch.ones_like(alpha))
    tokens.scatter_add_(1, beta, 2 * torch.ones_like(beta))
    return torch.unique(tokens, dim=0)


def fixed_model(ham) -> TransformerWavefunction:
    """The benchmarks' model: d_model 32, 2 layers, float64, P(HF) = HF_PROB at init, seed 0."""
    torch.manual_seed(0)
    return TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=32, dtype=torch.float64,
                                   hf_bias=hf_bias_for(ham.n_orbitals, ham.n_alpha, ham.n_beta, HF_PROB))


def step_record(system: str, ham, cfg: VMCConfig, steps: int) -> dict:
    """``steps`` VMC steps of a fresh fixed model (after one warm-up step), medians of their timers."""
    torch.manual_seed(0)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=cfg.d_model,
                                 n_layers=cfg.n_layers, dtype=torch.float64,
                                 hf_bias=hf_bias_for(ham.n_orbitals, ham.n_alpha, ham.n_beta, HF_PROB))
    state = new_state(wf, cfg)
    compact = CompactHamiltonian.from_molecular(ham)
    results, n_samples = [], cfg.samples
    # Each step moves the model, so no step repeats: the step's own timers (perf_counter) give the split.
    for i in range(steps + 1):  # the first step warms up (vmap tracing, allocations, sample count)
        results.append(vmc_step(wf, compact, state.opt, state.sched, cfg, i, n_samples, state.generator))
        n_samples = results[-1].n_samples
    results = results[1:]
    med = {k: statistics.median(getattr(r, k) for r in results) for k in ("t_sample", "t_local", "t_grad")}
    return {
        "benchmark": "vmc_step", "system": system, "n_orbitals": ham.n_orbitals, "n_qubits": 2 * ham.n_orbitals,
        "samples": results[-1].n_samples, "optimizer": cfg.optimizer, "estimator": cfg.estimator, "selection": cfg.selection, "n_unique": results[-1].n_unique,
        "n_unique_connected": results[-1].n_unique_connected, "connected_dtype": cfg.connected_dtype,
        **{k: round(v, 4) for k, v in med.items()},
        "t_step": round(sum(med.values()), 4), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "threads": torch.get_num_threads(),
    }


def scaling_record(system: str, ham, n_configs: int, min_run_time: float, estimator: str = "exact") -> dict:
    """The local energy of ``n_configs`` random sector configurations, timed in one run three ways:
    x' by the default evaluator of :func:`~nnqs.vmc.local_energy.share_local_energy` (a float32 copy
    of the float64 model, through the prefix tree from ``TREE_MIN_ORBITALS`` on: ``seconds``), the
    same in float64 (``seconds_float64``) and by plain float64 passes (``seconds_plain``); the
    largest differences of the local energies against the plain pass are recorded."""
    wf = fixed_model(ham)
    compact = CompactHamiltonian.from_molecular(ham)
    configs = random_sector_configs(ham.n_orbitals, ham.n_alpha, ham.n_beta, n_configs, seed=1)
    ways = {"seconds": lambda: TreeLogPsi(wf, dtype=getattr(torch, le.CONNECTED_DTYPE)),  # the copy is timed too
            "seconds_float64": lambda: TreeLogPsi(wf), "seconds_plain": lambda: wf.log_psi}
    record = {"benchmark": "local_energy_scaling", "system": system, "estimator": estimator,
              "n_orbitals": ham.n_orbitals, "n_configs": len(configs), "connected_per_config": compact.n_connected,
              "connected_dtype": le.CONNECTED_DTYPE, "timer": "torch.utils.benchmark.Timer.blocked_autorange"}
    values = {}
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
        for key, fn in ways.items():
            seconds, result, calls = timed(lambda fn=fn: local_energy(fn(), compact, configs, log_psi, estimator),
                                           min_run_time)
            record[key], record["calls" + key[len("seconds"):]] = round(seconds, 4), calls
            values[key] = result.values
    record["n_unique_connected"] = result.n_unique_connected
    record["speedup"] = round(record["seconds_plain"] / record["seconds"], 2)
    record["speedup_over_float64"] = round(record["seconds_float64"] / record["seconds"], 2)
    for key in ("seconds", "seconds_float64"):
        record["max_difference" + key[len("seconds"):]] = float((values[key] - values["seconds_plain"]).abs().max())
    return record


def ablation_record(system: str, ham, n_samples: int, repeats: int = 3) -> dict:
    """The exact local energy of one sample set of the step's model, timed with and without the two
    savings in one run: symmetry zeros dropped (``element_cutoff``) and passes of at most
    ``PASS_TOKENS`` tokens. Median of ``repeats``; the energies must agree."""
    wf = fixed_model(ham)
    configs, _ = wf.sample(n_samples, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    record = {"benchmark": "local_energy_ablation", "system": system, "n_orbitals": ham.n_orbitals,
              "n_unique": len(configs), "repeats": repeats}
    energies = {}
    hamiltonians = {cutoff: CompactHamiltonian(ham.h1e, ham.eri, ham.e_core, ham.n_alpha, ham.n_beta,
                                               element_cutoff=cutoff) for cutoff in (0.0, ELEMENT_CUTOFF)}
    for cutoff, tokens, name in ((0.0, 10**9, "before"), (0.0, le.PASS_TOKENS, "pass_tokens"),
                                 (ELEMENT_CUTOFF, 10**9, "cutoff"), (ELEMENT_CUTOFF, le.PASS_TOKENS, "both")):
        compact = hamiltonians[cutoff]
        saved, le.PASS_TOKENS = le.PASS_TOKENS, tokens  # the module constant, set back below
        try:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                result = local_energy(wf.log_psi, compact, configs, log_psi)
                times.append(time.perf_counter() - t0)
        finally:
            le.PASS_TOKENS = saved
        energies[name] = result.values
        record[f"t_{name}"] = round(statistics.median(times), 4)
        record[f"n_evaluated_{name}"] = result.n_evaluated
    record["speedup"] = round(record["t_before"] / record["t_both"], 2)
    record["max_difference"] = max(float((v - energies["before"]).abs().max()) for v in energies.values())
    return record


class UncutTreeLogPsi(TreeLogPsi):
    """The prefix-tree ranker as before the cut: every amplitude exact (``above`` ignores the floor)."""

    def above(self, log_abs_floor: float) -> "UncutTreeLogPsi":
        return self


def reselect_record(system: str, ham, fit_steps: int, repeats: int = 1) -> dict:
    """One core re-selection from the teacher's set, the ranker cut below the threshold and not."""
    from nnqs.vmc.keys import unpack
    from nnqs.vmc.pretrain import fit_to_vector
    from nnqs.vmc.sci import selected_ci
    from nnqs.vmc.selection import external_space, normalised_amplitudes, select_core

    cfg = VMCConfig(steps=STEPS)
    wf = fixed_model(ham)
    compact = CompactHamiltonian.from_molecular(ham)
    sci = selected_ci(compact, wf.hf_config().unsqueeze(0), cfg.teacher_threshold, cfg.teacher_max)
    t0 = time.perf_counter()
    fit_loss = fit_to_vector(wf, sci.configs, sci.coefficients, fit_steps, cfg.pretrain_lr, dtype=torch.float32)
    t_fit = time.perf_counter() - t0
    with torch.no_grad():
        log_psi = wf.log_psi(sci.configs)
    t0 = time.perf_counter()
    keys, _ = external_space(compact, sci.configs, normalised_amplitudes(log_psi))
    t_external = time.perf_counter() - t0
    t0 = time.perf_counter()
    compact.diagonal(unpack(keys, ham.n_orbitals))
    t_diagonal = time.perf_counter() - t0
    record = {"benchmark": "core_reselection", "system": system, "n_orbitals": ham.n_orbitals,
              "n_set": len(sci.configs), "n_external": len(keys), "fit_steps": fit_steps, "fit_loss": round(fit_loss, 4),
              "t_fit": round(t_fit, 2), "t_external": round(t_external, 3), "t_diagonal": round(t_diagonal, 3),
              "repeats": repeats, "threads": torch.get_num_threads()}  # fmt: skip
    cores = {}
    for name, kind in (("cut", TreeLogPsi), ("uncut", UncutTreeLogPsi)):
        times = []
        for _ in range(repeats):
            ranker = kind(wf, min(cfg.max_batch, TREE_ROWS), torch.float32)
            t0 = time.perf_counter()
            cores[name] = select_core(ranker, compact, sci.configs, log_psi, cfg.core_threshold, cfg.core_max,
                                      cfg.max_batch, sci.energy).configs  # fmt: skip
            times.append(time.perf_counter() - t0)
        record[f"t_{name}"] = round(statistics.median(times), 3)
    record["speedup"] = round(record["t_uncut"] / max(record["t_cut"], 1e-9), 2)
    record["same_core"] = bool(torch.equal(cores["cut"], cores["uncut"]))
    record["n_core"] = len(cores["cut"])
    return record


def tree_record(system: str, ham, teacher_max: int, limit: int | None, repeats: int = 3) -> dict:
    """log psi of the external space of the selected-CI teacher's set (what the core selection
    evaluates; at most ``limit`` of its configurations), timed in one run by plain passes in
    float64 (before), through the prefix tree in float64 (the local energy's default) and in
    float32 (the selection's ranking); median of ``repeats``, largest differences of log psi."""
    import copy

    from nnqs.vmc.keys import unpack
    from nnqs.vmc.local_energy import evaluate_chunked
    from nnqs.vmc.sci import selected_ci
    from nnqs.vmc.selection import external_space

    wf = fixed_model(ham)
    compact = CompactHamiltonian.from_molecular(ham)
    sci = selected_ci(compact, wf.hf_config().unsqueeze(0), 1e-4, teacher_max)
    keys, _ = external_space(compact, sci.configs, sci.coefficients)
    tokens = unpack(keys, ham.n_orbitals)[:limit]
    ways = {"plain": wf.log_psi, "tree": TreeLogPsi(wf), "tree_float32": TreeLogPsi(copy.deepcopy(wf).float())}
    record = {"benchmark": "tree_evaluation", "system": system, "n_orbitals": ham.n_orbitals,
              "n_teacher": len(sci.configs), "n_configs": len(tokens), "repeats": repeats}
    values = {}
    for name, fn in ways.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            values[name] = fn(tokens) if name != "plain" else evaluate_chunked(fn, tokens, 8192)  # the tree at any n
            times.append(time.perf_counter() - t0)
        record[f"t_{name}"] = round(statistics.median(times), 4)
    for name in ("tree", "tree_float32"):
        record[f"speedup_{name}"] = round(record["t_plain"] / max(record[f"t_{name}"], 1e-9), 2)
        record[f"max_difference_{name}"] = float((values[name] - values["plain"]).abs().max()) if len(tokens) else 0.0
    return record


def fit_exponent(records: list[dict], key: str = "seconds") -> float:
    """Least-squares slope of log(``key`` per configuration) against log(n_orbitals)."""
    xs = [math.log(r["n_orbitals"]) for r in records]
    ys = [math.log(r[key] / r["n_configs"]) for r in records]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def parser_of():
    parser = benchmark_parser("vmc_step", __doc__, "H2 and LiH, tiny sizes (seconds)")
    parser.add_argument("--systems", nargs="+", default=SYSTEMS)
    parser.add_argument("--samples", type=int, default=10**5)
    parser.add_argument("--configs", type=int, default=64, help="U for the local-energy scaling")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--optimizer", choices=["sr", "adamw"], default="sr")
    parser.add_argument("--estimator", choices=["exact", "sample-space"], default="exact")
    parser.add_argument("--selection", choices=["samples", "core"], default="samples",
                        help="samples: plain sampled VMC with --estimator (the recorded table); core: the run default")
    parser.add_argument("--connected-dtypes", nargs="+", choices=["float32", "float64"], default=["float32"],
                        help="vmc_step records: precision of the passes over the connected x' (one record each)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ablation", action="store_true",
                        help="only the local-energy ablation (symmetry zeros, pass size) on each system")
    parser.add_argument("--scaling-only", action="store_true", help="only the local-energy scaling records")
    parser.add_argument("--tree", action="store_true",
                        help="only the prefix-tree records: log psi of each system's teacher's external space")
    parser.add_argument("--tree-teacher", type=int, default=4096, help="--tree: configurations of the teacher's set")
    parser.add_argument("--tree-limit", type=int, default=10**5, help="--tree: most external configurations (0: all)")
    parser.add_argument("--repeats", type=int, default=3, help="--tree, --ablation, --reselect: timed repeats (median)")
    parser.add_argument("--reselect", action="store_true",
                        help="only the core re-selection, the ranker cut below the threshold and not")
    parser.add_argument("--reselect-fit", type=int, default=100, help="--reselect: teacher-fit steps first")
    return parser


def one_mode_records(args) -> list[dict] | None:
    """The records of --tree, --reselect or --ablation (one per system), or None for the default mode."""
    repeats = 1 if args.quick else args.repeats
    if args.tree:
        make = lambda system: tree_record(system, load(system), 64 if args.quick else args.tree_teacher,  # noqa: E731
                                          args.tree_limit or None, repeats)
    elif args.reselect:
        make = lambda system: reselect_record(system, load(system), 5 if args.quick else args.reselect_fit, repeats)  # noqa: E731
    elif args.ablation:
        make = lambda system: ablation_record(system, load(system), args.samples, repeats)  # noqa: E731
    else:
        return None
    records = []
    for system in args.systems:
        records.append(make(system))
        emit(records[-1], args.out)
    return records


def main(argv: list[str] | None = None) -> list[dict]:
    args = parser_of().parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.systems, args.samples, args.configs, args.steps = ["H2", "LiH"], 1000, 8, 1
    cfg = VMCConfig(steps=STEPS, samples=args.samples, optimizer=args.optimizer, estimator=args.estimator, selection=args.selection)
    records = one_mode_records(args)
    if records is not None:
        return records
    records, scaling = [], []
    for system in args.systems:
        ham = load(system)
        if not args.scaling_only:
            for dtype in args.connected_dtypes:
                records.append(step_record(system, ham, dataclasses.replace(cfg, connected_dtype=dtype), args.steps))
                emit(records[-1], args.out)
        scaling.append(scaling_record(system, ham, args.configs, 0.0 if args.quick else 1.0, args.estimator))
        emit(scaling[-1], args.out)
    if len(scaling) >= 2:
        fit = {"benchmark": "local_energy_scaling_fit", "exponent": round(fit_exponent(scaling), 2),
               "exponent_float64": round(fit_exponent(scaling, "seconds_float64"), 2),
               "exponent_plain": round(fit_exponent(scaling, "seconds_plain"), 2),
               "systems": [r["system"] for r in scaling], "n_configs": args.configs, "estimator": args.estimator}
        emit(fit, args.out)
        records.append(fit)
    return records + scaling


if __name__ == "__main__":
    main()
