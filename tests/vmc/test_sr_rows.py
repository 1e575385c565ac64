"""The subsampled natural-gradient step (``VMCConfig.sr_rows``) against exact minSR: the whole set
when it fits (the same bits), unbiased metric and force estimates above it, and a run that converges."""
import pytest
import torch

from nnqs.vmc.sr import inclusion_probabilities, sr_direction, subsample_rows
from tests_support import copy_split, ill_conditioned_system


def weights_of(u: int, seed: int) -> torch.Tensor:
    """Weights spread over five decades, one row much heavier than the rest (a Hartree-Fock-like peak)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.exp(5 * torch.randn(u, generator=g, dtype=torch.float64))
    w[0] = 50 * w.sum()
    return w / w.sum()


@pytest.mark.parametrize("rows", [1, 10, 64, 299])
def test_inclusion_probabilities_sum_to_the_rows_and_keep_the_heaviest(rows):
    w = weights_of(300, 0)
    pi = inclusion_probabilities(w, rows)
    assert abs(float(pi.sum()) - rows) < 1e-9 and float(pi.min()) > 0 and float(pi.max()) <= 1
    assert rows < 10 or float(pi[0]) == 1.0  # the peak is kept once the rows are more than a few
    order = torch.argsort(w)
    assert bool((pi[order].diff() >= -1e-15).all())  # heavier rows are at least as likely
    assert torch.equal(inclusion_probabilities(w, 300), torch.ones(300, dtype=torch.float64))


def test_all_rows_when_they_fit_give_the_exact_step():
    w = weights_of(50, 1)
    sample = subsample_rows(w, 50, torch.Generator().manual_seed(0))
    assert torch.equal(sample.index, torch.arange(50)) and torch.equal(sample.weights, w)


def test_subsampled_metric_and_force_are_unbiased():
    """Horvitz-Thompson: the mean over draws of sum_kept (w_i / pi_i) O_i O_i^T and of
    sum_kept (w_i / pi_i) O_i eps_i equals the whole set's (before the kept weights are normalised)."""
    u, p, rows = 200, 6, 40
    g = torch.Generator().manual_seed(2)
    o = torch.randn(u, p, generator=g, dtype=torch.float64)
    eps = torch.randn(u, generator=g, dtype=torch.float64)
    w = weights_of(u, 3)
    pi = inclusion_probabilities(w, rows)
    exact_s, exact_f = (w[:, None] * o).T @ o, (w[:, None] * o).T @ eps
    draws, s, f = 20000, torch.zeros(p, p, dtype=torch.float64), torch.zeros(p, dtype=torch.float64)
    for _ in range(draws):
        keep = torch.rand(u, generator=g, dtype=torch.float64) < pi
        hw = (w / pi)[keep][:, None]
        s += (hw * o[keep]).T @ o[keep]
        f += (hw * o[keep]).T @ eps[keep]
    assert float((s / draws - exact_s).abs().max()) < 0.02 * float(exact_s.abs().max())
    assert float((f / draws - exact_f).abs().max()) < 0.03 * float(exact_f.abs().max())


def test_subsample_direction_approaches_the_exact_one_as_rows_grow():
    """On an SR system of 600 rows: the direction from a subsample's rows is nearer the exact
    minSR direction the more rows it keeps, and equal to it with all of them."""
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=6)
    exact = sr_direction(copy_split(jac), e_loc, w, energy, 1e-3)

    def error(rows: int, seed: int) -> float:
        sample = subsample_rows(w, rows, torch.Generator().manual_seed(seed))
        part = copy_split(jac)
        part.real, part.imag = part.real[sample.index], part.imag[sample.index]
        d = sr_direction(part, e_loc[sample.index], sample.weights, energy, 1e-3)
        return float((d - exact).norm() / exact.norm())

    errors = [sum(error(rows, seed) for seed in range(5)) / 5 for rows in (100, 300, 500)]
    assert errors[0] > errors[1] > errors[2] and error(600, 0) < 1e-9


