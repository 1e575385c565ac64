"""Local energy against (H psi)(x)/psi(x) from an explicit matrix."""
import numpy as np
import pytest
import torch

from nnqs.vmc.configurations import occupations_to_tokens, tokens_to_occupations
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.local_energy import local_energy, local_energy_dense
from tests_support import full_index, openfermion_matrix, random_integrals, sector_tokens


def toy_log_psi(n: int, seed: int):
    """A smooth complex log-amplitude of the tokens (one- and two-orbital terms)."""
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(n, 4, generator=g, dtype=torch.float64)
    w2 = 0.3 * torch.randn(n, 4, n, 4, generator=g, dtype=torch.float64)
    ph = torch.randn(n, 4, generator=g, dtype=torch.float64)

    def fn(tokens: torch.Tensor) -> torch.Tensor:
        one_hot = torch.nn.functional.one_hot(tokens, 4).double()  # (B, n, 4)
        re = torch.einsum("bpi,pi->b", one_hot, w1) + torch.einsum("bpi,piqj,bqj->b", one_hot, w2, one_hot)
        return torch.complex(re, torch.einsum("bpi,pi->b", one_hot, ph))

    return fn


@pytest.mark.parametrize("n, n_alpha, n_beta", [(4, 2, 2), (5, 2, 1)])
@pytest.mark.parametrize("max_connected", [2**22, 7])  # one chunk; many tiny chunks
def test_exact_local_energy_matches_matrix(n, n_alpha, n_beta, max_connected):
    h, g = random_integrals(n, seed=3)
    full = openfermion_matrix(h, g, e_core=-1.3)
    basis = sector_tokens(n, n_alpha, n_beta)
    idx = full_index(basis)
    sector = full[idx][:, idx]
    fn = toy_log_psi(n, seed=1)
    ham = CompactHamiltonian(h, g, -1.3, n_alpha, n_beta)
    samples = basis[torch.randperm(len(basis), generator=torch.Generator().manual_seed(0))[: len(basis) // 2]]
    result = local_energy(fn, ham, samples, fn(samples), max_batch=3, max_connected=max_connected)
    reference = local_energy_dense(sector, basis, fn(basis), samples)
    torch.testing.assert_close(result.values, reference, atol=1e-10, rtol=0)
    assert result.n_evaluated <= result.n_unique_connected


def test_sample_space_estimator_uses_only_sampled_configs():
    n, n_alpha, n_beta = 4, 2, 1
    h, g = random_integrals(n, seed=5)
    full = openfermion_matrix(h, g, e_core=0.0)
    basis = sector_tokens(n, n_alpha, n_beta)
    idx = full_index(basis)
    samples = basis[::3]
    sub = full[idx[::3]][:, idx[::3]]  # H restricted to the sample set
    fn = toy_log_psi(n, seed=2)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    result = local_energy(fn, ham, samples, fn(samples), estimator="sample-space")
    reference = local_energy_dense(sub, samples, fn(samples), samples)
    torch.testing.assert_close(result.values, reference, atol=1e-10, rtol=0)
    assert result.n_evaluated == 0


def test_all_amplitudes_evaluated_once():
    n, n_alpha, n_beta = 5, 2, 2
    h, g = random_integrals(n, seed=7)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    calls = []
    fn = toy_log_psi(n, seed=3)

    def counting(tokens):
        calls.append(tokens.clone())
        return fn(tokens)

    samples = sector_tokens(n, n_alpha, n_beta)[:20]
    local_energy(counting, ham, samples, fn(samples), max_batch=16, max_connected=50)
    evaluated = torch.cat(calls)
    assert len(torch.unique(evaluated, dim=0)) == len(evaluated)  # no x' evaluated twice
    sample_set = {tuple(t) for t in samples.tolist()}
    assert not any(tuple(t) in sample_set for t in evaluated.tolist())  # samples' amplitudes reused


def sparse_integrals(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Integrals with a few nonzero entries (8-fold symmetric), touching orbitals past 31."""
    rng = np.random.default_rng(seed)
    h = np.zeros((n, n))
    g = np.zeros((n, n, n, n))
    for _ in range(12):
        p, q = rng.integers(0, n, 2)
        h[p, q] = h[q, p] = rng.normal()
    for _ in range(12):
        p, q, r, s = rng.integers(0, n, 4)
        v = rng.normal()
        for a, b, c, d in ((p, q, r, s), (q, p, r, s), (p, q, s, r), (q, p, s, r)):
            g[a, b, c, d] = g[c, d, a, b] = v
    for p in range(n):
        h[p, p] = rng.normal()
        g[p, p, (p + 1) % n, (p + 1) % n] = g[(p + 1) % n, (p + 1) % n, p, p] = 0.3
    return h, g


def pauli_matrix_elements(qubit_op, bits: tuple[int, ...]) -> dict[tuple[int, ...], complex]:
    """<x'|H|x> for every x' reached from |x> = |bits> by the Pauli strings of ``qubit_op``."""
    out: dict[tuple[int, ...], complex] = {}
    for term, coeff in qubit_op.terms.items():
        new, phase = list(bits), complex(coeff)
        for q, op in term:
            if op == "Z":
                phase *= -1 if bits[q] else 1
            elif op == "Y":
                phase *= -1j if bits[q] else 1j
            if op in "XY":
                new[q] ^= 1
        out[tuple(new)] = out.get(tuple(new), 0) + phase
    return out


def test_local_energy_beyond_64_qubits_matches_openfermion():
    from openfermion import FermionOperator, jordan_wigner

    n, n_alpha, n_beta = 34, 3, 2  # 68 qubits: keys span three int64 words
    h, g = sparse_integrals(n, seed=11)
    op = FermionOperator((), 0.25)
    for p, q in zip(*(idx.tolist() for idx in np.nonzero(h))):
        for s in (0, 1):
            op += FermionOperator(((2 * p + s, 1), (2 * q + s, 0)), h[p, q])
    for p, q, r, t in zip(*(idx.tolist() for idx in np.nonzero(g))):
        for s1 in (0, 1):
            for s2 in (0, 1):
                op += FermionOperator(((2 * p + s1, 1), (2 * r + s2, 1), (2 * t + s2, 0), (2 * q + s1, 0)), 0.5 * g[p, q, r, t])
    qubit_op = jordan_wigner(op)
    ham = CompactHamiltonian(h, g, 0.25, n_alpha, n_beta)
    fn = toy_log_psi(n, seed=4)
    g_ = torch.Generator().manual_seed(3)
    configs = []
    for _ in range(4):  # configurations whose electrons sit where the sparse integrals act
        t = torch.zeros(n, dtype=torch.long)
        t[torch.randperm(n, generator=g_)[:n_alpha]] += 1
        t[torch.randperm(n, generator=g_)[:n_beta]] += 2
        configs.append(t)
    configs = torch.stack(configs)
    result = local_energy(fn, ham, configs, fn(configs), max_batch=50)
    assert result.n_connected > 0 and result.n_evaluated > 0  # off-diagonal terms are exercised
    for b, tokens in enumerate(configs):
        bits = tuple(int(v) for v in tokens_to_occupations(tokens[None])[0])
        reference = 0j
        for target, element in pauli_matrix_elements(qubit_op, bits).items():
            if abs(element) < 1e-14:
                continue
            target_tokens = occupations_to_tokens(torch.tensor([target]))
            reference += element * complex(torch.exp(fn(target_tokens)[0] - fn(tokens[None])[0]))
        assert abs(complex(result.values[b]) - reference) < 1e-10, (b, complex(result.values[b]), reference)


def test_heat_bath_estimator_is_unbiased(monkeypatch):
    # Against the dense matrix: the mean over independent draws of the heat-bath local energy is the
    # exact local energy within 5 standard errors, while single draws differ from it.
    import nnqs.vmc.local_energy as le

    n, n_alpha, n_beta = 5, 2, 2
    h, g = random_integrals(n, seed=3)
    full = openfermion_matrix(h, g, e_core=0.0)
    basis = sector_tokens(n, n_alpha, n_beta)
    idx = full_index(basis)
    fn = toy_log_psi(n, seed=1)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    samples = basis[:6]
    reference = local_energy_dense(full[idx][:, idx], basis, fn(basis), samples)
    magnitudes = ham.connections(samples).elements.abs()
    cutoff = float(magnitudes[magnitudes > 0].median())  # half of the nonzero elements are drawn
    monkeypatch.setattr(le, "HEAT_BATH_CUTOFF", cutoff)
    monkeypatch.setattr(le, "HEAT_BATH_DRAWS", 4)
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([local_energy(fn, ham, samples, fn(samples), "heat-bath", generator=generator).values
                         for _ in range(400)])
    mean, stderr = draws.mean(0), draws.std(0) / 20
    assert bool((stderr.abs() > 0).all())  # a stochastic remainder in every row
    assert bool(((mean - reference).abs() < 5 * stderr.abs() + 1e-12).all())


def test_heat_bath_terms_without_remainder_are_the_elements():
    from nnqs.vmc.local_energy import heat_bath_terms

    elements = torch.tensor([[0.5, 0.0, -0.2], [0.0, 0.3, 0.0]], dtype=torch.float64)
    owner, k, coefficient = heat_bath_terms(elements, 0.1, 8, None)
    dense = torch.zeros_like(elements).index_put_((owner, k), coefficient, accumulate=True)
    assert torch.equal(dense, elements)
    owner, k, coefficient = heat_bath_terms(elements, 0.4, 8, torch.Generator().manual_seed(0))
    dense = torch.zeros_like(elements).index_put_((owner, k), coefficient, accumulate=True)
    assert dense[0, 0] == 0.5 and float(dense[0, 2]) == pytest.approx(-0.2) and float(dense[1, 1]) == pytest.approx(0.3)


def test_heat_bath_draws_follow_the_sample_set_not_the_global_generator(monkeypatch):
    # Every rank evaluates the same x' only if the draws depend on what all ranks hold alike.
    import nnqs.vmc.local_energy as le
    from nnqs.vmc.wavefunction import TransformerWavefunction
    from nnqs.common.distributed import SingleProcess

    n, n_alpha, n_beta = 5, 2, 2
    h, g = random_integrals(n, seed=3)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    torch.manual_seed(0)
    wf = TransformerWavefunction(n, n_alpha, n_beta, d_model=8, n_layers=1, dtype=torch.float64, hf_bias=0.5)

    def fn(tokens: torch.Tensor) -> torch.Tensor:
        return wf.log_psi(tokens).detach()

    samples = sector_tokens(n, n_alpha, n_beta)[:6]
    magnitudes = ham.connections(samples).elements.abs()
    monkeypatch.setattr(le, "HEAT_BATH_CUTOFF", float(magnitudes[magnitudes > 0].median()))
    values = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        values.append(le.share_local_energy(wf, ham, samples, fn(samples), "heat-bath", 64, SingleProcess())[0])
    assert torch.equal(values[0], values[1])
    exact = local_energy(fn, ham, samples, fn(samples)).values
    assert not torch.allclose(values[0], exact)  # the draws are there


@pytest.mark.parametrize("tree", [False, True])
def test_connected_passes_in_float32_match_the_matrix(monkeypatch, tree):
    # share_local_energy evaluates the connected x' with a float32 copy of a float64 network (the
    # plain pass below TREE_MIN_ORBITALS, the prefix tree above it); the samples' own amplitudes and
    # the sums stay float64. Against the dense matrix with float64 amplitudes: float32 rounding of
    # log psi(x') only, while the float64 passes agree to 1e-10.
    import nnqs.vmc.local_energy as le
    from nnqs.vmc.wavefunction import TransformerWavefunction
    from nnqs.common.distributed import SingleProcess

    if tree:
        monkeypatch.setattr(le, "TREE_MIN_ORBITALS", 1)
    n, n_alpha, n_beta = 6, 3, 2
    h, g = random_integrals(n, seed=4)
    full = openfermion_matrix(h, g, e_core=-0.7)
    basis = sector_tokens(n, n_alpha, n_beta)
    idx = full_index(basis)
    ham = CompactHamiltonian(h, g, -0.7, n_alpha, n_beta)
    torch.manual_seed(0)
    wf = TransformerWavefunction(n, n_alpha, n_beta, d_model=16, n_layers=2, dtype=torch.float64, hf_bias=0.5)
    with torch.no_grad():
        log_psi_basis = wf.log_psi(basis)
    samples = basis[:: 4]  # three quarters of the x' lie outside the sample set
    reference = local_energy_dense(full[idx][:, idx], basis, log_psi_basis, samples)
    log_psi = log_psi_basis[:: 4]
    single = le.share_local_energy(wf, ham, samples, log_psi, "exact", 64, SingleProcess(), "float32")[0]
    double = le.share_local_energy(wf, ham, samples, log_psi, "exact", 64, SingleProcess(), "float64")[0]
    assert single.dtype == double.dtype == torch.complex128
    torch.testing.assert_close(double, reference, atol=1e-10, rtol=0)
    scale = float(reference.abs().max())
    torch.testing.assert_close(single, reference, atol=1e-6 * scale, rtol=0)
    assert not torch.equal(single, double)  # the float32 copy did the passes
    assert wf.dtype == torch.float64  # and the network itself was left as it was
