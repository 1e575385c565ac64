"""The external space of a core (re-selection, PT2, the teacher) against how often it is folded (JSON lines).

    python -m benchmarks.external_space [--system N2/cc-pvdz] [--size 16384] [--folds 0 4194304 16777216]
                                        [--doubles joined elementwise] [--threads 1] [--out FILE]
    python -m benchmarks.external_space --quick     # LiH, a tiny core (run by the test suite)

A selected-CI vector of at most ``--size`` configurations is grown from HF (threshold 1e-4) and taken as the
core; :func:`nnqs.vmc.selection.external_space` is then timed once per ``FOLD_ENTRIES`` of ``--folds`` (the
outside connections held before they are sorted and summed into the external set; 0 folds after every chunk
of rows, as before 2026-12-06), each checked against the first: the same keys, the largest coupling difference.
With ``--doubles`` it is timed for each way of forming the connections' double excitations and each fold: ``joined``
(:func:`nnqs.vmc.hamiltonian_terms.double_terms`, the default) or ``elementwise`` (its slow twin, the way before
the third session of 2026-12-07).
"""
from __future__ import annotations

import sys
import time

import torch

from benchmarks.common import benchmark_parser, emit, software


DOUBLES = {"joined": "double_terms", "elementwise": "double_terms_elementwise"}


def records(
    system: str, size: int, folds: list[int], threads: int, doubles: tuple[str, ...] = ("joined",),
) -> list[dict]:
    from benchmarks.vmc_step import fixed_model, load
    from nnqs.vmc import compact_hamiltonian, hamiltonian_terms, selection
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.sci import selected_ci

    ham = load(system)
    compact = CompactHamiltonian.from_molecular(ham)
    t0 = time.perf_counter()
    sci = selected_ci(compact, fixed_model(ham).hf_config().unsqueeze(0), 1e-4, size)
    t_teacher = time.perf_counter() - t0
    amplitudes = sci.coefficients.to(torch.complex128)
    lines, first, default = [], None, selection.FOLD_ENTRIES
    try:
        for way, fold in [(way, fold) for way in doubles for fold in folds]:
            selection.FOLD_ENTRIES = fold
            compact_hamiltonian.double_terms = getattr(hamiltonian_terms, DOUBLES[way])
            t0 = time.perf_counter()
            keys, coupling = selection.external_space(compact, sci.configs, amplitudes)
            seconds = time.perf_counter() - t0
            first = first or (keys, coupling)
            lines.append({"benchmark": "external_space", "system": system, "n_core": len(sci.configs),
                          "connected_per_config": compact.n_connected, "t_teacher": round(t_teacher, 2),
                          "doubles": way, "fold_entries": fold, "n_external": len(keys), "seconds": round(seconds, 3),
                          "same_keys": bool(torch.equal(keys, first[0])),
                          "coupling_max_difference": float((coupling - first[1]).abs().max()) if len(keys) else 0.0,
                          "threads": threads, **software()})
    finally:
        selection.FOLD_ENTRIES = default
        compact_hamiltonian.double_terms = hamiltonian_terms.double_terms
    return lines


def main(argv: list[str] | None = None) -> list[dict]:
    from nnqs.common.config import apply_threads

    parser = benchmark_parser("external_space", __doc__, "LiH, a core of a few configurations (what the test suite runs)")
    parser.add_argument("--system", default="N2/cc-pvdz")
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 2**22, 2**24])
    parser.add_argument("--doubles", nargs="+", choices=sorted(DOUBLES), default=["joined"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    apply_threads(args.threads)
    if args.quick:
        lines = records("LiH", 64, [0, 2**24], args.threads, tuple(args.doubles))
    else:
        lines = records(args.system, args.size, args.folds, args.threads, tuple(args.doubles))
    for line in lines:
        emit(line, args.out)
    return lines


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
