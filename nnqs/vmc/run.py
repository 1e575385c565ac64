"""One VMC run on a molecule, end to end: references, model, loop, files.

Used by ``nnqs vmc`` and the examples. Writes into its run folder
(:mod:`nnqs.common.runfolder`: one run per folder, locked while it runs):
``config.toml``, ``hamiltonian.npz`` (the integrals, which a resumed run works in), ``history.csv``
(one row per step, fsynced each step), ``checkpoint.pt`` (every ``checkpoint_every`` steps, every
``checkpoint_seconds`` seconds, at the end and on SIGINT/SIGTERM), ``result.json`` and ``energy.png``;
``events.log`` if a non-finite step was rolled back (:mod:`nnqs.common.guard`).
"""
from __future__ import annotations

import csv
from collections.abc import Collection
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hamiltonians import InputError, MolecularHamiltonian, MoleculeSpec, exact_references
from hamiltonians.sector import sector_dim
from nnqs.common.atomic import atomic_write_bytes, atomic_write_text
from nnqs.common.checkpoint import load_checkpoint
from nnqs.common.config import apply_threads, config_to_toml
from nnqs.common.console import note
from nnqs.common.distributed import Communicator, SingleProcess
from nnqs.common.errors import UserError
from nnqs.common.guard import DivergenceGuard, event_logger
from nnqs.common.history import HistoryWriter, new_history, resume_history
from nnqs.common.interrupt import StopSignal
from nnqs.common.loop import Checkpointer, restore_state
from nnqs.common.progress import Progress
from nnqs.common.resume import resume_checkpoint, resume_config
from nnqs.common.runfolder import RunFolder, claim
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.hamiltonian_file import FILE as HAMILTONIAN_FILE, load_hamiltonian, save_hamiltonian
from nnqs.vmc.orbitals import hamiltonian_for
from nnqs.vmc.vmc_loop import HISTORY_FIELDS, HISTORY_FLOAT_FORMAT, KIND, history_row, new_state, vmc_steps, save_state
from nnqs.vmc.plots import plot_energy
from nnqs.vmc.pretrain import fit_steps, fit_to_vector, pretrain_phase
from nnqs.vmc.properties import plot_occupations, run_properties, sampled_properties
from nnqs.vmc.sci import SelectedCI, selected_ci
from nnqs.vmc.pretrain_store import FILE as PRETRAIN_FILE, PretrainStore
from nnqs.vmc.selection import core_energies
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.estimates import final_energy, final_unique_max
from nnqs.vmc.wavefunction import TransformerWavefunction, hf_bias_for

# Options a resumed run may change (applied and recorded in config.toml); all others are fixed.
# They say where and how fast a run goes, not what it computes.
MUTABLE = ("steps", "threads", "checkpoint_every", "checkpoint_seconds", "max_batch", "final_samples", "device")


def system_identity(ham: MolecularHamiltonian) -> dict:
    """What a checkpoint must match: sizes and a fingerprint of the integrals."""
    digest = hashlib.sha256(np.round(ham.h1e, 8).tobytes() + np.round(ham.eri, 8).tobytes()).hexdigest()[:16]
    return {"description": ham.description, "n_orbitals": ham.n_orbitals, "n_alpha": ham.n_alpha,
            "n_beta": ham.n_beta, "integrals": digest}


def references_for(spec: MoleculeSpec, exact: bool = True) -> dict:
    """HF, CCSD(T) and exact energies where they can be had; exact is None when too large for FCI
    (HF and CCSD(T) are still computed)."""
    if not exact:
        return {"e_hf": None, "e_ccsd_t": None, "e_exact": None}
    try:
        refs = exact_references(spec, method="fci")
    except InputError as exc:
        if "too large" not in str(exc):
            raise
        refs = exact_references(spec, method="none")
    return {"e_hf": refs.e_hf, "e_ccsd_t": refs.e_ccsd_t, "e_exact": refs.e_exact}


def make_wavefunction(ham: MolecularHamiltonian, cfg: VMCConfig) -> TransformerWavefunction:
    """The network of ``cfg`` for ``ham``, initialised from ``cfg.seed`` (torch's global generator is
    forked for the initialisation and left as it was)."""
    dtype = torch.float64 if cfg.dtype == "float64" else torch.float32
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return TransformerWavefunction(
            ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=cfg.d_model, n_layers=cfg.n_layers,
            n_heads=cfg.n_heads, phase_hidden=cfg.phase_hidden, real=cfg.ansatz == "real", dtype=dtype,
            device=cfg.device, hf_bias=hf_bias_for(ham.n_orbitals, ham.n_alpha, ham.n_beta, cfg.hf_prob),
        )


