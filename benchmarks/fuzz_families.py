"""The in-process families of :mod:`benchmarks.fuzz`: hostile option values (``flags``) and hostile
files (``files``). Each family is a generator of :class:`~benchmarks.fuzz_run.Case`, built one at a
time (its files written into a fresh case folder) from the family's ``random.Random``.

A case whose expensive work could grow with a hostile value (``--steps 1e9``) is either stubbed
(:func:`benchmarks.fuzz_run.install_stubs`) or given only values that keep it small; a real run
starts from a tiny model (``VMC_TINY``, ``LM_TINY``) so that it takes a second or two.
"""
from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Iterator

from benchmarks import fuzz_inputs as inputs
from benchmarks.fuzz_checks import LM_TINY, QUESTION, VMC_TINY, Templates, output_problem
from benchmarks.fuzz_run import Case
from nnqs.cli.lm import TRAIN_FLAGS
from nnqs.cli.vmc import FLAGS as VMC_RUN_FLAGS

MOLECULE_FLAGS = {"--geometry": "str", "--xyz": "str", "--fcidump": "str", "--basis": "str", "--charge": "int",
                  "--spin": "int", "--active": "int2"}
RUN_FLAGS = {"--config": "str", "--out": "str", "--resume": "flag", "--overwrite": "flag", "--json": "flag",
             "--no-progress": "flag"}
VMC_FLAGS = {**{"--" + k.replace("_", "-"): kind.__name__ for k, (kind, _) in VMC_RUN_FLAGS.items()}, **MOLECULE_FLAGS,
             **RUN_FLAGS, "--no-exact": "flag"}
VMC_COSTLY = {"--steps", "--d-model", "--n-layers", "--n-heads", "--pretrain-steps", "--phase-pretrain", "--threads"}
EXACT_FLAGS = {**MOLECULE_FLAGS, "--method": "str", "--bond-dim": "int", "--no-reorder": "flag", "--threads": "int",
               "--no-cache": "flag", "--json": "flag"}
LM_FLAGS = {**{flag: kind.__name__ for flag, _, kind, _ in TRAIN_FLAGS}, "--data": "str", "--train-size": "int",
            **RUN_FLAGS}
LM_COSTLY = {"--steps", "--batch-size", "--d-model", "--n-layers", "--n-heads", "--d-ff", "--train-size", "--val-size",
             "--threads"}
QUESTIONS = ["BOS", "BOS POSITIVE 01 add POSITIVE 02", QUESTION.replace("add", "multiply"),
             "BOS NEGATIVE 00 add POSITIVE 00 EOS", "BOS " + "POSITIVE 01 add " * 500 + "POSITIVE 01 EOS",
             "BOS POSITIVE 50 add POSITIVE 01 EOS", QUESTION.lower(), QUESTION.replace(" ", "  "),
             "BOS POSITIVE 1 add POSITIVE 2 EOS", "EOS POSITIVE 01 add POSITIVE 02 BOS"]
# Config keys whose hostile values cannot make a real run long (the others go to stubbed runs only).
VMC_SAFE_KEYS = ["lr", "seed", "optimizer", "sr_shift", "sr_momentum", "grad_clip", "selection", "teacher", "ansatz",
                 "orbitals", "dtype", "device", "estimator", "connected_dtype", "checkpoint_every",
                 "checkpoint_seconds", "lr_final", "warmup", "weight_decay", "hf_prob", "core_threshold",
                 "teacher_threshold", "pretrain_lr", "pretrain_dtype", "sr_momentum_schedule", "sr_rows",
                 "sr_exact_max", "max_batch", "final_samples"]
LM_SAFE_KEYS = ["lr", "seed", "arch", "dropout", "weight_decay", "warmup_steps", "device", "checkpoint_every",
                "checkpoint_seconds", "answer_mask_prob", "target_exact", "min_lr_ratio", "grad_clip", "eval_every"]


