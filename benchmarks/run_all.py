"""Every benchmark in turn (what ``make bench`` runs), JSON lines appended under ``benchmarks/results/``.

``python -m benchmarks.run_all [--quick] [--only NAME ...] [--results DIR]``

The full set takes hours on 2 cores (the accuracy runs and LM training
dominate); ``--quick`` runs each at toy size in about a minute, ``--only``
picks some. Each benchmark's lines go to ``DIR/<name>.jsonl`` (``--quick``
writes to ``DIR/quick/`` so toy lines never mix with measurements). A
benchmark that fails is reported and the rest still run; the exit code is the
number of failures. (``benchmarks.diagnose`` works on finished run folders and is not in the set.)
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

ORDER = ("sr_solve", "allocator", "sampling", "vmc_step", "distributed", "device", "scan", "teacher", "teacher_fit", "fit_step", "end_of_run", "external_space",
         "accuracy", "lm")
RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark at toy size")
    parser.add_argument("--only", nargs="+", choices=ORDER, default=list(ORDER), metavar="NAME",
                        help=f"run only these (of {', '.join(ORDER)})")  # fmt: skip
    parser.add_argument("--results", default=str(RESULTS), help="folder for the JSON lines")
    args = parser.parse_args(argv)
    folder = Path(args.results) / ("quick" if args.quick else "")
    folder.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name in (n for n in ORDER if n in args.only):
        out = folder / f"{name}.jsonl"
        print(f"== {name} -> {out}", file=sys.stderr, flush=True)
        start = time.perf_counter()  # the wall time of a whole benchmark, for the log only
        try:
            importlib.import_module(f"benchmarks.{name}").main(["--out", str(out)] + (["--quick"] if args.quick else []))
        except Exception:  # one broken benchmark must not hide the others' numbers
            failures += 1
            traceback.print_exc()
        print(f"== {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return failures


if __name__ == "__main__":
    raise SystemExit(main())
