"""The NNQS side: wavefunction, sampler, Hamiltonian form, local energy, SR, pretraining,
the VMC step and loop, and one run on a molecule. Never imports :mod:`nnqs.lm`."""
