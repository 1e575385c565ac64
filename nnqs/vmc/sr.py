"""Stochastic reconfiguration (natural gradient) in its sample-space form ("minSR").

With per-sample log-derivatives O_i = d log psi(x_i) / d theta (U x P, complex),
weights w_i and centred, weighted rows  Ō_i = sqrt(w_i) (O_i - sum_j w_j O_j),
the real-parameter metric is S = Re(Ō^H Ō) and the force Re(Ō^H ε) with
ε_i = sqrt(w_i) (E_loc(x_i) - E). Stacking real and imaginary parts,
X = [Re Ō; Im Ō] (2U x P) and e = [Re ε; Im ε], so S = X^T X and the update
direction S^-1 X^T e equals X^T (X X^T + λ)^-1 e: a 2U x 2U solve instead of
a P x P one, cheap while the unique samples are fewer than the parameters.
The plain VMC gradient is 2 X^T e; this direction is S^-1 of half of it.

With momentum mu (SPRING, arXiv 2401.10190) the direction is the least-squares solution
argmin |X d - e|^2 + lam |d - mu d_prev|^2 = mu d_prev + X^T (X X^T + lam)^-1 (e - mu X d_prev):
the same U x U solve with one more product X d_prev. Along X's rows it still fits e; in the
directions the rows do not see it keeps mu of the previous direction, so steps taken on
different working sets add up instead of being forgotten.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from nnqs.common.distributed import column_ranges

# Default diagonal shift of X X^T, relative to its mean diagonal (VMCConfig.sr_shift too). A row of weight
# w has |X_i|^2 ~ w, so the shift damps the natural-gradient step of every configuration whose weight is
# below about shift x mean: at 1e-4 a configuration the teacher fit left near zero stayed there (N2: eight
# of exact weight 3e-6 to 9e-6 each held at 1e-15 to 4e-13, +0.374 mHa); at 1e-5 they are revived
# (+0.050 mHa; benchmarks/RESULTS.md, "The SR shift starved configurations").
SR_SHIFT = 1e-5
# SPRING (Goldshlager, Abrahamsen, Lin, arXiv 2401.10190): each direction regularised towards this times the
# previous one (VMCConfig.sr_momentum), ramped up as the learning rate falls (VMCConfig.sr_momentum_schedule).
# Ramped, with the defaults otherwise unchanged: N2/STO-3G +0.160 -> +0.135 mHa, N2 at 2.2 A +0.193 -> +0.164,
# H2O +0.196 -> +0.111; constant 0.99 gave N2 +0.062 but N2 at 2.2 A +0.931 (benchmarks/RESULTS.md).
SR_MOMENTUM = 0.99


def per_sample_jacobian(wf: nn.Module, configs: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """``d log psi(x_i) / d theta`` for ``configs`` ``(U, n)`` -> ``(U, P)`` complex128,
    columns in ``wf.parameters()`` order. Real part from Re log psi (log P / 2, with the real
    ansatz plus log |cos phi|), imaginary from the phase (zero for the real ansatz).

    ``wf`` is called as ``wf(x, part=...)`` (the wavefunction's unchecked ``forward``) for the
    parts of its ``jacobian_parts()`` through :func:`torch.func.functional_call`, with per-sample
    gradients from ``vmap(grad(...))`` over blocks of ``chunk`` rows. A part that is None (the
    real ansatz's sign) has no derivative: its half is zero.
    """
    names = [k for k, _ in wf.named_parameters()]
    real_part, imag_part = wf.jacobian_parts()
    real = _part_jacobian(wf, configs, real_part, names, chunk)
    imag = torch.zeros_like(real) if imag_part is None else _part_jacobian(wf, configs, imag_part, names, chunk)
    return torch.complex(real, imag)


@dataclass
class SplitJacobian:
    """Per-sample log-derivatives of a wavefunction whose modulus and phase have disjoint
    parameters, kept as two real blocks: ``real`` ``(U, P_r)`` = d Re log psi over the parameters
    that move the modulus (``real_columns`` ``(P,)`` bool), ``imag`` ``(U, P_i)`` = d Im log psi
    over those that move the phase. The columns of neither part are structurally zero."""

    real: torch.Tensor
    real_columns: torch.Tensor
    imag: torch.Tensor
    imag_columns: torch.Tensor


def split_jacobian(wf: nn.Module, configs: torch.Tensor, chunk: int = 1024) -> SplitJacobian | None:
    """The Jacobian of :func:`per_sample_jacobian` as a :class:`SplitJacobian` (a quarter of the
    memory, no complex copy), or None when some parameter moves both the modulus and the phase.
    Which parameters move which part is read from the autograd graph of one sample."""
    probe = configs.new_zeros(1, configs.shape[1])  # structure only: the same on every rank, even an empty share
    parts = wf.jacobian_parts()
    moved = [[] if part is None else _moved_by(wf, probe, part) for part in parts]
    if set(moved[0]) & set(moved[1]):
        return None
    names = [k for k, _ in wf.named_parameters()]
    columns = [torch.cat([torch.full((p.numel(),), k in part, dtype=torch.bool) for k, p in wf.named_parameters()])
               for part in moved]
    blocks = [_part_jacobian(wf, configs, part, [k for k in names if k in set(used)], chunk)
              for part, used in zip(parts, moved)]
    return SplitJacobian(blocks[0], columns[0].to(configs.device), blocks[1], columns[1].to(configs.device))


def _moved_by(wf: nn.Module, x: torch.Tensor, part: str) -> list[str]:
    """Names of the parameters in the autograd graph of ``wf(x, part=part)`` (``x`` ``(1, n)``)."""
    params = dict(wf.named_parameters())
    with torch.enable_grad():
        grads = torch.autograd.grad(wf(x, part=part).sum(), list(params.values()), allow_unused=True)
    return [k for k, g in zip(params, grads) if g is not None]


def _part_jacobian(wf: nn.Module, configs: torch.Tensor, part: str, names: list[str], chunk: int) -> torch.Tensor:
    """``(U, sum of numel of names)`` float64: d ``wf(x, part=part)`` per sample (``"log_abs"``:
    Re log psi, or ``"phase"``), over the parameters ``names``, written into one buffer (no part:
    no columns)."""
    if part is None:
        return torch.zeros(configs.shape[0], 0, dtype=torch.float64, device=configs.device)
    own = dict(wf.named_parameters())
    params = {k: own[k].detach() for k in names}
    out = torch.zeros(configs.shape[0], sum(v.numel() for v in params.values()), dtype=torch.float64, device=configs.device)

    def value(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(wf, p, (x.unsqueeze(0),), {"part": part})[0]

    for start in range(0, configs.shape[0], chunk):
        block = configs[start : start + chunk]
        grads = vmap(grad(value), in_dims=(None, 0))(params, block)
        offset = 0
        for k in names:
            width = params[k].numel()
            out[start : start + len(block), offset : offset + width] = grads[k].reshape(len(block), -1)
            offset += width
    return out


def sr_direction(
    jacobian: torch.Tensor | SplitJacobian, local_energies: torch.Tensor, weights: torch.Tensor, energy: float,
    shift: float = SR_SHIFT, comm=None, split: bool = True, previous: torch.Tensor | None = None,
    momentum: float = 0.0, mixed: bool = False,
) -> torch.Tensor:
    """Natural-gradient direction ``(P,)`` float64 (see module docstring).

    ``jacobian`` (U, P) complex, or a :class:`SplitJacobian` (consumed: its blocks are centred
    in place), ``local_energies`` (U,) complex, ``weights`` (U,) summing to 1.
    ``shift`` is the diagonal shift of X X^T relative to its mean diagonal. With a
    communicator ``comm`` the rows are this rank's share (weights summing to 1 over all
    ranks): the mean is all-reduced, each rank computes its rows of X X^T, and rows are
    gathered so that every rank solves the same system (the same direction on every rank).

    When no parameter moves both the modulus and the phase (the wavefunction's separate
    phase head), Re O and Im O have disjoint columns, X X^T is block diagonal, and the
    two U x U blocks are formed and solved apart: the same direction for a quarter of the
    matrix product (``split=False`` forces the single 2U x 2U solve, for comparison).
    ``previous`` ``(P,)`` with ``momentum`` mu: the SPRING direction (module docstring), the
    same on every rank. ``mixed``: solve by :func:`gram_solve` (a subsampled step's rows) instead of
    :func:`direct_solve`.
    """
    reduce = (lambda t: t) if comm is None else comm.all_reduce_sum
    sw = weights.sqrt().unsqueeze(1)
    eps = weights.sqrt() * (local_energies - energy)

    def centred(part: torch.Tensor) -> torch.Tensor:  # sqrt(w_i) (O_i - sum_j w_j O_j) in place, real (U, P')
        return part.sub_(reduce(weights.to(part.dtype) @ part)).mul_(sw)  # a product, no (U, P') temporary

    if isinstance(jacobian, SplitJacobian):
        n_params = len(jacobian.real_columns)
        blocks = [(centred(jacobian.real), eps.real, jacobian.real_columns),
                  (centred(jacobian.imag), eps.imag, jacobian.imag_columns)]  # fmt: skip
    else:
        n_params = jacobian.shape[1]
        used = torch.stack([jacobian.real.ne(0).any(0), jacobian.imag.ne(0).any(0)]).double()
        used = reduce(used) > 0  # the same on every rank (centring keeps zero columns zero)
        if not split or bool((used[0] & used[1]).any()):
            whole = centred(torch.cat([jacobian.real, jacobian.imag], dim=1))
            blocks = [(torch.cat([whole[:, :n_params], whole[:, n_params:]]), torch.cat([eps.real, eps.imag]), None)]
        else:  # only the columns each part moves
            blocks = [(centred(jacobian.real[:, used[0]]), eps.real, used[0]),
                      (centred(jacobian.imag[:, used[1]]), eps.imag, used[1])]  # fmt: skip
    return _solve_blocks(blocks, shift, comm, n_params, weights.device, previous if momentum else None, momentum,
                         mixed)


def _solve_blocks(
    blocks: list, shift: float, comm, n_params: int, device, previous: torch.Tensor | None = None,
    momentum: float = 0.0, mixed: bool = False,
) -> torch.Tensor:
    """``X^T (X X^T + lam)^-1 e`` for each block ``(X, e, columns)``, written into the ``columns``
    of one ``(n_params,)`` direction; lam relative to the mean diagonal of all blocks' X X^T.
    On one process each block's system is solved by :func:`gram_solve` where ``mixed`` (float32 Gram matrix
    preconditioning float64 conjugate gradients from ``MIXED_ROWS`` rows on), else by :func:`direct_solve`;
    over several ranks the Gram matrices are float64 and solved directly.

    Over several ranks (each holding its rows of X and e): rank r receives every rank's rows of
    its share of X's columns (``exchange_columns``), forms their Gram matrix, and the sum over
    ranks is all-reduced; block b is solved on rank ``b % world_size`` and its solution summed to
    all (the others add zeros, so every rank holds the same bits); each rank multiplies its
    columns, and the pieces are gathered in rank order, which is column order."""
    alone = comm is None or comm.world_size == 1
    reduce = (lambda t: t) if alone else comm.all_reduce_sum
    blocks = [b for b in blocks if b[0].shape[1] > 0]  # a part with no parameters (the real ansatz's sign)
    if not alone:
        blocks = [(comm.exchange_columns(x), comm.all_gather_rows(e), columns) for x, e, columns in blocks]
    if previous is not None:  # SPRING: e - mu X d_prev, each rank the product of its columns, summed
        shifted = []
        for x, e, columns in blocks:
            mine = previous if columns is None else previous[columns]
            if not alone:
                start, stop = column_ranges(len(mine), comm.world_size)[comm.rank]
                mine = mine[start:stop]
            shifted.append((x, e - momentum * reduce(x @ mine), columns))
        blocks = shifted
    diagonal = torch.cat([reduce(torch.linalg.vector_norm(x, dim=1).square()) for x, _, _ in blocks])
    lam = shift * diagonal.mean().clamp(min=1e-12) + 1e-12
    direction = torch.zeros(n_params, dtype=torch.float64, device=device)
    for b, (x, e, columns) in enumerate(blocks):  # one Gram matrix held at a time
        if alone:
            solution = gram_solve(x, e, lam) if mixed else direct_solve(x, e, lam)
        else:
            t = reduce(self_gram(x))
            t.diagonal().add_(lam)
            mine = b % comm.world_size == comm.rank
            solution = comm.all_reduce_sum(torch.linalg.solve(t, e) if mine else torch.zeros_like(e))
        part = x.T @ solution if alone else comm.all_gather_rows(x.T @ solution)
        if columns is None:
            direction = part
        else:
            direction[columns] = part
    if previous is not None:
        direction += momentum * previous
    return direction


def self_gram(x: torch.Tensor) -> torch.Tensor:
    """``X X^T`` ``(U, U)`` float64 of a float64 ``x`` ``(U, P)``: on the CPU by BLAS ``dsyrk`` (one
    triangle, half the flops of a matrix product; measured 1.2 s against 2.5 s at 1,510 x 26,000);
    elsewhere ``x @ x.T``."""
    if x.device.type != "cpu" or x.dtype != torch.float64 or x.requires_grad or x.shape[1] == 0:
        return x @ x.T  # (also no columns: a rank's empty share of them)
    from scipy.linalg.blas import dsyrk

    upper = torch.from_numpy(dsyrk(1.0, x.numpy().T, trans=1)).triu()  # x.T is Fortran-ordered: no copy
    return upper + upper.triu(1).T


# The (U, U) solve (X X^T + lam) s = e of a step, on one process. Below MIXED_ROWS rows, or off the CPU, the
# float64 Gram matrix is formed and solved directly (:func:`direct_solve`, the slow twin). From MIXED_ROWS rows
# on, the Gram matrix is formed in float32 (BLAS ``ssyrk``: half the seconds of ``dsyrk``, which takes about
# 90% of the solve at 2,048 rows) and only preconditions conjugate gradients on the float64 operator
# v -> X (X^T v) + lam v, two float64 products with X per iteration (:func:`gram_solve`). It is factored in float32
# too (LAPACK ``spotrf`` on ``ssyrk``'s triangle, no float64 copy): on H10's rows (4,090 x 32,973, one core) the
# solve is 1.67x the float64 direct solve against 1.39x with a float64 factor (7.79 s against 8.60 s, measured in
# two runs; 2,064 rows 1.33x against 1.27x), a CG iteration or two more (``python -m benchmarks.sr_solve --run
# DIR``, benchmarks/RESULTS.md). The float32 rounding over
# P columns moves the Gram matrix by about +-6 lam at the default shift (H10 at 1.5 A, 2,085 x 32,973), so it
# is shifted by PRECONDITIONER_SHIFT lam (doubled until its Cholesky factor exists); CG then reaches the
# relative residual CG_TOLERANCE in about 11 iterations, the direction within 1e-7 of the direct solve's. The
# iterations cost O(U P) and the Gram matrix saves O(U^2 P): on H10's rows the solve is 0.98x as fast at 985
# rows, 1.33x at 1,500, 1.2x at 2,010 and 1.66x at 3,048 (benchmarks/RESULTS.md, "Step cost against the
# working set"), so the float64 solve is kept below 1,024. It is taken on subsampled steps only, where it was
# measured to pay: on the exact minSR steps of C2 (every row of sets of 1,024 to 2,318) it was not shown to
# pay cleanly (the SR part of its first 83 steps, on the same trajectory, 4.33 s a step with it and nothing beside
# it, 4.86 s without it and the test suite beside it).
MIXED_ROWS = 1024
PRECONDITIONER_SHIFT = 4.0
CG_TOLERANCE = 1e-7
CG_MAX_ITERATIONS = 100


def direct_solve(x: torch.Tensor, e: torch.Tensor, lam: float) -> torch.Tensor:
    """``(X X^T + lam)^-1 e`` ``(U,)`` for ``x`` ``(U, P)`` float64: the Gram matrix in float64, solved directly."""
    t = self_gram(x)
    t.diagonal().add_(lam)
    return torch.linalg.solve(t, e)


def gram_solve(x: torch.Tensor, e: torch.Tensor, lam: float) -> torch.Tensor:
    """``(X X^T + lam)^-1 e`` ``(U,)`` for ``x`` ``(U, P)`` float64: from ``MIXED_ROWS`` rows on the CPU, conjugate
    gradients on the float64 operator preconditioned by the Cholesky factor of the float32 Gram matrix (see
    ``MIXED_ROWS``); :func:`direct_solve` elsewhere, and where the factor or CG fails (never silently worse)."""
    if x.device.type != "cpu" or x.dtype != torch.float64 or x.requires_grad or len(x) < MIXED_ROWS or x.shape[1] == 0:
        return direct_solve(x, e, lam)
    factor = _float32_factor(x, lam)
    solution = None if factor is None else _preconditioned_cg(x, e, lam, factor)
    return direct_solve(x, e, lam) if solution is None else solution


def _float32_factor(x: torch.Tensor, lam: float) -> torch.Tensor | None:
    """The lower Cholesky factor ``(U, U)`` (as float64) of ``X X^T`` formed in float32 plus ``a lam``, ``a`` the
    first of ``PRECONDITIONER_SHIFT`` times 1, 2, 4, 8 at which the factor exists; None if none does. The Gram
    matrix and its factor stay in float32 and in BLAS/LAPACK's one triangle (``ssyrk``, ``spotrf``): the factor
    only preconditions, and its float32 rounding is of the order of the Gram matrix's own."""
    from scipy.linalg.blas import ssyrk
    from scipy.linalg.lapack import spotrf

    gram = ssyrk(1.0, x.float().numpy().T, trans=1)  # the upper triangle of X X^T, Fortran-ordered
    diagonal = gram.diagonal().copy()
    shift = PRECONDITIONER_SHIFT * lam
    for _ in range(4):
        np.fill_diagonal(gram, diagonal + np.float32(shift))
        upper, info = spotrf(gram, lower=0, clean=1, overwrite_a=0)  # X X^T + a lam = R^T R
        if info == 0:
            return torch.from_numpy(upper).double().T
        shift *= 2
    return None


def _preconditioned_cg(x: torch.Tensor, e: torch.Tensor, lam: float, factor: torch.Tensor) -> torch.Tensor | None:
    """Preconditioned conjugate gradients for ``(X X^T + lam) s = e`` from ``s = M^-1 e``, ``M = factor
    factor^T``; ``s`` once the residual is below ``CG_TOLERANCE |e|``, None if ``CG_MAX_ITERATIONS`` do not get there."""
    def apply(v: torch.Tensor) -> torch.Tensor:
        return x @ (x.T @ v) + lam * v

    upper = factor.T  # two triangular solves: 11x faster than torch.cholesky_solve at 4,118 rows, the same bits

    def precondition(v: torch.Tensor) -> torch.Tensor:
        inner = torch.linalg.solve_triangular(factor, v.unsqueeze(1), upper=False)
        return torch.linalg.solve_triangular(upper, inner, upper=True).squeeze(1)

    target = CG_TOLERANCE * float(torch.linalg.vector_norm(e))
    s = precondition(e)
    r = e - apply(s)
    z = precondition(r)
    p = z.clone()
    rz = r @ z
    for _ in range(CG_MAX_ITERATIONS):
        if float(torch.linalg.vector_norm(r)) <= target:
            return s
        ap = apply(p)
        alpha = rz / (p @ ap)
        s.add_(alpha * p)
        r.sub_(alpha * ap)
        z = precondition(r)
        rz, previous = r @ z, rz
        p = z + (rz / previous) * p
    return s if float(torch.linalg.vector_norm(r)) <= target else None


# The exact minSR step costs O(U^2 P) in the working set's size U (on one core: 21 s at 4,096 rows, 67 s at
# 8,192; benchmarks/RESULTS.md, "Step cost"). Up to SR_EXACT_MAX rows (VMCConfig.sr_exact_max) every row is
# kept and the step is exactly minSR, as on the STO-3G molecules of the table (CH4's set peaked at 2,440 in
# its first steps, C2's at 1,913); above, the step is taken on a subsample (:func:`subsample_rows`) of at least
# SR_ROWS rows (:func:`subsample_size`), whose cost grows with U only up to SR_ROWS_MAX rows. 2,048 rows rather than
# 1,024: H2O/6-31G +1.10 mHa against +1.92 after 300 steps from the same fit. The exact step up to
# 1.5 x SR_ROWS (at most 2.25x the subsampled step's Gram matrix) rather than 4,096 rows: on H8 at 1.5 A
# (sets of 3,544 to 4,533 rows) +0.272 mHa after 300 steps, 1.6 mHa crossed at step 57, where exact steps
# of 10 s below 4,096 rows (and 1,024 subsampled rows above) ended at +0.758 (benchmarks/RESULTS.md,
# "Beyond exact diagonalisation").
SR_EXACT_MAX = 3072
SR_ROWS = 2048
# The subsample grows with the set (VMCConfig.sr_rows 0, the default; :func:`subsample_size`): U / SR_ROWS_SHARE
# rows, at least SR_ROWS and at most SR_ROWS_MAX, so sets up to 16,384 (H2O/6-31G, the H8 chains) keep the
# 2,048 rows above. From the same fitted network, the step energy fell below FCI + 1.6 mHa at step 63 with
# 4,096 rows against 152 with 2,048 on H10 at 2.5 A (sets of 32,000 to 37,000), and at step 101 against never
# in 300 on H10 at 2.0 A (+1.52 mHa at step 113, where 2,048 rows were at +2.36 and ended at +1.66); the
# solve of 4,096 rows costs 2.95x that of 2,048, an H10 step 1.48x (H10 at 1.5 A: 1.6 mHa at step 120 against
# past 150, ahead by the clock after 8 minutes of steps); N2/6-31G at 1.1 A (about 2,900 rows) +3.90 mHa against
# +4.47 at 1.09x the step seconds (benchmarks/RESULTS.md, "Beyond exact diagonalisation").
SR_ROWS_SHARE = 8
SR_ROWS_MAX = 4096


def subsample_size(n_rows: int, rows: int = 0) -> int:
    """Expected size of the subsample the SR step on a working set of ``n_rows`` is taken on: ``rows`` where
    it is positive (a fixed size), else ``n_rows / SR_ROWS_SHARE`` between SR_ROWS and SR_ROWS_MAX."""
    if rows > 0:
        return rows
    return min(SR_ROWS_MAX, max(SR_ROWS, n_rows // SR_ROWS_SHARE))


@dataclass
class RowSample:
    """Rows ``index`` ``(K,)`` of a working set and their weights ``(K,)`` float64, summing to 1."""

    index: torch.Tensor
    weights: torch.Tensor


def inclusion_probabilities(weights: torch.Tensor, rows: int) -> torch.Tensor:
    """Per-row inclusion probabilities ``pi`` ``(U,)`` of a Poisson subsample of expected size
    ``rows`` from ``weights`` ``(U,)``: ``pi_i = min(1, c sqrt(w_i))`` with ``c`` such that
    ``sum pi = rows`` (water-filling: the heaviest rows are always kept). ``sqrt(w)`` lies between
    drawing by weight (which would spend the rows on the few heavy configurations) and drawing
    uniformly (which would keep too few of them): the light configurations, where the network's
    remaining error is spread, keep a share of the rows. All ones when ``rows >= U``."""
    u = len(weights)
    if rows >= u:
        return torch.ones_like(weights, dtype=torch.float64)
    q = weights.double().clamp_min(0).sqrt()
    order = torch.argsort(q, descending=True)
    sorted_q = q[order]
    tail = sorted_q.flip(0).cumsum(0).flip(0)  # sum of q from position k to the end
    k = torch.arange(u, device=weights.device, dtype=torch.float64)
    scale = (rows - k) / tail.clamp_min(1e-300)  # c if the k heaviest rows are saturated
    fits = (scale * sorted_q <= 1.0) & (k < rows)
    first = int(torch.nonzero(fits)[0]) if bool(fits.any()) else rows
    c = float(scale[first]) if first < u else 0.0
    pi = torch.empty_like(q)
    pi[order] = torch.clamp(c * sorted_q, max=1.0)
    pi[order[:first]] = 1.0
    return pi


def subsample_rows(weights: torch.Tensor, rows: int, generator: torch.Generator) -> RowSample:
    """A Poisson subsample of the rows of a working set with weights ``(U,)`` (summing to 1):
    row i is kept with probability ``pi_i`` (:func:`inclusion_probabilities`) and weighted
    ``w_i / pi_i`` (Horvitz-Thompson, so that the metric and the force of the kept rows are
    unbiased estimates of the whole set's), then normalised. Every row, with its own weight,
    when ``rows >= U``: the exact step."""
    pi = inclusion_probabilities(weights, rows)
    if bool((pi >= 1).all()):
        return RowSample(torch.arange(len(weights), device=weights.device), weights.double())
    draw = torch.rand(len(weights), generator=generator, dtype=torch.float64, device=weights.device)
    index = torch.nonzero(draw < pi).squeeze(1)
    kept = weights.double()[index] / pi[index]
    return RowSample(index, kept / kept.sum())
