"""VMC on a CUDA device against the CPU: one step's statistics, gradient and SR direction on the
same samples; the selected-CI teacher and a core selection; the sampler's frequencies against
|psi|^2 by full enumeration; the NCCL process
group (one process) against gloo on the CPU and against no group at all; a CLI run with
``--device cuda`` that resumes on the CPU. Skipped where torch sees no CUDA device (CI has none);
no PySCF needed (random integrals), so it runs on a bare GPU machine."""
import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hamiltonians import MolecularHamiltonian, write_fcidump
from nnqs.common.distributed import SingleProcess, TorchDistributed, init_process_group
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.vmc_loop import new_state, vmc_steps
from nnqs.vmc.sci import selected_ci
from nnqs.vmc.selection import select_core, subspace_energy, unique_union
from nnqs.vmc.sr import per_sample_jacobian, sr_direction
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.estimates import energy_and_loss
from nnqs.vmc.wavefunction import TransformerWavefunction
from tests_support import random_integrals, sector_tokens

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ROOT = Path(__file__).resolve().parents[2]
N, N_ALPHA, N_BETA = 5, 2, 2  # 100 configurations


def molecular() -> MolecularHamiltonian:
    h, g = random_integrals(N, seed=11)
    return MolecularHamiltonian(h, g, 1.5, N, N_ALPHA, N_BETA, "random integrals", None)


def tiny_wf(device: str) -> TransformerWavefunction:
    torch.manual_seed(0)
    wf = TransformerWavefunction(N, N_ALPHA, N_BETA, d_model=8, n_layers=1, n_heads=2, phase_hidden=8,
                                 hf_bias=0.5, dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.3 * torch.randn_like(p))  # away from the symmetric start: many unique samples
    return wf.to(device)


def step_numbers(device: str, comm, connected_dtype: str = "float64") -> dict:
    """Energy statistics, gradient and SR direction of one step on fixed samples (drawn on the CPU)."""
    wf_cpu = tiny_wf("cpu")
    configs, counts = wf_cpu.sample(10**5, generator=torch.Generator().manual_seed(1))
    wf = tiny_wf(device)
    ham = CompactHamiltonian.from_molecular(molecular(), device)
    configs, counts = configs.to(device), counts.to(device)
    wf.zero_grad(set_to_none=True)
    est, loss = energy_and_loss(wf, ham, configs, counts, "exact", comm=comm, connected_dtype=connected_dtype)
    loss.backward()
    comm.sum_gradients(wf.parameters())
    grad = torch.cat([p.grad.reshape(-1) for p in wf.parameters() if p.grad is not None])
    jac = per_sample_jacobian(wf, configs)
    direction = sr_direction(jac, est.local_energies, est.weights, est.energy, 1e-4, comm, split=False)
    return {"stats": [est.energy, est.variance, est.stderr], "grad": grad.cpu(), "sr": direction.cpu(),
            "local": est.local_energies.cpu(), "n_unique": len(counts)}  # fmt: skip


def assert_close(a: dict, b: dict, rel: float) -> None:
    assert a["n_unique"] == b["n_unique"] > 10
    assert a["stats"] == pytest.approx(b["stats"], rel=rel, abs=1e-12)
    for key in ("grad", "sr", "local"):
        torch.testing.assert_close(a[key], b[key], rtol=rel, atol=rel * float(b[key].abs().max()), msg=key)


def test_one_step_on_cuda_equals_the_cpu_step():
    cpu, gpu = step_numbers("cpu", SingleProcess("cpu")), step_numbers("cuda", SingleProcess("cuda"))
    assert_close(gpu, cpu, rel=1e-9)
    # the default float32 passes over the connected configurations: float32's accuracy
    f32 = step_numbers("cuda", SingleProcess("cuda"), connected_dtype="float32")
    assert f32["stats"][0] == pytest.approx(cpu["stats"][0], rel=1e-6)


def test_teacher_and_core_selection_on_cuda_equal_the_cpu():
    runs = {}
    for device in ("cpu", "cuda"):
        ham, wf = CompactHamiltonian.from_molecular(molecular(), device), tiny_wf(device)
        # grown to the whole sector: the set cannot depend on how a device orders equal amplitudes
        sci = selected_ci(ham, wf.hf_config().unsqueeze(0), 1e-12, 100)
        seed = unique_union(sci.configs)[::8]  # by key: the same 13 configurations on either device
        with torch.no_grad():
            chosen = select_core(wf.log_psi, ham, seed, wf.log_psi(seed), 1e-3, 60, energy=sci.energy)
        runs[device] = (sci, chosen.configs.cpu())
    (sci_cpu, core_cpu), (sci_gpu, core_gpu) = runs["cpu"], runs["cuda"]
    assert sci_gpu.coefficients.device.type == "cuda" and len(sci_cpu.configs) == len(sci_gpu.configs) == 100
    assert sci_gpu.energy == pytest.approx(sci_cpu.energy, abs=1e-10)
    # the same coefficients, row by row (rows of equal amplitude may come in another order)
    gpu_rows = {tuple(c): v for c, v in zip(sci_gpu.configs.tolist(), sci_gpu.coefficients.tolist())}
    cpu_rows = {tuple(c): v for c, v in zip(sci_cpu.configs.tolist(), sci_cpu.coefficients.tolist())}
    assert gpu_rows.keys() == cpu_rows.keys()
    assert all(gpu_rows[c] == pytest.approx(cpu_rows[c], abs=1e-9) for c in cpu_rows)
    assert sorted(map(tuple, core_gpu.tolist())) == sorted(map(tuple, core_cpu.tolist()))


