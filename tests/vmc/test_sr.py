"""The per-sample Jacobian (vmap of grad through torch.func.functional_call) against a plain
loop of torch.autograd.grad, one sample at a time, through the public log_psi."""
import pytest
import torch

from nnqs import TransformerWavefunction
from nnqs.vmc.sr import per_sample_jacobian, self_gram, split_jacobian, sr_direction
from tests_support import copy_split, ill_conditioned_system, sector_tokens


def autograd_loop(wf: TransformerWavefunction, configs: torch.Tensor) -> torch.Tensor:
    """``(U, P)`` complex128: row i = d log psi(x_i) / d theta by autograd, one sample per call."""
    params = list(wf.parameters())
    rows = []
    for x in configs:
        parts = []
        for part in ("real", "imag"):
            value = getattr(wf.log_psi(x.unsqueeze(0))[0], part)
            grads = torch.autograd.grad(value, params, allow_unused=True)
            parts.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, params)]))
        rows.append(torch.complex(parts[0].double(), parts[1].double()))
    return torch.stack(rows)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_per_sample_jacobian_equals_autograd_loop(dtype, atol):
    torch.manual_seed(0)
    wf = TransformerWavefunction(6, 3, 2, d_model=16, n_layers=2, n_heads=2, phase_hidden=8, dtype=dtype)
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.2 * torch.randn_like(p))
    configs = sector_tokens(6, 3, 2)[::29]  # 11 configurations, chunks of 4 (a ragged last one)
    jac = per_sample_jacobian(wf, configs, chunk=4)
    assert jac.shape == (len(configs), sum(p.numel() for p in wf.parameters())) and jac.dtype == torch.complex128
    reference = autograd_loop(wf, configs)
    assert reference.abs().max() > 1e-2  # the reference is not trivially zero
    torch.testing.assert_close(jac, reference, atol=atol, rtol=0)


def test_empty_share_gives_an_empty_jacobian():
    wf = TransformerWavefunction(4, 2, 2, d_model=8, n_heads=2)
    jac = per_sample_jacobian(wf, torch.zeros(0, 4, dtype=torch.long))
    assert jac.shape == (0, sum(p.numel() for p in wf.parameters())) and jac.dtype == torch.complex128


def test_split_jacobian_holds_the_columns_of_the_complex_one():
    torch.manual_seed(1)
    wf = TransformerWavefunction(6, 3, 2, d_model=16, n_layers=2, n_heads=2, phase_hidden=8, dtype=torch.float64)
    configs = sector_tokens(6, 3, 2)[::13]
    full = autograd_loop(wf, configs)
    split = split_jacobian(wf, configs, chunk=5)
    assert split is not None and not bool((split.real_columns & split.imag_columns).any())
    torch.testing.assert_close(split.real, full.real[:, split.real_columns], atol=1e-12, rtol=0)
    torch.testing.assert_close(split.imag, full.imag[:, split.imag_columns], atol=1e-12, rtol=0)
    assert full.real[:, ~split.real_columns].abs().max() == 0 and full.imag[:, ~split.imag_columns].abs().max() == 0
    g = torch.Generator().manual_seed(2)  # the SR direction from either form is the same
    e_loc = torch.randn(len(configs), generator=g, dtype=torch.complex128)
    w = torch.softmax(torch.randn(len(configs), generator=g, dtype=torch.float64), 0)
    energy = float((w * e_loc.real).sum())
    torch.testing.assert_close(sr_direction(split, e_loc, w, energy, 1e-3), sr_direction(full, e_loc, w, energy, 1e-3, split=False),
                               atol=1e-9, rtol=1e-7)


def test_split_jacobian_of_an_empty_share_is_empty():
    wf = TransformerWavefunction(4, 2, 2, d_model=8, n_heads=2)
    split = split_jacobian(wf, torch.zeros(0, 4, dtype=torch.long))
    assert split.real.shape == (0, int(split.real_columns.sum())) and split.imag.shape == (0, int(split.imag_columns.sum()))


@pytest.mark.parametrize("shape", [(1, 5), (7, 3), (40, 300)])
def test_self_gram_equals_the_matrix_product(shape):
    x = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(self_gram(x), x @ x.T, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(self_gram(x), self_gram(x).T, atol=0, rtol=0)


def test_self_gram_of_no_columns_is_zero():
    """A rank's share of the Jacobian's columns can be empty (fewer columns than ranks)."""
    assert torch.equal(self_gram(torch.zeros(3, 0, dtype=torch.float64)), torch.zeros(3, 3, dtype=torch.float64))


def parameter_space_system(jac, e_loc, w, energy, shift):
    """The oracle's P x P metric S = Re(O^H O), force Re(O^H eps) and shift lam of a split Jacobian,
    with the rows centred and weighted as sr_direction does."""
    u, p = jac.real.shape[0], len(jac.real_columns)
    full = torch.complex(jac.real.new_zeros(u, p), jac.real.new_zeros(u, p))
    full.real[:, jac.real_columns], full.imag[:, jac.imag_columns] = jac.real, jac.imag
    o = w.sqrt()[:, None] * (full - (w[:, None] * full).sum(0))
    lam = shift * float(torch.cat([o.real, o.imag]).pow(2).sum(1).mean()) + 1e-12
    return (o.conj().T @ o).real, (o.conj().T @ (w.sqrt() * (e_loc - energy))).real, lam


def test_direction_equals_the_dense_parameter_space_solve(monkeypatch):
    """On a metric whose singular values fall over eight decades, at the default shift and a
    tenth of it: the U x U solve in float64 gives the P x P solve's direction to float64 accuracy."""
    from nnqs.vmc.sr import SR_SHIFT

    monkeypatch.setattr("nnqs.vmc.sr.MIXED_ROWS", 10**9)  # the float64 direct solve

    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=4)
    for shift in (SR_SHIFT, SR_SHIFT / 10):
        s, force, lam = parameter_space_system(jac, e_loc, w, energy, shift)
        dense = torch.linalg.solve(s + lam * torch.eye(len(s), dtype=torch.float64), force)
        direction = sr_direction(copy_split(jac), e_loc, w, energy, shift)
        assert float((direction - dense).abs().max()) <= 1e-8 * float(dense.abs().max())