def test_a_run_on_subsampled_rows_descends_under_its_own_clip(tmp_path):
    """LiH (225 determinants) with the exact step capped at 32 rows and no teacher fit: every step is
    taken on a subsample of 32 rows under grad_clip_sampled (grad_clip, 1e-9, would freeze the run),
    and the VMC alone recovers most of the correlation energy in 100 steps."""
    import json

    from hamiltonians import get_spec
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.run import run_molecule
    from tests_support import pyscf_references

    cfg = VMCConfig(steps=100, sr_exact_max=32, sr_rows=32, grad_clip=1e-9, grad_clip_sampled=1.0, threads=1,
                    final_samples=10**8, seed=3, pretrain_steps=0)  # no fit: the VMC alone must get there
    result = run_molecule(get_spec("LiH"), cfg, tmp_path / "run", progress=False, exact=False)
    rows = (tmp_path / "run" / "history.csv").read_text().splitlines()[1:]
    header = (tmp_path / "run" / "history.csv").read_text().splitlines()[0].split(",")
    unique = [int(r.split(",")[header.index("n_unique")]) for r in rows]
    assert min(unique) > 32  # every step above the exact limit: a clip of 1e-9 would have frozen the run
    refs = pyscf_references("LiH")
    e_fci, e_hf = refs["exact (fci)"], refs["HF"]
    assert result["energy"] >= e_fci - 3 * result["energy_stderr"]
    assert result["energy"] - e_fci < 0.5 * (e_hf - e_fci)  # more than half the correlation energy recovered
    assert json.loads((tmp_path / "run" / "result.json").read_text())["energy"] == result["energy"]


def test_float32_passes_give_the_float64_step():
    """``pass_dtype = "float32"`` (the set's log psi and the rows' Jacobian from a float32 copy) against
    float64 passes on one subsampled step of LiH (all 225 determinants, 32 rows): the same set energy
    to 1e-6 Ha and the same applied direction to 1e-3, while the model itself stays float64."""
    import dataclasses

    from hamiltonians import build_hamiltonian, get_spec
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.run import make_wavefunction
    from nnqs.vmc.sci import selected_ci
    from nnqs.vmc.selection import CoreHamiltonian
    from nnqs.vmc.step import vmc_step
    from nnqs.vmc.vmc_loop import new_state

    mol = build_hamiltonian(get_spec("LiH"))
    base = VMCConfig(steps=300, sr_exact_max=32, sr_rows=32, core_every=10**9, core_samples=1, threads=1)
    wf = make_wavefunction(mol, base)
    ham = CompactHamiltonian.from_molecular(mol, wf.device)
    core = selected_ci(ham, wf.hf_config().unsqueeze(0), 0.0, 10**6).configs
    core_ham = CoreHamiltonian(ham, core)
    initial = {k: v.clone() for k, v in wf.state_dict().items()}
    out = {}
    for dtype in ("float64", "float32"):
        cfg = dataclasses.replace(base, pass_dtype=dtype)
        wf.load_state_dict(initial)
        state = new_state(wf, cfg)
        r = vmc_step(wf, ham, state.opt, state.sched, cfg, 1, 1, state.generator, core=core, core_ham=core_ham)
        assert r.n_unique > 32 and all(p.dtype == torch.float64 for p in wf.parameters())
        out[dtype] = (r.energy, torch.cat([p.detach().reshape(-1) for p in wf.parameters()]) - torch.cat(
            [initial[k].reshape(-1) for k, _ in wf.named_parameters()]))
    (e64, d64), (e32, d32) = out["float64"], out["float32"]
    assert abs(e64 - e32) < 1e-6 and float(d64.norm()) > 0, (e64, e32)
    assert 0 < float((d32 - d64).norm() / d64.norm()) < 1e-3  # 0 would mean no float32 pass ran


