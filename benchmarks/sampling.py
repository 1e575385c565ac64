"""Sampling time with and without the KV cache.

``python -m benchmarks.sampling [--quick] [--out FILE] [--device cpu|cuda]``

For each ``n_orbitals`` a Hartree–Fock-biased wavefunction (P(HF) = 0.7 at init)
draws ``n_samples`` with the unique-prefix sampler, once feeding one token per
step over the KV cache and once re-running the full prefix each step. Prints one
JSON object per size: unique count, median seconds of each (torch.utils.benchmark's
``blocked_autorange`` after a warm-up call: repeated until ``min_run_time`` seconds
were spent, at least one timed call), and the speedup. Both
runs use the same generator seed; ``identical_samples`` says whether they returned
the same samples (float32 rounding differences between the two forwards may flip
a rare binomial draw).
"""
from __future__ import annotations

import os

import torch

from benchmarks.common import benchmark_parser, emit, software, timed
from nnqs import TransformerWavefunction
from nnqs.vmc.wavefunction import hf_bias_for

FULL = dict(orbitals=(10, 20, 40, 60), n_samples=10**6, d_model=64, n_layers=2, n_heads=4, min_run_time=1.0)

HF_PROB = 0.7  # P(HF) at init of the recorded results (runs start at VMCConfig.hf_prob = 0.95)
QUICK = dict(orbitals=(4, 8), n_samples=10**4, d_model=16, n_layers=1, n_heads=2, min_run_time=0.0)


def electrons(n_orbitals: int) -> tuple[int, int]:
    """n_alpha = n_beta = n/4 (rounded, at least 1): half the spin-orbitals of the lower half filled."""
    n = max(1, round(n_orbitals / 4))
    return n, n


def run_one(n_orbitals: int, size: dict, device: torch.device, threads: int) -> dict:
    """Time cached and uncached sampling for one system size; return the JSON record."""
    n_alpha, n_beta = electrons(n_orbitals)
    torch.manual_seed(0)
    wf = TransformerWavefunction(n_orbitals, n_alpha, n_beta, d_model=size["d_model"], n_layers=size["n_layers"],
                                 n_heads=size["n_heads"], device=device,
                                 hf_bias=hf_bias_for(n_orbitals, n_alpha, n_beta, HF_PROB))  # fmt: skip

    def draw(use_cache: bool) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=device).manual_seed(1)
        return wf.sample(size["n_samples"], generator=gen, use_cache=use_cache)

    t_cached, (configs, counts), n_cached = timed(lambda: draw(True), size["min_run_time"])
    t_full, (configs_full, counts_full), n_full = timed(lambda: draw(False), size["min_run_time"])
    same = configs.shape == configs_full.shape and bool((configs == configs_full).all())
    same = same and bool((counts == counts_full).all())
    hf = (configs == wf.hf_config()).all(-1)
    return {
        "benchmark": "sampling", "n_orbitals": n_orbitals, "n_alpha": n_alpha, "n_beta": n_beta,
        "n_samples": size["n_samples"], "unique": int(configs.shape[0]),
        "hf_prob": HF_PROB, "hf_fraction": float(counts[hf].sum()) / size["n_samples"],
        "seconds_cached": round(t_cached, 6), "seconds_uncached": round(t_full, 6),
        "speedup": round(t_full / t_cached, 3), "identical_samples": same,
        "d_model": size["d_model"], "n_layers": size["n_layers"], "n_heads": size["n_heads"],
        "dtype": "float32", "repeats_cached": n_cached, "repeats_uncached": n_full, "threads": threads,
        "timer": "torch.utils.benchmark.Timer.blocked_autorange", "min_run_time": size["min_run_time"],
        "device": str(device),
        **software(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("sampling", __doc__, "toy sizes, one timed call each (seconds)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--orbitals", type=int, nargs="*", default=None, help="override the system sizes")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    size = dict(QUICK if args.quick else FULL)
    for n_orbitals in args.orbitals or size["orbitals"]:
        emit(run_one(n_orbitals, size, torch.device(args.device), args.threads), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
