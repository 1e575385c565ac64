"""`nnqs vmc SPEC ...`: a VMC run compared with exact diagonalization.

Under ``torchrun --nproc_per_node K -m nnqs vmc ...`` the run is shared by K
processes (:mod:`nnqs.common.distributed`); rank 0 alone writes and prints.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import replace
from pathlib import Path

from hamiltonians import InputError
from nnqs.cli.molecule_args import add_molecule_arguments, molecule_given, save_molecule, saved_molecule, spec_from_args
from nnqs.cli.run_options import add_run_arguments, run_mode, signals_for
from nnqs.common.config import build_config
from nnqs.vmc.config import STEPS, WIDE_STEPS, VMCConfig
from nnqs.vmc.pretrain import WIDE_QUBITS

# CLI flag -> VMCConfig field (flags left out keep the TOML or default value). The help says what a
# flag means; its default is read from VMCConfig (:func:`help_text`), the one home of the settings.
FLAGS = {
    "steps": (int, "VMC steps (at 32 qubits and more the teacher fit is longer instead)"),
    "samples": (int, "samples drawn per step; only unique ones cost (adapts)"),
    "seed": (int, "seed of the model init and the sampler"),
    "optimizer": (str, "sr (natural gradient) or adamw"),
    "lr": (float, "peak learning rate"),
    "sr_shift": (float, "SR diagonal shift relative to the mean diagonal"),
    "sr_momentum": (float, "SPRING momentum of the SR direction, in [0, 1) (0: plain minSR)"),
    "grad_clip": (float, "largest norm of the applied direction"),
    "grad_clip_sampled": (float, "largest norm of the applied direction where the SR step is subsampled"),
    "grad_clip_rule": (str, "fixed (--grad-clip-sampled at every subsample size) or rows (it is the clip of 2,048 "
                            "rows and grows with the subsample's rows)"),
    "sr_momentum_schedule": (str, "ramp (the momentum rises from 0 as the learning rate decays) or constant"),
    "sr_exact_max": (int, "the SR step keeps every row of a working set up to this size: exact minSR"),
    "sr_rows": (int, "above it, the SR step is taken on a subsample of this expected size (0: U/8, 2,048 to 4,096)"),
    "selection": (str, "core (a selected core + fresh samples) or samples (plain sampled VMC)"),
    "core_threshold": (float, "|psi|/max|psi| that keeps a configuration in the core"),
    "core_max": (int, "most configurations in the core"),
    "teacher": (str, "sci (fit to a selected-CI vector first) or mp1 (perturbative signs only)"),
    "teacher_threshold": (float, "--teacher sci only: first-order amplitude that admits a configuration"),
    "teacher_max": (int, "--teacher sci only: most configurations in the selected-CI teacher"),
    "pretrain_steps": (int, "--teacher sci only: Adam steps fitting a teacher vector of up to 4,096 configurations; "
                            "one of N more takes 2 sqrt(N / 4,096) times as many, at most 6x; at 32 qubits and more 17 sqrt(N / "
                            "4,096), at most 57x (0: off)"),
    "pretrain_lr": (float, "--teacher sci only: Adam learning rate of the teacher fit"),
    "pretrain_dtype": (str, "--teacher sci only: precision of the teacher fit, float32 or float64"),
    "pretrain_batch": (int, "--teacher sci only: rows per Adam step of the fit to a teacher of more than 4,096 "
                            "configurations (smaller ones enter whole)"),
    "pretrain_draw": (str, "--teacher sci only: a minibatch fit draws its cross-entropy rows by |c| (modulus, "
                           "reweighted) or by |c|^2 (weight)"),
    "pretrain_lr_sampled": (float, "--teacher sci only: peak Adam learning rate of a minibatch fit"),
    "pretrain_decay": (float, "--teacher sci only: a minibatch fit's learning rate falls along a cosine to this "
                              "fraction of its peak (1: constant)"),
    "unique_max": (int, "--selection samples: redraw with fewer samples above this many unique ones"),
    "d_model": (int, "Transformer width"),
    "n_layers": (int, "Transformer blocks"),
    "n_heads": (int, "attention heads"),
    "orbitals": (str, "auto (localized where a selected-CI set of 1,024 is lower in them by 1.6 mHa), "
                      "canonical or localized (Boys, within the occupied and the virtual blocks)"),
    "ansatz": (str, "real (sqrt(P) cos(phase)) or complex (sqrt(P) exp(i phase))"),
    "phase_pretrain": (int, "--teacher mp1 only: steps fitting the phase to perturbative signs (0: off)"),
    "dtype": (str, "float64 or float32 network"),
    "device": (str, "cpu or cuda"),
    "estimator": (str, "--selection samples only: the training local energy, exact, sample-space or heat-bath"),
    "connected_dtype": (str, "precision of the network passes over the connected configurations of the local "
                             "energy: float32 (ratios and sums stay float64) or float64"),
    "pass_dtype": (str, "precision of the network passes over a working set whose SR step is subsampled (its log "
                        "psi, the rows' Jacobian): float32 (Gram matrices, solve and reported energy stay float64) "
                        "or float64"),
    "max_batch": (int, "configurations per network call in the local energy (memory knob)"),
    "final_samples": (int, "fresh samples for the reported energy"),
    "checkpoint_every": (int, "steps between checkpoints"),
    "checkpoint_seconds": (float, "seconds between checkpoints as well (0: off)"),
    "threads": (int, "CPU threads of torch, BLAS and OpenMP (PySCF) (0: every core)"),
}


# Fields whose default the run takes from its system (None in VMCConfig), as the help states it.
SYSTEM_DEFAULTS = {"steps": f"{STEPS}, or {WIDE_STEPS} at {WIDE_QUBITS} qubits and more"}


def help_text(name: str, text: str) -> str:
    """``text`` and the default of VMCConfig's field ``name``."""
    default = next(f.default for f in dataclasses.fields(VMCConfig) if f.name == name)
    if name in SYSTEM_DEFAULTS:
        return f"{text} (default {SYSTEM_DEFAULTS[name]})"
    shown = f"{default:.0e}" if isinstance(default, int) and default >= 10**6 else f"{default:g}" if isinstance(
        default, float) else str(default)
    return f"{text} (default {shown})"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vmc", help="optimise a Transformer wavefunction by VMC and compare with exact energies",
                       description="Variational Monte Carlo on a molecule; writes config.toml, history.csv, "
                                   "checkpoint.pt, result.json and energy.png into --out.")
    add_molecule_arguments(p)
    group = p.add_argument_group("run (override --config)")
    for name, (kind, text) in FLAGS.items():
        group.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=None, help=help_text(name, text))
    p.add_argument("--config", metavar="FILE.toml", help="run config (flags override it)")
    p.add_argument("--out", metavar="DIR", help="run folder (default runs/<system>); one run per folder")
    add_run_arguments(p)
    p.add_argument("--no-exact", action="store_true", help="skip HF/CCSD(T)/FCI references")
    p.set_defaults(func=vmc_command)


