"""nnqs: neural-network quantum states for molecules, and an LM mode on the same core."""
from nnqs.wavefunction import TransformerWavefunction

__version__ = "0.1.0"
__all__ = ["TransformerWavefunction", "__version__"]
