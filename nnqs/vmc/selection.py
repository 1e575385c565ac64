"""Deterministic selected-configuration optimisation: a core set grown by Hamiltonian connectivity.

Sampling starves configurations of small weight: in N2 the quadruple excitations carry 3.4e-3
of the exact weight, but a model that gives them 1e-7 never draws them, so neither the gradient
nor SR sees them (``benchmarks/RESULTS.md``, "What stops N2"). Here a *core* set C of unique
configurations is kept across steps and every step works on the working set S = C ∪ (fresh
samples of the model, which reveal where the model puts weight that C misses):

* weights ``p(x) = |psi(x)|^2 / sum_S |psi|^2`` (renormalised on S), no counts;
* local energies restricted to S (``E_loc^S(x) = sum_{x' in S} H[x,x'] psi(x')/psi(x)``), so
  ``E_S = sum_S p E_loc^S`` is the Rayleigh quotient of psi projected onto S: an upper bound of
  the ground-state energy, and ``2 Re sum_S p (E_loc^S - E_S)^* d log psi`` its exact gradient;
* the core is then re-selected (:func:`select_core`): every configuration of S or connected to
  S whose amplitude ratio |psi(x)| / max_S |psi| is at least ``threshold`` (by default 1e-4:
  a weight of 1e-8 relative to the largest passes), at most ``max_size`` of them, largest first.

This follows the selected-configuration NQS of Li et al. (SC-NQS, JCTC 19, 8156, 2023) and
the renormalised unique-set weights of Malyshev et al. (ANQS). Side numbers, never reported as
the network's energy: :func:`pt2_correction` (Epstein-Nesbet second order over the external
space of C) and :func:`subspace_energy` (H diagonalised on C, as NAQS's "VMC+FCI").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nnqs.common.distributed import Communicator, SingleProcess
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.keys import lookup, pack, unique_keys, unpack
from nnqs.vmc.local_energy import LogPsiFn, evaluate_chunked, local_energy


def unique_union(*sets: torch.Tensor) -> torch.Tensor:
    """The distinct rows of the ``(M_i, n)`` token sets, sorted by packed key -> ``(U, n)``."""
    tokens = torch.cat(sets)
    uniq, _ = unique_keys(pack(tokens))
    return unpack(uniq, tokens.shape[1])


def set_weights(log_psi: torch.Tensor) -> torch.Tensor:
    """``|psi|^2`` renormalised over the set: ``(U,)`` complex log psi -> ``(U,)`` float64 summing to 1."""
    log_w = 2.0 * log_psi.detach().real.double()
    return torch.softmax(log_w, dim=0)


# How far below the threshold (in log |psi|) the prefix-tree ranker still evaluates exactly: a
# configuration whose prefix falls below it cannot pass on its network amplitude (the conditionals
# are probabilities), so its subtree is cut. The margin covers float32 rounding of the ranker.
FLOOR_MARGIN = 1e-3


# External configurations unpacked, scored and screened at once by the core's re-selection and by PT2: the
# external space of a 65,536-configuration core at 52 qubits is ~10^8 configurations, whose tokens alone
# (26 int64 each) would be tens of GB; a run of N2/cc-pVDZ was killed for memory at 23.6 GB in its third
# re-selection when they were unpacked and ranked all at once (benchmarks/RESULTS.md).
CANDIDATE_CHUNK = 2**20


def external_chunks(ham: CompactHamiltonian, keys: torch.Tensor, coupling: torch.Tensor, n: int, device):
    """The external space ``keys`` ``(T, W)`` (:func:`external_space`) a chunk of ``CANDIDATE_CHUNK`` at a
    time: ``(tokens (B, n), coupling rows (B, ...), H[a, a] (B,))`` per chunk, the tokens on ``device``."""
    for start in range(0, len(keys), CANDIDATE_CHUNK):
        tokens = unpack(keys[start : start + CANDIDATE_CHUNK], n).to(device)
        yield tokens, coupling[start : start + len(tokens)], ham.diagonal(tokens)


# Connection entries outside the set held before they are folded into the external set (sorted and summed):
# each fold sorts the whole external set again, so folding after every chunk of rows (about 2^22 entries)
# sorted a 52-qubit external set of ~10^8 keys hundreds of times in one re-selection.
FOLD_ENTRIES = 2**24


def rows_per_chunk(ham: CompactHamiltonian) -> int:
    """Configurations whose connections are held at once: about 2^22 connected entries."""
    return max(1, 2**22 // max(1, ham.n_connected))


# How often the core is re-selected. A re-selection enumerates every connection of the set (the external
# space) and ranks the distinct ones, so its cost grows with core size x connections per configuration: about
# 0.2 microseconds per entry on one core here (H2O/6-31G 17M entries 3 s, H10 at 1.5 A 22M 5.4 s, N2/6-31G
# at 1.1 A 114M 29 s, at 2.2 A 277M 52 s), while a step above sr_exact_max costs about the same at any size
# (5 to 8 s, the Gram matrix of sr_rows rows). Every core_every steps, at 32 qubits the re-selections took
# 46-54% of the VMC time. (Those seconds predate the doubles joined from pairs (nnqs.vmc.hamiltonian_terms): the
# 2.2 A re-selection of a core of 65,000 then took 39 s, 20 of them enumerating connections, and takes 19 s with
# 5 since; the spacing below was kept.) They are spaced so that one enumerates at most CORE_ENTRIES entries per step
# between (about as many seconds as those steps), at most CORE_EVERY_GROWTH times core_every apart.
CORE_ENTRIES = 2**25
CORE_EVERY_GROWTH = 4


def reselection_every(core_every: int, core_entries: int, core_rows: int, n_connected: int) -> int:
    """Steps between re-selections of a core of ``core_rows`` configurations with ``n_connected`` connections
    each: ``core_every``, or more where the entries exceed ``core_entries`` per step (0: ``core_every``)."""
    if core_entries <= 0:
        return core_every
    return min(CORE_EVERY_GROWTH * core_every, max(core_every, -(-core_rows * n_connected // core_entries)))


@dataclass
class Selection:
    """The re-selected core ``configs`` ``(M, n)`` and what the selection saw."""

    configs: torch.Tensor
    n_candidates: int  # distinct configurations of S and connected to S
    n_evaluated: int  # connected configurations handed to the ranker (the cut tree stops early on most)


def select_core(
    log_psi_fn: LogPsiFn, ham: CompactHamiltonian, configs: torch.Tensor, log_psi: torch.Tensor,
    threshold: float, max_size: int, max_batch: int = 8192, energy: float | None = None,
    comm: Communicator | None = None,
) -> Selection:
    """Keep the configurations of ``configs`` ``(U, n)`` (amplitudes ``log_psi`` ``(U,)``) and of
    their connected set whose ``|psi| / max |psi|`` over ``configs`` is at least ``threshold``;
    at most ``max_size``, largest first -> :class:`Selection`.

    With ``energy`` (the Rayleigh quotient of psi on ``configs``, Hartree) a connected
    configuration a also passes on its first-order amplitude
    ``|<a|H|psi_S>| / |energy - H[a, a]|`` relative to ``max |psi_S|`` (psi normalised on the
    set), as CIPSI selects: the network's own guess for a configuration outside the set gets no
    gradient, so a configuration it underrates would otherwise never come back.

    With ``comm`` every rank enumerates the same external space and evaluates the network on
    its share of it (the costly part); the amplitudes are gathered, so every rank selects the
    same core."""
    comm = comm or SingleProcess()
    log_psi = log_psi.detach().to(torch.complex128)
    amplitudes = normalised_amplitudes(log_psi)
    outside, coupling = external_space(ham, configs, amplitudes)
    ceiling, floor = float(log_psi.real.max()), float(np.log(threshold))
    if hasattr(log_psi_fn, "above"):  # a ranker that can skip what cannot pass (TreeLogPsi.above)
        log_psi_fn = log_psi_fn.above(ceiling + floor - FLOOR_MARGIN)
    tokens, scores = [configs], [log_psi.real - ceiling]
    for part, numerator, h_aa in external_chunks(ham, outside, coupling, configs.shape[1], configs.device):
        # only the candidates that pass are kept
        score_out = comm.unshare(evaluate_chunked(log_psi_fn, comm.share(part), max_batch).real) - ceiling
        if energy is not None:
            first_order = numerator.abs() / (energy - h_aa).abs().clamp_min(1e-12)
            score_out = torch.maximum(score_out, torch.log(first_order / amplitudes.abs().max()))
        passing = score_out >= floor
        tokens.append(part[passing]), scores.append(score_out[passing])
    everything, score = torch.cat(tokens), torch.cat(scores)
    keep = score >= floor
    order = torch.argsort(score[keep], descending=True, stable=True)[:max_size]
    return Selection(everything[keep][order], len(configs) + len(outside), len(outside))


def external_space(ham: CompactHamiltonian, configs: torch.Tensor, amplitudes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The configurations a outside ``configs`` ``(M, n)`` connected to it, as sorted unique packed
    keys ``(T, W)``, and ``<a|H|c>`` ``(T,)`` complex128 for the vector ``amplitudes`` ``(M,)`` on the set;
    for ``k`` vectors ``(M, k)`` at once, ``(T, k)`` from one pass over the set's connections."""
    amplitudes = amplitudes.to(torch.complex128)
    single = amplitudes.dim() == 1
    amplitudes = amplitudes.unsqueeze(1) if single else amplitudes
    own = unique_keys(pack(configs))[0]
    keys_all, values_all, pending = [own[:0]], [amplitudes[:0]], 0
    for rows in torch.arange(len(configs), device=configs.device).split(rows_per_chunk(ham)):
        conn = ham.connections(configs[rows])
        owner, k = torch.nonzero(conn.elements, as_tuple=True)
        keys = conn.keys[owner, k]
        outside = lookup(own, keys) < 0
        keys_all.append(keys[outside])
        values_all.append(conn.elements[owner, k][outside].to(torch.complex128).unsqueeze(1) * amplitudes[rows][owner[outside]])
        pending += len(keys_all[-1])
        if pending > FOLD_ENTRIES:  # fold as we go: the external set, not the connection list, is kept
            uniq, summed = _fold(keys_all, values_all)
            keys_all, values_all, pending = [uniq], [summed], 0
    uniq, summed = _fold(keys_all, values_all)
    return uniq, summed.squeeze(1) if single else summed


