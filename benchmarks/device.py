"""Step time of one VMC job with ``--device cuda`` against ``--device cpu``, measured in one run.

``python -m benchmarks.device [--quick] [--out FILE] (--fcidump FILE | --molecule NAME [--basis B])
[--label NAME] [--steps N] [--pretrain-steps N] [--side-by-side] [--limit SECONDS] [--devices cuda cpu]``

The same command (``nnqs vmc`` with the defaults, only the step count, the teacher fit's length
and the final sample count fixed; ``--no-exact``) is run once per device. The time of a step is
``t_sample + t_local + t_grad`` from history.csv: the wall time of the step, re-selection of the
core included, since every step ends in a host synchronisation (the gradient norm). Reported per
device: the median step, the median of the re-selection steps (every ``core_every``-th) and of the
others, the teacher's time (selected CI and fit) and the wall time; ``speedup`` is the ratio of the
median steps. With ``--side-by-side`` both runs go at once on disjoint cores (the cuda run on 2,
the cpu run on the rest; each process pinned, its thread count set to its cores) to halve the wall
time of a measurement on a lent machine; a run still going after ``--limit`` seconds is stopped and
its finished steps are reported. ``--fcidump`` needs no PySCF on the machine that runs it.
Prints one JSON object.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import benchmark_parser, emit, history_rows, software, step_seconds

ROOT = Path(__file__).resolve().parents[1]
GPU_CORES = 2  # cores left to the cuda run in --side-by-side


def command(system: list[str], device: str, threads: int, steps: int, pretrain: int | None, out: Path) -> list[str]:
    chosen = [] if pretrain is None else ["--pretrain-steps", str(pretrain)]
    return vmc_command(system, out, "--device", device, "--threads", str(threads), "--steps", str(steps), *chosen)


def vmc_command(system: list[str], out: Path, *options: str) -> list[str]:
    """The ``nnqs vmc`` process of a measured job (device and scan): no references computed, no
    progress bar, a token final energy, the result as JSON on stdout."""
    return [sys.executable, "-m", "nnqs", "vmc", *system, *options, "--no-exact", "--no-progress",
            "--final-samples", "1000", "--out", str(out), "--json"]  # fmt: skip


def launch(cmd: list[str], cores: set[int] | None, threads: int, log: Path) -> subprocess.Popen:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=path)
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
                            preexec_fn=pin)  # fmt: skip


def summarise(out: Path, stdout: str, returncode: int | None) -> dict:
    """Step times from the run's history.csv (finished steps only), teacher time from result.json."""
    from nnqs.vmc.config import VMCConfig

    every = VMCConfig().core_every  # the default cadence: step k re-selects when k % every == every - 1
    rows = history_rows(out / "history.csv")
    steps, times = [int(r["step"]) for r in rows], [step_seconds(r) for r in rows]
    reselect = [t for s, t in zip(steps, times) if s % every == every - 1]
    plain = [t for s, t in zip(steps[1:], times[1:]) if s % every != every - 1]  # step 0 warms up
    result = json.loads(stdout.strip().splitlines()[-1]) if returncode == 0 and stdout.strip() else {}
    median = (lambda xs: round(statistics.median(xs), 4) if xs else None)
    return {"steps_done": len(steps), "median_step_s": median(times[1:] or times), "median_plain_step_s": median(plain),
            "median_reselect_step_s": median(reselect), "step_times_s": [round(t, 4) for t in times],
            "teacher_s": result.get("pretrain_s"), "n_core": result.get("n_core"), "energy": result.get("energy"),
            "peak_rss_mb": result.get("peak_rss_mb"), "finished": returncode == 0}  # fmt: skip


