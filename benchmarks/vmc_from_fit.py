"""VMC with changed settings from a finished run's teacher fit, step by step against that run (JSON lines).

    python -m benchmarks.vmc_from_fit --source RUN [--system H10@2.5] --folder DIR [--set sr_rows=4096 ...]
                                      [--stop-after N] [--threads 1] [--report 20 50 100 150] [--out FILE]
    python -m benchmarks.vmc_from_fit --quick     # a toy LiH run, then VMC from its fit (run by the test suite)

A run's teacher and its fit are its largest fixed cost (H10 at 1.5 A: 10.5 of 34 minutes), and the float32
fit is not bitwise the same from one install to the next; a VMC setting is best judged from the same fitted
network. This takes the source run's integrals (its ``hamiltonian.npz``, or the molecule rebuilt in the
orbitals it names: the cache of this machine then gives the run's own signs), its settings (``config.toml``)
changed by ``--set``, and the network and set the run's VMC started from (the fit's final state in
``pretrain.pt`` and the teacher's configurations), and runs VMC into ``--folder`` (``--stop-after`` N steps: the
run is stopped there, with a checkpoint, keeping the step schedule of its configured steps). With no
``--set`` the steps are the source run's (a check: the same energies). The molecule: the source's
``molecule.json`` (``nnqs vmc`` runs), else ``--system`` (a name of ``benchmarks.accuracy``).

One record: the changed settings, and at each ``--report`` step (and the last) both runs' step energy above
the exact energy (mHa, where the source knows it) and their cumulative step seconds.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.common import benchmark_parser, emit, history_rows, software, step_seconds


def source_spec(source: Path, system: str | None):
    """The molecule of the run in ``source``: its ``molecule.json``, else the benchmark name ``system``."""
    if (source / "molecule.json").is_file():
        from nnqs.cli.molecule_args import saved_molecule

        return saved_molecule(source)
    if system is None:
        raise SystemExit(f"{source} does not record its molecule (molecule.json): name it with --system")
    from benchmarks.accuracy import system_spec

    return system_spec(system)[0]


def fitted_start(source: Path) -> tuple[dict, torch.Tensor]:
    """The network after the source run's fit (its state in float64) and the teacher's configurations."""
    from nnqs.common.checkpoint import load_checkpoint
    from nnqs.vmc.pretrain_store import KIND

    data = load_checkpoint(source / "pretrain.pt", KIND)
    if "fit" not in data or "teacher" not in data:
        raise SystemExit(f"{source}/pretrain.pt holds no finished fit")
    model = {k: v.double() if v.is_floating_point() else v for k, v in data["fit"]["model"].items()}
    return model, data["teacher"]["configs"]


def stop_after(history: Path, steps: int | None):
    """A :class:`nnqs.common.interrupt.StopSignal` that asks the loop to stop once ``history`` holds
    ``steps`` rows (never for None)."""
    import signal

    from nnqs.common.interrupt import StopSignal

    class StopAt(StopSignal):
        @property
        def requested(self) -> bool:
            if steps is not None and self.signum is None and len(history_rows(history)) >= steps:
                self.signum = signal.SIGTERM
            return self.signum is not None

    return StopAt()


def compare(source_rows: list[dict], rows: list[dict], e_exact: float | None, report: list[int]) -> list[dict]:
    """Both runs at each ``report`` step both reached, and at the last step of the new run."""
    def at(history: list[dict], step: int) -> dict:
        seconds = sum(step_seconds(r) for r in history[: step + 1])
        energy = float(history[step]["energy"])
        above = None if e_exact is None else round(1000 * (energy - e_exact), 4)
        return {"energy": energy, "above_exact_mha": above, "step_seconds": round(seconds, 1)}

    steps = sorted({s for s in report if s < len(rows)} | ({len(rows) - 1} if rows else set()))
    return [{"step": s, "source": at(source_rows, s) if s < len(source_rows) else None, "changed": at(rows, s)}
            for s in steps]


def run(source: Path, out: Path, settings: dict, system: str | None, steps: int | None, threads: int,
        report: list[int]) -> dict:
    from nnqs.common.config import build_config, read_toml
    from nnqs.common.interrupt import Interrupted
    from nnqs.common.resume import as_run
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.hamiltonian_file import folder_hamiltonian
    from nnqs.vmc.run import run_molecule

    spec = source_spec(source, system)
    saved = {**read_toml(source / "config.toml"), **settings, "threads": threads}
    cfg = as_run(VMCConfig, build_config(VMCConfig, None, saved), saved)  # a setting the source predates: as it ran
    model, core = fitted_start(source)
    integrals = folder_hamiltonian(source, spec)
    result = json.loads((source / "result.json").read_text()) if (source / "result.json").is_file() else {}
    try:  # SIGINT / SIGTERM (or --stop-after) end the run at a step boundary, and the record is still written
        with stop_after(out / "history.csv", steps) as stop:
            done = run_molecule(spec, cfg, out, overwrite=True, init_model=model, init_core=core, integrals=integrals,
                                progress=sys.stderr.isatty(), exact=False, stop=stop)
    except Interrupted:
        done = None
    rows = history_rows(out / "history.csv")
    return {
        "benchmark": "vmc_from_fit", "source": str(source), "system": integrals[0].description, "settings": settings,
        "steps": cfg.steps, "steps_taken": len(rows), "finished": done is not None,
        "error_mha": None if done is None or result.get("e_exact") is None else 1000 * (done["energy"] - result["e_exact"]),
        "source_error_mha": result.get("error_mha"),
        "by_step": compare(history_rows(source / "history.csv"), rows, result.get("e_exact"), report),
        "threads": threads, **software(),
    }  # fmt: skip


def quick(threads: int) -> dict:
    """A toy LiH run in a temporary folder, then VMC from its fit with the same settings."""
    from hamiltonians import get_spec
    from nnqs.vmc.config import toy_config
    from nnqs.vmc.run import run_molecule

    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "source"
        run_molecule(get_spec("LiH"), dataclasses.replace(toy_config(4), threads=threads), source, progress=False)
        (source / "molecule.json").write_text(json.dumps(dataclasses.asdict(get_spec("LiH"))))
        return run(source, Path(scratch) / "again", {}, None, None, threads, [0, 2])


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("vmc_from_fit", __doc__, "a toy LiH run and VMC from its fit (seconds)")
    parser.add_argument("--source", type=Path, help="a finished core-mode run with its pretrain.pt")
    parser.add_argument("--folder", type=Path, help="the new run's folder (replaced)")
    parser.add_argument("--system", default=None, help="the source's molecule where it has no molecule.json")
    parser.add_argument("--set", nargs="+", metavar="FIELD=VALUE", default=[], help="VMCConfig fields to change")
    parser.add_argument("--stop-after", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--report", type=int, nargs="+", default=[20, 50, 100, 150, 200, 250])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        emit(quick(args.threads), args.out)
        return 0
    if args.source is None or args.folder is None:
        parser.error("--source and --folder are needed (or --quick)")
    from benchmarks.accuracy import parse_settings

    emit(run(args.source, args.folder, parse_settings(args.set), args.system, args.stop_after, args.threads,
             args.report), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
