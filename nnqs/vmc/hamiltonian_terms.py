"""Single and double excitations of a batch, vectorised: key deltas, signs, matrix elements.

Helpers of :meth:`nnqs.vmc.compact_hamiltonian.CompactHamiltonian.connections`. Each returns
a list of ``(key_delta (B, K, W) int64, element (B, K) float64)`` blocks. Signs
are the Jordan-Wigner parities of the ordered operator products on
``|x> = prod_{q ascending} a+_q |vac>``: ``below[b, q]`` counts the occupied
spin-orbitals of sample b before spin-orbital q.
"""
from __future__ import annotations

import torch


def _key_delta(ham, moves: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    """Packed-key change ``(B, K, W)`` of token changes ``[(spatial orbital (B, K), delta), ...]``."""
    words = []
    for w in range(ham.n_words):
        total = 0
        for orb, delta in moves:
            term = ham.place[orb] * delta
            total = total + (term if ham.n_words == 1 else term * (ham.word[orb] == w))
        words.append(total)
    return torch.stack(words, dim=-1)


def _sign(parity: torch.Tensor) -> torch.Tensor:
    return 1.0 - 2.0 * (parity & 1).double()


def _at(below: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``below[b, q[b, k]]`` -> (B, K)."""
    return below.gather(1, q)


def single_terms(ham, tokens, order_a, order_b, below) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """a+_A a_I for each spin: element h_ia + sum_k n_k (ia|kk) - sum_{k same spin} n_k (ik|ka)."""
    n = ham.n_orbitals
    n_tot = ((tokens & 1) + (tokens >> 1)).double()
    coulomb = n_tot @ ham.single_j.T  # (B, n*n)
    blocks = []
    for spin, order, n_occ, table in ((0, order_a, ham.n_alpha, ham.singles_a), (1, order_b, ham.n_beta, ham.singles_b)):
        if table.numel() == 0:
            continue
        i = order[:, table[:, 0]]
        a = order[:, n_occ + table[:, 1]]
        n_spin = ((tokens >> spin) & 1).double()
        fock = ham.h1e.reshape(1, -1) + coulomb - n_spin @ ham.single_k.T  # (B, n*n)
        element = fock.gather(1, i * n + a)
        so_i, so_a = 2 * i + spin, 2 * a + spin
        parity = _at(below, so_i) + _at(below, so_a) - (so_i < so_a).long()
        blocks.append((_key_delta(ham, [(i, -(1 << spin)), (a, 1 << spin)]), _sign(parity) * element))
    return blocks


def double_terms(ham, order_a, order_b, below) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """a+_A a+_B a_J a_I: same spin <AB||IJ> = (ai|bj) - (aj|bi); opposite spin (ai|bj).

    Each block is the outer product of the sample's occupied pairs (i, j) and virtual pairs (a, b), in
    the order of the tables ``doubles_aa``, ``doubles_bb`` and ``doubles_ab``: the parts of the ERI index,
    the key change and the parity that depend on one side only are formed per side, ``(B, pairs)``, and
    joined by one broadcast each; only the parity's four occupied-virtual comparisons are formed over
    ``(B, K)``, as bytes. The same bits as :func:`double_terms_elementwise`, its slow twin, in about a third
    of the time (``tests/vmc/test_hamiltonian.py``)."""
    n = ham.n_orbitals
    blocks = []
    for spin, order, n_occ in ((0, order_a, ham.n_alpha), (1, order_b, ham.n_beta)):
        n_virt = n - n_occ
        if n_occ < 2 or n_virt < 2:
            continue
        occ, virt = _pairs_of(order[:, :n_occ]), _pairs_of(order[:, n_occ:])
        (i, j), (a, b) = occ, virt  # each (B, pairs), i < j and a < b
        outer = _eri_index(n, a, b)[:, None, :]
        element = (ham.eri_flat[outer + _eri_index(n, i, j, inner=True)[:, :, None]]
                   - ham.eri_flat[outer + _eri_index(n, j, i, inner=True)[:, :, None]])
        s_occ = _at(below, 2 * i + spin) + _at(below, 2 * j + spin) + 1  # -[si < sj] = -1: i < j
        s_virt = _at(below, 2 * a + spin) + _at(below, 2 * b + spin)  # [sb < sa] = 0: a < b
        parity = _joined_parity(s_occ, s_virt, [(i, a), (j, a), (i, b), (j, b)])
        d = 1 << spin
        key = _joined_key(ham, [(i, -d), (j, -d)], [(a, d), (b, d)])
        blocks.append((key, torch.where(parity, -element, element).reshape(len(order), -1)))
    na, nb = ham.n_alpha, ham.n_beta
    if na and nb and n - na and n - nb:
        i, j = order_a[:, :na, None].expand(-1, -1, nb), order_b[:, None, :nb].expand(-1, na, -1)  # (B, na, nb)
        a, b = order_a[:, na:, None].expand(-1, -1, n - nb), order_b[:, None, nb:].expand(-1, n - na, -1)
        i, j, a, b = (t.reshape(len(order_a), -1) for t in (i, j, a, b))
        element = ham.eri_flat[_eri_index(n, a, b)[:, None, :] + _eri_index(n, i, j, inner=True)[:, :, None]]
        # spin-orbitals 2i, 2j+1, 2a, 2b+1: [2i < 2j+1] = [i <= j], [2b+1 < 2a] = [b < a]
        s_occ = _at(below, 2 * i) + _at(below, 2 * j + 1) + (i > j).long() + 1
        s_virt = _at(below, 2 * a) + _at(below, 2 * b + 1) + (b < a).long()
        # the cross terms [2i < 2a], [2j+1 < 2a], [2i < 2b+1], [2j+1 < 2b+1]: [i < a], [j < a], [i <= b], [j < b]
        parity = _joined_parity(s_occ, s_virt, [(i, a), (j, a), (i, b + 1), (j, b)])
        key = _joined_key(ham, [(i, -1), (j, -2)], [(a, 1), (b, 2)])
        blocks.append((key, torch.where(parity, -element, element).reshape(len(order_a), -1)))
    return blocks


def pairs(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """All i < j in range(n), ``(n(n-1)/2, 2)``, i-major: the one order of the pairs that the tables
    ``doubles_aa`` / ``doubles_bb`` and :func:`double_terms` both use."""
    return torch.triu_indices(n, n, 1, device=device).T


def _pairs_of(slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs (p, q) of a sample's orbitals ``slots`` ``(B, m)`` taken at slot pairs s < t, in the order of
    :func:`pairs`: two ``(B, m(m-1)/2)``."""
    first, second = pairs(slots.shape[1], slots.device).T
    return slots[:, first], slots[:, second]


def _eri_index(n: int, p: torch.Tensor, r: torch.Tensor, inner: bool = False) -> torch.Tensor:
    """The part of the flat index of (pq|rs), ``((p n + q) n + r) n + s``, from the outer indices ``p, r``
    (``p n^3 + r n``) or, with ``inner``, from the inner ones ``q, s`` passed as ``p, r`` (``q n^2 + s``)."""
    return p * n * n + r if inner else p * n * n * n + r * n


def _joined_parity(s_occ: torch.Tensor, s_virt: torch.Tensor, cross: list) -> torch.Tensor:
    """Odd parity ``(B, P_occ, P_virt)`` bool of ``s_occ`` ``(B, P_occ)`` + ``s_virt`` ``(B, P_virt)`` minus the
    number of pairs ``(o, v)`` of ``cross`` (each ``(B, P_occ)``, ``(B, P_virt)``) with ``o < v``."""
    parity = ((s_occ & 1).bool()[:, :, None]) ^ ((s_virt & 1).bool()[:, None, :])
    for o, v in cross:
        parity ^= o[:, :, None] < v[:, None, :]
    return parity


def _joined_key(ham, occ_moves: list, virt_moves: list) -> torch.Tensor:
    """Packed-key change ``(B, P_occ * P_virt, W)`` of the moves on the occupied side (each ``(B, P_occ)``,
    delta) joined to those on the virtual side (:func:`_key_delta` of each side, broadcast)."""
    occ, virt = _key_delta(ham, occ_moves), _key_delta(ham, virt_moves)  # (B, P_occ, W), (B, P_virt, W)
    return (occ[:, :, None, :] + virt[:, None, :, :]).reshape(len(occ), -1, occ.shape[-1])


def _double_parity(below, si, sj, sa, sb) -> torch.Tensor:
    """Parity of a+_A a+_B a_J a_I on |x> (spin-orbital indices, each (B, K))."""
    p = _at(below, si)
    p = p + _at(below, sj) - (si < sj).long()
    p = p + _at(below, sb) - (si < sb).long() - (sj < sb).long()
    return p + _at(below, sa) - (si < sa).long() - (sj < sa).long() + (sb < sa).long()


def _eri(ham, p, q, r, s) -> torch.Tensor:
    n = ham.n_orbitals
    return ham.eri_flat[((p * n + q) * n + r) * n + s]


def double_terms_elementwise(ham, order_a, order_b, below) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`double_terms` entry by entry over the tables: each index, sign and key change formed over
    ``(B, K)`` (the slow, obviously-correct twin)."""
    blocks = []
    for spin, order, n_occ, table in ((0, order_a, ham.n_alpha, ham.doubles_aa), (1, order_b, ham.n_beta, ham.doubles_bb)):
        if table.numel() == 0:
            continue
        i, j = order[:, table[:, 0]], order[:, table[:, 1]]
        a, b = order[:, n_occ + table[:, 2]], order[:, n_occ + table[:, 3]]
        element = _eri(ham, a, i, b, j) - _eri(ham, a, j, b, i)
        parity = _double_parity(below, 2 * i + spin, 2 * j + spin, 2 * a + spin, 2 * b + spin)
        d = 1 << spin
        blocks.append((_key_delta(ham, [(i, -d), (j, -d), (a, d), (b, d)]), _sign(parity) * element))
    table = ham.doubles_ab
    if table.numel():
        i, j = order_a[:, table[:, 0]], order_b[:, table[:, 1]]
        a, b = order_a[:, ham.n_alpha + table[:, 2]], order_b[:, ham.n_beta + table[:, 3]]
        element = _eri(ham, a, i, b, j)
        parity = _double_parity(below, 2 * i, 2 * j + 1, 2 * a, 2 * b + 1)
        blocks.append((_key_delta(ham, [(i, -1), (j, -2), (a, 1), (b, 2)]), _sign(parity) * element))
    return blocks
