"""The selected-core estimator, core selection, PT2, subspace energy and the selected-CI teacher,
each held against a dense matrix over the whole sector (OpenFermion's JW matrix of random integrals)."""
import copy

import numpy as np
import pytest
import torch
from tests_support import full_index, openfermion_matrix, random_integrals, sector_tokens

from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.local_energy import local_energy
from nnqs.vmc.pretrain import fit_to_vector
from nnqs.vmc.sci import MIN_GROWTH, selected_ci
from nnqs.vmc.keys import unpack
from nnqs.vmc.selection import (CoreHamiltonian, core_energies, external_space, pt2_correction, select_core, set_weights,
                                subspace_energy, unique_union)
from nnqs.vmc.sr import per_sample_jacobian, sr_direction
from nnqs.vmc.estimates import energy_and_loss, estimate
from nnqs.vmc.wavefunction import TransformerWavefunction

N, NA, NB = 5, 2, 2  # sector of 100 configurations


@pytest.fixture(scope="module")
def system():
    h, g = random_integrals(N, seed=3)
    ham = CompactHamiltonian(h, g, 0.7, NA, NB)
    basis = sector_tokens(N, NA, NB)
    full = openfermion_matrix(h, g, 0.7)
    idx = full_index(basis)
    dense = torch.as_tensor(full[idx][:, idx].toarray().real)  # (D, D) sector matrix, the oracle
    return ham, basis, dense


def rows_of(basis: torch.Tensor, configs: torch.Tensor) -> torch.Tensor:
    index = {tuple(t): i for i, t in enumerate(basis.tolist())}
    return torch.tensor([index[tuple(t)] for t in configs.tolist()])


def spread_model(seed: int = 0) -> TransformerWavefunction:
    torch.manual_seed(seed)
    return TransformerWavefunction(N, NA, NB, d_model=8, n_layers=1, phase_hidden=8, hf_bias=0.0, dtype=torch.float64)


def subset(basis: torch.Tensor, size: int, seed: int) -> torch.Tensor:
    return basis[torch.randperm(len(basis), generator=torch.Generator().manual_seed(seed))[:size]]


def model_on_subset(basis: torch.Tensor, model_seed: int, size: int, subset_seed: int):
    """A spread model, a random subset of the sector, its rows in the basis and its log psi."""
    wf = spread_model(model_seed)
    configs = unique_union(subset(basis, size, subset_seed))
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    return wf, configs, rows_of(basis, configs), log_psi


def test_set_energy_and_gradient_are_the_rayleigh_quotient(system):
    ham, basis, dense = system
    wf = spread_model()
    configs = unique_union(subset(basis, 40, 1))
    rows = rows_of(basis, configs)
    with torch.no_grad():
        weights = set_weights(wf.log_psi(configs))
    est, loss = energy_and_loss(wf, ham, configs, weights, "sample-space")
    loss.backward()
    ours = torch.cat([p.grad.flatten() for p in wf.parameters()])
    wf.zero_grad()
    psi = torch.exp(wf.log_psi(configs))  # the oracle: c^H H_SS c / c^H c, differentiated by autograd
    h_ss = dense[rows][:, rows].to(torch.complex128)
    rayleigh = ((psi.conj() @ h_ss @ psi) / (psi.conj() @ psi)).real
    rayleigh.backward()
    oracle = torch.cat([p.grad.flatten() for p in wf.parameters()])
    assert est.energy == pytest.approx(float(rayleigh.detach()), abs=1e-10)
    assert torch.allclose(ours, oracle, atol=1e-9, rtol=1e-7)
    assert float(rayleigh.detach()) >= float(torch.linalg.eigvalsh(dense)[0]) - 1e-12  # variational


