"""The VMC-step benchmark runs at toy size so it cannot rot."""
from benchmarks.vmc_step import main, random_sector_configs


def test_quick_vmc_step_benchmark():
    records = main(["--quick", "--threads", "1"])
    kinds = {r["benchmark"] for r in records}
    assert kinds == {"vmc_step", "local_energy_scaling", "local_energy_scaling_fit"}
    for r in records:
        if r["benchmark"] == "vmc_step":
            assert r["n_unique"] > 0 and r["t_step"] > 0


def test_random_sector_configs_are_in_the_sector():
    configs = random_sector_configs(9, 4, 3, 50, seed=0)
    assert ((configs & 1).sum(1) == 4).all() and ((configs >> 1).sum(1) == 3).all()
