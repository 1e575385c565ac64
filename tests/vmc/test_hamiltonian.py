"""Connected configurations and matrix elements against OpenFermion's Jordan-Wigner matrix."""
import numpy as np
import pytest
import torch

from nnqs.vmc.keys import pack, unpack
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from tests_support import full_index, openfermion_matrix, random_integrals, sector_tokens


@pytest.mark.parametrize("n, n_alpha, n_beta", [(4, 2, 2), (4, 2, 1), (5, 3, 1)])
def test_connections_reproduce_openfermion_rows(n, n_alpha, n_beta):
    h, g = random_integrals(n, seed=n + n_alpha)
    full = openfermion_matrix(h, g, e_core=0.7)
    ham = CompactHamiltonian(h, g, 0.7, n_alpha, n_beta)
    tokens = sector_tokens(n, n_alpha, n_beta)
    conn = ham.connections(tokens)
    rows = full_index(tokens)
    assert conn.keys.shape[:2] == (len(tokens), ham.n_connected)
    for b in range(len(tokens)):
        dense = np.zeros(full.shape[0])
        targets = full_index(unpack(conn.keys[b], n))
        np.add.at(dense, targets, conn.elements[b].numpy())
        dense[rows[b]] += conn.diagonal[b].item()
        reference = full[rows[b]].toarray().ravel()
        np.testing.assert_allclose(dense, reference, atol=1e-12)
        assert len(set(targets.tolist())) == len(targets)  # every excitation reaches a distinct x'


def test_diagonal_in_chunks_equals_the_openfermion_diagonal(monkeypatch):
    n, n_alpha, n_beta = 5, 2, 2
    h, g = random_integrals(n, seed=9)
    full = openfermion_matrix(h, g, e_core=0.4)
    ham = CompactHamiltonian(h, g, 0.4, n_alpha, n_beta)
    tokens = sector_tokens(n, n_alpha, n_beta)
    whole = ham.diagonal(tokens)
    monkeypatch.setattr("nnqs.vmc.compact_hamiltonian.DIAGONAL_ROWS", 7)  # 100 rows: 15 chunks
    torch.testing.assert_close(ham.diagonal(tokens), whole, atol=1e-12, rtol=0)
    np.testing.assert_allclose(whole.numpy(), full.diagonal()[full_index(tokens)].real, atol=1e-12)


def test_keys_pack_many_words():
    tokens = torch.randint(0, 4, (7, 70))
    keys = pack(tokens)
    assert keys.shape == (7, 3)
    assert torch.equal(unpack(keys, 70), tokens)


def test_symmetry_zeros_held_as_noise_are_exact_zeros():
    # Orbitals of two irreps (even/odd): integrals whose irreps do not multiply to the even one are
    # symmetry zeros, held here as 3e-16 as floating-point integrals hold them.
    n, n_alpha, n_beta = 5, 2, 2
    h, g = random_integrals(n, seed=11)
    irrep = np.array([0, 1, 0, 1, 1])
    h = np.where((irrep[:, None] ^ irrep[None, :]) == 1, 3e-16, h)
    odd = (irrep[:, None, None, None] ^ irrep[None, :, None, None] ^ irrep[None, None, :, None] ^ irrep[None, None, None, :]) == 1
    g = np.where(odd, 3e-16, g)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    tokens = sector_tokens(n, n_alpha, n_beta)
    conn = ham.connections(tokens)

    def parity(t: torch.Tensor) -> torch.Tensor:  # irrep of a configuration: its electrons' irreps summed mod 2
        electrons = (t & 1) + (t >> 1)
        return (electrons * torch.as_tensor(irrep)).sum(-1) % 2

    targets = unpack(conn.keys.reshape(-1, conn.keys.shape[-1]), n).reshape(len(tokens), -1, n)
    crosses = parity(targets) != parity(tokens).unsqueeze(1)
    assert crosses.any() and bool((conn.elements[crosses] == 0).all())
    assert bool((conn.elements[~crosses] != 0).any())
    full = openfermion_matrix(h, g, e_core=0.0)  # the noise is below the comparison's tolerance
    rows = full_index(tokens)
    for b in range(len(tokens)):
        dense = np.zeros(full.shape[0])
        np.add.at(dense, full_index(targets[b]), conn.elements[b].numpy())
        dense[rows[b]] += conn.diagonal[b].item()
        np.testing.assert_allclose(dense, full[rows[b]].toarray().ravel(), atol=1e-12)


@pytest.mark.parametrize("n, n_alpha, n_beta", [(9, 4, 3), (7, 1, 2), (6, 4, 0), (33, 3, 2)])
def test_doubles_joined_from_pairs_are_the_elementwise_bits(n, n_alpha, n_beta):
    # The fast doubles (occupied pairs x virtual pairs, joined by broadcasts) against their slow twin formed
    # entry by entry, on random configurations of sizes the OpenFermion test cannot reach (33: two key words).
    from nnqs.vmc import hamiltonian_terms

    h, g = random_integrals(n, seed=n)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    generator = torch.Generator().manual_seed(n)
    alpha = torch.stack([torch.randperm(n, generator=generator)[:n_alpha] for _ in range(50)])
    beta = torch.stack([torch.randperm(n, generator=generator)[:n_beta] for _ in range(50)])
    tokens = torch.zeros(50, n, dtype=torch.long).scatter_(1, alpha, 1).scatter_add_(1, beta, torch.full_like(beta, 2))
    n_a, n_b = tokens & 1, tokens >> 1
    order_a, order_b = (torch.argsort(1 - t, dim=1, stable=True) for t in (n_a, n_b))
    spin_occ = torch.stack([n_a, n_b], dim=-1).reshape(50, 2 * n)
    below = torch.cumsum(spin_occ, dim=1) - spin_occ
    fast = hamiltonian_terms.double_terms(ham, order_a, order_b, below)
    slow = hamiltonian_terms.double_terms_elementwise(ham, order_a, order_b, below)
    assert len(fast) == len(slow) > 0
    for (key, element), (key_ref, element_ref) in zip(fast, slow):
        assert torch.equal(key, key_ref) and torch.equal(element, element_ref)