def _fold(keys: list[torch.Tensor], values: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The sorted unique keys of the blocks ``keys`` and the rows of ``values`` ``(., k)`` summed over each."""
    uniq, inverse = unique_keys(torch.cat(keys))
    stacked = torch.cat(values)
    return uniq, stacked.new_zeros(len(uniq), stacked.shape[1]).index_add(0, inverse, stacked)


def normalised_amplitudes(log_psi: torch.Tensor) -> torch.Tensor:
    """psi on the set, normalised to 1 there: ``(M,)`` complex log psi -> ``(M,)`` complex128."""
    log_psi = log_psi.detach().to(torch.complex128)
    amp = torch.exp(log_psi - log_psi.real.max())
    return amp / amp.abs().pow(2).sum().sqrt()


def pt2_correction(ham: CompactHamiltonian, configs: torch.Tensor, log_psi: torch.Tensor, energy: float) -> float:
    """Epstein-Nesbet second-order correction (Hartree) for the state psi restricted to ``configs``
    ``(M, n)`` with variational energy ``energy`` (its Rayleigh quotient on the set):
    ``sum_a |<a|H|psi_C>|^2 / (energy - H[a, a])`` over the configurations a outside the set."""
    keys, numerator = external_space(ham, configs, normalised_amplitudes(log_psi))
    total = 0.0
    for _, part, h_aa in external_chunks(ham, keys, numerator, configs.shape[1], configs.device):
        total += float((part.abs().pow(2) / (energy - h_aa)).sum())
    return total


def set_hamiltonian(ham: CompactHamiltonian, configs: torch.Tensor):
    """H restricted to ``configs`` ``(M, n)`` as a scipy CSR matrix ``(M, M)`` (rows in input order)."""
    return set_hamiltonian_rows(ham, configs, torch.arange(len(configs), device=configs.device))


def lowest_eigenpairs(ham: CompactHamiltonian, configs: torch.Tensor, roots: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The ``roots`` lowest eigenvalues ``(k,)`` (ascending, Hartree) and eigenvectors ``(M, k)`` of H on
    ``configs`` ``(M, n)``: dense below 200 configurations, Lanczos (``eigsh``) above."""
    return matrix_eigenpairs(set_hamiltonian(ham, configs), roots)


def matrix_eigenpairs(h, roots: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """:func:`lowest_eigenpairs` of a matrix ``h`` (scipy sparse, ``(M, M)``) already built."""
    import scipy.sparse.linalg as sla

    k = min(roots, h.shape[0])
    if h.shape[0] <= 200:
        w, v = np.linalg.eigh(h.toarray())
        return w[:k], v[:, :k]
    v0 = np.random.default_rng(0).standard_normal(h.shape[0])  # ARPACK's own start is random: runs would differ
    w, v = sla.eigsh(h, k=k, which="SA", tol=1e-10, v0=v0)
    order = np.argsort(w)
    return w[order], v[:, order]


def subspace_energy(ham: CompactHamiltonian, configs: torch.Tensor) -> float:
    """Lowest eigenvalue (Hartree) of H diagonalised on the set ``configs`` ``(M, n)``: a variational
    energy of the best vector on the set, not of the network."""
    return float(lowest_eigenpairs(ham, configs, 1)[0][0])


def core_energies(wf, ham: CompactHamiltonian, core: torch.Tensor, max_batch: int = 8192,
                  core_ham: "CoreHamiltonian | None" = None) -> dict:
    """The side numbers of a core ``(M, n)``, each under its own name (Hartree): the network's Rayleigh
    quotient on the core (``e_core``), plus its PT2 correction (``e_core_pt2``), and H diagonalised on
    the core (``e_subspace``). None of them is the network's energy ``<psi|H|psi>``.

    ``core_ham``: H on this core or on an earlier one (the run's :class:`CoreHamiltonian`), grown to
    this core where they differ; ``e_core`` and ``e_subspace`` are then taken from its matrix and only
    the PT2 correction enumerates the core's connections (without it, each of the three does)."""
    with torch.no_grad():
        log_psi = wf.log_psi(core, chunk_size=max_batch)
    if core_ham is None:
        with torch.no_grad():
            values = local_energy(wf.log_psi, ham, core, log_psi, "sample-space", max_batch).values
        e_core = float((set_weights(log_psi) * values.real).sum())
        e_subspace = subspace_energy(ham, core)
    else:
        if core_ham.core is not core:
            core_ham = CoreHamiltonian(ham, core, previous=core_ham)
        e_core = core_ham.rayleigh_quotient(log_psi)
        e_subspace = float(matrix_eigenpairs(core_ham.matrix, 1)[0][0])
    return {"n_core": len(core), "e_core": e_core, "e_core_pt2": e_core + pt2_correction(ham, core, log_psi, e_core),
            "e_subspace": e_subspace}


class CoreHamiltonian:
    """H restricted to a core ``(M, n)``, held as a CSR matrix and built once per core, and the
    Rayleigh-quotient local energies of a working set S = core + fresh samples from it: only the
    fresh rows' connections are enumerated each step (the set's local energy of
    :func:`nnqs.vmc.local_energy.local_energy` with ``"sample-space"`` is its slow twin)."""

    def __init__(self, ham: CompactHamiltonian, core: torch.Tensor, previous: "CoreHamiltonian | None" = None) -> None:
        self.core = core
        self.keys = pack(core)
        if previous is None:
            self.matrix = set_hamiltonian(ham, core)  # rows and columns in core order
        else:
            self.matrix = _grown_hamiltonian(ham, core, self.keys, previous)

    def rayleigh_quotient(self, log_psi: torch.Tensor) -> float:
        """``<psi|H|psi> / <psi|psi>`` (Hartree) of the state restricted to the core, whose amplitudes
        ``log_psi`` ``(M,)`` are in core order."""
        psi = torch.exp(log_psi.detach().to(torch.complex128) - log_psi.real.max()).cpu().numpy()
        return float(np.vdot(psi, self.matrix @ psi).real / np.vdot(psi, psi).real)

    def local_energies(self, ham: CompactHamiltonian, configs: torch.Tensor, log_psi: torch.Tensor) -> torch.Tensor:
        """``E_loc^S(x) = sum_{x' in S} H[x, x'] psi(x') / psi(x)`` ``(U,)`` complex128 for the working
        set ``configs`` ``(U, n)`` (sorted by packed key, as :func:`unique_union` returns them, and holding
        the core) with amplitudes ``log_psi`` ``(U,)``."""
        log_psi = log_psi.detach().to(torch.complex128)
        keys = pack(configs)
        at = lookup(keys, self.keys)  # where each core row sits in the set
        assert bool((at >= 0).all()), "the working set must hold the core, sorted by key"
        psi = torch.exp(log_psi - log_psi.real.max())
        h_psi = torch.zeros_like(psi)
        h_psi[at] = torch.from_numpy(self.matrix @ psi[at].cpu().numpy()).to(psi.device)
        fresh = torch.ones(len(configs), dtype=torch.bool, device=configs.device)
        fresh[at] = False
        rows = torch.nonzero(fresh).squeeze(1)
        if len(rows):
            conn = ham.connections(configs[rows])
            owner, k = torch.nonzero(conn.elements, as_tuple=True)
            slot = lookup(keys, conn.keys[owner, k])
            inside = slot >= 0
            owner, slot, h = owner[inside], slot[inside], conn.elements[owner, k][inside].to(torch.complex128)
            h_psi[rows] += conn.diagonal.to(torch.complex128) * psi[rows]
            h_psi.index_add_(0, rows[owner], h * psi[slot])  # the fresh rows: all of S
            to_core = ~fresh[slot]  # and their columns of the core rows (H is symmetric)
            h_psi.index_add_(0, slot[to_core], h[to_core] * psi[rows[owner[to_core]]])
        return torch.where(psi.abs() > 0, h_psi / psi, ham.diagonal(configs).to(torch.complex128))


def _grown_hamiltonian(ham: CompactHamiltonian, core: torch.Tensor, keys: torch.Tensor, previous: CoreHamiltonian):
    """H on ``core`` ``(M, n)`` (CSR, core order) from H on the previous core: the rows and columns of the
    configurations both hold are taken from it, and only the new configurations' connections are
    enumerated (a re-selection keeps most of the core). The same matrix as :func:`set_hamiltonian`."""
    import scipy.sparse as sp

    old_keys, old_inverse = unique_keys(previous.keys)
    old_position = torch.empty(len(old_keys), dtype=torch.long)
    old_position[old_inverse] = torch.arange(len(previous.keys))
    slot = lookup(old_keys, keys)
    kept = torch.nonzero(slot >= 0).squeeze(1)  # rows of the new core the previous one held
    added = torch.nonzero(slot < 0).squeeze(1)
    source = old_position[slot[kept]].numpy()
    order = np.concatenate([kept.numpy(), added.numpy()])  # block b holds core row order[b]: kept first
    blocks = [[previous.matrix[source][:, source], None], [None, None]]
    if len(added):
        whole = set_hamiltonian_rows(ham, core, added)[:, order]  # (A, M), columns in block order
        blocks[1] = [whole[:, : len(kept)], whole[:, len(kept):]]
        blocks[0][1] = whole[:, : len(kept)].T
    else:
        blocks = [[blocks[0][0]]]
    matrix = sp.bmat(blocks, format="csr")
    back = np.argsort(order)  # core row i sits at block row back[i]
    return matrix[back][:, back].tocsr()


def set_hamiltonian_rows(ham: CompactHamiltonian, configs: torch.Tensor, rows: torch.Tensor):
    """The ``rows`` ``(A,)`` of H restricted to ``configs`` ``(M, n)``: a CSR matrix ``(A, M)``."""
    import scipy.sparse as sp

    own, inverse = unique_keys(pack(configs))
    position = torch.empty(len(own), dtype=torch.long, device=own.device)
    position[inverse] = torch.arange(len(configs), device=own.device)
    r, c, v = [], [], []
    chunk = rows_per_chunk(ham)
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        conn = ham.connections(configs[part])
        owner, k = torch.nonzero(conn.elements, as_tuple=True)
        slot = lookup(own, conn.keys[owner, k])
        inside = slot >= 0
        r.append((owner[inside] + start).cpu()), c.append(position[slot[inside]].cpu())
        v.append(conn.elements[owner, k][inside].cpu())
        index = torch.arange(start, start + len(part))
        r.append(index), c.append(part.cpu()), v.append(conn.diagonal.cpu())
    return sp.csr_matrix((torch.cat(v).numpy(), (torch.cat(r).numpy(), torch.cat(c).numpy())), shape=(len(rows), len(configs)))