def test_sampler_on_cuda_draws_psi_squared():
    wf = tiny_wf("cuda")
    n_samples = 10**6
    configs, counts = wf.sample(n_samples, generator=torch.Generator("cuda").manual_seed(3))
    assert configs.device.type == "cuda" and int(counts.sum()) == n_samples
    tokens = sector_tokens(N, N_ALPHA, N_BETA)
    with torch.no_grad():
        prob = torch.exp(2 * tiny_wf("cpu").log_psi(tokens).real)  # the oracle: full enumeration, CPU
    assert float(prob.sum()) == pytest.approx(1.0, abs=1e-10)
    index = {tuple(t): i for i, t in enumerate(tokens.tolist())}
    observed = torch.zeros(len(tokens), dtype=torch.float64)
    for row, count in zip(configs.cpu().tolist(), counts.cpu().tolist()):
        observed[index[tuple(row)]] = count  # a KeyError here: a configuration outside the sector
    sigma = torch.sqrt(prob * (1 - prob) / n_samples)
    assert bool(((observed / n_samples - prob).abs() <= 5 * sigma + 1e-6).all())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_group(backend: str, device: str, work):
    """``work(comm)`` inside a one-process group of ``backend`` (torch.distributed's real path)."""
    init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    comm = TorchDistributed(device)
    try:
        return work(comm)
    finally:
        comm.close()


def run_numbers(comm) -> torch.Tensor:
    """A 4-step core-mode SR run re-selecting every 2nd step: energies and final parameters."""
    cfg = VMCConfig(steps=4, selection="core", core_every=2, core_samples=64, optimizer="sr", lr=0.01, warmup=1,
                    device=comm.device)  # fmt: skip
    state = new_state(tiny_wf(comm.device), cfg, comm)
    results = vmc_steps(state, CompactHamiltonian.from_molecular(molecular(), comm.device), cfg)
    energies = torch.tensor([r.energy for r in results], dtype=torch.float64)
    return torch.cat([energies, torch.cat([p.detach().cpu().reshape(-1) for p in state.wf.parameters()])])


def test_nccl_with_one_process_equals_gloo_and_no_group():
    nccl = in_group("nccl", "cuda:0", lambda comm: step_numbers("cuda:0", comm))
    gloo = in_group("gloo", "cpu", lambda comm: step_numbers("cpu", comm))
    assert_close(nccl, gloo, rel=1e-9)
    # a whole run: through NCCL the same bits as without a process group (same device, same stream)
    with_group = in_group("nccl", "cuda:0", run_numbers)
    torch.testing.assert_close(with_group, run_numbers(SingleProcess("cuda:0")), rtol=1e-12, atol=1e-14)


def test_cli_run_on_cuda_is_variational_and_resumes_on_the_cpu(tmp_path):
    ham = molecular()
    fcidump = tmp_path / "random.fcidump"
    write_fcidump(fcidump, ham)
    out = tmp_path / "run"
    base = [sys.executable, "-m", "nnqs", "vmc", "--fcidump", str(fcidump), "--no-exact", "--no-progress",
            "--out", str(out), "--json", "--final-samples", "100000", "--pretrain-steps", "30"]  # fmt: skip

    def run(*extra: str) -> dict:
        proc = subprocess.run(base + list(extra), cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # the exact ground energy: H diagonalised on the whole sector (held against OpenFermion in CI)
    e0 = subspace_energy(CompactHamiltonian.from_molecular(ham), sector_tokens(N, N_ALPHA, N_BETA))
    first = run("--steps", "6", "--device", "cuda")
    assert first["steps"] == 6 and first["energy"] >= e0 - 5 * first["energy_stderr"] - 1e-9
    resumed = run("--resume", "--steps", "8", "--device", "cpu")  # a cuda checkpoint continues on the CPU
    assert resumed["steps"] == 8 and len((out / "history.csv").read_text().splitlines()) == 1 + 8
    assert np.isfinite(resumed["energy"]) and resumed["energy"] >= e0 - 5 * resumed["energy_stderr"] - 1e-9
