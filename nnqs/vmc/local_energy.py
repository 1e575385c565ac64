"""Local energy E_loc(x) = sum_x' H[x, x'] psi(x') / psi(x), vectorised over a batch.

The hot path: enumerate the connected x' of every sample
(:meth:`~nnqs.vmc.compact_hamiltonian.CompactHamiltonian.connections`), drop zero
elements, deduplicate x' across the whole batch, evaluate log psi once per
unique x' that is not already known (the samples' own amplitudes are reused),
in chunks of at most ``max_batch`` configurations, then sum.

Estimators:

* ``"exact"`` -- every connected x' (the default; always used for reported energies).
* ``"sample-space"`` -- only x' inside the current sample set (cheaper, biased).
* ``"heat-bath"`` -- x' with ``|H[x, x']| >= HEAT_BATH_CUTOFF`` exactly, and the screened-out
  remainder R_x by ``HEAT_BATH_DRAWS`` draws with probability ``|H[x, x']| / sum_R |H|``, each
  weighted ``sign(H[x, x']) sum_R |H| / draws``: unbiased, with a variance of its own (as the
  semistochastic heat-bath CI treats its perturbative remainder).

:func:`local_energy_dense` is the slow, obviously-correct twin (a dense or
sparse matrix in an enumerated basis) used as a test oracle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal

import torch

from nnqs.vmc.keys import lookup, pack, unique_keys, unpack
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.prefix_tree import TREE_MIN_ORBITALS, TREE_ROWS, TreeLogPsi

if TYPE_CHECKING:
    from nnqs.common.distributed import Communicator

LogPsiFn = Callable[[torch.Tensor], torch.Tensor]
Estimator = Literal["exact", "sample-space", "heat-bath"]
HEAT_BATH_CUTOFF = 1e-2  # Hartree: |H[x, x']| kept exactly by the heat-bath estimator
HEAT_BATH_DRAWS = 32  # draws per configuration from its screened-out remainder


@dataclass
class LocalEnergyResult:
    """``values`` (U,) complex128 local energies (Hartree) and work counters."""

    values: torch.Tensor
    n_connected: int  # nonzero connected entries over the batch
    n_unique_connected: int  # distinct x' among them
    n_evaluated: int  # x' whose log psi had to be computed


class AmplitudeTable:
    """Sorted packed keys ``(T, W)`` with their log psi ``(T,)``; grows as x' are evaluated."""

    def __init__(self, keys: torch.Tensor, log_psi: torch.Tensor) -> None:
        uniq, inverse = unique_keys(keys)
        values = torch.empty(len(uniq), dtype=log_psi.dtype, device=log_psi.device)
        values[inverse] = log_psi
        self.keys, self.log_psi = uniq, values

    def add(self, keys: torch.Tensor, log_psi: torch.Tensor) -> None:
        merged = torch.cat([self.keys, keys])
        uniq, inverse = unique_keys(merged)
        values = torch.empty(len(uniq), dtype=self.log_psi.dtype, device=log_psi.device)
        values[inverse] = torch.cat([self.log_psi, log_psi])
        self.keys, self.log_psi = uniq, values


PASS_TOKENS = 2048  # tokens per network call: the activations of a pass stay in the CPU's L2 cache


