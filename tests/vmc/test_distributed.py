"""Data-parallel VMC: 2 gloo processes give the single-process numbers (plain VMC and core mode,
whose working-set amplitudes and re-selection are split over the ranks and gathered); a
2-process CLI run writes once."""
import faulthandler
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from hamiltonians import build_hamiltonian, get_spec
from nnqs.common.distributed import (SingleProcess, TorchDistributed, column_ranges, init_process_group,
                                     process_group_threads)
from nnqs.vmc.vmc_loop import new_state, vmc_steps
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.pretrain import fit_to_vector
from nnqs.vmc.selection import select_core
from nnqs.vmc.sr import per_sample_jacobian, sr_direction
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.estimates import energy_and_loss, final_energy
from nnqs.vmc.step import set_sr_gradient
from nnqs.vmc.wavefunction import TransformerWavefunction

ROOT = Path(__file__).resolve().parents[2]


def tiny_wf(ham, real: bool = False) -> TransformerWavefunction:
    torch.manual_seed(0)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=8, n_layers=1, n_heads=2,
                                 phase_hidden=8, hf_bias=0.5, real=real, dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.3 * torch.randn_like(p))  # away from the symmetric start: many unique samples
    return wf


def flat_grad(wf) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in wf.parameters()])


def one_step_numbers(comm) -> dict:
    """Energy statistics, AdamW gradient and SR direction of one step, a 3-step run and a final energy."""
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    wf = tiny_wf(ham)
    configs, counts = wf.sample(10**6, generator=torch.Generator().manual_seed(1))
    out = {"n_unique": len(counts)}
    cases = {"exact": (configs, counts), "sample-space": (configs, counts), "one-sample": (configs[:1], counts[:1])}
    for name, (c, n) in cases.items():
        estimator = "sample-space" if name == "sample-space" else "exact"
        wf.zero_grad(set_to_none=True)
        # float64 passes over the connected x': float32 ones are rounded differently when the ranks
        # split them (checked apart below, to float32's accuracy)
        est, loss = energy_and_loss(wf, compact, c, n, estimator, comm=comm, connected_dtype="float64")
        loss.backward()
        comm.sum_gradients(wf.parameters())
        out[name] = [est.energy, est.variance, est.stderr, est.n_unique]
        out[name + "/grad"] = flat_grad(wf)
        set_sr_gradient(wf, comm.share(c), est.local_energies, est.weights, est.energy, 1e-4, comm)
        out[name + "/sr"] = flat_grad(wf)
        jacobian = per_sample_jacobian(wf, comm.share(c))  # the single 2U x 2U solve across ranks too
        out[name + "/sr-full"] = sr_direction(jacobian, est.local_energies, est.weights, est.energy, 1e-4, comm,
                                              split=False)  # fmt: skip
    with torch.no_grad():
        out["float32"] = [energy_and_loss(wf, compact, configs[:1], counts[:1], "exact", comm=comm)[0].energy]
    for optimizer in ("adamw", "sr"):
        cfg = VMCConfig(steps=3, samples=10**5, optimizer=optimizer, lr=0.01, warmup=1, unique_max=64,
                        connected_dtype="float64", sr_momentum_schedule="constant")  # momentum from step 1
        state = new_state(tiny_wf(ham), cfg, comm)
        results = vmc_steps(state, compact, cfg)
        out[optimizer + "/run"] = [[r.energy, r.variance, r.n_samples, r.n_unique] for r in results]
        out[optimizer + "/params"] = torch.cat([p.detach().reshape(-1) for p in state.wf.parameters()])
        final = final_energy(state.wf, compact, 10**6, state.generator, comm=comm, connected_dtype="float64")
        out[optimizer + "/final"] = [final.energy, final.variance, final.n_unique]
    return out


def core_numbers(comm) -> dict:
    """Core mode: one re-selection from a sampled set, and a 4-step run re-selecting every step."""
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    wf = tiny_wf(ham)
    configs = wf.sample(10**4, generator=torch.Generator().manual_seed(1))[0][:16]  # a set with a wide outside
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    chosen = select_core(wf.log_psi, compact, configs, log_psi, 1e-3, 10**4, energy=-7.8, comm=comm)
    cfg = VMCConfig(steps=4, selection="core", core_every=1, core_samples=64, optimizer="sr", lr=0.01, warmup=1)
    state = new_state(tiny_wf(ham), cfg, comm)
    results = vmc_steps(state, compact, cfg)
    return {"selected": chosen.configs, "n_evaluated": chosen.n_evaluated,
            "run": torch.tensor([[r.energy, r.n_unique] for r in results], dtype=torch.float64),
            "params": torch.cat([p.detach().reshape(-1) for p in state.wf.parameters()])}


def exchange_numbers(comm) -> dict:
    """``exchange_columns`` of uneven row shares (rank r holds 3 + 2r rows; 11 columns)."""
    full = torch.arange(8 * 11, dtype=torch.float64).view(8, 11)
    mine = full[:3] if comm.rank == 0 else full[3:]
    return {"columns": comm.exchange_columns(mine), "empty": comm.exchange_columns(mine[:0] if comm.rank else mine)}


