"""The prefix-tree evaluation of log psi against the plain parallel pass (its oracle)."""
from __future__ import annotations

import pytest
import torch

from nnqs.vmc.local_energy import evaluate_chunked, local_energy
from nnqs.vmc.prefix_tree import TreeLogPsi, log_prob_by_prefix_tree, prefix_groups
from nnqs.vmc.wavefunction import TransformerWavefunction, all_configurations, in_sector
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from tests_support import random_integrals


def _model(n: int = 6, n_alpha: int = 2, n_beta: int = 3, seed: int = 0) -> TransformerWavefunction:
    torch.manual_seed(seed)
    return TransformerWavefunction(n, n_alpha, n_beta, d_model=16, n_layers=2, dtype=torch.float64, hf_bias=0.5)


def _system(n: int, n_alpha: int, n_beta: int, seed: int, model_seed: int, stride: int):
    """Random integrals, a model, every ``stride``-th sector configuration and its log psi."""
    h, g = random_integrals(n, seed=seed)
    ham = CompactHamiltonian(h, g, 0.3, n_alpha, n_beta)
    wf = _model(n, n_alpha, n_beta, seed=model_seed)
    configs = all_configurations(n)
    configs = configs[in_sector(configs, n_alpha, n_beta)][::stride]
    return ham, wf, configs, wf.log_psi(configs).detach()


def test_prefix_ids_number_the_distinct_prefixes_in_lexicographic_order():
    configs = torch.tensor([[1, 2, 0], [0, 3, 1], [1, 2, 3], [0, 3, 1], [1, 0, 0]])
    groups = prefix_groups(configs)
    for i in range(configs.shape[1]):
        prefixes = sorted({tuple(row[: i + 1]) for row in configs.tolist()})
        expected = [prefixes.index(tuple(row[: i + 1])) for row in configs.tolist()]
        assert groups[i].tolist() == expected


def test_tree_equals_the_plain_pass_on_every_configuration_in_any_order_and_tree_size():
    wf = _model()
    configs = all_configurations(6)  # 4,096: inside and outside the sector
    configs = configs[torch.randperm(len(configs), generator=torch.Generator().manual_seed(1))]
    plain = wf.log_prob(configs).detach()
    inside = in_sector(configs, 2, 3)
    for rows in (1, 7, 100, 10**5):
        tree = log_prob_by_prefix_tree(wf, configs, rows)
        assert torch.equal(torch.isfinite(tree), inside)  # -inf exactly outside the sector, never NaN
        torch.testing.assert_close(tree[inside], plain[inside], atol=1e-12, rtol=0)


def test_tree_log_psi_is_the_wavefunction_log_psi_and_float32_ranks_alike():
    wf = _model(seed=3)
    configs = all_configurations(6)
    configs = configs[in_sector(configs, 2, 3)]
    exact = wf.log_psi(configs).detach()
    torch.testing.assert_close(TreeLogPsi(wf, rows=33)(configs), exact, atol=1e-12, rtol=0)
    single = TreeLogPsi(wf, rows=33, dtype=torch.float32)(configs)
    assert single.dtype == torch.complex128 and wf.dtype == torch.float64  # the model itself untouched
    assert (single - exact).abs().max() < 1e-4


@pytest.mark.parametrize("min_orbitals", [1, 100])  # through the tree; the plain fallback for short ones
def test_local_energy_through_the_tree_equals_the_plain_passes(monkeypatch, min_orbitals):
    monkeypatch.setattr("nnqs.vmc.local_energy.TREE_MIN_ORBITALS", min_orbitals)
    ham, wf, samples, log_psi = _system(6, 2, 3, seed=5, model_seed=2, stride=7)
    plain = local_energy(wf.log_psi, ham, samples, log_psi, max_batch=5).values
    tree = local_energy(TreeLogPsi(wf, rows=9), ham, samples, log_psi, max_batch=5).values
    torch.testing.assert_close(tree, plain, atol=1e-10, rtol=0)
    assert evaluate_chunked(TreeLogPsi(wf), samples[:0], 5).shape == (0,)


@pytest.mark.parametrize("quantile", [0.0, 0.5, 1.0])
def test_a_floor_keeps_every_value_above_it_exact_and_every_other_below_it(quantile):
    wf = _model(seed=4)
    configs = all_configurations(6)
    configs = configs[torch.randperm(len(configs), generator=torch.Generator().manual_seed(2))]
    plain = wf.log_prob(configs).detach()
    inside = in_sector(configs, 2, 3)
    floor = float(torch.quantile(plain[inside], quantile))
    for rows in (50, 10**5):
        cut = log_prob_by_prefix_tree(wf, configs, rows, floor)
        above = plain >= floor
        torch.testing.assert_close(cut[above], plain[above], atol=1e-12, rtol=0)
        assert bool((cut[~above] < floor).all()) and bool((cut >= plain - 1e-12).all())  # cut: upper bounds
    exact = TreeLogPsi(wf, rows=33)(configs[inside])
    pruned = TreeLogPsi(wf, rows=33).above(0.5 * floor)(configs[inside])
    keep = exact.real >= 0.5 * floor
    torch.testing.assert_close(pruned[keep], exact[keep], atol=1e-12, rtol=0)
    assert bool((pruned.real[~keep] < 0.5 * floor).all())


def test_core_selection_through_the_pruned_tree_equals_the_plain_pass(monkeypatch):
    """select_core hands the ranker a floor just below its threshold: the same core as the plain pass."""
    from nnqs.vmc.selection import select_core

    monkeypatch.setattr("nnqs.vmc.local_energy.TREE_MIN_ORBITALS", 1)
    ham, wf, configs, log_psi = _system(7, 3, 2, seed=8, model_seed=6, stride=17)
    for threshold, rule in ((1e-1, None), (3e-2, -5.0), (1e-3, None)):
        tree = select_core(TreeLogPsi(wf, rows=13), ham, configs, log_psi, threshold, 400, 7, energy=rule)
        plain = select_core(wf.log_psi, ham, configs, log_psi, threshold, 400, 7, energy=rule)
        assert torch.equal(tree.configs, plain.configs) and len(plain.configs) > len(configs) // 2
