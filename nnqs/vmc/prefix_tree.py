"""log P of many configurations through their prefix tree, each distinct prefix evaluated once.

The connected configurations x' of a sample set share long prefixes: an excitation changes
2-4 orbitals, so every x' agrees with its x before the first changed orbital, and x' that
differ only late agree on more. The plain pass (:meth:`TransformerWavefunction.log_prob`)
runs all ``n`` positions of every x'; here the configurations are sorted lexicographically,
grouped by prefix at every orbital, and the model is stepped orbital by orbital over the
*distinct* prefixes only, with a branching KV cache (:mod:`nnqs.nn.branching_cache`) whose
rows follow the prefixes exactly as in the sampler. On the external space of H2O/6-31G's
4,096-configuration selected-CI set, 184,268 configurations of 13 orbitals need 2,395,484 token
positions plainly and 712,091 through the tree (3.4x fewer); 100,000 of them took 15.8 s plainly
and 7.75 s through the tree (2.04x, float32 3.62x; one thread). :data:`TREE_MIN_ORBITALS` says
where the plain pass is faster.

Only the :class:`~nnqs.vmc.protocols.SamplerModel` contract is used (``new_cache(branching=True)``
and ``next_log_conditional``), so any autoregressive model the sampler drives works here too.
The plain pass is the oracle (``tests/vmc/test_prefix_tree.py``).
"""
from __future__ import annotations

import torch

from nnqs.vmc.protocols import SamplerModel

TREE_ROWS = 4096  # configurations per tree: bounds the cache at 4,096 rows x n positions
# Below this many orbitals the plain pass is faster (``python -m benchmarks.vmc_step --tree``, one
# thread, the external space of the selected-CI teacher: N2, 10 orbitals, 0.57x; H2O/6-31G, 13, 2.04x).
TREE_MIN_ORBITALS = 12


def prefix_groups(configs: torch.Tensor) -> torch.Tensor:
    """Prefix ids ``(n, M)``: row ``i`` numbers the distinct prefixes ``configs[:, :i + 1]``
    (``configs`` ``(M, n)`` tokens 0..3) in lexicographic order, 0 upward."""
    ids = torch.zeros(configs.shape[0], dtype=torch.long, device=configs.device)
    levels = []
    for i in range(configs.shape[1]):
        ids = torch.unique(ids * 4 + configs[:, i], sorted=True, return_inverse=True)[1]
        levels.append(ids)
    return torch.stack(levels) if levels else ids.new_zeros(0, configs.shape[0])


def log_prob_by_prefix_tree(model: SamplerModel, configs: torch.Tensor, rows: int = TREE_ROWS,
                            floor: float | None = None) -> torch.Tensor:
    """``log P(x)`` ``(M,)`` float64 of ``configs`` ``(M, n)`` long, the same values as the plain
    pass (``-inf`` outside the sector); under no_grad. The configurations are sorted and cut
    into trees of at most ``rows`` configurations (prefixes shared across a cut are evaluated
    once per tree).

    With a ``floor``, a prefix whose log probability has fallen below it is not followed further:
    the conditionals of an autoregressive model are probabilities, so no configuration under it
    can come back above the floor. Every value at or above the floor is then exact, and every
    other one is below the floor (the log probability of the prefix where it was cut, an upper
    bound, or the exact value)."""
    m, n = configs.shape
    out = torch.empty(m, dtype=torch.float64, device=configs.device)
    if m == 0:
        return out
    groups = prefix_groups(configs)  # (n, M)
    order = torch.argsort(groups[-1]) if n else torch.arange(m, device=configs.device)
    groups = groups[:, order]
    with torch.no_grad():
        for start in range(0, m, rows):
            block = order[start : start + rows]
            local = groups[:, start : start + rows]
            # A contiguous slice of the sorted configurations holds consecutive prefix ids at every
            # orbital: renumbered from 0, they are the slice's own prefix ids.
            out[block] = _tree_log_prob(model, configs[block], local - local[:, :1], floor)
    return out


