"""Cost of one VMC step against the working set's size U (JSON lines).

    python -m benchmarks.step_cost [--chain 12] [--spacing 1.5] [--sizes 4096 8192 16384 32768 65536]
                                   [--exact 4096 8192] [--sr-rows 0] [--pass-dtype float32 float64]
                                   [--threads 1] [--out FILE]
    python -m benchmarks.step_cost --quick      # toy size, seconds (run by the test suite)

The working set is the first U configurations of a selected-CI vector grown on a hydrogen chain
(STO-3G, ``--chain`` atoms ``--spacing`` Angstrom apart: strongly correlated, so the set spreads),
with the default model (d_model 32, 2 layers). One record per U: median seconds of a step with the
default optimiser (minSR on the whole set up to ``VMCConfig.sr_exact_max`` rows, on a subsample of
``VMCConfig.subsample_size(U)`` rows above: U / 8 between 2,048 and 4,096 by default; ``rows`` in the record),
split into its parts (the set's local energies from H held on the core, whose build is timed apart
as ``t_core_hamiltonian``, and grown from a core holding nine tenths of it as
``t_core_hamiltonian_grown``, the way a run rebuilds it once per re-selection), the re-selection itself
(``t_reselect``, first-order rule), the step with both amortised over the steps between re-selections
of such a core in a run with the defaults (``reselection_every``, ``t_step_with_reselection``), seconds
per configuration, and the process's peak resident memory so far;
for the sizes of ``--exact`` also the exact minSR step (every row) timed in the
same run (``sr_exact_max = U``). The last record fits the exponent p of ``t_step ~ U^p`` over the default
steps above ``sr_exact_max`` (the subsampled regime; over all sizes when fewer than two are above it).
"""
from __future__ import annotations

import dataclasses
import math
import resource
import statistics
import time

import torch

from benchmarks.common import benchmark_parser, emit, software
from hamiltonians import MoleculeSpec, build_hamiltonian
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.vmc_loop import new_state
from nnqs.vmc.run import make_wavefunction
from nnqs.vmc.sci import selected_ci
from nnqs.vmc.prefix_tree import TREE_ROWS, TreeLogPsi
from nnqs.vmc.selection import CoreHamiltonian, reselection_every, select_core, set_weights, unique_union
from nnqs.vmc.config import STEPS, VMCConfig
from nnqs.vmc.step import vmc_step

QUICK = {"chain": 6, "spacing": 1.5, "sizes": (16, 32, 64), "exact": (32,), "sr_rows": 16, "repeats": 2}


def chain_spec(atoms: int, spacing: float) -> MoleculeSpec:
    """A linear hydrogen chain of ``atoms`` atoms, ``spacing`` Angstrom apart, STO-3G."""
    return MoleculeSpec(name=f"H{atoms}@{spacing}", atom="; ".join(f"H 0 0 {i * spacing}" for i in range(atoms)))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_steps(wf, ham, cfg: VMCConfig, core: torch.Tensor, repeats: int) -> dict:
    """Median parts of ``repeats`` steps (after one warm-up step) on the working set ``core``;
    the model is reset after each step so that every step sees the same state."""
    initial = {k: v.clone() for k, v in wf.state_dict().items()}
    t0 = time.perf_counter()
    core_ham = CoreHamiltonian(ham, core)  # built once per core (once per re-selection in a run)
    t_build = time.perf_counter() - t0
    kept = CoreHamiltonian(ham, core[: int(0.9 * len(core))])
    t0 = time.perf_counter()
    CoreHamiltonian(ham, core, previous=kept)  # a re-selection that adds a tenth: grown from the last core's
    t_grow = time.perf_counter() - t0
    t0 = time.perf_counter()
    working = unique_union(core)  # sorted by key, as a step's working set is
    with torch.no_grad():
        log_psi = wf.log_psi(working, chunk_size=cfg.max_batch)
    ranker = TreeLogPsi(wf, min(cfg.max_batch, TREE_ROWS), torch.float32)
    energy = float((set_weights(log_psi) * core_ham.local_energies(ham, working, log_psi).real).sum())
    select_core(ranker, ham, working, log_psi, cfg.core_threshold, cfg.core_max, cfg.max_batch, energy)
    t_reselect = time.perf_counter() - t0
    every = defaults_every(len(core), ham.n_connected)
    parts = []
    for i in range(repeats + 1):
        state = new_state(wf, cfg)
        r = vmc_step(wf, ham, state.opt, state.sched, cfg, 1, 1, state.generator, core=core, core_ham=core_ham)
        wf.load_state_dict(initial)
        if i:
            parts.append((r.t_sample, r.t_local, r.t_grad, r.n_unique))
    t = [statistics.median(p[k] for p in parts) for k in range(3)]
    return {"t_sample": t[0], "t_local": t[1], "t_grad": t[2], "t_step": sum(t), "unique": parts[0][3],
            "t_core_hamiltonian": t_build, "t_core_hamiltonian_grown": t_grow, "t_reselect": t_reselect,
            "reselection_every": every, "t_step_with_reselection": sum(t) + (t_grow + t_reselect) / every}


