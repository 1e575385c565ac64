"""nnqs: neural-network quantum states for molecules, and an LM mode on the same core.

Subpackages: ``nnqs.nn`` (the shared Transformer core), ``nnqs.vmc`` (the wavefunction
and variational Monte Carlo), ``nnqs.lm`` (the arithmetic language model),
``nnqs.common`` (the run layer both modes use) and ``nnqs.cli`` (the ``nnqs`` command).
"""
from __future__ import annotations

__version__ = "0.1.0"
# what `nnqs` prints for a Ctrl-C before a command's own handling took over (nnqs.cli.main, python -m nnqs)
INTERRUPTED_LOADING = "nnqs: interrupted before the run started; nothing was saved"
__all__ = ["FCISolver", "TransformerWavefunction", "__version__"]


def __getattr__(name: str):
    # Lazy, so that importing nnqs.lm never imports the VMC side (and the reverse).
    if name == "TransformerWavefunction":
        from nnqs.vmc.wavefunction import TransformerWavefunction

        return TransformerWavefunction
    if name == "FCISolver":
        from nnqs.solver import FCISolver

        return FCISolver
    raise AttributeError(f"module 'nnqs' has no attribute {name!r}")
