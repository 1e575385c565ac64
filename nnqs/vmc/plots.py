"""Plots of runs (matplotlib, Agg backend: files only, no screen needed)."""
from __future__ import annotations

from pathlib import Path

CHEMICAL_ACCURACY = 1.6e-3  # Hartree


def plot_energy(path: str | Path, steps, energies, e_hf=None, e_ccsd_t=None, e_exact=None, title: str = "") -> None:
    """Energy vs step with HF / CCSD(T) / exact lines and the chemical-accuracy band;
    a lower panel shows |E - E_exact| in mHa on a log scale when E_exact is known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if e_exact is not None else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7, 3.2 * panels + 0.6), sharex=True, squeeze=False)
    ax = axes[0, 0]
    ax.plot(steps, energies, lw=1.2, color="C0", label="VMC")
    for value, name, style in ((e_hf, "HF", "C3"), (e_ccsd_t, "CCSD(T)", "C2"), (e_exact, "exact", "k")):
        if value is not None:
            ax.axhline(value, color=style, ls="--" if name != "exact" else "-", lw=1, label=f"{name} {value:.6f}")
    if e_exact is not None:
        ax.axhspan(e_exact - CHEMICAL_ACCURACY, e_exact + CHEMICAL_ACCURACY, color="k", alpha=0.12,
                   label="chemical accuracy (1.6 mHa)")
        lows = [v for v in (e_exact, e_ccsd_t) if v is not None]
        top = max(v for v in (e_hf, e_exact + 0.02) if v is not None)
        ax.set_ylim(min(lows) - 0.005, max(top, min(lows) + 0.01) + 0.005)
    ax.set_ylabel("energy (Ha)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    if e_exact is not None:
        err = axes[1, 0]
        err.semilogy(steps, [max(abs(e - e_exact) * 1000, 1e-4) for e in energies], lw=1, color="C0")
        err.axhline(1.6, color="k", lw=1, ls=":", label="1.6 mHa")
        err.set_ylabel("|E - E_exact| (mHa)")
        err.legend(fontsize=8)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
