"""Unique-prefix sampler: sector, counts, exact distribution, seeds, depth-first, cache."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from nnqs import TransformerWavefunction
from nnqs.vmc.configurations import all_configurations, in_sector
from nnqs.common.errors import UserError
from nnqs.vmc.sampler import UniqueLimit, split_counts
from nnqs.vmc.draws import draw

N, NA, NB = 6, 3, 2
P_THRESHOLD = 1e-3


def make_wf(n: int = N, na: int = NA, nb: int = NB, seed: int = 0) -> TransformerWavefunction:
    """A float64 model perturbed away from its init so P is spread over the sector."""
    torch.manual_seed(seed)
    wf = TransformerWavefunction(n, na, nb, d_model=16, n_layers=2, n_heads=2, phase_hidden=8,
                                 hf_bias=0.0, dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return wf


def exact_probs(wf: TransformerWavefunction) -> tuple[torch.Tensor, torch.Tensor]:
    allc = all_configurations(wf.n_orbitals)
    sector = allc[in_sector(allc, wf.n_alpha, wf.n_beta)]
    with torch.no_grad():
        return sector, wf.log_prob(sector).exp()


def chi_square_pvalue(wf: TransformerWavefunction, configs: torch.Tensor, counts: torch.Tensor) -> float:
    """Pearson test of sampled counts against the exact P (bins with expected < 5 pooled)."""
    sector, p = exact_probs(wf)
    codes = lambda c: (c * 4 ** torch.arange(c.shape[1] - 1, -1, -1)).sum(-1)  # noqa: E731
    observed = torch.zeros(4**wf.n_orbitals, dtype=torch.float64)
    observed[codes(configs)] = counts.double()
    observed = observed[codes(sector)]
    expected = p * counts.sum().double()
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any():
        obs = torch.cat([obs, observed[small].sum().view(1)])
        exp = torch.cat([exp, expected[small].sum().view(1)])
    exp = exp * obs.sum() / exp.sum()  # absorb the 1e-16 rounding of sum(P)
    return float(chisquare(obs.numpy(), exp.numpy()).pvalue)


def check_valid(wf: TransformerWavefunction, configs: torch.Tensor, counts: torch.Tensor, n: int) -> None:
    assert configs.dtype == torch.long and counts.dtype == torch.long
    assert configs.shape[1] == wf.n_orbitals and configs.shape[0] == counts.shape[0]
    assert int(configs.min()) >= 0 and int(configs.max()) <= 3
    assert in_sector(configs, wf.n_alpha, wf.n_beta).all()
    assert len(torch.unique(configs, dim=0)) == len(configs)
    assert (counts > 0).all() and int(counts.sum()) == n


def test_split_counts_exact_sums_and_zeros():
    counts = torch.tensor([10**12, 2**53 - 1, 7, 0, 1], dtype=torch.float64)
    probs = [[0.1, 0.0, 0.6, 0.3], [0.25] * 4, [0.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0, 0], [0, 0, 0, 1.0]]
    probs = torch.tensor(probs, dtype=torch.float64)
    out = split_counts(counts, probs, torch.Generator().manual_seed(0))
    assert torch.equal(out.sum(-1), counts)
    assert (out[probs == 0] == 0).all() and (out >= 0).all() and torch.equal(out, out.round())
    assert out[2].tolist() == [0, 0, 7, 0] and out[4].tolist() == [0, 0, 0, 1]
    z = (out[0] - 1e12 * probs[0]) / (1e12 * probs[0] * (1 - probs[0])).clamp(min=1e-300).sqrt()
    assert z.abs().max() < 6


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 2**53), min_size=1, max_size=8),
    st.lists(st.sampled_from([0.0, 1e-300, 1e-12, 0.1, 0.5, 1.0, 3.0]), min_size=4, max_size=4),
    st.integers(0, 2**31),
)
def test_split_counts_property(counts, weights, seed):
    c = torch.tensor(counts, dtype=torch.float64)
    probs = torch.tensor(weights, dtype=torch.float64).expand(len(counts), 4)
    if probs.sum() == 0:
        return
    out = split_counts(c, probs, torch.Generator().manual_seed(seed))
    assert torch.equal(out.sum(-1), c) and (out >= 0).all() and (out[probs == 0] == 0).all()


def test_samples_valid_and_follow_exact_distribution():
    wf = make_wf()
    configs, counts = wf.sample(200_000, generator=torch.Generator().manual_seed(1))
    check_valid(wf, configs, counts, 200_000)
    assert len(configs) > 250  # the spread model reaches most of the 300 states
    assert chi_square_pvalue(wf, configs, counts) > P_THRESHOLD


def test_chi_square_detects_a_wrong_distribution():
    wf, other = make_wf(seed=0), make_wf(seed=3)
    configs, counts = other.sample(200_000, generator=torch.Generator().manual_seed(1))
    assert chi_square_pvalue(wf, configs, counts) < 1e-10


def test_huge_sample_count():
    wf = make_wf()
    configs, counts = wf.sample(10**12, generator=torch.Generator().manual_seed(2))
    check_valid(wf, configs, counts, 10**12)
    assert len(configs) == 300  # every state of the sector, however many samples
    _, p = exact_probs(wf)
    freq = counts.double() / 1e12
    assert (freq - p).abs().max() < 1e-5  # binomial noise at 1e12 is ~1e-7


def test_same_seed_same_samples():
    wf = make_wf()
    a = wf.sample(5000, generator=torch.Generator().manual_seed(7))
    b = wf.sample(5000, generator=torch.Generator().manual_seed(7))
    c = wf.sample(5000, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not (a[0].shape == c[0].shape and torch.equal(a[0], c[0]) and torch.equal(a[1], c[1]))


def test_uncached_sampler_gives_identical_samples():
    wf = make_wf()
    for n in (1, 1000, 10**9):
        a = wf.sample(n, generator=torch.Generator().manual_seed(3))
        b = wf.sample(n, generator=torch.Generator().manual_seed(3), use_cache=False)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("max_frontier", [1, 3, 17])
def test_depth_first_valid_and_same_distribution(max_frontier):
    wf = make_wf()
    configs, counts = wf.sample(100_000, generator=torch.Generator().manual_seed(4), max_frontier=max_frontier)
    check_valid(wf, configs, counts, 100_000)
    assert chi_square_pvalue(wf, configs, counts) > P_THRESHOLD
    sorted_codes = (configs * 4 ** torch.arange(N - 1, -1, -1)).sum(-1)
    assert torch.equal(sorted_codes, sorted_codes.sort().values)  # lexicographic like the breadth-first order


def test_depth_first_huge_counts_cover_the_sector():
    wf = make_wf()
    gen = torch.Generator().manual_seed(5)
    configs, counts = wf.sample(10**12, generator=gen, max_frontier=8, use_cache=False)
    check_valid(wf, configs, counts, 10**12)
    assert len(configs) == 300


@pytest.mark.parametrize("n,na,nb", [(4, 4, 4), (4, 0, 0), (5, 0, 5), (1, 1, 0), (7, 1, 6)])
def test_edge_sectors(n, na, nb):
    wf = TransformerWavefunction(n, na, nb, d_model=8, n_heads=2, dtype=torch.float64)
    configs, counts = wf.sample(10_000, generator=torch.Generator().manual_seed(0))
    check_valid(wf, configs, counts, 10_000)
    allc = all_configurations(n)
    assert len(configs) <= int(in_sector(allc, na, nb).sum())


def test_default_float32_model_samples_the_sector():
    wf = TransformerWavefunction(12, 4, 3)
    configs, counts = wf.sample(10**6, generator=torch.Generator().manual_seed(0))
    check_valid(wf, configs, counts, 10**6)
    hf = (configs == wf.hf_config()).all(-1)
    assert 0.9 < float(counts[hf].sum()) / 1e6 < 0.98  # P(HF) = 0.95 at init, blurred by the random head


def test_bad_arguments_are_user_errors():
    wf = make_wf()
    for bad in (0, -3, 2**53 + 1, 1.5):
        with pytest.raises(UserError):
            wf.sample(bad)
    with pytest.raises(UserError):
        wf.sample(10, max_frontier=0)


def test_branching_cache_matches_full_forward():
    from nnqs.nn.branching_cache import BranchingKVCache
    from nnqs.nn import CoreConfig, TransformerCore

    torch.manual_seed(0)
    core = TransformerCore(CoreConfig(vocab_size=7, max_len=10, d_model=16, n_layers=2, n_heads=2)).double()
    tokens = torch.randint(0, 7, (3, 8))
    torch.set_grad_enabled(False)  # the branching cache is for inference only
    try:
        _check_branching_cache(core, tokens, BranchingKVCache)
    finally:
        torch.set_grad_enabled(True)


def _check_branching_cache(core, tokens, BranchingKVCache):
    parent = BranchingKVCache(2)
    core(tokens[:, :2], cache=parent)  # multi-token prefill
    core(tokens[:, 2:3], cache=parent)  # in-place append, no select
    assert len(parent) == 3 and parent.batch_size == 3
    for index in (torch.tensor([2, 0, 0, 1]), torch.tensor([1])):  # the parent is branched twice
        child = parent.select(index)
        steps = [core(tokens[index, i : i + 1], cache=child) for i in range(3, 8)]
        full = core(tokens[index])[:, 3:]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-12, rtol=0)
    child = parent.select(torch.tensor([0, 0]))
    out = core(tokens[[0, 0], 3:4], cache=child)
    parent.release()  # the child owns its own buffers now
    grandchild = child.select(torch.tensor([1]))
    out = core(tokens[[0], 4:5], cache=grandchild)
    torch.testing.assert_close(out[:, 0], core(tokens[[0], :5])[:, 4], atol=1e-12, rtol=0)


@pytest.mark.parametrize("max_frontier", [2**16, 5])
@pytest.mark.parametrize("n_samples", [30, 300, 3_000, 10**6])
def test_a_unique_limit_abandons_exactly_the_draws_that_exceed_it(n_samples, max_frontier):
    """Oracle: the full draw from the same seed. With ``max_unique`` the draw raises iff the full
    draw holds more unique configurations than the limit, and otherwise returns the same draw."""
    wf = make_wf()
    full = wf.sample(n_samples, generator=torch.Generator().manual_seed(9), max_frontier=max_frontier)
    u = len(full[1])
    for limit in sorted({1, max(u - 1, 1), u, u + 1, 1000}):
        gen = torch.Generator().manual_seed(9)
        if u > limit:
            with pytest.raises(UniqueLimit):
                wf.sample(n_samples, generator=gen, max_frontier=max_frontier, max_unique=limit)
        else:
            got = wf.sample(n_samples, generator=gen, max_frontier=max_frontier, max_unique=limit)
            assert torch.equal(got[0], full[0]) and torch.equal(got[1], full[1])


@pytest.mark.parametrize("shrink", [4, 2])
def test_draw_shrinks_the_samples_until_the_limit_holds(shrink):
    """``draw`` against full draws (each from a fresh seed-1 generator) at 10^6, then ``1 / shrink``
    of that (a step's quarter, the reported energy's half), while over the limit: ``draw`` accepts the
    same sample count."""
    wf = make_wf()
    n, tried = 10**6, []
    while True:
        u = len(wf.sample(n, generator=torch.Generator().manual_seed(1))[1])
        tried.append(n)
        if u <= 40 or n <= 100:
            break
        n = max(100, n // shrink)
    configs, counts = draw(wf, 10**6, torch.Generator().manual_seed(1), 40, shrink)
    assert int(counts.sum()) == tried[-1] and (len(counts) <= 40 or tried[-1] == 100)
    assert len(tried) > 2  # the limit made it redraw