def defaults_every(core_rows: int, n_connected: int) -> int:
    """Steps between re-selections of such a core in a run with the defaults (this benchmark times none
    inside its steps)."""
    defaults = VMCConfig()
    return reselection_every(defaults.core_every, defaults.core_entries, core_rows, n_connected)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("step_cost", __doc__, "a 6-atom chain and sets of 16 to 64 (seconds)")
    parser.add_argument("--chain", type=int, default=12)
    parser.add_argument("--spacing", type=float, default=1.5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384, 32768, 65536])
    parser.add_argument("--exact", type=int, nargs="*", default=[4096, 8192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sr-rows", type=int, nargs="+", default=[VMCConfig().sr_rows],
                        help="expected subsample sizes of the SR step, 0: the default's U/8 from 2,048 to 4,096 (one record per size and set)")
    parser.add_argument("--pass-dtype", nargs="+", choices=("float32", "float64"), default=[VMCConfig().pass_dtype],
                        help="precisions of the network passes over a subsampled set (one record per precision)")
    args = parser.parse_args(argv)
    if args.quick:
        args.chain, args.spacing, args.sizes, args.exact, args.repeats = (QUICK[k] for k in
                                                                          ("chain", "spacing", "sizes", "exact", "repeats"))
    torch.set_num_threads(args.threads)
    cfg = VMCConfig(steps=STEPS, core_every=10**9, core_samples=1, threads=args.threads)  # no re-selection inside the timing
    if args.quick:
        cfg = dataclasses.replace(cfg, sr_rows=QUICK["sr_rows"], sr_exact_max=QUICK["sr_rows"])
    mol = build_hamiltonian(chain_spec(args.chain, args.spacing))
    wf = make_wavefunction(mol, cfg)
    ham = CompactHamiltonian.from_molecular(mol, wf.device)
    sci = selected_ci(ham, wf.hf_config().unsqueeze(0), 1e-6, max(args.sizes))
    records = []
    for u, rows, dtype in ((u, r, d) for u in args.sizes for r in args.sr_rows for d in args.pass_dtype):
        if u > len(sci.configs):
            break
        core = sci.configs[:u]
        cfg = dataclasses.replace(cfg, pass_dtype=dtype, **({} if args.quick else {"sr_rows": rows}))
        record = {"benchmark": "step_cost", "system": mol.description, "working_set": u, "sr_rows": cfg.sr_rows,
                  "rows": cfg.subsample_size(u) if cfg.subsampled(u) else u,
                  "sr_exact_max": cfg.sr_exact_max, "pass_dtype": dtype,
                  **time_steps(wf, ham, cfg, core, args.repeats)}
        record["seconds_per_configuration"] = record["t_step"] / record["unique"]
        if u in args.exact:
            exact = time_steps(wf, ham, dataclasses.replace(cfg, sr_exact_max=u), core, 1)
            record.update({f"exact_{k}": v for k, v in exact.items() if k != "unique"})
        record.update({"peak_rss_mb": peak_rss_mb(), "threads": args.threads, **software()})
        emit(record, args.out)
        records.append(record)
    for rows, dtype in sorted({(r["sr_rows"], r["pass_dtype"]) for r in records}):  # one fit per rows and precision
        mine = [r for r in records if (r["sr_rows"], r["pass_dtype"]) == (rows, dtype)]
        sampled = [r for r in mine if r["unique"] > cfg.sr_exact_max]  # the subsampled step's regime
        fitted = sampled if len(sampled) >= 2 else mine
        if len(fitted) >= 2:
            emit({"benchmark": "step_cost_fit", "system": mol.description, "sr_rows": rows, "pass_dtype": dtype,
                  "exponent": exponent(fitted), "sizes": [r["unique"] for r in fitted]}, args.out)
    return 0


def exponent(records: list[dict]) -> float:
    """Least-squares slope p of log t_step against log U over ``records``."""
    x = torch.tensor([math.log(r["unique"]) for r in records], dtype=torch.float64)
    y = torch.tensor([math.log(r["t_step"]) for r in records], dtype=torch.float64)
    return float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


if __name__ == "__main__":
    raise SystemExit(main())