def _tree_log_prob(model: SamplerModel, configs: torch.Tensor, groups: torch.Tensor,
                   floor: float | None = None) -> torch.Tensor:
    """``log P`` ``(M,)`` float64 of one tree's ``configs`` ``(M, n)``, sorted lexicographically,
    with their prefix ids ``groups`` ``(n, M)`` (:func:`prefix_groups`); prefixes below ``floor``
    are dropped (see :func:`log_prob_by_prefix_tree`)."""
    m, n = configs.shape
    total = torch.zeros(m, dtype=torch.float64, device=configs.device)
    cache = model.new_cache(branching=True)
    prefix = configs[:1, :0]  # the root: one empty prefix
    n_up = n_dn = torch.zeros(1, dtype=torch.long, device=configs.device)
    live = torch.arange(m, device=configs.device)  # the configurations still followed, in sorted order
    parent_of = torch.zeros(m, dtype=torch.long, device=configs.device)  # each live config's prefix row
    spent = None  # the cache whose rows the current one gathers at its first update
    for i in range(n):
        logp = model.next_log_conditional(prefix, n_up, n_dn, cache).double()  # (B_i, 4)
        if spent is not None and hasattr(spent, "release"):
            spent.release()  # its rows were gathered by that forward: recycle the buffers
        total[live] += logp[parent_of, configs[live, i]]
        if i == n - 1:
            break
        if floor is not None:
            keep = total[live] >= floor
            live, parent_of = live[keep], parent_of[keep]
            if len(live) == 0:
                break
        ids = groups[i, live]
        starts = torch.ones(len(live), dtype=torch.bool, device=configs.device)
        starts[1:] = ids[1:] != ids[:-1]
        first = starts.nonzero().squeeze(1)  # the first config of each prefix (the configs are sorted)
        parent_rows, state = parent_of[first], configs[live[first], i]
        prefix = configs[live[first], : i + 1]
        n_up, n_dn = n_up[parent_rows] + (state & 1), n_dn[parent_rows] + (state >> 1)
        spent, cache, parent_of = cache, cache.select(parent_rows), starts.cumsum(0) - 1
    return total


class TreeLogPsi:
    """``log psi`` ``(M,)`` complex128 of any number of configurations ``(M, n)`` under no_grad: the
    modulus through the prefix tree (:func:`log_prob_by_prefix_tree`, trees of ``rows``), the phase
    head in chunks of ``rows``. ``dtype=torch.float32`` evaluates a float32 copy of ``wf`` (taken
    now), for uses that only rank amplitudes (the core selection); results are float64 either way.

    ``whole_batch`` tells :func:`nnqs.vmc.local_energy.evaluate_chunked` to hand it every
    configuration at once (it cuts its own trees). :meth:`above` gives a copy that only needs the
    amplitudes at or above a floor exactly (the others: any value below it, phase 0)."""

    whole_batch = True

    def __init__(self, wf, rows: int = TREE_ROWS, dtype: torch.dtype | None = None) -> None:
        from nnqs.vmc.wavefunction import in_dtype

        wf = in_dtype(wf, dtype)
        self.wf, self.rows, self.floor = wf, max(1, rows), None

    def above(self, log_abs_floor: float) -> "TreeLogPsi":
        """The same evaluator (the same model copy), exact only where ``log |psi| >= log_abs_floor``."""
        import copy

        pruned = copy.copy(self)
        pruned.floor = 2.0 * log_abs_floor  # on log P = 2 log |psi|
        return pruned

    def __call__(self, configs: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            log_prob = log_prob_by_prefix_tree(self.wf, configs, self.rows, self.floor)
            phase = torch.zeros_like(log_prob)
            needed = torch.arange(len(configs), device=configs.device)
            if self.floor is not None:
                needed = needed[log_prob >= self.floor]
            for rows in needed.split(self.rows):
                phase[rows] = self.wf.phase(configs[rows]).double()
        return self.wf.combine(log_prob, phase)  # the wavefunction's own log psi from log P and phase