def evaluate_chunked(log_psi_fn: LogPsiFn, tokens: torch.Tensor, max_batch: int) -> torch.Tensor:
    """``log_psi_fn`` over ``(M, n)`` tokens under no_grad -> (M,), in chunks of ``max_batch``
    configurations or :data:`PASS_TOKENS` tokens, whichever is fewer. Small passes are faster:
    one thread, d_model 32, float64, the exact local energy of H2O/6-31G took 1.6 s in chunks of
    8,192 tokens and 1.15 s in chunks of 2,048 (H2O/cc-pVDZ 2.7 s and 1.6 s)."""
    if getattr(log_psi_fn, "whole_batch", False):  # nnqs.vmc.prefix_tree.TreeLogPsi: it cuts its own trees
        if tokens.shape[1] >= TREE_MIN_ORBITALS:
            with torch.no_grad():
                return log_psi_fn(tokens).to(torch.complex128)
        log_psi_fn = log_psi_fn.wf.log_psi  # short configurations: the plain pass is faster
    rows = max(1, min(max_batch, PASS_TOKENS // max(1, tokens.shape[1])))
    with torch.no_grad():
        parts = [log_psi_fn(tokens[s : s + rows]) for s in range(0, tokens.shape[0], rows)]
    if not parts:
        return torch.empty(0, dtype=torch.complex128, device=tokens.device)
    return torch.cat(parts).to(torch.complex128)


def local_energy(
    log_psi_fn: LogPsiFn,
    ham: CompactHamiltonian,
    configs: torch.Tensor,
    log_psi: torch.Tensor,
    estimator: Estimator = "exact",
    max_batch: int = 8192,
    max_connected: int = 2**22,
    generator: torch.Generator | None = None,
) -> LocalEnergyResult:
    """Local energies of unique ``configs`` ``(U, n)`` whose amplitudes are ``log_psi`` ``(U,)``.

    ``max_batch`` bounds the configurations per network call; ``max_connected``
    bounds the connected entries held at once (samples are processed in chunks
    of ``max_connected // K``; x' already evaluated in earlier chunks are reused).
    ``generator`` drives the heat-bath draws.
    """
    if estimator not in ("exact", "sample-space", "heat-bath"):
        raise ValueError(f"unknown estimator {estimator!r}")
    log_psi = log_psi.detach().to(torch.complex128)
    table = AmplitudeTable(pack(configs), log_psi)
    chunk = max(1, max_connected // max(1, ham.n_connected))
    values, n_conn, n_eval, seen = [], 0, 0, []
    for start in range(0, configs.shape[0], chunk):
        rows = slice(start, start + chunk)
        conn = ham.connections(configs[rows])
        if estimator == "heat-bath":
            owner, k, elements = heat_bath_terms(conn.elements, HEAT_BATH_CUTOFF, HEAT_BATH_DRAWS, generator)
        else:
            owner, k = torch.nonzero(conn.elements, as_tuple=True)
            elements = conn.elements[owner, k]
        keys = conn.keys[owner, k]
        uniq, inverse = unique_keys(keys)
        slot, added = _slots(table, uniq, log_psi_fn, configs.shape[1], max_batch, estimator != "sample-space")
        n_eval += added
        seen.append(uniq)
        slot = slot[inverse]
        valid = slot >= 0  # all, but for "sample-space": only x' inside the sample set
        ratio = torch.exp(table.log_psi[slot[valid]] - log_psi[rows][owner[valid]])
        e = conn.diagonal.to(torch.complex128)
        e = e.index_add(0, owner[valid], elements[valid].to(torch.complex128) * ratio)
        values.append(e)
        n_conn += len(keys)
    n_unique = len(seen[0]) if len(seen) == 1 else len(unique_keys(torch.cat(seen))[0]) if seen else 0
    return LocalEnergyResult(torch.cat(values), n_conn, n_unique, n_eval)


def heat_bath_terms(
    elements: torch.Tensor, cutoff: float, draws: int, generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The terms of the heat-bath estimator for connection ``elements`` ``(B, K)``: row and column
    indices and coefficients ``(T,)``: every element of magnitude at least ``cutoff`` as it is, and
    ``draws`` draws per row from the smaller nonzero ones with probability proportional to their
    magnitude, each with coefficient ``sign * (their magnitude sum) / draws``; the expected sum of
    ``coefficient * ratio`` over a row's terms is its exact ``sum_k H[x, x'_k] ratio_k``."""
    magnitude = elements.abs()
    large = magnitude >= cutoff
    owner, k = torch.nonzero(large, as_tuple=True)
    small = torch.where(large, torch.zeros_like(magnitude), magnitude)
    remainder = small.sum(1)
    rows = torch.nonzero(remainder > 0).squeeze(1)
    if len(rows) == 0 or draws == 0:
        return owner, k, elements[owner, k]
    picked = torch.multinomial(small[rows], draws, replacement=True, generator=generator)  # (R, draws)
    picked_rows = rows.unsqueeze(1).expand_as(picked)
    weight = (remainder[rows] / draws).unsqueeze(1) * torch.sign(elements[picked_rows, picked])
    return (torch.cat([owner, picked_rows.reshape(-1)]), torch.cat([k, picked.reshape(-1)]),
            torch.cat([elements[owner, k], weight.reshape(-1)]))


def _slots(table: "AmplitudeTable", uniq: torch.Tensor, log_psi_fn: LogPsiFn, n_orbitals: int, max_batch: int,
           evaluate: bool) -> tuple[torch.Tensor, int]:
    """The rows of the packed keys ``uniq`` in ``table`` (-1: absent), after evaluating the network on
    the absent ones and adding them when ``evaluate``; and how many were evaluated."""
    slot = lookup(table.keys, uniq)
    missing = slot < 0
    if not evaluate or not bool(missing.any()):
        return slot, 0
    new_keys = uniq[missing]
    table.add(new_keys, evaluate_chunked(log_psi_fn, unpack(new_keys, n_orbitals), max_batch))
    return lookup(table.keys, uniq), len(new_keys)


def local_energy_dense(
    matrix, basis_tokens: torch.Tensor, log_psi_basis: torch.Tensor, configs: torch.Tensor
) -> torch.Tensor:
    """Oracle: (H psi)(x) / psi(x) with ``matrix`` (D, D) (dense or scipy sparse) over an
    enumerated basis ``basis_tokens`` (D, n) with amplitudes ``log_psi_basis`` (D,) -> (U,) complex128."""
    import numpy as np

    psi = torch.exp(log_psi_basis.detach().to(torch.complex128)).numpy()
    h_psi = np.asarray(matrix @ psi).ravel()
    index = {tuple(t): i for i, t in enumerate(basis_tokens.tolist())}
    rows = [index[tuple(t)] for t in configs.tolist()]
    return torch.from_numpy(h_psi[rows] / psi[rows])


# Precision of the network passes over the connected x' (the samples' own log psi, the ratios and all
# sums stay float64). On trained states, against float64 passes (10^12 fresh samples, one thread):
# N2/STO-3G 3,385 unique, energy moved by 3e-14 Ha (1e-6 of its 3.7e-8 standard error), 1.55x faster;
# H2O/6-31G 3,758 unique, 6.8e-11 Ha (2e-6 of its 4.2e-5), 1.90x (benchmarks/RESULTS.md).
CONNECTED_DTYPE = "float32"


def share_local_energy(
    wf, ham, configs: torch.Tensor, log_psi: torch.Tensor, estimator: str, max_batch: int, comm: Communicator,
    connected_dtype: str = CONNECTED_DTYPE,
) -> tuple[torch.Tensor, int]:
    """Local energies ``(U_r,)`` complex128 of this rank's share of the unique ``configs`` ``(U, n)``
    (the same on every rank), given the share's ``log_psi`` ``(U_r,)``; and the number of distinct
    connected x'. Every rank enumerates and deduplicates the connected x' of *all* samples (cheap),
    then evaluates the network on its share of the distinct x' only; the amplitudes are gathered.
    ``connected_dtype`` ("float32" or "float64"): the precision of those network passes (a copy of
    ``wf`` in it); the ratios psi(x') / psi(x) and the sums are float64 either way."""
    log_psi = log_psi.detach()
    # The heat-bath draws must pick the same x' on every rank (the ranks share their evaluation),
    # so they are seeded by the sample set, which every rank holds alike; a run also repeats them.
    generator = torch.Generator(configs.device).manual_seed(int(pack(configs).sum()) % 2**63)
    # x' through their prefix tree (below TREE_MIN_ORBITALS the plain pass of the same copy)
    tree = TreeLogPsi(wf, min(max_batch, TREE_ROWS), getattr(torch, connected_dtype))
    if comm.world_size == 1:
        result = local_energy(tree, ham, configs, log_psi, estimator, max_batch, generator=generator)
        return result.values, result.n_unique_connected

    def log_psi_by_shares(tokens: torch.Tensor) -> torch.Tensor:  # called alike on every rank
        return comm.unshare(tree(comm.share(tokens)))

    result = local_energy(log_psi_by_shares, ham, configs, comm.unshare(log_psi), estimator, max_batch,
                          generator=generator)
    return comm.share(result.values), result.n_unique_connected
