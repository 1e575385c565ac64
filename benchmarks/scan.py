"""Settings against each other on one job: ``nnqs vmc`` runs side by side, one per variant.

``python -m benchmarks.scan [--quick] [--out FILE] (--fcidump FILE | --molecule NAME [--basis B])
--reference E [--device D] [--steps N] [--pretrain-steps N] [--cores-per-run K] [--limit SECONDS]
[--at STEP ...] [--keep DIR] VARIANT ...``

A VARIANT is ``NAME`` (the defaults) or ``NAME:FIELD=VALUE,FIELD=VALUE`` (VMCConfig fields, as
``benchmarks.accuracy --set`` takes them). The variants run at once, each pinned to its own
``--cores-per-run`` cores (more variants than the cores hold wait for a free slot), all on
``--device``; a run still going after ``--limit`` seconds is stopped and its finished steps count.
Reported per variant, from its history.csv: the working set's energy against ``--reference``
(mHa; in core mode the core's Rayleigh quotient, deterministic) at each ``--at`` step and at the
last step, the lowest of the last ten, the steps done and the median step time. The runs use
``--no-exact`` and a small final sample, so the side-by-side comparison is of the optimisation.
``--fcidump`` needs no PySCF where it runs (a lent GPU machine). One JSON line per variant.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.accuracy import parse_settings
from benchmarks.common import benchmark_parser, emit, history_rows, software, step_seconds
from benchmarks.device import add_job_arguments, job, launch, vmc_command
from nnqs.vmc.config import VMCConfig


def parse_variant(text: str) -> tuple[str, dict]:
    """``NAME`` or ``NAME:FIELD=VALUE,...`` -> (name, VMCConfig settings)."""
    name, _, rest = text.partition(":")
    if not name:
        raise SystemExit(f"variant {text!r}: expected NAME or NAME:FIELD=VALUE,...")
    return name, parse_settings([item for item in rest.split(",") if item])


def summarise(history: Path, reference: float, at: list[int]) -> dict:
    rows = history_rows(history)
    error = {int(r["step"]): 1000.0 * (float(r["energy"]) - reference) for r in rows}
    times = [step_seconds(r) for r in rows[1:]]  # step 0 warms up
    last = max(error) if error else None
    return {
        "steps_done": len(rows), "error_mha_at": {str(s): round(error[s], 4) for s in at if s in error},
        "last_step": last, "error_mha_last": None if last is None else round(error[last], 4),
        "error_mha_min_last10": round(min(error[s] for s in sorted(error)[-10:]), 4) if error else None,
        "median_step_s": round(statistics.median(times), 4) if times else None,
    }  # fmt: skip


def scan(system: list[str], variants: list[tuple[str, dict]], device: str, steps: int, pretrain: int | None,
         cores_per_run: int, limit: float, workdir: Path) -> dict[str, dict]:
    from nnqs.common.config import config_to_toml

    cores = sorted(os.sched_getaffinity(0))
    slots = [set(cores[i : i + cores_per_run]) for i in range(0, len(cores) - cores_per_run + 1, cores_per_run)]
    if not slots:
        raise SystemExit(f"--cores-per-run {cores_per_run}: only {len(cores)} cores here")
    pending, running, done = list(variants), {}, {}
    while pending or running:
        while pending and slots:
            name, settings = pending.pop(0)
            cores_here = slots.pop(0)
            fixed = {"steps": steps, "device": device, "threads": len(cores_here)}
            fixed |= {} if pretrain is None else {"pretrain_steps": pretrain}
            toml = workdir / f"{name}.toml"
            toml.write_text(config_to_toml(VMCConfig(**(fixed | settings))))
            out = workdir / name
            proc = launch(vmc_command(system, out, "--config", str(toml)), cores_here, len(cores_here),
                          workdir / f"{name}.log")
            running[name] = (proc, cores_here, time.perf_counter(), settings)
        time.sleep(1.0)
        for name, (proc, cores_here, start, settings) in list(running.items()):
            if proc.poll() is None and time.perf_counter() - start < limit:
                continue
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
            if proc.returncode not in (0, -9):
                print(f"{name} failed ({proc.returncode}):\n{(workdir / f'{name}.log').read_text()[-1500:]}",
                      file=sys.stderr)  # fmt: skip
            done[name] = {"settings": settings, "finished": proc.returncode == 0,
                          "wall_s": round(time.perf_counter() - start, 1)}  # fmt: skip
            slots.append(cores_here)
            del running[name]
    return done


def main(argv: list[str] | None = None) -> list[dict]:
    parser = benchmark_parser("scan", __doc__, "H2, 3 steps, two variants on the CPU (seconds)")
    add_job_arguments(parser)
    parser.add_argument("--reference", type=float, default=None, help="reference energy (Hartree) of the errors")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=VMCConfig().steps)
    parser.add_argument("--pretrain-steps", type=int, default=None, help="teacher-fit steps (default: the run's)")
    parser.add_argument("--cores-per-run", type=int, default=1)
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds after which a run is stopped")
    parser.add_argument("--at", type=int, nargs="+", default=[], help="steps whose errors are reported")
    parser.add_argument("--keep", default=None, help="keep the run folders and logs under this folder")
    parser.add_argument("variants", nargs="*", help="NAME or NAME:FIELD=VALUE,...")
    args = parser.parse_args(argv)
    if args.quick:
        args.molecule, args.fcidump, args.steps, args.pretrain_steps = "H2", None, 3, 10
        args.variants = args.variants or ["base", "lr:lr=0.1,d_model=8,n_layers=1"]
    if not args.variants:
        parser.error("name at least one variant")
    system, label = job(args)
    variants = [parse_variant(v) for v in args.variants]
    if len({name for name, _ in variants}) != len(variants):
        parser.error("variant names must differ")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nnqs-scan-"))
    workdir.mkdir(parents=True, exist_ok=True)
    done = scan(system, variants, args.device, args.steps, args.pretrain_steps, args.cores_per_run, args.limit, workdir)
    reference = args.reference  # none given: errors against the lowest energy any variant reached
    if reference is None:
        reference = min((float(r["energy"]) for n, _ in variants for r in history_rows(workdir / n / "history.csv")),
                        default=0.0)  # fmt: skip
    records = []
    for name, _ in variants:
        line = {"benchmark": "scan", "job": label, "variant": name, "device": args.device, "steps": args.steps,
                "pretrain_steps": args.pretrain_steps, "cores_per_run": args.cores_per_run, "reference": reference,
                **done[name], **summarise(workdir / name / "history.csv", reference, args.at), **software()}  # fmt: skip
        emit(line, args.out)
        records.append(line)
    return records


if __name__ == "__main__":
    main()
