"""`nnqs vmc` with glibc's default malloc vs :func:`nnqs.common.allocator.reuse_freed_memory`.

``python -m benchmarks.allocator [--quick] [--out FILE] [--repeats R]``

Runs the same short ``nnqs vmc`` job in fresh processes, alternately with
``NNQS_MALLOC=system`` (glibc's defaults) and without (freed memory kept and
reused), one thread each; prints one JSON line per molecule with the median
wall seconds of each, the speedup, system (kernel) seconds and peak RSS.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import benchmark_parser, emit, software

FULL = dict(jobs=(("LiH", 60), ("H2O", 30)), extra=(), repeats=1)
QUICK = dict(jobs=(("H2", 3),), extra=("--d-model", "8", "--n-layers", "1", "--final-samples", "1000"), repeats=1)

CHILD = (
    "import resource, sys; from nnqs.cli import main; code = main(sys.argv[1:]); "
    "usage = resource.getrusage(resource.RUSAGE_SELF); "
    "print('RUSAGE', usage.ru_maxrss, usage.ru_stime, file=sys.stderr); sys.exit(code)"
)


def run_job(molecule: str, steps: int, extra: tuple, system_malloc: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("NNQS_MALLOC", None)
    if system_malloc:
        env["NNQS_MALLOC"] = "system"
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-c", CHILD, "vmc", molecule, "--steps", str(steps), "--threads", "1",
               "--no-exact", "--out", out, "--json", *extra]  # fmt: skip
        start = time.perf_counter()  # a whole fresh process is what is timed, so a wall clock, not Timer
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"nnqs vmc {molecule} failed: {proc.stderr[-500:]}")
    line = [x for x in proc.stderr.splitlines() if x.startswith("RUSAGE")][-1].split()
    energy = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])["energy"]
    return {"wall": wall, "peak_rss_mb": int(line[1]) / 1024, "system_s": float(line[2]), "energy": energy}


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("allocator", __doc__, "H2, 3 steps, a tiny model")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    repeats = args.repeats or size["repeats"]
    for molecule, steps in size["jobs"]:
        runs = {"system": [], "reuse": []}
        for _ in range(repeats):  # alternate, so that machine load hits both alike
            runs["system"].append(run_job(molecule, steps, size["extra"], True))
            runs["reuse"].append(run_job(molecule, steps, size["extra"], False))
        med = {k: {f: statistics.median(r[f] for r in v) for f in ("wall", "peak_rss_mb", "system_s")}
               for k, v in runs.items()}  # fmt: skip
        emit({
            "benchmark": "allocator", "molecule": molecule, "steps": steps, "repeats": repeats,
            "seconds_system_malloc": round(med["system"]["wall"], 3), "seconds_reuse": round(med["reuse"]["wall"], 3),
            "speedup": round(med["system"]["wall"] / med["reuse"]["wall"], 3),
            "kernel_seconds_system_malloc": round(med["system"]["system_s"], 3),
            "kernel_seconds_reuse": round(med["reuse"]["system_s"], 3),
            "peak_rss_mb_system_malloc": round(med["system"]["peak_rss_mb"], 1),
            "peak_rss_mb_reuse": round(med["reuse"]["peak_rss_mb"], 1),
            "same_energy": runs["system"][0]["energy"] == runs["reuse"][0]["energy"],
            "threads": 1, **software(),
        }, args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
