"""The per-sample Jacobian (vmap of grad through torch.func.functional_call) against a plain
loop of torch.autograd.grad, one sample at a time, through the public log_psi."""
import pytest
import torch

from nnqs import TransformerWavefunction
from nnqs.vmc.sr import per_sample_jacobian, self_gram, split_jacobian, sr_direction
from tests_support import sector_tokens


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