def _fields(cls) -> list[str]:
    import dataclasses

    return [f.name for f in dataclasses.fields(cls)]


def _case(family: str, label: str, argv: list[str], cwd: Path, stub: bool = False, **kw) -> Case:
    """A case whose exit 0 is judged by :func:`output_problem` (a stubbed run has nothing to judge)."""
    check = None if stub else (lambda out: output_problem(cwd, argv, out))
    return Case(family, label, argv, cwd, stub=stub, check=check, **kw)


def _mutate(rng: random.Random, argv: list[str], flags: dict[str, str], costly: set[str], real: bool,
            at: int) -> tuple[list[str], list[str]]:
    """(argv with one to three hostile additions, their labels); ``flags``: option -> the type of its value;
    ``at``: where the options start."""
    labels = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if rng.random() < 0.7:
            # a real run mostly gets its settings (files, folders and the molecule have families of their own)
            names = sorted(flags)
            if real and rng.random() < 0.7:
                names = [f for f in names if f not in MOLECULE_FLAGS and f not in RUN_FLAGS] or names
            flag = rng.choice(names)
            kind, safe = flags[flag], real and flag in costly
            values = [inputs.value(rng, kind.rstrip("2"), safe) for _ in range(2 if kind == "int2" else 1)]
            tokens = [flag] if kind == "flag" else [f"{flag}={values[0]}"] if rng.random() < 0.2 else [flag, *values]
            labels.append(repr(" ".join(tokens))[1:-1][:60])
        else:
            label, tokens = inputs.structure(rng, sorted(flags))
            labels.append(f"{label}: {' '.join(tokens)}"[:60])
        pos = len(argv) if rng.random() < 0.8 else at
        argv = argv[:pos] + tokens + argv[pos:]
    return argv, labels


def _command(rng: random.Random, t: Templates) -> tuple[str, list[str], dict[str, str], set[str], float]:
    """(name, valid tiny argv, its flags and their types, the costly ones, chance of a real run) of one command."""
    ckpt = str(rng.choice([t.lm, t.lm_encoder, t.lm / "checkpoint.pt"]))
    table = [
        (32, "vmc", ["vmc", "H2", *VMC_TINY, "--steps", "1", "--out", "run"], VMC_FLAGS, VMC_COSTLY, 0.7),
        (14, "exact", ["exact", "H2"], EXACT_FLAGS, set(), 0.5),
        (20, "lm train", ["lm", "train", *LM_TINY, "--steps", "3", "--train-size", "40", "--out", "run"], LM_FLAGS,
         LM_COSTLY, 0.7),
        (8, "lm data", ["lm", "data", "--n", "5", "--out", "d.json"],
         {"--n": "int", "--seed": "int", "--out": "str", "--exclude": "str"}, set(), 1),
        (8, "lm eval", ["lm", "eval", "--ckpt", ckpt, "--data", str(t.data)],
         {"--ckpt": "str", "--data": "str", "--threads": "int", "--json": "flag", "--fill": "str"}, {"--threads"}, 1),
        (8, "lm generate", ["lm", "generate", "--ckpt", ckpt, QUESTION], {"--ckpt": "str", "--temperature": "float",
         "--top-k": "int", "--top-p": "float", "--seed": "int", "--fill": "str"}, set(), 1),
        (5, "lm show", ["lm", "show", "--ckpt", ckpt, QUESTION, "--out", "a.png"],
         {"--ckpt": "str", "--out": "str", "--fill": "str"}, set(), 1),
    ]
    _, name, argv, flags, costly, real = rng.choices(table, weights=[row[0] for row in table])[0]
    return name, argv, flags, costly, real


