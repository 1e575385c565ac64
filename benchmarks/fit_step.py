"""The teacher fit's step with each drawn row once (``nnqs.vmc.pretrain.merged``) against the raw draws (JSON lines).

    python -m benchmarks.fit_step --source RUN [--steps 40] [--repeats 3] [--threads 1] [--out FILE]
    python -m benchmarks.fit_step --system H10@1.5 ...      # the teacher grown as a run grows it
    python -m benchmarks.fit_step --quick                    # H6 at 1.5 A, a few steps (run by the test suite)

The teacher is a finished run's (its ``pretrain.pt``: configurations and coefficients) or grown for
``--system`` (``benchmarks.teacher_fit.teacher_for``). One float32 network (the run's defaults) takes
``--steps`` Adam steps on the same minibatches (``VMCConfig.pretrain_batch`` rows, drawn as a run draws them)
raw and then merged, ``--repeats`` times alternating; the record holds the median milliseconds of a step of
each, their ratio, and the distinct rows of a minibatch (cross entropy and signs, of ``2 x batch``).
"""
from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from benchmarks.common import benchmark_parser, emit, software


def teacher(source: Path | None, system: str) -> tuple[torch.Tensor, torch.Tensor, SimpleNamespace]:
    """The teacher's configurations ``(M, n)``, coefficients ``(M,)`` and its sector (``n_orbitals``, ``n_alpha``,
    ``n_beta``: what :func:`nnqs.vmc.run.make_wavefunction` reads of a Hamiltonian)."""
    if source is not None:
        from nnqs.common.checkpoint import load_checkpoint
        from nnqs.vmc.pretrain_store import KIND

        data = load_checkpoint(source / "pretrain.pt", KIND)["teacher"]
        configs = data["configs"]
        first = configs[0]  # every configuration of the teacher is in the sector: its electrons give it
        sector = SimpleNamespace(n_orbitals=configs.shape[1], n_alpha=int((first & 1).sum()),
                                 n_beta=int(((first >> 1) & 1).sum()))
        return configs, data["coefficients"].double(), sector
    from benchmarks.teacher_fit import teacher_for

    ham, _, sci = teacher_for(system)
    return sci.configs, sci.coefficients.double(), ham


def record(source: Path | None, system: str, steps: int, repeats: int, threads: int) -> dict:
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.pretrain import Batches, _fit_loss, merged
    from nnqs.vmc.run import make_wavefunction
    from nnqs.vmc.wavefunction import in_dtype

    configs, c, sector = teacher(source, system)
    cfg = VMCConfig()
    wf = in_dtype(make_wavefunction(sector, cfg), torch.float32)  # the run's network, fitted in float32 as a run fits it
    weight2, sign_weight = c**2 / (c**2).sum(), c.abs() / c.abs().sum()
    target = torch.where(c * c[0] >= 0, 0.0, math.pi).double()
    draw = Batches(weight2, sign_weight, cfg.pretrain_batch, cfg.seed, cfg.pretrain_draw == "modulus")
    draws = [next(draw) for _ in range(steps)]
    once = [merged(*rows) for rows in draws]
    opt = torch.optim.Adam(wf.parameters(), lr=1e-4)

    def seconds(batches) -> float:
        start = time.perf_counter()
        for rows in batches:
            loss = _fit_loss(wf, configs, target, *rows)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return (time.perf_counter() - start) / len(batches)

    raw, merged_s = [], []
    for _ in range(repeats):
        raw.append(seconds(draws))
        merged_s.append(seconds(once))
    distinct = statistics.fmean((len(rows[0]) + len(rows[2])) / (2 * cfg.pretrain_batch) for rows in once)
    return {"benchmark": "fit_step", "teacher": str(source) if source else system, "n_teacher": len(configs),
            "batch": cfg.pretrain_batch, "steps": steps, "repeats": repeats, "distinct_fraction": distinct,
            "raw_ms": 1e3 * statistics.median(raw), "merged_ms": 1e3 * statistics.median(merged_s),
            "ratio": statistics.median(merged_s) / statistics.median(raw), "threads": threads, **software()}


def main(argv: list[str] | None = None) -> list[dict]:
    from nnqs.common.config import apply_threads

    parser = benchmark_parser("fit_step", __doc__, "H6 at 1.5 A, 3 steps, 1 repeat (what the test suite runs)")
    parser.add_argument("--source", type=Path, default=None, help="a finished run's folder with its pretrain.pt")
    parser.add_argument("--system", default="H10@1.5", help="the teacher grown for this system (without --source)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.source is not None and not (args.source / "pretrain.pt").is_file():
        parser.error(f"{args.source} holds no pretrain.pt")
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be at least 1")
    apply_threads(args.threads)
    line = record(None if args.quick else args.source, "H6@1.5" if args.quick else args.system,
                  3 if args.quick else args.steps, 1 if args.quick else args.repeats, args.threads)
    emit(line, args.out)
    return [line]


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
