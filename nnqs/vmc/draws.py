"""What a VMC step works on: samples drawn from the network (bounded in unique count), the sample
count adapted to the unique window, and the working set of core mode (the core and fresh samples)."""
from __future__ import annotations

import torch

from nnqs.common.distributed import Communicator
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.sampler import UniqueLimit
from nnqs.vmc.selection import set_weights, unique_union
from nnqs.vmc.wavefunction import in_dtype


def adapt_samples(n_samples: int, n_unique: int, cfg: VMCConfig) -> int:
    """Grow or shrink the requested sample count to keep the unique count in the window."""
    if cfg.unique_min and n_unique < cfg.unique_min:
        return min(n_samples * 2, 10**12)
    if cfg.unique_max and n_unique > cfg.unique_max:
        return max(n_samples // 4, 100)
    return n_samples


def draw(wf, n_samples: int, generator, unique_max: int = 0, shrink: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample; while more than ``unique_max`` unique configurations would come back, redraw with
    ``1 / shrink`` of the samples (sampling is cheap, the unique set is what the rest of a step costs).
    A draw over the limit is abandoned as soon as that is certain (:class:`UniqueLimit`), so a
    broad distribution never holds millions of prefixes in memory; 100 samples are always kept."""
    while True:
        limit = unique_max if n_samples > 100 else 0
        try:
            return wf.sample(n_samples, generator=generator, max_unique=limit)
        except UniqueLimit:
            n_samples = max(100, n_samples // shrink)


def pass_network(wf, cfg: VMCConfig, n_rows: int):
    """The network a step's passes over a working set of ``n_rows`` use: a float32 copy of ``wf`` where
    ``cfg.pass_dtype`` says so and the SR step is subsampled (``cfg.subsampled``), else ``wf`` itself."""
    if cfg.pass_dtype != "float32" or cfg.optimizer != "sr" or not cfg.subsampled(n_rows):
        return wf
    return in_dtype(wf, torch.float32)


def working_set(
    wf, cfg: VMCConfig, n_samples: int, generator, core: torch.Tensor | None, comm: Communicator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int, object]:
    """The configurations a step works on ``(U, n)``, their weights ``(U,)`` (counts, or |psi|^2
    renormalised on the set for ``selection = "core"``), log psi ``(U,)`` complex128 where it was
    computed (core mode), the number of samples drawn, and the network of the set's passes
    (:func:`pass_network`)."""
    if cfg.selection == "samples":
        configs, counts = draw(wf, n_samples, generator, cfg.unique_max)
        comm.check_same_samples(configs, counts)
        return configs, counts, None, int(counts.sum()), wf
    samples, counts = draw(wf, n_samples, generator, cfg.core_samples)
    comm.check_same_samples(samples, counts)
    configs = samples if core is None else unique_union(core, samples)
    net = pass_network(wf, cfg, len(configs))
    with torch.no_grad():  # each rank its share of the set, then every rank holds all of it
        log_psi = comm.unshare(net.log_psi(comm.share(configs), chunk_size=cfg.max_batch))
    return configs, set_weights(log_psi), log_psi, int(counts.sum()), net