def fit_numbers(comm) -> dict:
    """Five steps of the teacher fit on 21 configurations with mixed signs: the parameters and losses."""
    ham = build_hamiltonian(get_spec("LiH"))
    wf = tiny_wf(ham)
    configs = wf.sample(10**4, generator=torch.Generator().manual_seed(2))[0][:21]
    coefficients = torch.randn(len(configs), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    losses = []
    fit_to_vector(wf, configs, coefficients / coefficients.norm(), 5, 1e-2, lambda step, loss: losses.append(loss),
                  comm=comm)  # fmt: skip
    return {"losses": losses, "params": torch.cat([p.detach().reshape(-1) for p in wf.parameters()])}


def sr_numbers(comm) -> dict:
    """The SR solve of this rank's share of an ill-conditioned system (Gram matrices of column
    shares all-reduced, each block solved on one rank), plain and with SPRING momentum."""
    import nnqs.vmc.sr as sr
    from tests_support import ill_conditioned_system

    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=6)
    def share():
        return sr.SplitJacobian(comm.share(jac.real).clone(), jac.real_columns, comm.share(jac.imag).clone(),
                                jac.imag_columns)

    previous = torch.randn(240 + 80, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    return {"direction": sr_direction(share(), comm.share(e_loc), comm.share(w), energy, 1e-4, comm),
            "spring": sr_direction(share(), comm.share(e_loc), comm.share(w), energy, 1e-4, comm,
                                   previous=previous, momentum=0.99)}


def real_numbers(comm) -> dict:
    """The real ansatz: importance-weighted sampled statistics, the SR direction of its one real block,
    a 3-step sampled run, its final energy, and five steps of the absolute-sign teacher fit."""
    from nnqs.vmc.estimates import sampling_ratio

    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    wf = tiny_wf(ham, real=True)
    configs, counts = wf.sample(10**6, generator=torch.Generator().manual_seed(1))
    est, _ = energy_and_loss(wf, compact, configs, counts, "exact", comm=comm, connected_dtype="float64",
                             ratios=sampling_ratio(wf, configs))
    set_sr_gradient(wf, comm.share(configs), est.local_energies, est.weights, est.energy, 1e-4, comm)
    out = {"n_unique": len(counts), "estimate": [est.energy, est.variance, est.stderr], "sr": flat_grad(wf)}
    cfg = VMCConfig(steps=3, samples=10**5, lr=0.01, warmup=1, unique_max=64, connected_dtype="float64",
                    selection="samples", ansatz="real")
    state = new_state(tiny_wf(ham, real=True), cfg, comm)
    out["run"] = [[r.energy, r.variance, r.n_unique] for r in vmc_steps(state, compact, cfg)]
    final = final_energy(state.wf, compact, 10**6, state.generator, comm=comm, connected_dtype="float64")
    out["final"] = [final.energy, final.variance, final.stderr]
    fitted = tiny_wf(ham, real=True)
    coefficients = torch.randn(21, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    losses = []
    fit_to_vector(fitted, configs[:21], coefficients / coefficients.norm(), 5, 1e-2,
                  lambda step, loss: losses.append(loss), comm=comm)  # fmt: skip
    out["fit"] = losses
    out["fit/params"] = torch.cat([p.detach().reshape(-1) for p in fitted.parameters()])
    return out


NUMBERS = {"real": real_numbers, "sr": sr_numbers, "step": one_step_numbers, "core": core_numbers, "exchange": exchange_numbers, "fit": fit_numbers}


def worker(rank: int, world: int, port: int, out_dir: str, which: str = "step") -> None:
    faulthandler.enable()  # a rank killed by a signal prints where it was
    torch.set_num_threads(1)
    init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    comm = TorchDistributed()
    try:
        torch.save(NUMBERS[which](comm), Path(out_dir) / f"rank{rank}.pt")
    finally:
        comm.close()
    # a group still referenced after close keeps its threads until interpreter exit, where they
    # now and then abort the process: fail here, every time, instead
    assert process_group_threads(wait=5.0) == [], f"rank {rank}: the process group outlived close()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_same(a, b, path=""):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-9, msg=path)
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == pytest.approx(b, rel=1e-10, abs=1e-12), path


def test_two_gloo_processes_equal_one_process(tmp_path):
    mp.spawn(worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)  # a dead rank's stderr is captured
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = one_step_numbers(SingleProcess())
    assert single["n_unique"] > 10
    for name in ("exact", "sample-space", "one-sample"):  # split and full solves: the same direction
        torch.testing.assert_close(single[name + "/sr"], single[name + "/sr-full"], atol=1e-9, rtol=1e-7)
    assert_same(ranks[0], ranks[1])  # every rank holds the same statistics and directions
    float32 = [numbers.pop("float32")[0] for numbers in (single, ranks[0])]
    assert float32[0] == pytest.approx(float32[1], rel=1e-7)  # float32 passes, split or not
    one = single["one-sample"][0]  # its connected x' all lie outside the sample set
    assert float32[0] == pytest.approx(one, rel=1e-7) and float32[0] != one
    assert_same(single, ranks[0])


def test_sr_on_two_ranks_equals_one_process(tmp_path, monkeypatch):
    from tests_support import copy_split, ill_conditioned_system

    monkeypatch.setattr("nnqs.vmc.sr.MIXED_ROWS", 10**9)  # one process in float64 too, as the ranks solve

    mp.spawn(worker, args=(2, free_port(), str(tmp_path), "sr"), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt")["direction"] for r in range(2)]
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=6)
    exact = sr_direction(copy_split(jac), e_loc, w, energy, 1e-4)
    assert torch.equal(ranks[0], ranks[1])  # every rank holds the same summed solution
    assert float((ranks[0] - exact).abs().max()) <= 1e-8 * float(exact.abs().max())
    # SPRING's e - mu X d_prev: each rank multiplies its columns of X, the products are summed
    springs = [torch.load(tmp_path / f"rank{r}.pt")["spring"] for r in range(2)]
    previous = torch.randn(240 + 80, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    one = sr_direction(copy_split(jac), e_loc, w, energy, 1e-4, previous=previous, momentum=0.99)
    assert torch.equal(springs[0], springs[1])
    assert float((springs[0] - one).abs().max()) <= 1e-8 * float(one.abs().max())


def test_core_mode_on_two_ranks_equals_one_process(tmp_path):
    mp.spawn(worker, args=(2, free_port(), str(tmp_path), "core"), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = core_numbers(SingleProcess())
    assert single["n_evaluated"] > 20 and len(single["selected"]) > 10
    for rank in ranks:
        assert torch.equal(rank["selected"], single["selected"]) and rank["n_evaluated"] == single["n_evaluated"]
        torch.testing.assert_close(rank["run"], single["run"], atol=1e-10, rtol=1e-9)
        torch.testing.assert_close(rank["params"], single["params"], atol=1e-10, rtol=1e-9)
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])  # the ranks hold the same bits


def test_two_process_cli_run_writes_one_result(tmp_path):
    out = tmp_path / "h2"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--nproc_per_node", "2", "--master_port", str(free_port()), "-m", "nnqs", "vmc", "H2",
           "--steps", "5", "--d-model", "8", "--n-layers", "1", "--final-samples", "100000",
           "--out", str(out), "--json"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(printed) == 1  # rank 0 alone prints the result
    result = json.loads(printed[0])
    assert json.loads((out / "result.json").read_text()) == result
    assert result["steps"] == 5 and result["energy"] >= result["e_exact"] - 1e-9
    rows = (out / "history.csv").read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["0", "1", "2", "3", "4"]
    for name in ("config.toml", "checkpoint.pt", "energy.png"):
        assert (out / name).is_file(), name


def test_column_ranges_cover_the_columns_in_order():
    for n, k in [(11, 2), (10, 2), (1, 2), (7, 3), (0, 2)]:
        ranges = column_ranges(n, k)
        assert len(ranges) == k and ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1


def test_exchange_columns_gives_each_rank_all_rows_of_its_columns(tmp_path):
    """Against slicing the whole matrix: rank r gets rows 0..7 (rank 0's 3, then rank 1's 5) of
    its column range; a rank with no rows contributes none."""
    mp.spawn(worker, args=(2, free_port(), str(tmp_path), "exchange"), nprocs=2, join=True)
    full = torch.arange(8 * 11, dtype=torch.float64).view(8, 11)
    for rank, (lo, hi) in enumerate(column_ranges(11, 2)):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert torch.equal(got["columns"], full[:, lo:hi])
        assert torch.equal(got["empty"], full[:3, lo:hi])


def test_the_teacher_fit_on_two_ranks_equals_one_process(tmp_path):
    mp.spawn(worker, args=(2, free_port(), str(tmp_path), "fit"), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = fit_numbers(SingleProcess())
    assert single["losses"][-1] < single["losses"][0]
    for rank in ranks:
        assert_same(rank, single)
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])


def test_from_environment_binds_the_nccl_group_to_the_rank_s_device(monkeypatch):
    """Under torchrun with cuda, the NCCL group is created with ``device_id`` = this rank's GPU, so
    its barrier (an all-reduce) does not guess the device; gloo on the CPU gets no device."""
    import nnqs.common.distributed as distributed

    calls = []
    monkeypatch.setattr(distributed, "init_process_group", lambda backend, **options: calls.append((backend, options)))
    monkeypatch.setattr(distributed, "TorchDistributed", lambda device: device)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.from_environment("cuda") == "cuda:1"
    assert calls == [("set_device", "cuda:1"), ("nccl", {"device_id": torch.device("cuda:1")})]
    calls.clear()
    assert distributed.from_environment("cpu") == "cpu"
    assert calls == [("gloo", {})]


def test_the_real_ansatz_on_two_ranks_equals_one_process(tmp_path):
    mp.spawn(worker, args=(2, free_port(), str(tmp_path), "real"), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = real_numbers(SingleProcess())
    assert single["n_unique"] > 10 and single["fit"][-1] < single["fit"][0]
    assert_same(ranks[0], ranks[1])
    assert_same(single, ranks[0])