def measure(system: list[str], devices: list[str], steps: int, pretrain: int | None, side_by_side: bool,
            limit: float, workdir: Path) -> dict:
    cores = sorted(os.sched_getaffinity(0))
    split = side_by_side and len(devices) > 1
    plan = {d: (set(cores[:GPU_CORES]) if d == "cuda" else set(cores[GPU_CORES:])) if split else None for d in devices}
    runs: dict[str, dict] = {}

    def start(device: str) -> None:
        threads = len(plan[device] or cores)
        out = workdir / device
        proc = launch(command(system, device, threads, steps, pretrain, out), plan[device], threads,
                      workdir / f"{device}.log")  # fmt: skip
        runs[device] = {"proc": proc, "out": out, "threads": threads, "start": time.perf_counter()}

    def finish(device: str) -> None:
        run = runs[device]
        try:
            stdout, _ = run["proc"].communicate(timeout=max(1.0, limit - (time.perf_counter() - run["start"])))
        except subprocess.TimeoutExpired:
            run["proc"].kill()
            stdout, _ = run["proc"].communicate()
        run["wall_s"] = round(time.perf_counter() - run["start"], 2)
        run["summary"] = summarise(run["out"], stdout, run["proc"].returncode)
        if run["proc"].returncode not in (0, -9):
            tail = (workdir / f"{device}.log").read_text()[-1500:]
            print(f"{device} run failed ({run['proc'].returncode}):\n{tail}", file=sys.stderr)

    if side_by_side:
        for device in devices:
            start(device)
        for device in devices:
            finish(device)
    else:
        for device in devices:
            start(device)
            finish(device)
    record = {device: {"threads": run["threads"], "wall_s": run["wall_s"], **run["summary"]}
              for device, run in runs.items()}  # fmt: skip
    if all(record.get(d, {}).get("median_step_s") for d in ("cpu", "cuda")):
        record["speedup"] = round(record["cpu"]["median_step_s"] / record["cuda"]["median_step_s"], 2)
    return record


def add_job_arguments(parser) -> None:
    """``--fcidump FILE`` or ``--molecule NAME [--basis B]``: the ``nnqs vmc`` job a benchmark runs."""
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--fcidump", help="FCIDUMP file of the job")
    what.add_argument("--molecule", help="catalog molecule of the job")
    parser.add_argument("--basis", default=None, help="basis set with --molecule")


def job(args) -> tuple[list[str], str]:
    """The ``nnqs vmc`` system arguments of :func:`add_job_arguments`' options (H2O without either)
    and the job's name."""
    if args.fcidump:
        return ["--fcidump", str(Path(args.fcidump).resolve())], Path(args.fcidump).stem
    name = args.molecule or "H2O"
    return [name] + (["--basis", args.basis] if args.basis else []), f"{name}/{args.basis or 'sto-3g'}"


def gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("device", __doc__, "H2, 3 steps, on the CPU only where no GPU is seen (seconds)")
    add_job_arguments(parser)
    parser.add_argument("--label", default=None, help="name of the job in the record")
    parser.add_argument("--steps", type=int, default=6, help="VMC steps per run (default 6: one re-selection)")
    parser.add_argument("--pretrain-steps", type=int, default=None, help="teacher-fit steps (default: the run's)")
    parser.add_argument("--devices", nargs="+", default=None, choices=("cuda", "cpu"),
                        help="default: cuda and cpu where CUDA is seen, else cpu")
    parser.add_argument("--side-by-side", action="store_true", help="both runs at once on disjoint cores")
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds after which a run is stopped")
    args = parser.parse_args(argv)
    if args.quick:
        args.molecule, args.fcidump, args.steps, args.pretrain_steps = "H2", None, 3, 10
    system, label = job(args)
    label = args.label or label
    devices = args.devices or (["cuda", "cpu"] if gpu_name() else ["cpu"])
    with tempfile.TemporaryDirectory() as tmp:
        record = measure(system, devices, args.steps, args.pretrain_steps, args.side_by_side, args.limit, Path(tmp))
    emit({"benchmark": "device", "job": label, "steps": args.steps, "pretrain_steps": args.pretrain_steps,
          "side_by_side": args.side_by_side, "gpu": gpu_name(), "cpu_count": os.cpu_count(), **record,
          **software()}, args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