def test_sr_direction_on_the_set_solves_the_dense_metric(system):
    ham, basis, _ = system
    wf = spread_model(1)
    configs = unique_union(subset(basis, 30, 2))
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    weights = set_weights(log_psi)
    est = estimate(local_energy(wf.log_psi, ham, configs, log_psi, "sample-space").values, weights)
    jac = per_sample_jacobian(wf, configs)
    shift = 1e-3
    ours = sr_direction(jac, est.local_energies, weights, est.energy, shift)
    centred = weights.sqrt().unsqueeze(1) * (jac - (weights.unsqueeze(1) * jac).sum(0))
    eps = weights.sqrt() * (est.local_energies - est.energy)
    x = torch.cat([centred.real, centred.imag])  # (2U, P): S = X^T X, force X^T e
    e = torch.cat([eps.real, eps.imag])
    lam = shift * float(torch.diagonal(x @ x.T).mean()) + 1e-12
    oracle = torch.linalg.solve(x.T @ x + lam * torch.eye(x.shape[1], dtype=x.dtype), x.T @ e)
    assert torch.allclose(ours, oracle, atol=1e-7 * float(oracle.abs().max()))


def test_select_core_matches_brute_force(system):
    ham, basis, dense = system
    wf, configs, rows, log_psi = model_on_subset(basis, 2, 12, 3)
    with torch.no_grad():
        amp_all = wf.log_psi(basis).real
    threshold = 0.3
    chosen = select_core(wf.log_psi, ham, configs, log_psi, threshold, max_size=1000).configs
    connected = (dense[rows] != 0).any(0)
    connected[rows] = True
    keep = connected & (amp_all >= float(log_psi.real.max()) + np.log(threshold))
    assert sorted(map(tuple, chosen.tolist())) == sorted(map(tuple, basis[keep].tolist()))
    capped = select_core(wf.log_psi, ham, configs, log_psi, threshold, max_size=3).configs
    top = torch.argsort(amp_all.masked_fill(~keep, -np.inf), descending=True)[:3]
    assert sorted(map(tuple, capped.tolist())) == sorted(map(tuple, basis[top].tolist()))


def test_select_core_first_order_rule_matches_dense_perturbation(system):
    """With the set's energy, an outside configuration a also enters on |<a|H|psi_S>| / |E - H_aa|
    relative to max |psi_S| (psi normalised on S): the same set as a brute force over the sector."""
    ham, basis, dense = system
    wf, configs, rows, log_psi = model_on_subset(basis, 2, 12, 3)
    with torch.no_grad():
        amp_all = wf.log_psi(basis).real
    c = torch.exp(log_psi.to(torch.complex128))
    c = c / c.abs().pow(2).sum().sqrt()
    h = dense.to(torch.complex128)
    energy = float((c.conj() @ h[rows][:, rows] @ c).real)
    first_order = (h[:, rows] @ c).abs() / (energy - dense.diagonal()).abs() / c.abs().max()
    score = amp_all - float(log_psi.real.max())  # log |psi(x)| / max_S |psi|
    outside = torch.ones(len(basis), dtype=torch.bool)
    outside[rows] = False
    connected = (dense[rows] != 0).any(0) & outside
    score[outside] = torch.where(connected[outside], torch.maximum(score, torch.log(first_order))[outside], -np.inf)
    threshold = 0.9
    keep = score >= np.log(threshold)
    chosen = select_core(wf.log_psi, ham, configs, log_psi, threshold, max_size=1000, energy=energy).configs
    assert sorted(map(tuple, chosen.tolist())) == sorted(map(tuple, basis[keep].tolist()))
    plain = select_core(wf.log_psi, ham, configs, log_psi, threshold, max_size=1000).configs
    assert len(chosen) > len(plain)  # the rule admits configurations the network underrates
    capped = select_core(wf.log_psi, ham, configs, log_psi, threshold, max_size=4, energy=energy).configs
    top = torch.argsort(score.masked_fill(~keep, -np.inf), descending=True)[:4]
    assert sorted(map(tuple, capped.tolist())) == sorted(map(tuple, basis[top].tolist()))


