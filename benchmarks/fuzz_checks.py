"""What a sound result looks like, for :mod:`benchmarks.fuzz`: a command that exits 0 must leave
these behind (a run folder whose history has every step once, a loadable checkpoint, finite
numbers...), and the template runs and files the cases start from.

A check takes the case's working folder and its command line, and returns what is wrong
(one short phrase) or None.
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import history_rows

VMC_TINY = ["--pretrain-steps", "2", "--d-model", "8", "--n-heads", "2", "--n-layers", "1", "--final-samples", "1000",
            "--no-exact", "--threads", "1", "--no-progress"]
LM_TINY = ["--eval-every", "3", "--checkpoint-every", "3", "--d-model", "8", "--n-heads", "2", "--n-layers", "1",
           "--batch-size", "8", "--val-size", "8", "--threads", "1", "--target-exact", "0", "--no-progress"]
QUESTION = "BOS POSITIVE 01 add NEGATIVE 02 EOS"


def parsed(argv: list[str]):
    """The namespace ``nnqs`` parses from ``argv`` (the case exited 0, so it parses)."""
    import contextlib
    import io

    from nnqs.cli import build_parser

    with contextlib.redirect_stderr(io.StringIO()):
        return build_parser().parse_args(argv)


def steps_problem(seen: list[int], expected: list[int]) -> str | None:
    """None if the history's steps are ``expected``, else what differs."""
    if seen == expected:
        return None
    twice = sorted({s for s in seen if seen.count(s) > 1})
    missing = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    found = (("twice", twice), ("missing", missing), ("extra", extra))
    parts = [f"{name} {values[:5]}" for name, values in found if values]
    return "history.csv steps " + ("; ".join(parts) or "out of order")


def vmc_problem(folder: Path) -> str | None:
    """What is unsound in a finished VMC run folder, or None."""
    from nnqs.common.checkpoint import load_checkpoint

    steps = tomllib.loads((folder / "config.toml").read_text())["steps"]
    seen = [int(row["step"]) for row in history_rows(folder / "history.csv")]
    problem = steps_problem(seen, list(range(steps)))
    if problem:
        return problem
    if load_checkpoint(folder, "vmc")["step"] != steps:
        return f"checkpoint.pt is not at step {steps}"
    result = json.loads((folder / "result.json").read_text())
    if result["steps"] != steps or not math.isfinite(result["energy"]):
        return f"result.json says steps {result['steps']}, energy {result['energy']}"
    if any(result[k] is not None and not math.isfinite(result[k]) for k in ("e_exact", "e_hf", "e_ccsd_t")):
        return f"result.json has a non-finite reference: e_exact {result['e_exact']}, e_hf {result['e_hf']}"
    return None


def lm_problem(folder: Path) -> str | None:
    """What is unsound in a finished LM run folder, or None."""
    from nnqs.common.checkpoint import load_checkpoint

    every = tomllib.loads((folder / "config.toml").read_text())["eval_every"]
    result = json.loads((folder / "result.json").read_text())
    stop = result["stopped_at"]
    seen = [int(row["step"]) for row in history_rows(folder / "history.csv")]
    problem = steps_problem(seen, list(range(every, stop + 1, every)) + ([stop] if stop % every else []))
    if problem:
        return problem
    if load_checkpoint(folder, "lm")["step"] != stop:
        return f"checkpoint.pt is not at step {stop}"
    if not 0 <= result["val_exact_match"] <= 1:
        return f"val_exact_match {result['val_exact_match']}"
    return None


def exact_problem(stdout: str, argv: list[str]) -> str | None:
    if parsed(argv).json:
        refs = json.loads(stdout.strip().splitlines()[-1])
        energies = {k: refs.get(k) for k in ("e_hf", "e_ccsd", "e_ccsd_t", "e_exact")}
        bad = [k for k, e in energies.items() if e is not None and not math.isfinite(e)]
        return f"non-finite {', '.join(bad)} in the JSON" if bad or refs["e_exact"] is None else None
    labels = (["HF"], ["CCSD"], ["CCSD(T)"], ["exact"])
    rows = [line.lower() for line in stdout.splitlines() if line.split()[:1] in labels]
    if any("nan" in row or "inf" in row for row in rows):
        return "a non-finite energy in the table"
    return None if "exact (" in stdout else "no exact energy printed"


