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


def test_keys_pack_many_words():
    tokens = torch.randint(0, 4, (7, 70))
    keys = pack(tokens)
    assert keys.shape == (7, 3)
    assert torch.equal(unpack(keys, 70), tokens)
