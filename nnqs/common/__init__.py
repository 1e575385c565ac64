"""The run layer both modes use: errors, config, atomic files, checkpoints, history,
progress, divergence guard, communicator. Imports neither :mod:`nnqs.vmc` nor :mod:`nnqs.lm`."""