def test_pt2_and_subspace_energy_match_dense_sums(system):
    ham, basis, dense = system
    wf, configs, rows, log_psi = model_on_subset(basis, 3, 25, 4)
    c = torch.exp(log_psi.to(torch.complex128))
    c = c / c.abs().pow(2).sum().sqrt()
    h = dense.to(torch.complex128)
    energy = float((c.conj() @ h[rows][:, rows] @ c).real)
    outside = torch.ones(len(basis), dtype=torch.bool)
    outside[rows] = False
    coupling = h[outside][:, rows] @ c  # <a|H|psi_C> for every a outside
    oracle = float((coupling.abs().pow(2) / (energy - dense.diagonal()[outside])).sum())
    assert pt2_correction(ham, configs, log_psi, energy) == pytest.approx(oracle, rel=1e-10, abs=1e-12)
    assert subspace_energy(ham, configs) == pytest.approx(float(torch.linalg.eigvalsh(dense[rows][:, rows])[0]), abs=1e-10)


def test_core_energies_from_the_runs_core_matrix_match_the_dense_oracle(system):
    """The end of a run takes e_core and e_subspace from the run's H on its core (built on this core or
    grown from an earlier one) instead of enumerating the core's connections again: the same numbers."""
    ham, basis, dense = system
    wf, core, rows, log_psi = model_on_subset(basis, 3, 30, 5)
    c = torch.exp(log_psi.to(torch.complex128))
    c = c / c.abs().pow(2).sum().sqrt()
    block = dense[rows][:, rows].to(torch.complex128)
    e_core = float((c.conj() @ block @ c).real)
    oracle = {"n_core": len(core), "e_core": e_core, "e_core_pt2": e_core + pt2_correction(ham, core, log_psi, e_core),
              "e_subspace": float(torch.linalg.eigvalsh(dense[rows][:, rows])[0])}
    earlier = unique_union(subset(basis, 20, 6))
    for core_ham in (None, CoreHamiltonian(ham, core), CoreHamiltonian(ham, earlier)):
        found = core_energies(wf, ham, core, core_ham=core_ham)
        assert found.keys() == oracle.keys()
        for key, value in oracle.items():
            assert found[key] == pytest.approx(value, abs=1e-10), (key, core_ham is None)


def test_selected_ci_is_the_set_eigenvector_and_reaches_the_ground_state(system):
    ham, basis, dense = system
    hf = torch.tensor([[3, 3, 0, 0, 0]])
    loose = selected_ci(ham, hf, threshold=0.05, max_size=1000)
    rows = rows_of(basis, loose.configs)
    assert loose.energy == pytest.approx(float(torch.linalg.eigvalsh(dense[rows][:, rows])[0]), abs=1e-10)
    residual = dense[rows][:, rows] @ loose.coefficients - loose.energy * loose.coefficients
    assert float(residual.abs().max()) < 1e-6 and float(loose.coefficients.norm()) == pytest.approx(1.0)
    tight = selected_ci(ham, hf, threshold=1e-8, max_size=1000)
    assert tight.energy == pytest.approx(float(torch.linalg.eigvalsh(dense)[0]), abs=1e-8)
    assert len(loose.configs) < len(tight.configs) <= len(basis)


def test_selected_ci_at_most_doubles_per_round_taking_the_largest_first_order_amplitudes(system):
    ham, basis, dense = system
    hf = torch.tensor([[3, 3, 0, 0, 0]])
    grown = [selected_ci(ham, hf, threshold=1e-8, max_size=1000, max_rounds=rounds).configs for rounds in range(1, 5)]
    sizes = [1] + [len(configs) for configs in grown]
    for before, after in zip(sizes, sizes[1:]):
        assert after <= before + max(before, MIN_GROWTH)
    assert sizes[:3] == [1, 1 + MIN_GROWTH, 2 * (1 + MIN_GROWTH)]  # 100 in the sector, none stops early
    # Round 1 oracle: from the HF vector, the first-order amplitude is |H[a, hf]| / |H[hf, hf] - H[a, a]|.
    h0 = int(rows_of(basis, hf)[0])
    amplitude = dense[:, h0].abs() / (dense[h0, h0] - dense.diagonal()).abs().clamp(min=1e-8)
    amplitude[h0] = -1.0
    first = grown[0][1:]
    assert set(rows_of(basis, first).tolist()) == set(torch.argsort(amplitude, descending=True)[:MIN_GROWTH].tolist())


