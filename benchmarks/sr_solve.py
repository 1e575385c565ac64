"""The SR direction: one 2U x 2U solve vs the modulus and phase blocks solved apart.

``python -m benchmarks.sr_solve [--quick] [--out FILE] [--threads T]``

For the default wavefunction of a catalog molecule (N2 STO-3G: 20 qubits,
32,973 parameters) and U configurations drawn from it, times
``sr_direction(..., split=True)`` (two U x U blocks: the separate phase head
moves no modulus parameter) against ``split=False`` (the full 2U x 2U Gram
matrix), median of 3 each, in the same process; prints one JSON line per U
with both times, the speedup and the largest difference between the two
directions (they are the same vector up to rounding).
"""
from __future__ import annotations

import os

import torch

from benchmarks.common import benchmark_parser, emit, median_seconds, software
from hamiltonians import build_hamiltonian, get_spec
from nnqs.vmc.run import make_wavefunction
from nnqs.vmc.sr import per_sample_jacobian, sr_direction
from nnqs.vmc.step import VMCConfig

FULL = dict(molecule="N2", sizes=(256, 512, 1024), repeats=3)
QUICK = dict(molecule="LiH", sizes=(16, 32), repeats=1)


def run_one(molecule: str, u: int, repeats: int, threads: int) -> dict:
    ham = build_hamiltonian(get_spec(molecule))
    wf = make_wavefunction(ham, VMCConfig())
    with torch.no_grad():  # spread the model so that U distinct configurations exist
        for p in wf.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    configs, _ = wf.sample(10**9, generator=torch.Generator().manual_seed(0))
    configs = configs[:u]
    jacobian = per_sample_jacobian(wf, configs)
    g = torch.Generator().manual_seed(1)
    weights = torch.rand(len(configs), generator=g, dtype=torch.float64)
    weights /= weights.sum()
    local = torch.complex(torch.randn(len(configs), generator=g, dtype=torch.float64),
                          0.1 * torch.randn(len(configs), generator=g, dtype=torch.float64))  # fmt: skip
    t_split, split, _ = median_seconds(lambda: sr_direction(jacobian, local, weights, 0.0, 1e-2), repeats)
    t_full, full, _ = median_seconds(lambda: sr_direction(jacobian, local, weights, 0.0, 1e-2, split=False), repeats)
    return {
        "benchmark": "sr_solve", "molecule": molecule, "unique": len(configs), "parameters": jacobian.shape[1],
        "seconds_split": round(t_split, 6), "seconds_full": round(t_full, 6), "speedup": round(t_full / t_split, 3),
        "max_difference": float((split - full).abs().max()), "direction_norm": float(full.norm()),
        "threads": threads, **software(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("sr_solve", __doc__, "LiH, tiny U, one repeat (seconds)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    size = QUICK if args.quick else FULL
    for u in size["sizes"]:
        emit(run_one(size["molecule"], u, size["repeats"], args.threads), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
