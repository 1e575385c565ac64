"""Independent oracles shared by tests: random integrals, OpenFermion matrices, sector enumeration,
ill-conditioned SR systems."""
import itertools

import numpy as np
import torch

from nnqs.vmc.configurations import tokens_to_occupations


def random_integrals(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Real h1e (symmetric) and eri with the 8-fold symmetry of real orbitals."""
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(n, n))
    h = h + h.T
    g = rng.normal(size=(n, n, n, n))
    g = g + g.transpose(1, 0, 2, 3)
    g = g + g.transpose(0, 1, 3, 2)
    g = g + g.transpose(2, 3, 0, 1)
    return h, 0.1 * g


def openfermion_matrix(h: np.ndarray, g: np.ndarray, e_core: float):
    """Full-space sparse JW matrix built term by term with OpenFermion (qubit 0 = most significant bit)."""
    from openfermion import FermionOperator, get_sparse_operator, jordan_wigner

    n = h.shape[0]
    op = FermionOperator((), e_core)
    for p, q in itertools.product(range(n), repeat=2):
        for s in (0, 1):
            op += FermionOperator(((2 * p + s, 1), (2 * q + s, 0)), h[p, q])
    for p, q, r, t in itertools.product(range(n), repeat=4):
        for s1, s2 in itertools.product((0, 1), repeat=2):
            term = ((2 * p + s1, 1), (2 * r + s2, 1), (2 * t + s2, 0), (2 * q + s1, 0))
            op += FermionOperator(term, 0.5 * g[p, q, r, t])
    return get_sparse_operator(jordan_wigner(op), n_qubits=2 * n).tocsr()


def sector_tokens(n: int, n_alpha: int, n_beta: int) -> torch.Tensor:
    rows = []
    for occ_a in itertools.combinations(range(n), n_alpha):
        for occ_b in itertools.combinations(range(n), n_beta):
            t = [0] * n
            for p in occ_a:
                t[p] += 1
            for p in occ_b:
                t[p] += 2
            rows.append(t)
    return torch.tensor(rows)


def full_index(tokens: torch.Tensor) -> np.ndarray:
    occ = tokens_to_occupations(tokens).numpy().astype(np.int64)
    n_q = occ.shape[1]
    return occ @ (1 << (n_q - 1 - np.arange(n_q)))


def pyscf_references(name: str) -> dict[str, float]:
    """RHF, CCSD(T) and FCI energies (Hartree) of catalog molecule ``name``, computed with
    PySCF alone from the catalog geometry (no nnqs or hamiltonians code on the way)."""
    from pyscf import cc, fci, gto, scf

    from hamiltonians import get_spec

    spec = get_spec(name)
    mol = gto.M(atom=spec.atom, basis=spec.basis, charge=spec.charge, spin=spec.spin, verbose=0)
    mf = scf.RHF(mol).run()
    ccsd = cc.CCSD(mf).run()
    return {"HF": mf.e_tot, "CCSD(T)": ccsd.e_tot + ccsd.ccsd_t(), "exact (fci)": fci.FCI(mf).kernel()[0]}


def ill_conditioned_system(u: int, p: int, seed: int):
    """A split Jacobian whose singular values fall over eight decades (as an NQS metric's do), with
    local energies and weights: as ill-conditioned as an NQS metric, so a solve short of float64 shows."""
    from nnqs.vmc.sr import SplitJacobian

    g = torch.Generator().manual_seed(seed)
    blocks = []
    for width in (p, p // 3):
        q_left, _ = torch.linalg.qr(torch.randn(u, width, generator=g, dtype=torch.float64))
        q_right, _ = torch.linalg.qr(torch.randn(width, width, generator=g, dtype=torch.float64))
        blocks.append(q_left @ torch.diag(torch.logspace(0, -8, width, dtype=torch.float64)) @ q_right * 30.0)
    columns = torch.arange(p + p // 3) < p
    jac = SplitJacobian(blocks[0], columns, blocks[1], ~columns)
    e_loc = torch.complex(torch.randn(u, generator=g, dtype=torch.float64), 0.1 * torch.randn(u, generator=g, dtype=torch.float64))
    w = torch.softmax(torch.randn(u, generator=g, dtype=torch.float64), 0)
    return jac, e_loc, w, float((w * e_loc.real).sum())


def copy_split(jac):
    from nnqs.vmc.sr import SplitJacobian

    return SplitJacobian(jac.real.clone(), jac.real_columns, jac.imag.clone(), jac.imag_columns)