def open_folder(out_dir: str | Path, resume: bool, overwrite: bool) -> RunFolder:
    """Claim ``out_dir`` for a new, replacing or resumed run (:func:`nnqs.common.runfolder.claim`)."""
    return claim(out_dir, "resume" if resume else "overwrite" if overwrite else "new")


def reconcile(folder: RunFolder, cfg: VMCConfig, given: Collection[str] | None) -> tuple[VMCConfig, list[str]]:
    """The config of a resumed run: its saved one, with the ``given`` fields of ``cfg`` applied where
    they may change (all fields when None; :func:`nnqs.common.resume.resume_config`), and the changes."""
    keys = [f.name for f in dataclasses.fields(VMCConfig)] if given is None else given
    return resume_config(VMCConfig, folder, KIND, cfg, keys, MUTABLE)


def run_molecule(
    spec: MoleculeSpec, cfg: VMCConfig, out_dir: str | Path | RunFolder, *, resume: bool = False,
    overwrite: bool = False, init_model: dict | None = None, progress: bool = True, exact: bool = True,
    init_core: torch.Tensor | None = None, integrals: tuple[MolecularHamiltonian, dict] | None = None,
    comm: Communicator | None = None, stop: StopSignal | None = None, given: Collection[str] | None = None,
) -> dict:
    """Run VMC on ``spec``; return (and write) the result dict. ``init_model`` warm-starts (the
    network's weights; ``init_core``, the core ``(M, n)`` it starts from, else Hartree-Fock; ``integrals``,
    the Hamiltonian and orbital record it was trained in, e.g. another run's, :func:`run_hamiltonian`).

    ``out_dir``: a folder claimed by the caller (:func:`nnqs.common.runfolder.claim`), or a
    path this function claims (a folder holding a run is refused unless ``resume`` or
    ``overwrite``). ``stop`` (:class:`~nnqs.common.interrupt.StopSignal`) ends the loop at a
    step boundary after a checkpoint. With a communicator over several ranks
    (:mod:`nnqs.common.distributed`) every rank runs the same steps on its share of the
    samples; rank 0 alone computes the references and writes the files, progress and
    checkpoints (all ranks read the checkpoint on ``resume``). On ``resume`` the run's saved
    config is reconciled here, once, with the fields of ``cfg`` named in ``given`` (the options a
    user set; all of them when None): a change to a fixed setting is refused in one line.
    """
    comm = comm or SingleProcess(cfg.device)
    apply_threads(cfg.threads)
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("device cuda requested but CUDA is not available")
    owned = comm.is_root and not isinstance(out_dir, RunFolder)
    if owned:
        folder = open_folder(out_dir, resume, overwrite)
    else:
        folder = out_dir if isinstance(out_dir, RunFolder) else RunFolder(Path(out_dir), None)
    try:
        cfg, changes = reconcile(folder, cfg, given) if resume else (cfg, [])
        return _solve(spec, cfg, folder, resume, (init_model, init_core, integrals), progress, exact, comm, stop,
                      changes)
    finally:
        if owned:
            folder.release()


