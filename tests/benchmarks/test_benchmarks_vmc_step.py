"""The VMC-step benchmark runs at toy size; its counts are checked by combinatorics, its fit by numpy."""
import math

import numpy as np
import pytest

from benchmarks.vmc_step import main, random_sector_configs

STO3G = {"H2": (2, 1, 1), "LiH": (6, 2, 2)}  # spatial orbitals, N_alpha, N_beta


def excitations(n: int, na: int, nb: int) -> int:
    """Spin-conserving singles and doubles of any configuration of the sector."""
    va, vb = n - na, n - nb
    return na * va + nb * vb + math.comb(na, 2) * math.comb(va, 2) + math.comb(nb, 2) * math.comb(vb, 2) + na * nb * va * vb


def test_quick_vmc_step_benchmark():
    records = main(["--quick", "--threads", "1"])
    kinds = {r["benchmark"] for r in records}
    assert kinds == {"vmc_step", "local_energy_scaling", "local_energy_scaling_fit"}
    scaling = [r for r in records if r["benchmark"] == "local_energy_scaling"]
    for r in records:
        if r["benchmark"] in ("vmc_step", "local_energy_scaling"):
            n, na, nb = STO3G[r["system"]]
            sector = math.comb(n, na) * math.comb(n, nb)
            assert r["n_orbitals"] == n and r["n_unique_connected"] <= sector
        if r["benchmark"] == "vmc_step":
            assert r["n_qubits"] == 2 * n and 0 < r["n_unique"] <= sector
            assert r["t_step"] == pytest.approx(r["t_sample"] + r["t_local"] + r["t_grad"], abs=2e-4)
        if r["benchmark"] == "local_energy_scaling":
            assert r["connected_per_config"] == excitations(n, na, nb) and r["calls"] >= 1
    fit = next(r for r in records if r["benchmark"] == "local_energy_scaling_fit")
    x = np.log([r["n_orbitals"] for r in scaling])
    y = np.log([r["seconds"] / r["n_configs"] for r in scaling])
    assert fit["exponent"] == pytest.approx(np.polyfit(x, y, 1)[0], abs=0.006)  # rounded to 2 decimals


def test_random_sector_configs_are_in_the_sector():
    configs = random_sector_configs(9, 4, 3, 50, seed=0)
    assert ((configs & 1).sum(1) == 4).all() and ((configs >> 1).sum(1) == 3).all()


def test_quick_ablation_agrees_with_the_unscreened_local_energy():
    records = main(["--quick", "--ablation", "--threads", "1"])
    assert [r["system"] for r in records] == ["H2", "LiH"]
    for r in records:
        assert r["max_difference"] < 1e-10  # the symmetry zeros carry no energy
        assert r["n_evaluated_both"] <= r["n_evaluated_before"]


def test_quick_tree_records_agree_with_the_plain_passes():
    records = main(["--quick", "--tree", "--threads", "1"])
    assert [r["system"] for r in records] == ["H2", "LiH"]
    for r in records:
        assert r["max_difference_tree"] < 1e-10 and r["max_difference_tree_float32"] < 1e-4
    assert records[1]["n_configs"] > 0  # LiH's teacher leaves configurations outside it


def test_quick_scaling_records_time_the_three_evaluations_alike():
    # float32 passes (the default) against plain float64 ones: float32 rounding of the ratios only;
    # the float64 tree (or plain pass below its orbital count) gives the plain values
    scaling = [r for r in main(["--quick", "--scaling-only", "--threads", "1"]) if r["benchmark"] == "local_energy_scaling"]
    assert [r["system"] for r in scaling] == ["H2", "LiH"]
    for r in scaling:
        assert r["max_difference_float64"] < 1e-10 and r["max_difference"] < 1e-5
        assert r["seconds_plain"] > 0 and r["calls_float64"] >= 1 and r["calls_plain"] >= 1
        assert r["speedup"] == pytest.approx(r["seconds_plain"] / r["seconds"], rel=0.05, abs=0.01)


def test_quick_step_records_one_per_connected_dtype():
    records = main(["--quick", "--threads", "1", "--connected-dtypes", "float32", "float64"])
    steps = [(r["system"], r["connected_dtype"]) for r in records if r["benchmark"] == "vmc_step"]
    assert steps == [("H2", "float32"), ("H2", "float64"), ("LiH", "float32"), ("LiH", "float64")]


def test_quick_reselection_benchmark_finds_the_same_core_cut_or_not(monkeypatch):
    monkeypatch.setattr("nnqs.vmc.local_energy.TREE_MIN_ORBITALS", 1)  # LiH through the tree, cut and uncut
    records = main(["--reselect", "--quick", "--threads", "1"])
    assert [r["system"] for r in records] == ["H2", "LiH"]
    for r in records:
        assert r["benchmark"] == "core_reselection" and r["same_core"] and r["n_core"] >= r["n_set"]
        assert r["t_cut"] > 0 and r["t_uncut"] > 0
