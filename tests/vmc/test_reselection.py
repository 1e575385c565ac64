"""When the core is re-selected: the rule from the core's connection entries, the count of steps since the
last re-selection, and the steps on which a run (and a lone ``vmc_step``) re-selects, on a five-orbital
sector of random integrals."""
import pytest
import torch
from tests_support import random_integrals, sector_tokens

from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.selection import unique_union
from nnqs.vmc.wavefunction import TransformerWavefunction

N, NA, NB = 5, 2, 2  # sector of 100 configurations


@pytest.fixture(scope="module")
def system():
    h, g = random_integrals(N, seed=3)
    return CompactHamiltonian(h, g, 0.7, NA, NB), sector_tokens(N, NA, NB), None


def spread_model(seed: int = 0) -> TransformerWavefunction:
    torch.manual_seed(seed)
    return TransformerWavefunction(N, NA, NB, d_model=8, n_layers=1, phase_hidden=8, hf_bias=0.0, dtype=torch.float64)


def subset(basis: torch.Tensor, size: int, seed: int) -> torch.Tensor:
    return basis[torch.randperm(len(basis), generator=torch.Generator().manual_seed(seed))[:size]]


def test_reselection_every_grows_with_the_entries_of_the_core_within_its_bounds():
    from nnqs.vmc.selection import CORE_EVERY_GROWTH, reselection_every

    assert reselection_every(5, 2**25, 3000, 609) == 5  # N2/STO-3G: 1.8M entries
    assert reselection_every(5, 2**25, 65536, 4235) == 9  # N2/6-31G's core at its cap: 277M entries
    assert reselection_every(5, 1000, 2000, 1) == 5  # 2 steps' worth of entries: core_every still
    assert reselection_every(5, 1000, 7001, 1) == 8  # ceil(7.001)
    assert reselection_every(5, 1, 10**6, 100) == CORE_EVERY_GROWTH * 5
    assert reselection_every(5, 0, 10**6, 100) == 5  # 0: every core_every steps
    assert reselection_every(1, 10, 15, 1) == 2


@pytest.mark.parametrize("core_entries, start, expected", [(0, 20, [1, 3, 5, 7, 9, 11]), (1, 20, [7]),
                                                            (0, 0, [1, 3, 5, 7, 9, 11])])
def test_a_run_re_selects_its_core_at_the_steps_the_rule_gives(system, core_entries, start, expected):
    """Twelve core-mode steps: with core_entries 0 the core is re-selected every core_every (2) steps;
    with 1 entry per step, CORE_EVERY_GROWTH (4) times as far apart, at the last step of each 8; a run that
    starts with no core (start 0: fresh samples alone) re-selects on the same schedule."""
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.vmc_loop import new_state, one_vmc_step

    ham, basis, _ = system
    cfg = VMCConfig(steps=12, core_every=2, core_entries=core_entries, core_samples=8, threads=1, d_model=8,
                    n_layers=1, phase_hidden=8)
    wf = spread_model(1)
    state = new_state(wf, cfg)
    state.core = unique_union(subset(basis, start, 0)) if start else None
    reselected = []
    for step in range(12):
        state.step = step
        if one_vmc_step(state, ham, cfg).core is not None:
            reselected.append(step)
    assert reselected == expected


def test_reselects_counts_from_the_last_re_selection():
    """The step after ``every - 1`` steps on a core re-selects it; where the rule grows (the core grew) the
    count goes on from the last re-selection instead of the step number (whose multiples would re-select
    early); where it shrank below the steps taken, at once."""
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.step import reselects

    cfg = VMCConfig(core_every=5, core_entries=100)
    assert [k for k in range(5) if reselects(k, cfg, 1, 100)] == [4]  # every 5: after 4 steps on the core
    assert not reselects(7, cfg, 9, 100) and reselects(8, cfg, 9, 100)  # every 9
    assert reselects(6, cfg, 5, 100)  # every 5 now, 6 steps taken: at once


def test_a_step_not_counted_by_its_caller_re_selects_on_the_step_number(system):
    """``vmc_step`` without ``core_steps`` (a benchmark's lone steps): the core is re-selected on the steps
    whose number is one short of a multiple of the rule's interval, never on every step past the first."""
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.step import vmc_step
    from nnqs.vmc.vmc_loop import new_state

    ham, basis, _ = system
    cfg = VMCConfig(steps=8, core_every=3, core_entries=0, core_samples=8, threads=1, d_model=8, n_layers=1,
                    phase_hidden=8)
    wf = spread_model(2)
    state = new_state(wf, cfg)
    core = unique_union(subset(basis, 20, 1))
    reselected = [k for k in range(8)
                  if vmc_step(wf, ham, state.opt, state.sched, cfg, k, 64, state.generator, core=core).core is not None]
    assert reselected == [2, 5]