def _solve(spec, cfg: VMCConfig, folder: RunFolder, resume: bool, warm: tuple, progress: bool, exact: bool,
         comm: Communicator, stop: StopSignal | None, changes: list[str]) -> dict:
    start = time.perf_counter()
    if comm.is_root and not resume:
        atomic_write_text(folder.config, config_to_toml(cfg))
    init_model, init_core, integrals = warm
    ham, orbitals = run_hamiltonian(folder.path, spec, cfg, resume, progress, comm, integrals)
    if cfg.steps is None:  # what the system sets, saved for a resume
        cfg = cfg.for_system(2 * ham.n_orbitals)
        if comm.is_root:
            atomic_write_text(folder.config, config_to_toml(cfg))
    refs = references_for(spec, exact and comm.is_root)
    wf = make_wavefunction(ham, cfg)
    if init_model is not None:
        wf.load_state_dict(init_model)
    state, system = new_state(wf, cfg, comm), system_identity(ham)
    data = _resumed(folder, cfg, state, system, changes, comm) if resume else None
    compact = CompactHamiltonian.from_molecular(ham, wf.device)
    teacher = {}
    if init_model is None and data is None:
        store = PretrainStore(folder.path / PRETRAIN_FILE, {"system": system, "config": _fixed_settings(cfg)},
                              cfg.checkpoint_seconds, write=comm.is_root)
        teacher = pretrain(wf, compact, cfg, progress and comm.is_root, comm, store if resume else None, store)
    seed = teacher.pop("configs", None)
    if seed is None and init_core is not None and init_model is not None:
        seed = init_core.to(wf.device)
    if cfg.selection == "core" and state.core is None:
        state.core = seed if seed is not None else wf.hf_config().unsqueeze(0)
    guard = _optimise(state, compact, cfg, folder, resume, data, system, refs, progress, stop)
    result = _finish(wf, ham, compact, spec, state, cfg, refs, progress, comm, folder)
    result.update(orbitals)
    result.update(teacher)
    result.update(wall_s=time.perf_counter() - start, peak_rss_mb=peak_rss_mb(), rollbacks=guard.events)
    if comm.is_root:
        atomic_write_text(folder.path / "result.json", json.dumps(result, indent=2) + "\n")
        _plot(folder.path, ham, refs)
    return result


def run_hamiltonian(folder: Path, spec: MoleculeSpec, cfg: VMCConfig, resume: bool, progress: bool,
                    comm: Communicator, given: tuple[MolecularHamiltonian, dict] | None = None,
                    ) -> tuple[MolecularHamiltonian, dict]:
    """The integrals of the run in ``folder`` and the record of its orbitals: on ``resume``, those the run
    saved (:mod:`nnqs.vmc.hamiltonian_file`); else ``given`` or built from ``spec`` (:func:`hamiltonian_for`),
    and saved by a new run (a resumed run from before the file is checked against its checkpoint, and saves
    nothing)."""
    path = folder / HAMILTONIAN_FILE
    if resume and path.is_file():
        return load_hamiltonian(path, spec)
    if given is not None and not resume:
        ham, orbitals = given
    else:
        ham, orbitals = hamiltonian_for(spec, cfg.orbitals, cfg.teacher_threshold, progress and comm.is_root)
    if comm.is_root and not resume:
        save_hamiltonian(path, spec, ham, orbitals)
    return ham, orbitals


def _resumed(folder: RunFolder, cfg: VMCConfig, state, system: dict, changes: list[str], comm) -> dict | None:
    """The checkpoint of a resumed run, restored into ``state`` (None when there is none yet)."""
    data = resume_checkpoint(folder, KIND, cfg, MUTABLE, expect={"system": system}, changes=changes,
                             map_location=state.wf.device, quiet=not comm.is_root)
    if data is not None and not restore_state(data, state, folder.checkpoint) and comm.is_root:
        note(f"the checkpoint's sampler stream is of another device than {cfg.device}: sampling goes on "
             "from a new stream seeded by it (the run continues; its samples differ from an unmoved run's)")
    return data


def _optimise(state, compact: CompactHamiltonian, cfg: VMCConfig, folder: RunFolder, resume: bool, data,
              system: dict, refs: dict, progress: bool, stop: StopSignal | None) -> DivergenceGuard:
    """The VMC loop with its history, checkpoints and progress (rank 0 writes); the guard it ran under."""
    history, callbacks, save = None, [], None
    if state.comm.is_root:
        if resume:  # after the checks: a refused resume leaves config.toml as it was
            atomic_write_text(folder.config, config_to_toml(cfg))
        history = _open_history(folder, data)
        callbacks, save = _callbacks(folder, history, cfg, system, refs["e_exact"], state.step, progress)
    guard = DivergenceGuard(log=event_logger(folder.path / "events.log") if state.comm.is_root else None,
                            checkpoint=folder.checkpoint)
    try:
        vmc_steps(state, compact, cfg, callbacks, guard, stop, save)
    finally:
        if history is not None:
            history.close()
    return guard


