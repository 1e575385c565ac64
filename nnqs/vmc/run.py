"""One VMC run on a molecule, end to end: references, model, loop, files.

Used by ``nnqs vmc`` and the examples. Writes into ``out_dir``:
``config.toml``, ``history.csv`` (one row per step, flushed each step),
``checkpoint.pt``, ``result.json`` and ``energy.png``; ``events.log`` if a
non-finite step was rolled back (:mod:`nnqs.common.guard`).
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from hamiltonians import InputError, MolecularHamiltonian, MoleculeSpec, build_hamiltonian, exact_references
from nnqs.common.callbacks import HistoryCSV, Progress
from nnqs.common.checkpoint import atomic_write_text
from nnqs.common.config import config_to_toml
from nnqs.common.distributed import SingleProcess
from nnqs.vmc.driver import Checkpointer, load_state, new_state, run_vmc
from nnqs.common.errors import UserError
from nnqs.common.guard import DivergenceGuard, event_logger
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.plots import plot_energy
from nnqs.vmc.pretrain import pretrain_phase
from nnqs.vmc.step import VMCConfig, final_energy
from nnqs.vmc.wavefunction import TransformerWavefunction, hf_bias_for


def system_identity(ham: MolecularHamiltonian) -> dict:
    """What a checkpoint must match: sizes and a fingerprint of the integrals."""
    digest = hashlib.sha256(np.round(ham.h1e, 8).tobytes() + np.round(ham.eri, 8).tobytes()).hexdigest()[:16]
    return {"description": ham.description, "n_orbitals": ham.n_orbitals, "n_alpha": ham.n_alpha,
            "n_beta": ham.n_beta, "integrals": digest}


def references_for(spec: MoleculeSpec, exact: bool = True) -> dict:
    """HF, CCSD(T) and exact energies where they can be had; exact is None when too large."""
    if not exact:
        return {"e_hf": None, "e_ccsd_t": None, "e_exact": None}
    try:
        refs = exact_references(spec, method="fci")
    except InputError as exc:
        if "too large" not in str(exc):
            raise
        return {"e_hf": None, "e_ccsd_t": None, "e_exact": None}
    return {"e_hf": refs.e_hf, "e_ccsd_t": refs.e_ccsd_t, "e_exact": refs.e_exact}


def prepare_out_dir(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"output folder {out} is not writable ({exc.strerror or exc})") from None
    return out


def make_wavefunction(ham: MolecularHamiltonian, cfg: VMCConfig) -> TransformerWavefunction:
    dtype = torch.float64 if cfg.dtype == "float64" else torch.float32
    torch.manual_seed(cfg.seed)
    return TransformerWavefunction(
        ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=cfg.d_model, n_layers=cfg.n_layers,
        n_heads=cfg.n_heads, phase_hidden=cfg.phase_hidden, dtype=dtype, device=cfg.device,
        hf_bias=hf_bias_for(ham.n_orbitals, ham.n_alpha, ham.n_beta, cfg.hf_prob),
    )


def run_molecule(
    spec: MoleculeSpec, cfg: VMCConfig, out_dir: str | Path, *, resume: bool = False,
    init_model: dict | None = None, progress: bool = True, exact: bool = True, comm: SingleProcess | None = None,
) -> dict:
    """Run VMC on ``spec``; return (and write) the result dict. ``init_model`` warm-starts.

    With a communicator over several ranks (:mod:`nnqs.common.distributed`) every rank runs the
    same steps on its share of the samples; rank 0 alone computes the references and writes
    the files, progress and checkpoints (all ranks read the checkpoint on ``resume``).
    """
    start = time.perf_counter()
    comm = comm or SingleProcess(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("device cuda requested but CUDA is not available")
    out = prepare_out_dir(out_dir) if comm.is_root else Path(out_dir)
    ham = build_hamiltonian(spec)
    refs = references_for(spec, exact and comm.is_root)
    wf = make_wavefunction(ham, cfg)
    if init_model is not None:
        wf.load_state_dict(init_model)
    state = new_state(wf, cfg, comm)
    system = system_identity(ham)
    ckpt = out / "checkpoint.pt"
    if resume:
        load_state(ckpt, state, system)
    compact = CompactHamiltonian.from_molecular(ham, wf.device)
    if cfg.phase_pretrain and init_model is None and not resume:
        pretrain_phase(wf, compact, cfg.phase_pretrain)
    history, callbacks = None, []
    if comm.is_root:
        atomic_write_text(out / "config.toml", config_to_toml(cfg))
        history = HistoryCSV(out / "history.csv", refs["e_exact"], append=resume, keep_below=state.step)
        callbacks = [history, Checkpointer(ckpt, cfg, system)]
        if progress:
            callbacks.insert(0, Progress(cfg.steps, refs["e_exact"]))
    guard = DivergenceGuard(log=event_logger(out / "events.log") if comm.is_root else None, checkpoint=ckpt)
    try:
        run_vmc(state, compact, cfg, callbacks, guard)
    finally:
        if history is not None:
            history.close()
    final = final_energy(wf, compact, cfg.final_samples, state.generator, cfg.max_batch, comm)
    result = _result(ham, refs, final, cfg, wf, time.perf_counter() - start)
    result["rollbacks"] = guard.events
    if comm.is_root:
        atomic_write_text(out / "result.json", json.dumps(result, indent=2) + "\n")
        _plot(out, ham, refs)
    return result


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
    from nnqs.common.checkpoint import load_checkpoint

    return load_checkpoint(Path(out_dir) / "checkpoint.pt", "vmc")["model"]


def _plot(out: Path, ham, refs: dict) -> None:
    import csv

    with open(out / "history.csv") as fh:
        rows = list(csv.DictReader(fh))
    steps = [int(r["step"]) for r in rows]
    energies = [float(r["energy"]) for r in rows]
    plot_energy(out / "energy.png", steps, energies, refs["e_hf"], refs["e_ccsd_t"], refs["e_exact"], ham.description)
