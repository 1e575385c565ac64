"""The 1-RDM of the network from samples, with standard errors: what a run reports where its core
does not hold the whole sector (there the core's vector is only part of the state).

For a configuration x drawn from |psi|^2, the local value of the spin-summed one-body operator
E_pq = sum_s a+_ps a_qs is

    L_pq(x) = sum_s sign_s(x; p -> q) psi(y) / psi(x),   y = a+_qs a_ps x   (p != q),
    L_pp(x) = n_p(x),

so that <E_pq> = E_{x ~ |psi|^2} [L_pq(x)] (the matrix elements are real: <x|a+_p a_q|y> =
<y|a+_q a_p|x>). The sign is Jordan-Wigner's on the interleaved spin-orbitals 2p (alpha), 2p + 1
(beta) (:mod:`nnqs.vmc.civector`): (-1) to the number of occupied spin-orbitals strictly between the
two. The ansatz is real, so the estimate is symmetrised, ``(L + L^T) / 2``, as PySCF's ``make_rdm1``
of a real vector is symmetric.

Samples come from the network's P with the weights of :func:`nnqs.vmc.estimates.estimate` (counts, times
|psi|^2 / P for the real ansatz, self-normalised); each element's standard error is that estimator's.
Any linear functional of the 1-RDM (a dipole component) gets its own error from its local values,
``functional_estimates``. Slow twin: the same sums with the whole sector weighted by the exact
|psi|^2, equal to PySCF's dense contraction of the vector (``tests/vmc/test_sampled_rdm.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class SampledRDM:
    """``rdm1`` ``(n, n)``: the spin-summed 1-RDM (PySCF's convention); ``stderr`` ``(n, n)`` its
    elements' standard errors; ``functionals`` ``(K,)`` and ``functional_stderr`` ``(K,)``: the
    estimates of sum_pq F_k[p, q] rdm1[p, q] for the matrices F given; ``n_unique`` configurations."""

    rdm1: np.ndarray
    stderr: np.ndarray
    functionals: np.ndarray
    functional_stderr: np.ndarray
    n_unique: int


def spin_occupations(configs: torch.Tensor) -> torch.Tensor:
    """``(M, 2n)`` 0/1 occupations of the interleaved spin-orbitals of tokens ``configs`` ``(M, n)``."""
    tokens = configs.long()
    return torch.stack([tokens & 1, tokens >> 1], dim=2).reshape(len(tokens), -1)


def single_moves(configs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every y = a+_qs a_ps x of ``configs`` ``(M, n)`` with p != q: ``(row, p, q, sign, y)``, ``row``
    the index of x, ``sign`` the Jordan-Wigner sign, ``y`` ``(K, n)`` tokens."""
    occ = spin_occupations(configs)
    before = torch.cumsum(occ, 1) - occ  # occupied spin-orbitals below each one
    n = configs.shape[1]
    out = []
    for s in (0, 1):
        for p in range(n):
            for q in range(n):
                if p == q:
                    continue
                lo, hi = sorted((2 * p + s, 2 * q + s))
                rows = torch.nonzero((occ[:, 2 * p + s] == 1) & (occ[:, 2 * q + s] == 0)).flatten()
                if len(rows) == 0:
                    continue
                between = before[rows, hi] - before[rows, lo] - occ[rows, lo]
                y = configs[rows].clone()
                y[:, p] -= 1 << s
                y[:, q] += 1 << s
                sign = 1.0 - 2.0 * (between % 2).double()
                out.append((rows, torch.full_like(rows, p), torch.full_like(rows, q), sign, y))
    if not out:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty, empty, torch.zeros(0, dtype=torch.float64), configs[:0]
    return tuple(torch.cat(parts) for parts in zip(*out))  # type: ignore[return-value]


def local_rdm1(wf, configs: torch.Tensor, log_psi: torch.Tensor, chunk_size: int = 8192) -> torch.Tensor:
    """``(M, n, n)`` the symmetrised local values L_pq(x) of ``configs`` ``(M, n)`` whose log psi
    ``(M,)`` (complex, the sign in its imaginary part) is given."""
    m, n = configs.shape
    local = torch.zeros(m, n, n, dtype=torch.float64)
    occ = spin_occupations(configs).reshape(m, n, 2).sum(2).double()
    local[:, torch.arange(n), torch.arange(n)] = occ
    rows, p, q, sign, y = single_moves(configs)
    if len(rows):
        unique, inverse = torch.unique(y, dim=0, return_inverse=True)
        with torch.no_grad():
            log_y = wf.log_psi(unique.to(configs.device), chunk_size=chunk_size).to(torch.complex128).cpu()[inverse]
        ratio = torch.exp(log_y - log_psi.to(torch.complex128).cpu()[rows]).real
        local.index_put_((rows, p, q), sign * ratio, accumulate=True)
    return 0.5 * (local + local.transpose(1, 2))


def rdm1_estimate(
    wf, configs: torch.Tensor, counts: torch.Tensor, ratios: torch.Tensor | None = None,
    functionals: list[np.ndarray] | None = None, chunk_size: int = 8192, rows_per_pass: int = 2048,
) -> SampledRDM:
    """The 1-RDM of ``wf`` from the unique ``configs`` ``(M, n)`` drawn ``counts`` ``(M,)`` times
    (``ratios``: |psi|^2 / P of each, the real ansatz), with standard errors; and the linear
    ``functionals`` of it (``(n, n)`` matrices F_k), each with its own error (see the module)."""
    counts = counts.double().cpu()
    q = counts * (1.0 if ratios is None else ratios.double().cpu())
    w = q / q.sum()
    w2 = w * w / counts.clamp_min(1) if ratios is not None else w / float(counts.sum())
    n = configs.shape[1]
    f = torch.as_tensor(np.stack(functionals) if functionals else np.zeros((0, n, n)), dtype=torch.float64)
    sums = [torch.zeros(n, n, dtype=torch.float64) for _ in range(3)]
    fsums = [torch.zeros(len(f), dtype=torch.float64) for _ in range(3)]
    with torch.no_grad():
        log_psi = wf.log_psi(configs, chunk_size=chunk_size)
    for start in range(0, len(configs), rows_per_pass):
        part = slice(start, start + rows_per_pass)
        local = local_rdm1(wf, configs[part], log_psi[part], chunk_size)
        values = torch.einsum("mpq,kpq->mk", local, f)
        for target, x in ((sums, local), (fsums, values)):
            wp, w2p = w[part].view(-1, *([1] * (x.dim() - 1))), w2[part].view(-1, *([1] * (x.dim() - 1)))
            target[0] += (wp * x).sum(0)
            target[1] += (w2p * x).sum(0)
            target[2] += (w2p * x * x).sum(0)
    total_w2 = float(w2.sum())

    def spread(s):  # sum_i w2_i (x_i - mean)^2, expanded
        return (s[2] - 2 * s[0] * s[1] + s[0] ** 2 * total_w2).clamp_min(0).sqrt().numpy()

    return SampledRDM(sums[0].numpy(), spread(sums), fsums[0].numpy(), spread(fsums), len(configs))
