"""Core mode over 2 gloo processes: the working set's amplitudes and the core re-selection are
split over the ranks (each evaluates its share of the external space) and gathered, giving the
single-process core, energies and parameters."""
import faulthandler
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hamiltonians import build_hamiltonian, get_spec
from nnqs.common.distributed import SingleProcess, TorchDistributed
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.driver import new_state, run_vmc
from nnqs.vmc.selection import select_core
from nnqs.vmc.step import VMCConfig
from nnqs.vmc.wavefunction import TransformerWavefunction


def tiny_wf(ham) -> TransformerWavefunction:
    torch.manual_seed(0)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=8, n_layers=1, n_heads=2,
                                 phase_hidden=8, hf_bias=0.5, dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return wf


def core_numbers(comm) -> dict:
    """One re-selection from a sampled set, and a 4-step core-mode run re-selecting every step."""
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    wf = tiny_wf(ham)
    configs = wf.sample(10**4, generator=torch.Generator().manual_seed(1))[0][:16]  # a set with a wide outside
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    chosen = select_core(wf.log_psi, compact, configs, log_psi, 1e-3, 10**4, energy=-7.8, comm=comm)
    cfg = VMCConfig(steps=4, selection="core", core_every=1, core_samples=64, optimizer="sr", lr=0.01, warmup=1)
    state = new_state(tiny_wf(ham), cfg, comm)
    results = run_vmc(state, compact, cfg)
    return {"selected": chosen.configs, "n_evaluated": chosen.n_evaluated,
            "run": torch.tensor([[r.energy, r.n_unique] for r in results], dtype=torch.float64),
            "params": torch.cat([p.detach().reshape(-1) for p in state.wf.parameters()])}


def worker(rank: int, world: int, port: int, out_dir: str) -> None:
    faulthandler.enable()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    comm = TorchDistributed()
    try:
        torch.save(core_numbers(comm), Path(out_dir) / f"rank{rank}.pt")
    finally:
        comm.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_core_mode_on_two_ranks_equals_one_process(tmp_path):
    mp.spawn(worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = core_numbers(SingleProcess())
    assert single["n_evaluated"] > 20 and len(single["selected"]) > 10
    for rank in ranks:
        assert torch.equal(rank["selected"], single["selected"]) and rank["n_evaluated"] == single["n_evaluated"]
        torch.testing.assert_close(rank["run"], single["run"], atol=1e-10, rtol=1e-9)
        torch.testing.assert_close(rank["params"], single["params"], atol=1e-10, rtol=1e-9)
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])  # the ranks hold the same bits
