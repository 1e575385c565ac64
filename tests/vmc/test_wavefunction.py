"""The Transformer wavefunction: sector masking, normalisation, causality, cache, gradients."""
import math

import pytest
import torch

from nnqs import TransformerWavefunction
from nnqs.vmc.configurations import (
    all_configurations,
    allowed_states_table,
    electrons_before,
    in_sector,
    occupations_to_tokens,
    tokens_to_occupations,
)
from nnqs.common.errors import UserError
from nnqs.vmc.wavefunction import hf_bias_for

N, NA, NB = 6, 3, 2


def make_wf(n: int = N, na: int = NA, nb: int = NB, seed: int = 0, **kw) -> TransformerWavefunction:
    """A float64 model perturbed away from its init so P is spread and the phase varies."""
    torch.manual_seed(seed)
    wf = TransformerWavefunction(n, na, nb, d_model=16, n_layers=2, n_heads=2, phase_hidden=8,
                                 hf_bias=0.0, dtype=torch.float64, **kw)  # fmt: skip
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return wf


def test_token_convention():
    configs = torch.tensor([[0, 1, 2, 3]])
    occ = tokens_to_occupations(configs)
    assert occ.dtype == torch.uint8
    assert occ.tolist() == [[0, 0, 1, 0, 0, 1, 1, 1]]  # 2p alpha, 2p+1 beta
    allc = all_configurations(4)
    assert torch.equal(occupations_to_tokens(tokens_to_occupations(allc, torch.bool)), allc)


def test_hf_config():
    assert TransformerWavefunction(6, 3, 2).hf_config().tolist() == [3, 3, 1, 0, 0, 0]
    assert TransformerWavefunction(5, 1, 2).hf_config().tolist() == [3, 2, 0, 0, 0]


@pytest.mark.parametrize("n,na,nb", [(5, 2, 3), (4, 0, 4), (4, 1, 0), (3, 3, 3)])
def test_allowed_table_is_exactly_the_completable_prefixes(n, na, nb):
    table = allowed_states_table(n, na, nb)
    allc = all_configurations(n)
    sector = allc[in_sector(allc, na, nb)]
    a, b = electrons_before(allc, na, nb)
    ok = table[torch.arange(n), a, b].gather(-1, allc.unsqueeze(-1)).squeeze(-1)  # (4^n, n)
    for i in range(n):
        completable = {tuple(r) for r in sector[:, : i + 1].tolist()}
        prefix_ok = ok[:, : i + 1].all(-1)
        got = {tuple(r) for r in allc[prefix_ok][:, : i + 1].tolist()}
        assert got == completable


def test_normalised_over_sector_and_zero_outside():
    wf = make_wf()
    allc = all_configurations(N)
    with torch.no_grad():
        log_psi = wf.log_psi(allc)
    inside = in_sector(allc, NA, NB)
    assert int(inside.sum()) == math.comb(N, NA) * math.comb(N, NB) == 300
    assert log_psi.dtype == torch.complex128
    assert not torch.isnan(log_psi.real).any() and not torch.isnan(log_psi.imag).any()
    assert torch.isneginf(log_psi.real[~inside]).all()
    assert torch.isfinite(log_psi.real[inside]).all()
    p = torch.exp(2 * log_psi.real)
    assert abs(float(p.sum()) - 1.0) < 1e-10
    assert 2 / 300 < float(p.max()) < 0.2  # the perturbed model is spread, but not uniform


def test_conditionals_are_normalised_and_masked():
    wf = make_wf()
    allc = all_configurations(N)
    cond = wf.conditionals(allc[in_sector(allc, NA, NB)])
    torch.testing.assert_close(cond.exp().sum(-1), torch.ones(300, N, dtype=torch.float64))
    last = cond[:, -1].exp()  # the last orbital is forced: one state with probability 1
    assert torch.all((last == 0) | (last == 1))