def test_external_space_of_several_vectors_is_each_vectors_dense_coupling(system):
    ham, basis, dense = system
    configs = unique_union(subset(basis, 30, 5))
    rows = rows_of(basis, configs)
    vectors = torch.randn(len(configs), 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    keys, numerators = external_space(ham, configs, vectors)
    outside = torch.ones(len(basis), dtype=torch.bool)
    outside[rows] = False
    coupling = dense[outside][:, rows] @ vectors  # (D_out, 3), the oracle
    nonzero = coupling.abs().amax(1) > 1e-12
    found = rows_of(basis, unpack(keys, N))
    assert set(found.tolist()) >= set(torch.nonzero(outside).squeeze(1)[nonzero].tolist())
    where = {int(r): i for i, r in enumerate(torch.nonzero(outside).squeeze(1).tolist())}
    expected = coupling[[where[int(r)] for r in found]]
    assert torch.allclose(numerators.real, expected, atol=1e-12) and float(numerators.imag.abs().max()) == 0.0
    single_keys, single = external_space(ham, configs, vectors[:, 1])
    assert torch.equal(single_keys, keys) and torch.allclose(single, numerators[:, 1], atol=1e-14)


def test_selected_ci_second_round_takes_the_largest_amplitude_over_three_roots(system):
    ham, basis, dense = system
    hf = torch.tensor([[3, 3, 0, 0, 0]])
    first, second = (selected_ci(ham, hf, threshold=1e-8, max_size=1000, max_rounds=r).configs for r in (1, 2))
    rows = rows_of(basis, first)
    energies, vectors = torch.linalg.eigh(dense[rows][:, rows])
    outside = torch.ones(len(basis), dtype=torch.bool)
    outside[rows] = False
    coupling = dense[outside][:, rows] @ vectors[:, :3]
    gaps = dense.diagonal()[outside].unsqueeze(1) - energies[:3]
    amplitude = (coupling.abs() / gaps.abs().clamp(min=1e-8)).amax(1)  # the oracle of every root at once
    expected = torch.nonzero(outside).squeeze(1)[torch.argsort(amplitude, descending=True)[:len(first)]]
    assert torch.equal(second[: len(first)], first)
    assert set(rows_of(basis, second[len(first):]).tolist()) == set(expected.tolist())


@pytest.mark.parametrize("whole, batch", [(4096, 1024), (16, 16)])
def test_fit_to_vector_learns_modulus_and_sign(system, whole, batch):
    """Every row each step, or minibatches of 16 rows drawn by weight (the path of sets above 4,096)."""
    ham, basis, _ = system
    target = selected_ci(ham, torch.tensor([[3, 3, 0, 0, 0]]), threshold=1e-3, max_size=1000)
    assert len(target.configs) > 16
    wf = spread_model(4)

    def overlap() -> float:
        with torch.no_grad():
            return float((target.coefficients.to(torch.complex128) * torch.exp(wf.log_psi(target.configs))).sum().abs() ** 2)

    before = overlap()
    fit_to_vector(wf, target.configs, target.coefficients, steps=300, lr=1e-2, batch=batch, whole=whole)
    assert before < 0.9 < overlap()


def test_fit_in_float32_is_the_float32_fit_copied_into_the_float64_model(system):
    ham, _, _ = system
    target = selected_ci(ham, torch.tensor([[3, 3, 0, 0, 0]]), threshold=1e-3, max_size=1000)
    wf = spread_model(4)
    twin = copy.deepcopy(wf).to(torch.float32)  # the oracle: a float32 model fitted by the plain path
    loss_twin = fit_to_vector(twin, target.configs, target.coefficients, steps=40, lr=1e-2)
    loss = fit_to_vector(wf, target.configs, target.coefficients, steps=40, lr=1e-2, dtype=torch.float32)
    assert loss == loss_twin
    for mine, fitted in zip(wf.parameters(), twin.parameters()):
        assert mine.dtype == torch.float64 and torch.equal(mine, fitted.double())


def test_select_core_when_the_set_is_the_whole_sector(system):
    ham, basis, _ = system
    wf = spread_model(5)
    with torch.no_grad():
        log_psi = wf.log_psi(basis)
    chosen = select_core(wf.log_psi, ham, basis, log_psi, 1e-9, max_size=1000)
    assert chosen.n_evaluated == 0 and len(chosen.configs) == len(basis)


def test_default_pipeline_on_lih_reaches_chemical_accuracy_with_ordered_side_numbers(tmp_path):
    """Teacher, fit and core VMC end to end (a small model, few steps); the side numbers obey
    E_core >= E_subspace >= E_FCI (Rayleigh quotients on the core), and none is the reported energy."""
    from hamiltonians import get_spec
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.run import run_molecule
    from tests_support import pyscf_references

    cfg = VMCConfig(steps=20, d_model=16, n_layers=1, phase_hidden=16, pretrain_steps=300, threads=1)
    r = run_molecule(get_spec("LiH"), cfg, tmp_path / "run", progress=False)
    e_fci = pyscf_references("LiH")["exact (fci)"]
    assert abs(r["e_exact"] - e_fci) < 1e-8
    assert abs(r["energy"] - e_fci) < 1.6e-3 and r["energy"] > e_fci - 3 * r["energy_stderr"] - 1e-9
    assert r["e_core"] >= r["e_subspace"] - 1e-10 >= e_fci - 2e-10
    assert r["e_teacher_sci"] >= e_fci - 1e-10 and 1 < r["n_core"] <= cfg.core_max


def test_lowest_eigenpairs_by_lanczos_are_reproducible():
    """Above 200 configurations the set is solved by eigsh from a fixed start vector: the same
    vectors bit for bit on every call (ARPACK's own random start made runs of one command differ),
    and the same eigenvalues as a dense solve."""
    from nnqs.vmc.selection import lowest_eigenpairs, set_hamiltonian

    h, g = random_integrals(7, seed=5)
    ham = CompactHamiltonian(h, g, 0.3, 3, 3)
    configs = sector_tokens(7, 3, 3)[::3]  # 409 configurations
    first, second = lowest_eigenpairs(ham, configs, 3), lowest_eigenpairs(ham, configs, 3)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    dense = np.linalg.eigvalsh(set_hamiltonian(ham, configs).toarray())[:3]
    assert np.allclose(first[0], dense, atol=1e-9)


def test_core_hamiltonian_gives_the_set_local_energies_of_the_connection_loop():
    """H held on the core, with only the fresh samples' connections enumerated, against the
    sample-space local energy (every row's connections looked up in the set)."""
    from hamiltonians import MoleculeSpec, build_hamiltonian
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.local_energy import local_energy
    from nnqs.vmc.selection import CoreHamiltonian

    mol = build_hamiltonian(MoleculeSpec(atom="; ".join(f"H 0 0 {1.3 * i}" for i in range(6))))
    ham = CompactHamiltonian.from_molecular(mol)
    wf = TransformerWavefunction(6, 3, 3, d_model=16, n_heads=2, hf_bias=0.0, dtype=torch.float64)
    core = selected_ci(ham, wf.hf_config().unsqueeze(0), 1e-3, 60).configs
    samples, _ = wf.sample(10**5, generator=torch.Generator().manual_seed(0))
    configs = unique_union(core, samples)
    assert len(configs) > len(core) + 20  # fresh rows, with connections to the core and to each other
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    slow = local_energy(wf.log_psi, ham, configs, log_psi, "sample-space").values
    fast = CoreHamiltonian(ham, core).local_energies(ham, configs, log_psi)
    torch.testing.assert_close(fast, slow, atol=1e-11, rtol=1e-11)
    whole = CoreHamiltonian(ham, configs).local_energies(ham, configs, log_psi)  # no fresh rows at all
    torch.testing.assert_close(whole, slow, atol=1e-11, rtol=1e-11)


def test_core_hamiltonian_grown_from_the_previous_core_equals_a_fresh_build():
    """A re-selected core keeps most of the old one: its H is taken from the old matrix and only the new
    rows are enumerated; the result is set_hamiltonian's matrix, element for element."""
    from hamiltonians import MoleculeSpec, build_hamiltonian
    from nnqs.vmc.configurations import hf_tokens
    from nnqs.vmc.selection import CoreHamiltonian, set_hamiltonian

    mol = build_hamiltonian(MoleculeSpec(atom="; ".join(f"H 0 0 {1.5 * i}" for i in range(6))))
    ham = CompactHamiltonian.from_molecular(mol)
    configs = selected_ci(ham, hf_tokens(6, 3, 3).unsqueeze(0), 1e-6, 400).configs
    g = torch.Generator().manual_seed(0)
    old = configs[torch.randperm(len(configs), generator=g)[:250]]
    for new in (configs[torch.randperm(len(configs), generator=g)[:300]], old[:40], old.flip(0)):
        grown = CoreHamiltonian(ham, new, previous=CoreHamiltonian(ham, old)).matrix
        fresh = set_hamiltonian(ham, new)
        assert (grown != fresh).nnz == 0 and grown.shape == fresh.shape


def test_the_external_space_screened_in_chunks_gives_the_same_core_pt2_and_teacher(system, monkeypatch):
    """Re-selection, PT2 and the selected-CI teacher unpack the external space a chunk at a time
    (``CANDIDATE_CHUNK``), and fold it from the connections of a few rows at a time (``FOLD_ENTRIES``):
    chunks of 7 configurations folded after every 2 rows give what one chunk folded once gives."""
    import nnqs.vmc.selection as selection

    ham, basis, dense = system
    wf, configs, rows, log_psi = model_on_subset(basis, 2, 12, 3)
    c = torch.exp(log_psi.to(torch.complex128))
    c = c / c.abs().pow(2).sum().sqrt()
    energy = float((c.conj() @ dense.to(torch.complex128)[rows][:, rows] @ c).real)
    hf = torch.tensor([[3, 3, 0, 0, 0]])

    def everything():
        core = select_core(wf.log_psi, ham, configs, log_psi, 0.05, max_size=1000, energy=energy)
        teacher = selected_ci(ham, hf, threshold=0.01, max_size=1000)
        return core, pt2_correction(ham, configs, log_psi, energy), teacher

    whole = everything()
    monkeypatch.setattr(selection, "CANDIDATE_CHUNK", 7)  # all three read it through external_chunks
    monkeypatch.setattr(selection, "FOLD_ENTRIES", 0)  # and the external set folded after every chunk of rows
    monkeypatch.setattr(selection, "rows_per_chunk", lambda ham: 2)
    chunked = everything()
    assert whole[0].n_candidates > len(configs) + 7  # several chunks
    assert torch.equal(chunked[0].configs, whole[0].configs) and chunked[0].n_candidates == whole[0].n_candidates
    assert chunked[1] == pytest.approx(whole[1], rel=1e-12, abs=1e-15)
    # the same teacher; its rows' order may differ where two first-order amplitudes tie to rounding (the
    # numerators are summed in another order)
    assert torch.equal(unique_union(chunked[2].configs), unique_union(whole[2].configs))
    assert chunked[2].energy == pytest.approx(whole[2].energy, abs=1e-12)

