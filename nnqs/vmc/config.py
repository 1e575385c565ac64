"""The VMC run configuration: one frozen dataclass, saved with every result and checkpoint.

Defaults are what ``nnqs vmc`` runs with no flags: the selected-core optimisation
(:mod:`nnqs.vmc.selection`) after supervised pretraining on a selected-CI vector
(:mod:`nnqs.vmc.sci`, :func:`nnqs.vmc.pretrain.fit_to_vector`); ``selection = "samples"``
and ``teacher = "mp1"`` give the plain sampled VMC with perturbative sign pretraining.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import ClassVar, Literal

import torch

from nnqs.vmc.local_energy import CONNECTED_DTYPE
from nnqs.vmc.pretrain import FIT_ROWS, WIDE_QUBITS
from nnqs.vmc.selection import CORE_ENTRIES
from nnqs.vmc.sr import SR_EXACT_MAX, SR_MOMENTUM, SR_ROWS, SR_SHIFT, subsample_size
from nnqs.vmc.wavefunction import HF_TARGET_PROB

SET_MAX = 65536  # default most configurations in the selected-CI teacher and in the core
# The VMC steps of a run whose steps are not set: STEPS, or WIDE_STEPS at WIDE_QUBITS qubits and more, where the
# teacher fit is longer instead (nnqs.vmc.pretrain.fit_steps). There the core the steps work on (about 21,000 of
# N2/6-31G's 19 million determinants at 1.1 A) holds less of the state than the network fitted to a teacher of
# 48,000: after a fit of 57,600 steps, 60 steps left the network's energy where it was (+1.844 mHa against
# +1.823 before them), where 300 after a fit of 28,800 ended at +2.22; a fit of 68,400 steps and 20 steps ended
# at +1.673 and +1.691 in two runs, below CCSD(T)'s +1.847, in 82 and 52 minutes on the 2 cores
# (benchmarks/RESULTS.md, "Beyond exact diagonalisation").
STEPS = 300
WIDE_STEPS = 20


def steps_for(n_qubits: int) -> int:
    """The VMC steps of a run on ``n_qubits`` qubits whose steps are not set."""
    return WIDE_STEPS if n_qubits >= WIDE_QUBITS else STEPS

# Settings that only one teacher reads: given another value than their default with the other
# teacher, the configuration is refused (they would be ignored without a word).
TEACHER_ONLY = {"sci": ("teacher_threshold", "teacher_max", "pretrain_steps", "pretrain_lr", "pretrain_dtype",
                        "pretrain_batch", "pretrain_draw", "pretrain_lr_sampled", "pretrain_decay"),
                "mp1": ("phase_pretrain",)}


@dataclass(frozen=True)
class VMCConfig:
    """Everything that defines a VMC run (saved with every result and checkpoint)."""

    RETIRED: ClassVar[dict] = {"core_rule": "first-order"}  # removed settings an older run's config.toml may hold
    # settings added with a new default: the value a saved run that predates them ran with (read where its
    # config.toml or checkpoint lacks the key, so a resumed older run keeps its steps)
    ADDED: ClassVar[dict] = {"grad_clip_rule": "fixed"}

    # VMC steps; None: from the system (steps_for: STEPS, or WIDE_STEPS at WIDE_QUBITS qubits and more)
    steps: int | None = None
    samples: int = 10**12  # requested samples per step: cheap, the unique set is what costs (may adapt)
    seed: int = 0
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 4
    phase_hidden: int = 64
    # real: psi = sqrt(P) cos(phi), the sign from the phase head (11 of the 12 STO-3G rows lower than
    # with complex: sqrt(P) exp(i phi); benchmarks/RESULTS.md, "A real ansatz")
    ansatz: Literal["complex", "real"] = "real"
    # auto: localized orbitals where a small selected-CI set is lower in them (nnqs.vmc.orbitals)
    orbitals: Literal["auto", "canonical", "localized"] = "auto"
    hf_prob: float = HF_TARGET_PROB  # P(Hartree-Fock determinant) at initialisation
    phase_pretrain: int = 300  # teacher "mp1": steps fitting the phase head to perturbative signs (0: off)
    teacher: Literal["sci", "mp1"] = "sci"  # sci: supervised fit of modulus and sign to a selected-CI vector
    teacher_threshold: float = 1e-4  # first-order amplitude that admits a configuration into the teacher's set
    # Most configurations in the teacher's set and in the core. The threshold is what stops them; the caps bound
    # memory and time (H on a core of 65,536 stays under 1 GB, and a step's cost grows linearly above sr_rows).
    teacher_max: int = SET_MAX
    # Adam steps of the supervised fit (teacher "sci"), in pretrain_dtype, for a teacher of at most FIT_WHOLE
    # configurations; a larger one takes more (nnqs.vmc.pretrain.fit_steps)
    pretrain_steps: int = 1200
    pretrain_lr: float = 2e-3  # 10 of the 12 STO-3G rows lower than at 1e-3 (benchmarks/RESULTS.md)
    pretrain_dtype: Literal["float32", "float64"] = "float32"  # precision of the teacher fit (float64 VMC after it)
    # rows per Adam step of the fit to a teacher of more than FIT_WHOLE configurations (smaller ones enter whole).
    # The fit is limited by its steps, not its rows: on H8 at 1.5 A (4,533) 1,024 rows gave the network +11.35 mHa
    # in 94 s where 4,096 gave +9.23 in 377 s, and the 283 s saved are about 55 VMC steps. End to end: H2O/6-31G
    # +1.166 mHa in 27.5 min (was +1.280 in 37.8); H10 at 1.5 A ahead by the clock for 30 min but ending at +3.12
    # where 4,096 rows end at +2.37 in twice the time (benchmarks/RESULTS.md, "Beyond exact diagonalisation")
    pretrain_batch: int = FIT_ROWS
    # A minibatch fit (a teacher above FIT_WHOLE configurations) draws its cross-entropy rows by |c| ("modulus",
    # reweighted to the same expected loss; "weight": by |c|^2, where most draws were the heaviest rows) and
    # lowers its learning rate from pretrain_lr_sampled along a cosine to pretrain_decay times it. On
    # H2O/6-31G (12,389) the three took the fitted network from +10.53 to +4.09 mHa above the teacher at equal
    # steps, the draw most of it (+5.65 alone): what a fit misses is the modulus more than the signs
    # (benchmarks/RESULTS.md, "What a fit misses")
    pretrain_draw: Literal["weight", "modulus"] = "modulus"
    pretrain_lr_sampled: float = 5e-3
    pretrain_decay: float = 0.05
    selection: Literal["core", "samples"] = "core"  # core: Rayleigh quotient on a selected core + fresh samples
    core_threshold: float = 1e-4  # |psi(x)| / max |psi| that keeps x (or a connected x') in the core
    core_max: int = SET_MAX
    core_every: int = 5  # fewest steps between re-selections of the core (more where one costs more: core_entries)
    # connection entries (core size x connections per configuration) a re-selection may enumerate per step
    # between re-selections, so that it takes about as long as the steps between (nnqs.vmc.selection.reselection_every);
    # 0: every core_every steps
    core_entries: int = CORE_ENTRIES
    core_samples: int = 512  # most unique fresh samples joined to the core each step
    dtype: Literal["float32", "float64"] = "float64"
    # the network's passes over a working set above sr_exact_max (the set's log psi, the SR rows' Jacobian):
    # float32 makes the step 1.12x to 1.25x as fast (U = 8,192 to 32,768; the float64 Gram matrix is the rest)
    # for a direction within 2.4e-5 of float64's, where the subsample itself moves it by O(1); the Gram
    # matrices, the solve and the reported energy stay float64
    pass_dtype: Literal["float32", "float64"] = "float32"
    device: str = "cpu"
    optimizer: Literal["sr", "adamw"] = "sr"  # sr: natural gradient (minSR) + SGD
    lr: float = 0.05
    lr_final: float | None = None  # where the cosine decay ends (default: lr / 10)
    sr_shift: float = SR_SHIFT  # diagonal shift of the SR matrix, relative to its mean diagonal
    sr_momentum: float = SR_MOMENTUM  # SPRING: the SR direction regularised towards this times the previous one
    sr_momentum_schedule: Literal["ramp", "constant"] = "ramp"  # ramp: 0 at the peak lr, sr_momentum at the end
    sr_exact_max: int = SR_EXACT_MAX  # the SR step keeps every row of a working set up to this size (exact minSR)
    # above it, the step is taken on a subsample of this expected size; 0: from the set, U / 8 between 2,048
    # and 4,096 rows (nnqs.vmc.sr.subsample_size)
    sr_rows: int = 0
    warmup: int = 5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    # the clip where the SR step is subsampled (working sets above sr_exact_max): H10 at 1.5 A reached +7.5 mHa
    # in 48 steps with 5 and in 139 with 1 (benchmarks/RESULTS.md, "Beyond exact diagonalisation")
    grad_clip_sampled: float = 5.0
    # "rows": that clip is the one of SR_ROWS (2,048) rows or fewer and grows in proportion to the subsample's rows
    # above (a subsample of 4,096 gets 10; sets up to 16,384 keep 5); "fixed": grad_clip_sampled at every size.
    # From H10 at 1.5 A's fit: +0.946 mHa against +1.088, 1.6 mHa crossed at step 92 against 120; N2/6-31G at
    # 1.1 A 0.08 mHa lower on average over its first 105 steps (benchmarks/RESULTS.md, "What we tried")
    grad_clip_rule: Literal["fixed", "rows"] = "rows"
    estimator: Literal["exact", "sample-space", "heat-bath"] = "exact"  # selection "samples" only
    unique_min: int = 512  # double the sample count while fewer unique samples are seen (0: off)
    unique_max: int = 2048  # quarter it while more are seen (0: off)
    max_batch: int = 8192  # configurations per network call in the local energy
    # precision of the network passes over the connected x' of the local energy (ratios and sums float64)
    connected_dtype: Literal["float32", "float64"] = CONNECTED_DTYPE
    final_samples: int = 10**12  # fresh samples for the reported (exact-estimator) energy
    checkpoint_every: int = 50
    checkpoint_seconds: float = 60.0  # also checkpoint when this much time passed since the last one (0: off)
    threads: int = 0  # CPU threads of torch, BLAS and OpenMP (0: every core; nnqs.common.config.apply_threads)

    def subsampled(self, n_rows: int) -> bool:
        """Whether the SR step on a working set of ``n_rows`` is taken on a subsample (above ``sr_exact_max``)."""
        return n_rows > max(self.sr_exact_max, self.subsample_size(n_rows))

    def clip(self, n_rows: int) -> float:
        """The largest norm of the applied direction on a working set of ``n_rows`` (the SR step's clip)."""
        if self.optimizer != "sr" or not self.subsampled(n_rows):
            return self.grad_clip
        if self.grad_clip_rule == "rows":
            return self.grad_clip_sampled * max(1.0, self.subsample_size(n_rows) / SR_ROWS)
        return self.grad_clip_sampled

    def subsample_size(self, n_rows: int) -> int:
        """Expected rows of the subsampled SR step on a working set of ``n_rows`` (:func:`nnqs.vmc.sr.subsample_size`)."""
        return subsample_size(n_rows, self.sr_rows)

    def for_system(self, n_qubits: int) -> VMCConfig:
        """This config with the settings left to the system resolved for ``n_qubits`` qubits (the steps)."""
        return self if self.steps is not None else replace(self, steps=steps_for(n_qubits))

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps <= 0:
            raise ValueError(f"steps must be positive, got {self.steps}")
        for name in ("samples", "final_samples", "max_batch", "d_model", "n_layers", "n_heads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.lr <= 0 or (self.lr_final is not None and self.lr_final < 0):
            raise ValueError("lr must be positive and lr_final non-negative")
        check_run_limits(self)


def toy_config(steps: int) -> VMCConfig:
    """A tiny model and sample set: smoke tests of scripts in seconds, not accuracy."""
    return VMCConfig(steps=steps, d_model=8, n_layers=1, phase_hidden=8, samples=10**4, unique_min=0, pretrain_steps=20,
                     unique_max=64, final_samples=10**4)


def check_run_limits(cfg: VMCConfig) -> None:
    """The rest of VMCConfig's checks: finite numbers, sane ranges, a device torch knows."""
    for name in ("lr", "lr_final", "sr_shift", "weight_decay", "grad_clip", "grad_clip_sampled", "pretrain_lr",
                 "pretrain_lr_sampled"):
        if name == "lr_final" and cfg.lr_final is None:
            continue
        if not math.isfinite(getattr(cfg, name)) or getattr(cfg, name) < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {getattr(cfg, name)}")
    for name, low, high in (("phase_hidden", 1, 2**20), ("phase_pretrain", 0, 10**6), ("checkpoint_every", 1, 2**62), ("seed", 0, 2**63 - 1),
                            ("warmup", 0, 2**62), ("unique_min", 0, 2**62), ("unique_max", 0, 2**62),
                            ("threads", 0, 1024), ("samples", 1, 2**53), ("final_samples", 1, 2**53),
                            ("checkpoint_seconds", 0, 10**9), ("teacher_max", 1, 2**24), ("pretrain_steps", 0, 10**6), ("pretrain_batch", 1, 2**24),
                            ("core_max", 1, 2**24), ("core_every", 1, 2**30), ("core_entries", 0, 2**62), ("core_samples", 1, 2**24), ("sr_rows", 0, 2**24), ("sr_exact_max", 0, 2**24)):
        if not low <= getattr(cfg, name) <= high:
            raise ValueError(f"{name} must be in {low}..{high}, got {getattr(cfg, name)}")
    for name in ("teacher_threshold", "core_threshold"):
        if not 0.0 < getattr(cfg, name) < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {getattr(cfg, name)}")
    if not 0.0 <= cfg.sr_momentum < 1.0:  # at 1 the directions' part outside X's row space can grow without bound
        raise ValueError(f"sr_momentum must be in [0, 1), got {cfg.sr_momentum}")
    if not 0.0 <= cfg.pretrain_decay <= 1.0:
        raise ValueError(f"pretrain_decay must be in [0, 1], got {cfg.pretrain_decay}")
    if not 0.0 < cfg.hf_prob < 1.0:
        raise ValueError(f"hf_prob must be in (0, 1), got {cfg.hf_prob}")
    if cfg.selection == "core" and cfg.estimator != "exact":  # the core's steps use the set's Rayleigh quotient
        raise ValueError(f"estimator {cfg.estimator!r} applies to selection 'samples' only; the default selection "
                         "'core' works on the set's Rayleigh quotient (add --selection samples, or drop --estimator)")
    _check_teacher_settings(cfg)
    for name in ("grad_clip", "grad_clip_sampled"):
        if getattr(cfg, name) == 0:
            raise ValueError(f"{name} must be > 0, got {getattr(cfg, name)}")
    if cfg.d_model % cfg.n_heads:
        raise ValueError(f"d_model ({cfg.d_model}) must be divisible by n_heads ({cfg.n_heads})")
    try:
        device = torch.device(cfg.device)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {cfg.device!r}")


def _check_teacher_settings(cfg: VMCConfig) -> None:
    """ValueError for a setting of the teacher a run does not use (:data:`TEACHER_ONLY`) changed from its default."""
    defaults = {f.name: f.default for f in fields(VMCConfig)}
    for teacher, names in TEACHER_ONLY.items():
        changed = [n for n in names if getattr(cfg, n) != defaults[n]]
        if cfg.teacher != teacher and changed:
            flags = ", ".join("--" + n.replace("_", "-") for n in changed)
            raise ValueError(f"{flags} applies to --teacher {teacher} only; this run's teacher is {cfg.teacher!r} "
                             f"(add --teacher {teacher}, or drop {flags})")