def test_causality():
    wf = make_wf()
    torch.manual_seed(1)
    configs = torch.randint(0, 4, (64, N))
    base = wf.conditionals(configs)
    for j in range(N - 1):
        changed = configs.clone()
        changed[:, j] = (changed[:, j] + 1 + torch.randint(0, 3, (64,))) % 4
        cond = wf.conditionals(changed)
        assert torch.equal(cond[:, : j + 1].isneginf(), base[:, : j + 1].isneginf())
        finite = base[:, : j + 1].isfinite()
        torch.testing.assert_close(cond[:, : j + 1][finite], base[:, : j + 1][finite], atol=1e-12, rtol=0)
        later = cond[:, j + 1 : N - 1].isfinite() & base[:, j + 1 : N - 1].isfinite()  # last is forced
        if j < N - 2:
            assert (cond[:, j + 1 : N - 1][later] - base[:, j + 1 : N - 1][later]).abs().max() > 1e-6


@pytest.mark.parametrize("cache_kind", ["plain", "branching", None])
def test_stepwise_conditionals_equal_parallel_forward(cache_kind):
    wf = make_wf()
    allc = all_configurations(N)
    configs = allc[in_sector(allc, NA, NB)]
    full = wf.conditionals(configs)
    cache = None if cache_kind is None else wf.new_cache(branching=cache_kind == "branching")
    n_up = torch.zeros(len(configs), dtype=torch.long)
    n_dn = torch.zeros_like(n_up)
    with torch.no_grad():
        for i in range(N):
            step = wf.next_log_conditional(configs[:, :i], n_up, n_dn, cache)
            torch.testing.assert_close(step, full[:, i], atol=1e-12, rtol=0)
            n_up, n_dn = n_up + (configs[:, i] & 1), n_dn + (configs[:, i] >> 1)
    if cache is not None:
        assert len(cache) == N


def test_gradients_real_part_amplitude_imag_part_phase():
    wf = make_wf()
    allc = all_configurations(N)
    configs = allc[in_sector(allc, NA, NB)][::7]
    phase_params = {id(p) for p in wf.phase_net.parameters()}
    wf.zero_grad()
    wf.log_psi(configs).real.sum().backward()
    for p in wf.parameters():
        zero = p.grad is None or not p.grad.any()
        assert zero == (id(p) in phase_params)
    wf.zero_grad()
    wf.log_psi(configs).imag.sum().backward()
    for p in wf.parameters():
        has = p.grad is not None and p.grad.any()
        assert has == (id(p) in phase_params)


def test_gradient_matches_finite_difference():
    wf = make_wf()
    configs = torch.tensor([[3, 3, 1, 0, 0, 0], [1, 2, 0, 3, 1, 0]])
    w = torch.tensor([0.7, -1.3], dtype=torch.float64)
    (wf.log_psi(configs) * w).real.sum().backward()
    grad = wf.head.weight.grad[2, 5].item()
    eps = 1e-6
    with torch.no_grad():
        values = []
        for sign in (1, -1):
            wf.head.weight[2, 5] += sign * eps
            values.append(float((wf.log_psi(configs).real * w).sum()))
            wf.head.weight[2, 5] -= sign * eps
    assert abs((values[0] - values[1]) / (2 * eps) - grad) < 1e-7


def test_out_of_sector_gradient_is_finite():
    wf = make_wf()
    configs = torch.tensor([[3, 3, 3, 0, 0, 0], [3, 3, 1, 0, 0, 0]])
    log_psi = wf.log_psi(configs)
    assert torch.isneginf(log_psi.real[0]) and torch.isfinite(log_psi.real[1])
    (log_psi.real[1] + log_psi.imag.sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in wf.parameters() if p.grad is not None)


def test_chunked_log_psi_equals_unchunked():
    wf = make_wf()
    configs = all_configurations(N)[::5]
    with torch.no_grad():
        chunked, whole = wf.log_psi(configs, chunk_size=37), wf.log_psi(configs)
        torch.testing.assert_close(chunked.real, whole.real, atol=1e-12, rtol=0)
        torch.testing.assert_close(chunked.imag, whole.imag, atol=1e-12, rtol=0)
        torch.testing.assert_close(wf.log_prob(configs, chunk_size=10), 2 * whole.real)


