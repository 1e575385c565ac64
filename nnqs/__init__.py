"""nnqs: neural-network quantum states for molecules, and an LM mode on the same core."""
__version__ = "0.1.0"