def test_spring_direction_equals_the_dense_regularised_least_squares(monkeypatch):
    """SPRING: d = argmin |X d - e|^2 + lam |d - mu d_prev|^2, i.e. (X^T X + lam) d = X^T e + lam mu d_prev,
    solved in parameter space; momentum 0 is the plain direction."""
    monkeypatch.setattr("nnqs.vmc.sr.MIXED_ROWS", 10**9)  # the float64 direct solve
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=5)
    shift, mu = 1e-4, 0.9
    s, force, lam = parameter_space_system(jac, e_loc, w, energy, shift)
    previous = torch.randn(len(s), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dense = torch.linalg.solve(s + lam * torch.eye(len(s), dtype=torch.float64), force + lam * mu * previous)
    spring = sr_direction(copy_split(jac), e_loc, w, energy, shift, previous=previous, momentum=mu)
    scale = float(dense.abs().max())
    assert float((spring - dense).abs().max()) <= 1e-8 * scale
    plain = sr_direction(copy_split(jac), e_loc, w, energy, shift, previous=previous, momentum=0.0)
    assert torch.equal(plain, sr_direction(copy_split(jac), e_loc, w, energy, shift))
    assert float((spring - plain).abs().max()) > 1e-3 * scale  # the momentum is there


def test_float32_preconditioned_solve_gives_the_dense_direction(monkeypatch):
    """From MIXED_ROWS rows (here 512) the system is solved by CG on the float64 operator, preconditioned by the float32
    Gram matrix: on the eight-decade metric, at the default shift and a tenth of it, with SPRING momentum,
    the direction of the P x P solve to 1e-6 of its largest entry, and the float64 direct solve is not called."""
    import nnqs.vmc.sr as sr

    def refuse(*args):
        raise AssertionError("the float64 direct solve was called")

    monkeypatch.setattr(sr, "direct_solve", refuse)
    monkeypatch.setattr(sr, "MIXED_ROWS", 512)
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=4)
    previous = torch.randn(240 + 80, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for shift, mu in ((sr.SR_SHIFT, 0.0), (sr.SR_SHIFT / 10, 0.0), (1e-4, 0.9)):
        s, force, lam = parameter_space_system(jac, e_loc, w, energy, shift)
        dense = torch.linalg.solve(s + lam * torch.eye(len(s), dtype=torch.float64), force + lam * mu * previous)
        direction = sr_direction(copy_split(jac), e_loc, w, energy, shift, previous=previous, momentum=mu, mixed=True)
        assert float((direction - dense).abs().max()) <= 1e-6 * float(dense.abs().max())


@pytest.mark.parametrize("failure", ["no factor", "no convergence"])
def test_float32_solve_falls_back_to_the_direct_one(monkeypatch, failure):
    """Where the float32 Gram matrix has no Cholesky factor at any shift tried, or CG does not reach its
    tolerance, the system is solved by the float64 direct solve: the same bits as that solve."""
    import nnqs.vmc.sr as sr

    monkeypatch.setattr(sr, "MIXED_ROWS", 512)
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=4)
    x = sr.SplitJacobian(jac.real, jac.real_columns, jac.imag, jac.imag_columns).real * w.sqrt().unsqueeze(1)
    e = w.sqrt() * (e_loc.real - energy)
    lam = 1e-5 * float(x.square().sum(1).mean())
    expected = sr.direct_solve(x, e, lam)
    if failure == "no factor":
        monkeypatch.setattr(sr, "PRECONDITIONER_SHIFT", -1e6)  # every shifted Gram matrix indefinite
    else:
        monkeypatch.setattr(sr, "CG_MAX_ITERATIONS", 1)
    assert torch.equal(sr.gram_solve(x, e, lam), expected)
    monkeypatch.undo()
    monkeypatch.setattr(sr, "MIXED_ROWS", 512)
    assert not torch.equal(sr.gram_solve(x, e, lam), expected)  # the float32 path runs when nothing fails


def test_below_mixed_rows_the_solve_is_the_direct_one():
    import nnqs.vmc.sr as sr

    g = torch.Generator().manual_seed(7)
    x = torch.randn(sr.MIXED_ROWS - 1, 40, generator=g, dtype=torch.float64)
    e = torch.randn(len(x), generator=g, dtype=torch.float64)
    assert torch.equal(sr.gram_solve(x, e, 1e-3), sr.direct_solve(x, e, 1e-3))


def test_the_direct_solve_unless_mixed_is_asked(monkeypatch):
    """``sr_direction`` solves by the float64 direct solve unless ``mixed`` (a step's subsampled rows)."""
    import nnqs.vmc.sr as sr

    def refuse(*args):
        raise AssertionError("the mixed solve was called")

    monkeypatch.setattr(sr, "gram_solve", refuse)
    monkeypatch.setattr(sr, "MIXED_ROWS", 512)
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=4)
    s, force, lam = parameter_space_system(jac, e_loc, w, energy, sr.SR_SHIFT)
    dense = torch.linalg.solve(s + lam * torch.eye(len(s), dtype=torch.float64), force)
    direction = sr_direction(copy_split(jac), e_loc, w, energy)
    assert float((direction - dense).abs().max()) <= 1e-8 * float(dense.abs().max())