def test_hparams_rebuild_from_state_dict():
    wf = make_wf()
    assert wf.hparams["dtype"] == "float64"
    assert set(wf.hparams) == {"n_orbitals", "n_alpha", "n_beta", "d_model", "n_layers", "n_heads", "phase_hidden",
                               "d_ff", "hf_bias", "real", "dtype"}
    state = wf.state_dict()
    assert "allowed" not in state
    clone = TransformerWavefunction(**wf.hparams)
    clone.load_state_dict(state)
    configs = all_configurations(N)[::11]
    with torch.no_grad():
        assert torch.equal(clone.log_psi(configs), wf.log_psi(configs))
    # checkpoints written before the real ansatz hold every other key and no "real": they rebuild as
    # the complex wavefunction they were
    older = {k: v for k, v in wf.hparams.items() if k != "real"}
    old_clone = TransformerWavefunction(**older)
    old_clone.load_state_dict(state)
    assert not old_clone.real
    with torch.no_grad():
        assert torch.equal(old_clone.log_psi(configs), wf.log_psi(configs))


def test_default_init_prefers_hartree_fock():
    for n, na, nb in [(6, 3, 2), (20, 5, 5)]:
        wf = TransformerWavefunction(n, na, nb)
        with torch.no_grad():
            p_hf = float(wf.log_prob(wf.hf_config().unsqueeze(0)).exp())
        assert 0.9 < p_hf < 0.98, (n, p_hf)  # HF_TARGET_PROB = 0.95, blurred by the random head
        flat = TransformerWavefunction(n, na, nb, hf_bias=0.0)
        with torch.no_grad():
            assert float(flat.log_prob(flat.hf_config().unsqueeze(0)).exp()) < 0.1
    assert hf_bias_for(6, 3, 2, target=0.7) < hf_bias_for(20, 5, 5, target=0.7)


def test_one_default_per_knob():
    """The library defaults are the run config's defaults (one constant each)."""
    import inspect

    from nnqs.vmc.sr import SR_SHIFT, sr_direction
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.wavefunction import HF_TARGET_PROB

    cfg = VMCConfig()
    assert cfg.hf_prob == HF_TARGET_PROB == inspect.signature(hf_bias_for).parameters["target"].default == 0.95
    assert cfg.sr_shift == SR_SHIFT == inspect.signature(sr_direction).parameters["shift"].default == 1e-5


def test_unknown_keyword_arguments_are_refused_by_name():
    with pytest.raises(UserError, match=r"unknown option\(s\) d_modle, n_layer$"):
        TransformerWavefunction(4, 2, 2, n_layer=3, d_modle=8)


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError):
        TransformerWavefunction(4, 5, 1)
    wf = TransformerWavefunction(4, 2, 2)
    with pytest.raises(UserError):
        wf.log_psi(torch.zeros(3, 5, dtype=torch.long))
    with pytest.raises(UserError):
        wf.log_psi(torch.full((3, 4), 4))


def test_forward_parts_equal_the_checked_methods():
    wf = make_wf()
    configs = all_configurations(N)[::13]
    with torch.no_grad():
        assert torch.equal(wf(configs), wf.log_psi(configs))
        assert torch.equal(wf(configs, part="log_prob"), wf.log_prob(configs))
        assert torch.equal(wf(configs, part="phase"), wf.phase(configs))


def test_make_wavefunction_is_seeded_without_touching_the_global_generator():
    from hamiltonians import build_hamiltonian, get_spec
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.run import make_wavefunction

    ham = build_hamiltonian(get_spec("H2"))
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    first = make_wavefunction(ham, VMCConfig(seed=1))
    assert torch.equal(torch.rand(3), expected)  # the global stream goes on as if nothing had been drawn
    second = make_wavefunction(ham, VMCConfig(seed=1))
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters()))
    other = make_wavefunction(ham, VMCConfig(seed=2))
    assert not all(torch.equal(a, b) for a, b in zip(first.parameters(), other.parameters()))