def flags(rng: random.Random, n: int, work: Path, t: Templates) -> Iterator[Case]:
    """Hostile values and shapes of the options of every command."""
    for i in range(n):
        cwd = work / f"flags-{i:04d}"
        cwd.mkdir(parents=True)
        if rng.random() < 0.05:
            words = ["lm", "vmc", "exact", "molecules", "eval", "generate", "train", "data", "--json", "-h", "", "VMC",
                     "bogus"]
            argv = [rng.choice(words) for _ in range(rng.randrange(0, 4))]
            yield _case("flags", "top-level words", argv, cwd, stub=True)
            continue
        name, argv, flag_names, costly, real_share = _command(rng, t)
        real = rng.random() < real_share
        at = 2 if name.startswith("lm") else 1
        labels = []
        if name in ("vmc", "exact") and rng.random() < 0.3:
            molecule = rng.choice(inputs.MOLECULES)
            argv = [argv[0], *molecule, *argv[2:]]
            labels.append("molecule " + " ".join(molecule)[:60])
        if name in ("lm generate", "lm show") and rng.random() < 0.3:
            question = rng.choice(QUESTIONS + inputs.TEXTS)
            argv = argv + [question] if name == "lm generate" else [q if q != QUESTION else question for q in argv]
            labels.append(f"question {question[:40]!r}")
        argv, more = _mutate(rng, argv, flag_names, costly, real, at)
        yield _case("flags", f"{name}: " + "; ".join(labels + more), argv, cwd, stub=not real)


def _write(cwd: Path, name: str, content: bytes, rng: random.Random) -> tuple[str, str]:
    """Write ``content`` as ``cwd/name``, or (rarely) put a folder, nothing or /dev/null in its place."""
    draw = rng.random()
    if draw < 0.04:
        (cwd / name).mkdir()
        return name, "a folder"
    if draw < 0.07:
        return name, "missing"
    if draw < 0.09:
        return "/dev/null", "/dev/null"
    (cwd / name).write_bytes(content)
    return name, ""