def _finish(wf, ham, compact: CompactHamiltonian, spec, state, cfg: VMCConfig, refs: dict, progress: bool, comm,
            folder: RunFolder) -> dict:
    """The reported energy from fresh samples, the side numbers and the properties of the final state."""
    if progress and comm.is_root:
        print(f"final energy: {cfg.final_samples:.0e} fresh samples, exact local energy of at most "
              f"{final_unique_max(compact)} unique configurations", file=sys.stderr, flush=True)
    final = final_energy(wf, compact, cfg.final_samples, state.generator, cfg.max_batch, comm,
                         connected_dtype=cfg.connected_dtype)
    if not np.isfinite(final.energy):
        raise UserError(f"the network's final energy is not finite: the run diverged (try a smaller --lr); "
                        f"its history and checkpoint are in {folder.path}")
    result = _result(ham, refs, final, cfg, wf, 0.0)
    if state.core is not None and comm.is_root:
        result.update(core_energies(wf, compact, state.core, cfg.max_batch, state.core_ham))
        _write_properties(folder.path, result, wf, ham, spec, state, cfg)
    return result


def _write_properties(out: Path, result: dict, wf, ham, spec, state, cfg: VMCConfig) -> None:
    """The network's 1-RDM properties on its core (FCI's beside them where it fits) into ``result``,
    ``rdm1.npy`` and ``natural_occupations.png``; where the core is not the whole sector, the whole
    state's sampled 1-RDM too (``properties_sampled``, ``rdm1_sampled.npy``, ``rdm1_stderr.npy``)."""
    mine, rdm1, fci = run_properties(wf, ham, spec, state.core, cfg.max_batch)
    result["properties"], result["fci_properties"] = mine, fci
    sampled = None
    if len(state.core) < sector_dim(ham.n_orbitals, ham.n_alpha, ham.n_beta):
        result["properties_sampled"], est = sampled_properties(wf, ham, spec, state.core, cfg.final_samples,
                                                               state.generator, max_batch=cfg.max_batch)
        atomic_write_bytes(out / "rdm1_sampled.npy", lambda fh: np.save(fh, est.rdm1))
        atomic_write_bytes(out / "rdm1_stderr.npy", lambda fh: np.save(fh, est.stderr))
        sampled = result["properties_sampled"]["natural_occupations"]
    if rdm1 is not None:
        atomic_write_bytes(out / "rdm1.npy", lambda fh: np.save(fh, rdm1))
        plot_occupations(out / "natural_occupations.png", mine["natural_occupations"],
                         None if fci is None else fci["natural_occupations"], ham.description, sampled)


