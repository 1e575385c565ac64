"""The selected-CI teacher's energy by set size, against the exact or DMRG reference.

    python -m benchmarks.teacher [--systems H2O/6-31g N2/6-31g@1.1 N2/6-31g@2.2] [--sizes 4096 8192]
                                 [--threshold T] [--references NAME=E ...] [--threads 1] [--out FILE]

A system is ``NAME/BASIS`` (a catalog molecule) or ``NAME/BASIS@R`` (the catalog diatomic at
bond length R Angstrom); N2 beyond STO-3G has its 1s orbitals frozen (16 orbitals, 10
electrons in 6-31G; ``benchmarks.common.system_spec``). The reference is the one given by ``--references`` (e.g. a DMRG energy
from ``benchmarks/RESULTS.md``), else FCI where ``nnqs exact`` can do it, else DMRG (block2;
computed if ``nnqs exact --method dmrg`` has not cached it: many minutes at 32 qubits), else none.
Each size grows the teacher from Hartree-Fock exactly as a run does (``selected_ci``), with the
run's threshold unless ``--threshold`` is given. The energy of H on a set of that size bounds
what a working set of that size can give any network.
"""
from __future__ import annotations

import sys
import time

from benchmarks.common import benchmark_parser, emit, software, system_spec

DEFAULT_SYSTEMS = ["H2O/6-31g", "N2/6-31g@1.1", "N2/6-31g@2.2"]
def reference(spec) -> tuple[float | None, str | None]:
    """(energy, method) of the best reference this machine gives for ``spec``, or (None, None)."""
    from hamiltonians import InputError, exact_references

    for method in ("fci", "dmrg"):
        try:
            return exact_references(spec, method=method).e_exact, method
        except InputError:
            continue
    return None, None


def records(name: str, sizes: list[int], threshold: float, given: float | None = None) -> list[dict]:
    import torch

    from hamiltonians import build_hamiltonian
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.sci import selected_ci
    from nnqs.vmc.configurations import hf_tokens

    spec = system_spec(name)
    ham = build_hamiltonian(spec)
    e_ref, method = (given, "given") if given is not None else reference(spec)
    compact = CompactHamiltonian.from_molecular(ham)
    hf = hf_tokens(ham.n_orbitals, ham.n_alpha, ham.n_beta).unsqueeze(0)
    out = []
    for size in sizes:
        start = time.perf_counter()
        sci = selected_ci(compact, hf, threshold, size)
        out.append({"benchmark": "teacher", "system": name, "n_qubits": 2 * ham.n_orbitals, "max_size": size,
                    "threshold": threshold, "n_configs": len(sci.configs), "rounds": sci.rounds,
                    "energy": sci.energy, "reference": e_ref, "reference_method": method,
                    "error_mha": None if e_ref is None else (sci.energy - e_ref) * 1e3,
                    "seconds": time.perf_counter() - start, "threads": torch.get_num_threads(), **software()})
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    from nnqs.common.config import apply_threads
    from nnqs.vmc.config import VMCConfig

    parser = benchmark_parser("teacher", __doc__, "H2O/STO-3G at sizes 16 and 64 (what the test suite runs)")
    parser.add_argument("--systems", nargs="+", default=DEFAULT_SYSTEMS)
    parser.add_argument("--sizes", nargs="+", type=int, default=[4096, 8192, 16384])
    parser.add_argument("--threshold", type=float, default=VMCConfig().teacher_threshold)
    parser.add_argument("--references", nargs="+", metavar="NAME=E", default=[],
                        help="reference energies (Hartree) of some systems, instead of computing them")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        given = {name: float(value) for name, _, value in (item.partition("=") for item in args.references)}
    except ValueError:
        parser.error(f"--references takes NAME=ENERGY items, got {' '.join(args.references)}")
    apply_threads(args.threads)
    systems, sizes = (["H2O/sto-3g"], [16, 64]) if args.quick else (args.systems, args.sizes)
    lines = []
    for name in systems:
        for line in records(name, sizes, args.threshold, given.get(name)):
            emit(line, args.out)
            lines.append(line)
    return lines


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
