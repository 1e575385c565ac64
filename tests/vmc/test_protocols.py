"""Contract tests: every implementation of each protocol passes the same checks.

* :class:`~nnqs.vmc.protocols.SamplerModel`: the Transformer wavefunction (several shapes and
  dtypes) and an exact table model (P enumerated over the sector, conditionals by marginals).
* :class:`~nnqs.nn.cache.AttentionCache`: :class:`KVCache` and :class:`BranchingKVCache`.
* :class:`~nnqs.vmc.protocols.ConnectedHamiltonian`: :class:`CompactHamiltonian` and a dense
  sector-matrix twin; both through :func:`local_energy` against the matrix.
"""
import math

import numpy as np
import pytest
import torch

from nnqs import TransformerWavefunction
from nnqs.nn import AttentionCache, CoreConfig, KVCache, TransformerCore
from nnqs.nn.branching_cache import BranchingKVCache
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian, Connections
from nnqs.vmc.keys import pack
from nnqs.vmc.local_energy import local_energy, local_energy_dense
from nnqs.vmc.protocols import ConnectedHamiltonian, SamplerModel
from nnqs.vmc.sampler import sample_unique
from tests_support import full_index, openfermion_matrix, random_integrals, sector_tokens


class TableModel:
    """A SamplerModel from an explicit P over the sector; conditionals are ratios of marginals.

    Its cache keeps the prefix tokens as the keys of one layer, so the cached path really
    reads the prefix back from the cache (rows gathered by the sampler's ``select``).
    """

    def __init__(self, n_orbitals: int, n_alpha: int, n_beta: int, seed: int) -> None:
        self.n_orbitals, self.n_alpha, self.n_beta = n_orbitals, n_alpha, n_beta
        self.sector = sector_tokens(n_orbitals, n_alpha, n_beta)
        logits = torch.randn(len(self.sector), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        self.p = torch.softmax(2 * logits, 0)
        self.marginal: dict[tuple, float] = {}
        for row, p in zip(self.sector.tolist(), self.p.tolist()):
            for i in range(n_orbitals + 1):
                self.marginal[tuple(row[:i])] = self.marginal.get(tuple(row[:i]), 0.0) + p

    device = torch.device("cpu")

    def new_cache(self, branching: bool = False) -> AttentionCache:
        return BranchingKVCache(1) if branching else KVCache(1)

    def next_log_conditional(self, prefix, n_up, n_dn, cache=None):
        if cache is not None:
            assert len(cache) == prefix.shape[1]
            new = prefix[:, -1:] if prefix.shape[1] else prefix.new_full((prefix.shape[0], 1), -1)
            keys, _ = cache.update(0, *(new.double().view(-1, 1, 1, 1),) * 2)
            prefix = keys[:, 0, 1:, 0].long()  # the first cached position is the start marker
        out = torch.full((prefix.shape[0], 4), -math.inf, dtype=torch.float64)
        for b, row in enumerate(prefix.tolist()):
            parent = self.marginal.get(tuple(row), 0.0)
            for s in range(4):
                child = self.marginal.get((*row, s), 0.0)
                if child > 0:
                    out[b, s] = math.log(child / parent)
        return out

    def log_prob(self, configs: torch.Tensor) -> torch.Tensor:
        return torch.tensor([math.log(p) if (p := self.marginal.get(tuple(r), 0.0)) > 0 else -math.inf for r in configs.tolist()], dtype=torch.float64)


def perturbed_wf(n: int, na: int, nb: int, dtype: torch.dtype, seed: int = 0) -> TransformerWavefunction:
    torch.manual_seed(seed)
    wf = TransformerWavefunction(n, na, nb, d_model=16, n_layers=2, n_heads=2, phase_hidden=8, dtype=dtype)
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return wf


MODELS = {
    "wf-float64": lambda: perturbed_wf(5, 2, 3, torch.float64),
    "wf-float32-default-init": lambda: TransformerWavefunction(5, 2, 2),
    "wf-edge-sector": lambda: perturbed_wf(4, 4, 0, torch.float64),
    "table": lambda: TableModel(5, 2, 1, seed=3),
}
TOL = {torch.float64: 1e-12, torch.float32: 2e-5}


def completable(n: int, na: int, nb: int, prefix: tuple) -> set[int]:
    """States s such that prefix + (s,) starts some configuration of the sector (by enumeration)."""
    i = len(prefix)
    return {r[i] for r in sector_tokens(n, na, nb).tolist() if tuple(r[:i]) == prefix}


def stepwise(model, configs: torch.Tensor, cache) -> torch.Tensor:
    """``log P(x_i | x_<i)`` ``(B, n, 4)`` from ``next_log_conditional`` one orbital at a time."""
    n_up = torch.zeros(len(configs), dtype=torch.long)
    n_dn = torch.zeros_like(n_up)
    out = []
    with torch.no_grad():
        for i in range(model.n_orbitals):
            out.append(model.next_log_conditional(configs[:, :i], n_up, n_dn, cache).double())
            n_up, n_dn = n_up + (configs[:, i] & 1), n_dn + (configs[:, i] >> 1)
    return torch.stack(out, dim=1)


@pytest.mark.parametrize("name", MODELS)
def test_sampler_model_contract(name):
    model = MODELS[name]()
    n, na, nb = model.n_orbitals, model.n_alpha, model.n_beta
    assert isinstance(model, SamplerModel)
    tol = TOL[getattr(model, "dtype", torch.float64)]
    sector = sector_tokens(n, na, nb)
    uncached = stepwise(model, sector, None)
    for branching in (False, True):  # cached (both cache kinds) == uncached
        cached = stepwise(model, sector, model.new_cache(branching=branching))
        assert torch.equal(cached.isneginf(), uncached.isneginf())
        torch.testing.assert_close(cached[cached.isfinite()], uncached[cached.isfinite()], atol=tol, rtol=0)
    probs = uncached.exp()
    torch.testing.assert_close(probs.sum(-1), torch.ones(len(sector), n, dtype=torch.float64), atol=tol, rtol=0)
    for row, p in zip(sector.tolist(), probs):  # nonzero exactly on the states that reach the sector
        for i in range(n):
            assert {s for s in range(4) if p[i, s] > 0} == completable(n, na, nb, tuple(row[:i]))
    if isinstance(model, TransformerWavefunction):  # the parallel forward agrees
        torch.testing.assert_close(uncached, model.conditionals(sector).double(), atol=tol, rtol=0)
    log_p = uncached.gather(-1, sector.unsqueeze(-1)).squeeze(-1).sum(-1)
    with torch.no_grad():
        torch.testing.assert_close(log_p, model.log_prob(sector).double(), atol=10 * tol, rtol=0)


@pytest.mark.parametrize("name", MODELS)
def test_out_of_sector_configurations_have_probability_zero(name):
    model = MODELS[name]()
    n = model.n_orbitals
    everything = torch.cartesian_prod(*[torch.arange(4)] * n)
    inside = set(map(tuple, sector_tokens(n, model.n_alpha, model.n_beta).tolist()))
    log_p = stepwise(model, everything, None).gather(-1, everything.unsqueeze(-1)).squeeze(-1).sum(-1)
    assert not log_p.isnan().any()
    for row, lp in zip(everything.tolist(), log_p.tolist()):
        assert (lp > -math.inf) == (tuple(row) in inside)


@pytest.mark.parametrize("name", MODELS)
def test_sampler_runs_on_every_model(name):
    model = MODELS[name]()
    sector = sector_tokens(model.n_orbitals, model.n_alpha, model.n_beta)
    runs = [sample_unique(model, 10**12, torch.Generator().manual_seed(4), use_cache=c) for c in (True, False)]
    if getattr(model, "dtype", torch.float64) == torch.float64:  # float32 rounding may flip a binomial draw
        assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    configs, counts = runs[0]
    assert int(counts.sum()) == 10**12 and len(configs) == len(sector)
    with torch.no_grad():
        p = model.log_prob(configs).double().exp()
    assert (counts.double() / 1e12 - p).abs().max() < 1e-5  # binomial noise at 1e12 is ~1e-7


# -- the KV cache ------------------------------------------------------------------------------
CACHES = {"KVCache": KVCache, "BranchingKVCache": BranchingKVCache}


@pytest.mark.parametrize("kind", CACHES)
def test_cache_contract(kind):
    torch.manual_seed(0)
    core = TransformerCore(CoreConfig(vocab_size=7, max_len=10, d_model=16, n_layers=2, n_heads=2)).double()
    tokens = torch.randint(0, 7, (3, 8))
    with torch.no_grad():
        cache = CACHES[kind](2)
        assert isinstance(cache, AttentionCache) and len(cache) == 0
        prefill = core(tokens[:, :3], cache=cache)  # multi-token prefill
        assert len(cache) == 3 and cache.batch_size == 3
        index = torch.tensor([2, 0, 0, 1])  # prune, repeat, reorder
        branch = cache.select(index)
        assert len(branch) == 3 and branch.batch_size == 4
        steps = [core(tokens[index, i : i + 1], cache=branch) for i in range(3, 8)]
        assert len(branch) == 8 and branch.batch_size == 4
        full = core(tokens)
    torch.testing.assert_close(prefill, full[:, :3], atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.cat(steps, dim=1), full[index, 3:], atol=1e-12, rtol=0)


def test_both_caches_return_the_same_keys_and_values():
    g = torch.Generator().manual_seed(1)
    caches = [KVCache(2), BranchingKVCache(2)]
    with torch.no_grad():
        for t, index in ((2, None), (1, torch.tensor([1, 1, 0])), (1, torch.tensor([2, 0]))):
            if index is not None:
                caches = [c.select(index) for c in caches]
            rows = caches[0].batch_size or 2
            new = [torch.randn(rows, 2, t, 4, generator=g, dtype=torch.float64) for _ in range(4)]
            outs = [[c.update(layer, new[2 * layer], new[2 * layer + 1]) for layer in range(2)] for c in caches]
            for (k1, v1), (k2, v2) in zip(*outs):
                assert torch.equal(k1, k2) and torch.equal(v1, v2)
    assert [len(c) for c in caches] == [4, 4] and [c.batch_size for c in caches] == [2, 2]


# -- the Hamiltonian the local energy needs ---------------------------------------------------------
class DenseSectorHamiltonian:
    """A ConnectedHamiltonian from a dense sector matrix: every other basis state is "connected"."""

    def __init__(self, matrix: np.ndarray, basis: torch.Tensor) -> None:
        self.matrix, self.basis, self.n_orbitals = matrix, basis, basis.shape[1]
        self.row = {tuple(t): i for i, t in enumerate(basis.tolist())}

    @property
    def n_connected(self) -> int:
        return len(self.basis) - 1

    def connections(self, tokens: torch.Tensor) -> Connections:
        rows = [self.row[tuple(t)] for t in tokens.tolist()]
        others = [[j for j in range(len(self.basis)) if j != i] for i in rows]
        keys = torch.stack([pack(self.basis[o]) for o in others])  # (B, K, W)
        elements = torch.tensor([[self.matrix[i, j] for j in o] for i, o in zip(rows, others)])
        return Connections(keys, elements, torch.tensor([self.matrix[i, i] for i in rows]))


def _toy_log_psi(n: int):
    g = torch.Generator().manual_seed(5)
    w = torch.randn(n, 4, generator=g, dtype=torch.float64)
    ph = torch.randn(n, 4, generator=g, dtype=torch.float64)
    return lambda t: torch.complex(w.gather(1, t.T).sum(0), ph.gather(1, t.T).sum(0))  # noqa: E731


@pytest.mark.parametrize("kind", ["compact", "dense"])
def test_hamiltonian_contract_through_the_local_energy(kind):
    n, na, nb = 4, 2, 1
    h, g = random_integrals(n, seed=7)
    basis = sector_tokens(n, na, nb)
    idx = full_index(basis)
    sector = openfermion_matrix(h, g, e_core=0.4)[idx][:, idx].toarray().real
    ham = CompactHamiltonian(h, g, 0.4, na, nb) if kind == "compact" else DenseSectorHamiltonian(sector, basis)
    assert isinstance(ham, ConnectedHamiltonian)
    conn = ham.connections(basis)
    assert conn.keys.shape[:2] == conn.elements.shape == (len(basis), ham.n_connected)
    np.testing.assert_allclose(conn.diagonal.numpy(), np.diag(sector), atol=1e-12)
    fn = _toy_log_psi(n)
    samples = basis[::2]
    result = local_energy(fn, ham, samples, fn(samples), max_batch=5, max_connected=11)
    torch.testing.assert_close(result.values, local_energy_dense(sector, basis, fn(basis), samples), atol=1e-10, rtol=0)


def test_protocols_reject_what_lacks_the_members():
    assert not isinstance(object(), SamplerModel) and not isinstance(object(), ConnectedHamiltonian)
    assert not isinstance(torch.zeros(2), AttentionCache)