def peak_rss_mb() -> float:
    """The process's peak resident memory so far (MiB; ``ru_maxrss``, KiB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _fixed_settings(cfg: VMCConfig) -> dict:
    """The settings a resumed run cannot change (what its pretraining state must have been made with)."""
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in MUTABLE}


def pretrain(wf, ham: CompactHamiltonian, cfg: VMCConfig, progress: bool, comm=None,
             found: PretrainStore | None = None, store: PretrainStore | None = None) -> dict:
    """Teacher "sci": grow a selected-CI vector from HF and fit the network's modulus and sign to it
    (its configurations seed the core; the fit is split over the ranks of ``comm``); teacher "mp1":
    perturbative signs for the phase head. Returns what the result should record (``configs``:
    the teacher's set, popped by the caller). ``found``: the store of a resumed run, whose teacher
    and fit state are taken up; ``store``: where this run's are written."""
    if cfg.teacher == "mp1":
        if cfg.phase_pretrain:
            pretrain_phase(wf, ham, cfg.phase_pretrain)
        return {}
    t0 = time.perf_counter()
    saved = found.load() if found is not None else {}
    sci = _teacher(ham, wf, cfg, progress, saved.get("teacher"), store, t0)
    steps = fit_steps(cfg.pretrain_steps, len(sci.configs), 2 * ham.n_orbitals)
    bar = Progress(steps, int(saved.get("fit", {}).get("step", 0))) if progress and steps else None
    if bar is not None:
        print(f"pretraining on a selected-CI vector of {len(sci.configs)} configurations "
              f"(E = {sci.energy:.8f} Ha, {sci.rounds} rounds), {steps} steps", file=sys.stderr, flush=True)
    offer = None if store is None else lambda state: store.offer_fit(state, state["step"] == steps)
    fit_to_vector(wf, sci.configs, sci.coefficients.to(wf.device), steps, cfg.pretrain_lr,
                  None if bar is None else lambda step, loss: bar.update(step + 1, f"fit loss {loss:.4f}"), comm,
                  getattr(torch, cfg.pretrain_dtype), batch=cfg.pretrain_batch, seed=cfg.seed, start=saved.get("fit"),
                  save=offer, decay=cfg.pretrain_decay, by_modulus=cfg.pretrain_draw == "modulus",
                  lr_sampled=cfg.pretrain_lr_sampled)
    return {"configs": sci.configs, "e_teacher_sci": sci.energy, "n_teacher": len(sci.configs),
            "pretrain_s": time.perf_counter() - t0}


def _teacher(ham: CompactHamiltonian, wf, cfg: VMCConfig, progress: bool, saved: dict | None,
             store: PretrainStore | None, t0: float) -> SelectedCI:
    """The selected-CI teacher: the one a resumed run saved, or grown now (and saved)."""
    if saved is not None:
        return SelectedCI(saved["configs"].to(wf.device), saved["coefficients"].to(wf.device), float(saved["energy"]),
                          int(saved["rounds"]))

    def on_round(rounds: int, size: int, energy: float) -> None:
        print(f"teacher: round {rounds}, {size} configurations, E = {energy:.8f} Ha, "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    sci = selected_ci(ham, wf.hf_config().unsqueeze(0), cfg.teacher_threshold, cfg.teacher_max,
                      on_round=on_round if progress else None)
    if store is not None:
        store.save_teacher({"configs": sci.configs.cpu(), "coefficients": sci.coefficients.cpu(), "energy": sci.energy,
                            "rounds": sci.rounds})
    return sci


def _open_history(folder: RunFolder, data: dict | None) -> HistoryWriter:
    if data is None:
        return new_history(folder.history, HISTORY_FIELDS, HISTORY_FLOAT_FORMAT)
    return resume_history(folder.history, data["history"], HISTORY_FIELDS, HISTORY_FLOAT_FORMAT)


def _callbacks(folder: RunFolder, history: HistoryWriter, cfg: VMCConfig, system: dict, e_exact: float | None,
               initial: int, progress: bool) -> tuple[list, object]:
    """History row, checkpoint and progress line after each step; and the save used on a signal."""
    checkpointer = Checkpointer(lambda s: save_state(folder.checkpoint, s, cfg, system, history.state()),
                                cfg.checkpoint_every, cfg.checkpoint_seconds, cfg.steps)
    callbacks = [lambda result, state: history.append(history_row(result, e_exact)), checkpointer]
    if progress:
        bar = Progress(cfg.steps, initial)
        callbacks.append(lambda result, state: bar.update(state.step, progress_postfix(result, e_exact)))
    return callbacks, checkpointer.save_now


def progress_postfix(result, e_exact: float | None) -> str:
    """The VMC measures shown after the progress bar."""
    err = "" if e_exact is None else f" err {1000 * (result.energy - e_exact):+.3f} mHa"
    return f"E {result.energy:.6f}{err} var {result.variance:.2e} uniq {result.n_unique}"


def _result(ham, refs: dict, final, cfg: VMCConfig, wf, wall: float) -> dict:
    e_exact = refs["e_exact"]
    return {
        "system": ham.description, "n_orbitals": ham.n_orbitals, "n_qubits": 2 * ham.n_orbitals,
        "n_alpha": ham.n_alpha, "n_beta": ham.n_beta,
        "energy": final.energy, "energy_stderr": final.stderr, "energy_variance": final.variance,
        "e_exact": e_exact, "error_mha": None if e_exact is None else 1000 * (final.energy - e_exact),
        "e_hf": refs["e_hf"], "e_ccsd_t": refs["e_ccsd_t"], "steps": cfg.steps,
        "final_samples": cfg.final_samples, "final_unique": final.n_unique,
        "wall_s": wall, "n_parameters": sum(p.numel() for p in wf.parameters()),
    }


def load_model_state(out_dir: str | Path) -> dict:
    """The model weights of the run saved in ``out_dir`` (for warm starts)."""
    return load_checkpoint(Path(out_dir) / "checkpoint.pt", KIND)["model"]


def _plot(out: Path, ham, refs: dict) -> None:
    with open(out / "history.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    steps = [int(r["step"]) for r in rows]
    energies = [float(r["energy"]) for r in rows]
    plot_energy(out / "energy.png", steps, energies, refs["e_hf"], refs["e_ccsd_t"], refs["e_exact"], ham.description)
