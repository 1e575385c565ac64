"""Shared helpers for benchmarks: the command line every benchmark starts from, JSON-lines
output, the software fields of a record, and timing."""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO


def benchmark_parser(name: str, doc: str, quick_help: str) -> argparse.ArgumentParser:
    """``python -m benchmarks.NAME`` with ``--quick`` (toy size: what the test suite runs) and ``--out``."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    return parser


def software() -> dict[str, str]:
    """The fields every record carries about where it ran."""
    import torch

    return {"torch": torch.__version__, "machine": platform.machine()}


def emit(record: dict[str, Any], path: str | Path | None = None, stream: TextIO | None = None) -> None:
    """Write ``record`` as one JSON object per line to ``stream`` (stdout) and append it to ``path``."""
    line = json.dumps(record, sort_keys=False)
    print(line, file=stream or sys.stdout, flush=True)
    if path is not None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def median_seconds(
    fn: Callable[[], Any], repeats: int, sync: Callable[[], None] = lambda: None, budget_s: float = float("inf")
) -> tuple[float, Any, int]:
    """Median wall-clock seconds of up to ``repeats`` calls of ``fn``, the last result, and the
    number of calls made (repeating stops once ``budget_s`` seconds were spent)."""
    times: list[float] = []
    result = None
    while len(times) < repeats and sum(times) < budget_s:
        sync()
        start = time.perf_counter()
        result = fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result, len(times)