def _fcidump(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    label, content = inputs.fcidump(rng, t.fcidump_h2 if rng.random() < 0.7 else t.fcidump_lih)
    path, instead = _write(cwd, "FCIDUMP", content, rng)
    spaces = [["1", "2"], ["2", "2"], ["0", "0"], ["3", "2"], ["1", "1"]]
    active = ["--active", *rng.choice(spaces)] if rng.random() < 0.15 else []
    if rng.random() < 0.6:
        argv = ["exact", "--fcidump", path, *active] + rng.choice([[], ["--no-cache"], ["--json"], ["--method", "ed"]])
    else:
        argv = ["vmc", "--fcidump", path, *active, *VMC_TINY, "--steps", "1", "--out", "run"]
    return f"FCIDUMP {instead or label}", argv, False


def _xyz(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    label, content = inputs.xyz(rng)
    path, instead = _write(cwd, "mol.xyz", content, rng)
    if rng.random() < 0.6:
        argv = ["exact", "--xyz", path] + rng.choice([[], ["--no-cache"], ["--json"], ["--spin", "1"]])
    else:
        argv = ["vmc", "--xyz", path, *VMC_TINY, "--steps", "1", "--out", "run"]
    return f"XYZ {instead or label}", argv, False


def _toml(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    from nnqs.lm.train import TrainConfig
    from nnqs.vmc.config import VMCConfig

    vmc, real = rng.random() < 0.6, rng.random() < 0.3
    keys = (VMC_SAFE_KEYS if vmc else LM_SAFE_KEYS) if real else _fields(VMCConfig if vmc else TrainConfig)
    label, content = inputs.toml(rng, keys)
    path, instead = _write(cwd, "c.toml", content, rng)
    tiny = [*VMC_TINY, "--steps", "1"] if vmc else [*LM_TINY, "--steps", "3", "--train-size", "40"]
    argv = ["vmc", "H2"] if vmc else ["lm", "train"]
    return f"config {instead or label}", argv + ["--config", path, *(tiny if real else []), "--out", "run"], not real


def _corrupted_copy(rng: random.Random, cwd: Path, template: Path, weights: dict[str, int], kin: Path,
                    stranger: Path) -> str:
    """Copy the run folder ``template`` to ``cwd/run`` and corrupt one of its files (drawn by ``weights``),
    with the same file of a kindred run (7 in 10) or of a run of the other mode as donor; the label."""
    shutil.copytree(template, cwd / "run")
    name = rng.choices(list(weights), list(weights.values()))[0]
    donor = (kin if rng.random() < 0.7 else stranger) / name
    return inputs.corrupt(rng, cwd / "run" / name, donor)


def _vmc_folder(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    label = _corrupted_copy(rng, cwd, t.vmc, {"checkpoint.pt": 35, "config.toml": 20, "history.csv": 20,
                                              "pretrain.pt": 15, "result.json": 10}, t.vmc_other, t.lm)
    mode = rng.choices([["--steps", "5", "--resume"], ["--steps", "5", "--overwrite"], ["--steps", "5"], ["--resume"]],
                       [75, 10, 10, 5])[0]
    return f"vmc run folder: {label}; {' '.join(mode)}", ["vmc", "H2", *VMC_TINY, "--out", "run", *mode], False


def _lm_folder(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    label = _corrupted_copy(rng, cwd, t.lm, {"checkpoint.pt": 45, "config.toml": 20, "history.csv": 20,
                                             "train.json": 5, "result.json": 10}, t.lm_encoder, t.vmc)
    ckpt = rng.choice(["run", "run/checkpoint.pt"])
    command = rng.choices([
        ["lm", "train", *LM_TINY, "--train-size", "40", "--steps", "9", "--out", "run", "--resume"],
        ["lm", "eval", "--ckpt", ckpt, "--data", str(t.data)], ["lm", "generate", "--ckpt", ckpt, QUESTION],
        ["lm", "show", "--ckpt", ckpt, QUESTION, "--out", "a.png"]], [40, 30, 20, 10])[0]
    return f"lm run folder: {label}; {' '.join(command[:2])}", command, False


def _lm_data(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    label, content = inputs.lm_data(rng)
    path, instead = _write(cwd, "data.json", content, rng)
    command = rng.choices([
        ["lm", "eval", "--ckpt", str(rng.choice([t.lm, t.lm_encoder])), "--data", path],
        ["lm", "train", *LM_TINY, "--steps", "3", "--data", path, "--out", "run"],
        ["lm", "data", "--n", "5", "--exclude", path, "--out", "d.json"]], [50, 35, 15])[0]
    return f"A5 data {instead or label}; {' '.join(command[:2])}", command, False


def _cache(rng: random.Random, cwd: Path, t: Templates) -> tuple[str, list[str], bool]:
    shutil.copytree(t.cache, cwd / "cache")
    label = inputs.corrupt_cache(rng, cwd / "cache")
    vmc = ["vmc", "H2", *[a for a in VMC_TINY if a != "--no-exact"], "--steps", "1", "--out", "run"]  # references too
    argv = rng.choice([["exact", "H2"], ["exact", "H2", "--json"], vmc])
    return label, argv, False


FILE_KINDS = ((24, _fcidump), (13, _xyz), (15, _toml), (15, _vmc_folder), (13, _lm_folder), (13, _lm_data),
              (7, _cache))


def files(rng: random.Random, n: int, work: Path, t: Templates) -> Iterator[Case]:
    """Hostile FCIDUMP, XYZ, TOML and A5 files, damaged run folders (checkpoints) to resume or load, and a
    damaged cache entry (``NNQS_CACHE_DIR``)."""
    for i in range(n):
        cwd = work / f"files-{i:04d}"
        cwd.mkdir(parents=True)
        make = rng.choices([kind for _, kind in FILE_KINDS], [w for w, _ in FILE_KINDS])[0]
        label, argv, stub = make(rng, cwd, t)
        env = {"NNQS_CACHE_DIR": str(cwd / "cache")} if make is _cache else None
        yield _case("files", label, argv, cwd, stub=stub, env=env)
