"""A fuzzing round: hostile inputs to ``nnqs exact``, ``nnqs vmc`` and ``nnqs lm``, counted by outcome.

    python -m benchmarks.fuzz [--quick] [--cases 500] [--seed 0] [--out FILE] [--log FILE] [--keep DIR]
                              [--families NAME ...]

The cases are drawn from ``--seed`` alone, family by family (each family its own random
generator, its share of ``--cases``):

* ``flags``: hostile values and shapes of every command's options (nan, 1e400, huge integers,
  unicode, option-looking values, repeated, abbreviated, unknown or valueless flags);
* ``files``: hostile FCIDUMP, XYZ, TOML and A5 data files, and damaged run folders
  (checkpoint.pt, config.toml, history.csv, pretrain.pt...) to resume or to load in ``lm eval``;
* ``folders``: hostile places for ``--out``, locked folders, runs started again;
* ``signals``: real processes signalled at random moments, then continued;
* ``disk full``: runs on a tiny tmpfs.

Each case runs in a forked child with a time and memory limit (:mod:`benchmarks.fuzz_run`);
where a hostile value could make the work large, the work is stubbed or the values kept small,
and real runs start from a tiny model. Outcomes: ``ran``, ``refused`` (one line, no traceback),
``work kept`` / ``work lost`` (signals) and ``bug``. One JSON line per family and a total line;
``--log`` writes one line per case (its argv, outcome, exit code, stderr line) to reproduce it;
``--keep DIR`` keeps the cases' files there. ``--quick`` (what the test suite runs) is about 48
cases of the first three families, no signals or full disks.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import benchmark_parser, emit, software

SHARES = {"flags": 0.42, "files": 0.30, "folders": 0.14, "signals": 0.07, "disk full": 0.07}
QUICK_FAMILIES = ("flags", "files", "folders")


def family_sizes(n: int, families: tuple[str, ...]) -> dict[str, int]:
    """``n`` cases shared among ``families`` in proportion to ``SHARES`` (every family at least one)."""
    total = sum(SHARES[f] for f in families)
    sizes = {f: max(1, round(n * SHARES[f] / total)) for f in families}
    sizes[families[0]] += n - sum(sizes.values())
    return sizes


def generators():
    from benchmarks import fuzz_faults, fuzz_families, fuzz_folders

    return {"flags": fuzz_families.flags, "files": fuzz_families.files, "folders": fuzz_folders.folders,
            "signals": fuzz_faults.signals, "disk full": fuzz_faults.disk_full}


def _log_line(case, verdict) -> dict:
    return {"family": case.family, "label": case.label, "argv": case.argv, "cwd": str(case.cwd), "stub": case.stub,
            "outcome": verdict.outcome, "why": verdict.why, "rc": verdict.rc, "stderr": verdict.line,
            "seconds": verdict.seconds, **verdict.extra}


def run_family(name: str, n: int, seed: int, work: Path, templates, log) -> dict:
    """Run the ``n`` cases of family ``name``; its record (counts per outcome)."""
    from benchmarks.fuzz_faults import FamilySkipped
    from benchmarks.fuzz_run import OUTCOMES, run_case

    rng = random.Random(f"{seed}/{name}")
    counts, start = Counter(), time.perf_counter()
    record = {"benchmark": "fuzz", "family": name, "cases": 0}
    try:
        for case in generators()[name](rng, n, work / "cases", templates):
            verdict = run_case(case)
            counts[verdict.outcome] += 1
            if log is not None:
                log.write(json.dumps(_log_line(case, verdict), ensure_ascii=True) + "\n")
                log.flush()
            if verdict.outcome == "bug":
                print(f"fuzz: bug in {name}: {case.label}: {verdict.why}: {verdict.line}"[:400], file=sys.stderr)
    except FamilySkipped as exc:
        record["skipped"] = str(exc)
    record["cases"] = sum(counts.values())
    record.update({outcome: counts[outcome] for outcome in OUTCOMES})
    record["seconds"] = round(time.perf_counter() - start, 1)
    return record


def main(argv: list[str] | None = None) -> list[dict]:
    parser = benchmark_parser("fuzz", __doc__, "about 48 in-process cases, no signals or full disks")
    parser.add_argument("--cases", type=int, default=None, help="number of cases (default 500; 48 with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="the seed every case is drawn from")
    parser.add_argument("--log", default=None, help="write one JSON line per case to this file")
    parser.add_argument("--keep", default=None, help="keep the cases' files in this folder (default: a temporary one)")
    parser.add_argument("--families", nargs="+", choices=tuple(SHARES), default=None, metavar="NAME",
                        help=f"only these families (of {', '.join(SHARES)}), sharing --cases")
    args = parser.parse_args(argv)
    families = tuple(args.families or (QUICK_FAMILIES if args.quick else SHARES))
    n = args.cases if args.cases is not None else 48 if args.quick else 500
    if n < len(families):
        parser.error(f"--cases must be at least {len(families)}")
    from benchmarks.fuzz_checks import make_templates
    from benchmarks.fuzz_run import OUTCOMES, preload

    work = Path(args.keep or tempfile.mkdtemp(prefix="nnqs-fuzz-")).resolve()
    old_cache = os.environ.get("NNQS_CACHE_DIR")
    os.environ["NNQS_CACHE_DIR"] = str(work / "cache")  # hostile molecules never reach the user's cache
    start, lines = time.perf_counter(), []
    log = open(args.log, "w", encoding="utf-8") if args.log else None
    try:
        preload()
        templates = make_templates(work / "templates")
        for name, size in family_sizes(n, families).items():
            print(f"fuzz: {name}, {size} cases", file=sys.stderr, flush=True)
            record = run_family(name, size, args.seed, work, templates, log)
            emit(record, args.out)
            lines.append(record)
    finally:
        if log is not None:
            log.close()
        os.environ.pop("NNQS_CACHE_DIR") if old_cache is None else os.environ.update(NNQS_CACHE_DIR=old_cache)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    total = {"benchmark": "fuzz", "family": "total", "cases": sum(r["cases"] for r in lines),
             **{o: sum(r[o] for r in lines) for o in OUTCOMES}, "seed": args.seed, "quick": args.quick,
             "skipped": [r["family"] for r in lines if "skipped" in r],
             "wall_s": round(time.perf_counter() - start, 1), **software()}
    emit(total, args.out)
    return [*lines, total]


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(0 if main() else 1)
