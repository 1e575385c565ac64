"""Speedup of data-parallel VMC: 2 processes (torchrun, gloo) over 1 on this machine.

``python -m benchmarks.distributed [--quick] [--out FILE] [--job n2|h2o-6-31g] [--molecule N2] [--optimizers adamw sr]``

Jobs: ``n2`` (the default) runs N2/STO-3G with a fixed small model under AdamW and SR;
``h2o-6-31g`` runs the 26-qubit job as a user would, ``nnqs vmc H2O --basis 6-31g`` with the
default model, optimizer and core mode (only the step count and the sample window are fixed).

For each optimizer the same run (molecule, model, seed, fixed sample count: the
adaptive sample window is switched off) is made by ``python -m nnqs vmc`` in one
process and by ``torchrun --nproc_per_node 2 -m nnqs vmc`` in two, each process
with one thread. The time of a step is ``t_sample + t_local + t_grad`` from
rank 0's history.csv (the ranks wait for each other at every all-reduce, so this
is the wall time of the step); the median over the steps after ``warmup`` is
compared. Both runs follow the same trajectory (same samples, same unique
counts; the teacher fit is run in float64, ``FIXED``); ``max_energy_diff`` says how closely
their step energies agree.
Prints one JSON object per optimizer.
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


from benchmarks.common import benchmark_parser, emit, history_rows, software, step_seconds

FULL = dict(molecule="N2", basis=None, pretrain_steps=None, steps=12, warmup=2, samples=10**5, d_model=32,
            n_layers=2, lr=0.01, optimizers=("adamw", "sr"))
# None: the option is not passed, so the run has the defaults of `nnqs vmc`.
H2O_631G = dict(molecule="H2O", basis="6-31g", pretrain_steps=None, steps=8, warmup=2, samples=None, d_model=None,
                n_layers=None, lr=None, optimizers=(None,))
JOBS = {"n2": FULL, "h2o-6-31g": H2O_631G}
QUICK = dict(molecule="H2", basis=None, pretrain_steps=None, steps=3, warmup=1, samples=10**4, d_model=8,
             n_layers=1, lr=0.01, optimizers=("adamw",))
# The teacher fit in float64: in float32 the gradient summed over 2 ranks rounds differently from
# one process's (energies 1e-7 Ha apart after 3 steps of the quick job), which would hide whether
# the data-parallel step itself is exact.
FIXED = 'unique_min = 0\nunique_max = 0\ncheckpoint_every = 100000\npretrain_dtype = "float64"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vmc_command(n_proc: int, size: dict, optimizer: str | None, config: Path, out: Path) -> list[str]:
    """The command line of one run with ``n_proc`` processes (options that are None: not passed)."""
    if n_proc == 1:
        launcher = [sys.executable, "-m", "nnqs"]
    else:
        torchrun = str(Path(sys.executable).parent / "torchrun")
        launcher = [torchrun, "--nproc_per_node", str(n_proc), "--master_port", str(free_port()), "-m", "nnqs"]
    options = {"--basis": size["basis"], "--samples": size["samples"], "--d-model": size["d_model"],
               "--n-layers": size["n_layers"], "--optimizer": optimizer, "--lr": size["lr"],
               "--pretrain-steps": size["pretrain_steps"]}
    chosen = [part for name, value in options.items() if value is not None for part in (name, str(value))]
    return launcher + [
        "vmc", size["molecule"], "--config", str(config), "--steps", str(size["steps"]), *chosen,
        "--threads", "1", "--no-exact", "--final-samples", "1000", "--out", str(out), "--json",
    ]  # fmt: skip


def run_once(n_proc: int, size: dict, optimizer: str, workdir: Path) -> dict:
    """Run VMC with ``n_proc`` processes; return per-step times, energies and unique counts."""
    config = workdir / "fixed.toml"
    config.write_text(FIXED)
    out = workdir / f"{optimizer or 'default'}-{n_proc}"
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(root))
    start = time.perf_counter()  # whole launched runs (step times come from history.csv), so not Timer
    proc = subprocess.run(vmc_command(n_proc, size, optimizer, config, out), env=env, cwd=workdir,
                          capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{n_proc}-process run failed:\n{proc.stderr[-2000:]}")
    rows = history_rows(out / "history.csv")
    times = [step_seconds(r) for r in rows]
    return {"times": times, "energies": [float(r["energy"]) for r in rows],
            "unique": [int(r["n_unique"]) for r in rows], "wall": wall}  # fmt: skip


def compare(size: dict, optimizer: str, workdir: Path) -> dict:
    """Time one optimizer with 1 and 2 processes; return the JSON record."""
    one, two = (run_once(n, size, optimizer, workdir) for n in (1, 2))
    w = size["warmup"]
    t1, t2 = statistics.median(one["times"][w:]), statistics.median(two["times"][w:])
    diff = max(abs(a - b) for a, b in zip(one["energies"], two["energies"]))
    return {
        "benchmark": "distributed", "molecule": size["molecule"], "basis": size["basis"] or "sto-3g",
        "optimizer": optimizer or "default", "pretrain_steps": size["pretrain_steps"],
        "steps": size["steps"], "warmup": w, "samples": size["samples"],
        "median_unique": statistics.median(one["unique"][w:]), "d_model": size["d_model"],
        "n_layers": size["n_layers"], "seconds_per_step_1": round(t1, 6), "seconds_per_step_2": round(t2, 6),
        "speedup": round(t1 / t2, 3), "wall_s_1": round(one["wall"], 2), "wall_s_2": round(two["wall"], 2),
        "max_energy_diff": diff, "threads_per_process": 1, "cpu_count": os.cpu_count(), "backend": "gloo",
        **software(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("distributed", __doc__, "H2, tiny model, 3 steps (seconds)")
    parser.add_argument("--job", choices=sorted(JOBS), default="n2",
                        help="n2: N2/STO-3G, fixed small model, AdamW and SR; h2o-6-31g: the 26-qubit default job")
    parser.add_argument("--molecule", default=None, help="catalog molecule (default: the job's)")
    parser.add_argument("--steps", type=int, default=None, help="steps per run")
    parser.add_argument("--optimizers", nargs="*", default=None, help="adamw and/or sr")
    parser.add_argument("--pretrain-steps", type=int, default=None,
                        help="teacher-fit steps before the timed steps (default: the run's default)")
    args = parser.parse_args(argv)
    size = dict(QUICK if args.quick else JOBS[args.job])
    for key in ("molecule", "steps", "optimizers", "pretrain_steps"):
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    with tempfile.TemporaryDirectory(prefix="nnqs-bench-") as tmp:
        for optimizer in size["optimizers"]:
            emit(compare(size, optimizer, Path(tmp)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
