"""Stochastic reconfiguration (natural gradient) in its sample-space form ("minSR").

With per-sample log-derivatives O_i = d log psi(x_i) / d theta (U x P, complex),
weights w_i and centred, weighted rows  Ō_i = sqrt(w_i) (O_i - sum_j w_j O_j),
the real-parameter metric is S = Re(Ō^H Ō) and the force Re(Ō^H ε) with
ε_i = sqrt(w_i) (E_loc(x_i) - E). Stacking real and imaginary parts,
X = [Re Ō; Im Ō] (2U x P) and e = [Re ε; Im ε], so S = X^T X and the update
direction S^-1 X^T e equals X^T (X X^T + λ)^-1 e: a 2U x 2U solve instead of
a P x P one, cheap while the unique samples are fewer than the parameters.
The plain VMC gradient is 2 X^T e; this direction is S^-1 of half of it.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

SR_SHIFT = 1e-4  # default diagonal shift of X X^T, relative to its mean diagonal (VMCConfig.sr_shift too)


def per_sample_jacobian(wf: nn.Module, configs: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """``d log psi(x_i) / d theta`` for ``configs`` ``(U, n)`` -> ``(U, P)`` complex128,
    columns in ``wf.parameters()`` order. Real part from log P / 2, imaginary from the phase.

    ``wf`` is called as ``wf(x, part="log_prob")`` and ``wf(x, part="phase")`` (the
    wavefunction's unchecked ``forward``) through :func:`torch.func.functional_call`, with
    per-sample gradients from ``vmap(grad(...))`` over blocks of ``chunk`` rows.
    """
    names = [k for k, _ in wf.named_parameters()]
    params = {k: v.detach() for k, v in wf.named_parameters()}
    if configs.shape[0] == 0:  # an empty share of the samples
        return torch.zeros(0, sum(v.numel() for v in params.values()), dtype=torch.complex128, device=configs.device)

    def real_part(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return 0.5 * functional_call(wf, p, (x.unsqueeze(0),), {"part": "log_prob"})[0]

    def imag_part(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(wf, p, (x.unsqueeze(0),), {"part": "phase"})[0].double()

    rows = []
    for block in configs.split(chunk):
        re = vmap(grad(real_part), in_dims=(None, 0))(params, block)
        im = vmap(grad(imag_part), in_dims=(None, 0))(params, block)
        flat_re = torch.cat([re[k].reshape(len(block), -1) for k in names], dim=1).double()
        flat_im = torch.cat([im[k].reshape(len(block), -1) for k in names], dim=1).double()
        rows.append(torch.complex(flat_re, flat_im))
    return torch.cat(rows)


def sr_direction(
    jacobian: torch.Tensor, local_energies: torch.Tensor, weights: torch.Tensor, energy: float,
    shift: float = SR_SHIFT, comm=None, split: bool = True,
) -> torch.Tensor:
    """Natural-gradient direction ``(P,)`` float64 (see module docstring).

    ``jacobian`` (U, P) complex, ``local_energies`` (U,) complex, ``weights`` (U,) summing to 1.
    ``shift`` is the diagonal shift of X X^T relative to its mean diagonal. With a
    communicator ``comm`` the rows are this rank's share (weights summing to 1 over all
    ranks): the mean is all-reduced, each rank computes its rows of X X^T, and rows are
    gathered so that every rank solves the same system (the same direction on every rank).

    When no parameter moves both the modulus and the phase (the wavefunction's separate
    phase head), Re O and Im O have disjoint columns, X X^T is block diagonal, and the
    two U x U blocks are formed and solved apart: the same direction for a quarter of the
    matrix product (``split=False`` forces the single 2U x 2U solve, for comparison).
    """
    reduce = (lambda t: t) if comm is None else comm.all_reduce_sum
    sw = weights.sqrt().unsqueeze(1)
    eps = weights.sqrt() * (local_energies - energy)
    used = torch.stack([jacobian.real.ne(0).any(0), jacobian.imag.ne(0).any(0)]).double()
    used = reduce(used) > 0  # the same on every rank (centring keeps zero columns zero)

    def centred(part: torch.Tensor) -> torch.Tensor:  # sqrt(w_i) (O_i - sum_j w_j O_j), real (U, P')
        return sw * (part - reduce((weights.unsqueeze(1) * part).sum(0)))

    if not split or bool((used[0] & used[1]).any()):
        whole = centred(torch.cat([jacobian.real, jacobian.imag], dim=1))
        p = jacobian.shape[1]
        blocks = [(torch.cat([whole[:, :p], whole[:, p:]]), torch.cat([eps.real, eps.imag]), None)]
    else:  # only the columns each part moves, never the complex (U, P) matrix
        blocks = [(centred(jacobian.real[:, used[0]]), eps.real, used[0]),
                  (centred(jacobian.imag[:, used[1]]), eps.imag, used[1])]  # fmt: skip
    systems = [_gram(x, e, comm) for x, e, _ in blocks]
    diagonal = torch.cat([torch.diagonal(t) for _, _, t in systems])
    lam = shift * diagonal.mean().clamp(min=1e-12) + 1e-12  # relative to the mean diagonal of all of X X^T
    direction = torch.zeros(jacobian.shape[1], dtype=torch.float64, device=jacobian.device)
    for (x, e, t), (_, _, columns) in zip(systems, blocks):
        t.diagonal().add_(lam)
        part = x.T @ torch.linalg.solve(t, e)
        if columns is None:
            direction = part
        else:
            direction[columns] = part
    return direction


def _gram(x: torch.Tensor, e: torch.Tensor, comm) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All ranks' rows of ``x`` and ``e`` and the Gram matrix ``X X^T`` (this rank's rows of ``x``)."""
    if comm is None:
        return x, e, x @ x.T
    x_rows, x, e = x, comm.all_gather_rows(x), comm.all_gather_rows(e)
    return x, e, comm.all_gather_rows(x_rows @ x.T)  # each rank forms its rows of X X^T