def data_problem(cwd: Path, argv: list[str]) -> str | None:
    from nnqs.lm.data import load_pairs

    args = parsed(argv)
    pairs = load_pairs(cwd / args.out)
    return None if len(pairs) == args.n and len(set(pairs.questions)) == args.n else f"{len(pairs)} pairs, not {args.n}"


def eval_problem(stdout: str) -> str | None:
    lines = stdout.strip().splitlines()
    found = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else dict(
        line.split(" ", 1) for line in lines if " " in line)
    match = float(found["exact_match"])
    return None if 0 <= match <= 1 else f"exact_match {match}"


def output_problem(cwd: Path, argv: list[str], stdout: str) -> str | None:
    """The check of any ``nnqs argv`` run in ``cwd`` that exited 0 (help text is always sound)."""
    if stdout.startswith("usage:"):
        return None
    args = parsed(argv)
    command = args.command if args.command != "lm" else f"lm {args.lm_command}"
    if command == "vmc":
        from nnqs.cli.molecule_args import spec_from_args

        return vmc_problem(cwd / (args.out or f"runs/{(spec_from_args(args).name or 'system').replace('/', '_')}"))
    if command == "lm train":
        return lm_problem(cwd / args.out)
    if command == "exact":
        return exact_problem(stdout, argv)
    if command == "lm data":
        return data_problem(cwd, argv)
    if command == "lm eval":
        return eval_problem(stdout)
    if command == "lm generate":
        n = len(stdout.strip().splitlines())
        return None if n == len(args.questions) else f"{n} answers to {len(args.questions)} questions"
    if command == "lm show":
        ckpt = cwd / args.ckpt
        png = cwd / args.out if args.out else (ckpt if ckpt.is_dir() else ckpt.parent) / "attention.png"
        return None if png.read_bytes().startswith(b"\x89PNG") else f"{png.name} is not a PNG"
    return None


@dataclass(frozen=True)
class Templates:
    """Finished runs and files the cases copy and damage (absolute paths)."""

    vmc: Path
    vmc_other: Path
    lm: Path
    lm_encoder: Path
    data: Path
    fcidump_h2: str
    fcidump_lih: str
    cache: Path  # NNQS_CACHE_DIR after `nnqs exact H2`: the Hamiltonian and references of H2


def make_templates(root: Path) -> Templates:
    """Run the template runs (forked, real) and write the FCIDUMP texts; RuntimeError if one fails."""
    from benchmarks.fuzz_run import run_forked
    from hamiltonians import build_hamiltonian, get_spec
    from hamiltonians.fcidump import write_fcidump

    root.mkdir(parents=True, exist_ok=True)
    lm_args = ["lm", "train", *LM_TINY, "--steps", "6", "--train-size", "40"]
    runs = {
        "vmc": ["vmc", "H2", *VMC_TINY, "--steps", "3", "--checkpoint-every", "1", "--out", "vmc"],
        "vmc_other": ["vmc", "--geometry", "H 0 0 0; H 0 0 1.0", *VMC_TINY, "--steps", "3", "--checkpoint-every", "1",
                      "--out", "vmc_other"],
        "lm": [*lm_args, "--out", "lm"],
        "lm_encoder": [*lm_args, "--arch", "encoder", "--out", "lm_encoder"],
        "data": ["lm", "data", "--n", "20", "--seed", "3", "--out", "data.json"],
    }
    runs["cache"] = ["exact", "H2"]
    for name, argv in runs.items():
        env = {"NNQS_CACHE_DIR": str(root / "cache")} if name == "cache" else None
        result = run_forked(argv, root, timeout=300, env=env)
        if result.rc != 0:
            raise RuntimeError(f"template {name} failed ({result.rc}): {result.stderr[-500:]}")
    texts = {}
    for name in ("H2", "LiH"):
        write_fcidump(root / f"FCIDUMP.{name}", build_hamiltonian(get_spec(name)))
        texts[name] = (root / f"FCIDUMP.{name}").read_text()
    return Templates(root / "vmc", root / "vmc_other", root / "lm", root / "lm_encoder", root / "data.json",
                     texts["H2"], texts["LiH"], root / "cache")