def vmc_command(args: argparse.Namespace) -> int:
    from nnqs.common.distributed import from_environment
    from nnqs.common.runfolder import RunFolder, claim

    overrides = {k: getattr(args, k) for k in FLAGS}
    cfg = build_config(VMCConfig, args.config, overrides)
    if args.resume and not molecule_given(args):  # the run folder names its molecule
        if args.out is None:
            raise InputError("--resume without molecule options needs --out, the run's folder")
        spec = saved_molecule(Path(args.out))
    else:
        spec = spec_from_args(args)
    out = args.out or f"runs/{(spec.name or 'system').replace('/', '_')}"
    comm = from_environment(cfg.device)  # one process unless launched by torchrun
    try:
        with claim(out, run_mode(args)) if comm.is_root else RunFolder(Path(out), None) as folder:
            with signals_for(out) as stop:
                result = _run_in(folder, spec, cfg, args, overrides, comm, stop)
    finally:
        comm.close()
    if not comm.is_root:
        return 0
    if args.json:
        print(json.dumps(result))
    else:
        print(summary(result, out))
    return 0


def _run_in(folder, spec, cfg: VMCConfig, args: argparse.Namespace, overrides: dict, comm, stop) -> dict:
    """Run in the claimed ``folder``; on --resume the run's config is reconciled (once, in
    :func:`nnqs.vmc.run.run_molecule`) with the options given here."""
    from nnqs.common.resume import given_keys
    from nnqs.vmc.run import run_molecule

    given = given_keys(args.config, overrides)
    if comm.is_root and not args.resume:  # what --resume alone reads back
        save_molecule(folder.path, spec)
    if comm.device != cfg.device:  # cuda:LOCAL_RANK under torchrun
        cfg, given = replace(cfg, device=comm.device), given | {"device"}
    return run_molecule(spec, cfg, folder, resume=args.resume, exact=not args.no_exact, comm=comm, stop=stop,
                        given=given, progress=not args.no_progress)


def summary(r: dict, out: str) -> str:
    """A short table of the final result against the references."""
    def fmt(v):
        return "       n/a" if v is None else f"{v:.8f}"

    lines = [
        f"{r['system']}: {r['n_orbitals']} orbitals, {r['n_qubits']} qubits, "
        f"{r['n_alpha']}a+{r['n_beta']}b electrons, {r['n_parameters']} parameters",
        f"  HF        {fmt(r['e_hf'])} Ha",
        f"  CCSD(T)   {fmt(r['e_ccsd_t'])} Ha",
        f"  VMC       {fmt(r['energy'])} Ha  +/- {1000 * r['energy_stderr']:.3f} mHa "
        f"({r['final_samples']:.0e} samples, {r['final_unique']} unique)",
        f"  exact     {fmt(r['e_exact'])} Ha",
    ]
    if r["error_mha"] is not None:
        ok = "within" if abs(r["error_mha"]) <= 1.6 else "outside"
        lines.append(f"  error     {r['error_mha']:+.3f} mHa ({ok} chemical accuracy)")
    peak = f", peak memory {r['peak_rss_mb'] / 1024:.2f} GB" if r.get("peak_rss_mb") else ""
    lines.append(f"  wall time {r['wall_s']:.1f} s{peak}; files in {out}/")
    return "\n".join(lines)