def test_the_default_subsample_grows_with_the_set_between_its_bounds():
    """``sr_rows = 0`` (the default): U / 8 rows, never fewer than 2,048 nor more than 4,096, so every set up
    to 16,384 configurations is stepped exactly as with a fixed 2,048 (the same rows drawn); a positive
    ``sr_rows`` is the size whatever the set."""
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.sr import SR_ROWS, SR_ROWS_MAX, SR_ROWS_SHARE

    auto, fixed = VMCConfig(), VMCConfig(sr_rows=SR_ROWS)
    assert auto.sr_rows == 0 and (SR_ROWS, SR_ROWS_MAX, SR_ROWS_SHARE) == (2048, 4096, 8)
    for u in (1, 2048, 3072, 3073, 10_000, 16_384, 16_391):
        assert auto.subsampled(u) == fixed.subsampled(u) == (u > auto.sr_exact_max)
        assert auto.subsample_size(u) == fixed.subsample_size(u) == 2048
    assert [auto.subsample_size(u) for u in (16_392, 24_000, 32_768, 32_776, 65_536, 10**6)] == [
        2049, 3000, 4096, 4096, 4096, 4096]
    assert VMCConfig(sr_rows=5000).subsample_size(10**6) == 5000 and not VMCConfig(sr_rows=5000).subsampled(5000)
    w = weights_of(20_000, 3)
    draws = [torch.Generator().manual_seed(100 + s) for s in range(4)]  # not the weights' own stream (seed 3)
    n = [len(subsample_rows(w, auto.subsample_size(20_000), g).index) for g in draws]
    assert all(abs(k - 2500) < 5 * 2500**0.5 for k in n), n  # a Poisson draw of expected size 20,000 / 8


def test_the_clip_of_a_subsampled_step_follows_its_rule():
    """``grad_clip_rule``: "fixed" clips every subsampled step at grad_clip_sampled; "rows" takes it as the clip
    of 2,048 rows or fewer and scales it with the subsample's rows above (10 at 4,096), so every set up to 16,384
    is clipped as under "fixed". Exact steps keep grad_clip, and so does AdamW."""
    from nnqs.vmc.config import VMCConfig

    fixed, rows = VMCConfig(grad_clip_rule="fixed"), VMCConfig(grad_clip_rule="rows")
    assert VMCConfig().grad_clip_rule == "rows"  # the default
    for u in (100, 3072):  # exact minSR: grad_clip
        assert fixed.clip(u) == rows.clip(u) == fixed.grad_clip == 1.0
    for u in (3073, 16_384):
        assert fixed.clip(u) == rows.clip(u) == 5.0
    assert [rows.clip(u) for u in (24_576, 32_768, 10**6)] == [7.5, 10.0, 10.0]
    assert [fixed.clip(u) for u in (24_576, 32_768, 10**6)] == [5.0, 5.0, 5.0]
    assert VMCConfig(grad_clip_rule="rows", sr_rows=3000).clip(10**6) == 5.0 * 3000 / 2048
    assert VMCConfig(grad_clip_rule="rows", sr_rows=32, sr_exact_max=32).clip(10**6) == 5.0  # never below its base
    assert VMCConfig(grad_clip_rule="rows", optimizer="adamw").clip(10**6) == 1.0


def test_a_resumed_run_that_predates_the_clip_rule_keeps_its_clip(tmp_path):
    """A run folder whose config.toml lacks ``grad_clip_rule`` (written before the setting) is read with the value
    it ran with, "fixed", not today's default; resumed, it records that value. A folder that names it keeps it."""
    import dataclasses

    from hamiltonians import get_spec
    from nnqs.common.resume import saved_config
    from nnqs.common.runfolder import RunFolder
    from nnqs.vmc.config import VMCConfig, toy_config
    from nnqs.vmc.run import run_molecule

    out = tmp_path / "run"
    run_molecule(get_spec("H2"), dataclasses.replace(toy_config(2), threads=1), out, progress=False, exact=False)
    toml = out / "config.toml"
    assert 'grad_clip_rule = "rows"' in toml.read_text()
    assert saved_config(VMCConfig, RunFolder(out, None), "vmc").grad_clip_rule == "rows"
    toml.write_text("".join(line for line in toml.read_text().splitlines(keepends=True)
                            if not line.startswith("grad_clip_rule")))
    assert saved_config(VMCConfig, RunFolder(out, None), "vmc").grad_clip_rule == "fixed"
    (out / "checkpoint.pt").unlink()  # this run's checkpoint names the rule; an older run's does not
    run_molecule(get_spec("H2"), dataclasses.replace(toy_config(3), threads=1), out, resume=True, progress=False,
                 exact=False, given={"steps"})
    assert 'grad_clip_rule = "fixed"' in toml.read_text()
