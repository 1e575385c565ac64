"""Data-parallel VMC: one optimisation over K processes (``torchrun``), or one process.

:class:`Communicator` (a ``typing.Protocol``) is all the VMC code knows of the other processes:
``rank``, ``world_size``, ``is_root``, the rank's ``device``, sums
(``all_reduce_sum``), row gathers (``all_gather_rows``) and the sample share
of this rank (``share`` / ``unshare``). :class:`SingleProcess` is the default:
every operation is the identity and torch.distributed is never imported.
:class:`TorchDistributed` wraps an initialised torch.distributed process group
(gloo on CPU, NCCL on CUDA, where rank r uses ``cuda:LOCAL_RANK``);
:func:`from_environment` builds one from torchrun's environment variables;
:func:`init_process_group` creates the group (use it rather than torch's own: see why there).

How the work is split. Sampling is cheap and deterministic given the sampler's
generator, and the unique-prefix sampler returns a few thousand unique
configurations however many samples are requested. So *every* rank draws the
same unique set (identical models, identically seeded ``torch.Generator``),
then rank r keeps the disjoint share ``configs[r::K]``, ``counts[r::K]`` for
log psi with its graph, the loss and the per-sample Jacobian of SR. The
duplicated sampling is small next to the local energy, no samples travel
between processes, and the sum over shares is the single-process sum over the
same samples. Weights are ``count / n_samples`` with the total over all ranks;
energy statistics, AdamW gradients and the mean log-derivative of SR are
all-reduced. The local energy splits the network work, not the samples:
neighbouring samples share most connected x', so every rank enumerates and
deduplicates the x' of all samples (no network involved) and evaluates log psi
on its share of the distinct x', and the amplitudes are gathered
(:func:`nnqs.vmc.local_energy.share_local_energy`). SR splits the parameters: an all-to-all
(``exchange_columns``) gives rank r every rank's rows of its contiguous share of the Jacobian's
columns, so rank r forms X_r X_r^T over its columns (the costly product, 1/K of it) and the
sums are all-reduced into the U x U matrix; the solves of the modulus and phase blocks are
shared out by rank, and each rank multiplies its columns back (:func:`nnqs.vmc.sr.sr_direction`). Like
DistributedDataParallel, this relies on all-reduce giving every rank the same
bits, which keeps the models (hence the samples) identical; each step checks
that the ranks drew the same samples.
"""
from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path
from typing import Iterable, Protocol, runtime_checkable

import torch

from nnqs.common.errors import UserError


@runtime_checkable
class Communicator(Protocol):
    """The contract of every communicator: rank facts, sums, gathers and the sample share."""

    rank: int
    world_size: int
    is_root: bool
    device: str

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def all_gather_rows(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def exchange_columns(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def share(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def unshare(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None: ...

    def check_same_samples(self, configs: torch.Tensor, counts: torch.Tensor) -> None: ...

    def close(self) -> None: ...


class SingleProcess:
    """The one-process :class:`Communicator`: sums and gathers are the identity."""

    rank = 0
    world_size = 1
    is_root = True

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise sum over ranks (a new tensor; the input is left alone)."""
        return tensor

    def all_gather_rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's rows ``(n_r, ...)``, concatenated in rank order -> ``(sum n_r, ...)``."""
        return tensor

    def exchange_columns(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's rows ``(n_r, P)`` of this rank's columns ``column_ranges(P, world_size)[rank]``,
        concatenated in rank order -> ``(sum n_r, P_rank)`` (real tensors)."""
        return tensor

    def share(self, tensor: torch.Tensor) -> torch.Tensor:
        """This rank's rows ``tensor[rank::world_size]`` of a tensor known to every rank."""
        return tensor

    def unshare(self, tensor: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`share`: every rank's share put back in the original row order."""
        return tensor

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Replace each ``.grad`` by its sum over ranks (a missing one counts as zero)."""

    def check_same_samples(self, configs: torch.Tensor, counts: torch.Tensor) -> None:
        """Raise if the ranks hold different sample sets (they must draw identical ones)."""

    def close(self) -> None:
        """Leave the process group (nothing to do for one process)."""


class TorchDistributed(SingleProcess):
    """A :class:`Communicator` over the default torch.distributed process group (already initialised)."""

    def __init__(self, device: str = "cpu") -> None:
        import torch.distributed as dist

        assert dist.is_initialized(), "initialise the process group first (see from_environment)"
        super().__init__(device)
        self.dist = dist
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.is_root = self.rank == 0

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.detach().clone()
        self.dist.all_reduce(torch.view_as_real(out) if out.is_complex() else out)
        return out

    def all_gather_rows(self, tensor: torch.Tensor) -> torch.Tensor:
        # sizes first, then equal-sized (padded) blocks, then strip the padding
        sizes = self._row_counts(tensor)
        rows = max(sizes)
        if rows == 0:  # every rank empty: nothing to gather (a zero-size block cannot be split)
            return tensor.detach().clone()
        padded = tensor.detach().contiguous()
        if tensor.shape[0] < rows:
            padded = torch.cat([padded, padded.new_zeros((rows - tensor.shape[0], *tensor.shape[1:]))])
        out = padded.new_empty((self.world_size * rows, *tensor.shape[1:]))  # blocks written in place
        real = (lambda t: torch.view_as_real(t)) if padded.is_complex() else (lambda t: t)
        self.dist.all_gather([real(b) for b in out.split(rows)], real(padded))
        if all(s == rows for s in sizes):
            return out
        return torch.cat([out[r * rows : r * rows + s] for r, s in enumerate(sizes)])

    def _row_counts(self, tensor: torch.Tensor) -> list[int]:
        """Every rank's number of rows of ``tensor``, in rank order."""
        n = torch.tensor([tensor.shape[0]], dtype=torch.int64, device=tensor.device)
        sizes = [torch.zeros_like(n) for _ in range(self.world_size)]
        self.dist.all_gather(sizes, n)
        return [int(size) for size in sizes]

    def exchange_columns(self, tensor: torch.Tensor) -> torch.Tensor:
        assert tensor.dim() == 2 and not tensor.is_complex(), "a real (rows, columns) tensor"
        rows = self._row_counts(tensor)
        ranges = column_ranges(tensor.shape[1], self.world_size)
        lo, hi = ranges[self.rank]
        # one flat buffer per direction: destination d gets my rows of its columns, row-major, so
        # what arrives from source s is its (n_s, hi - lo) block and the blocks stack in rank order
        send = torch.cat([tensor[:, a:b].reshape(-1) for a, b in ranges])
        received = send.new_empty(sum(rows) * (hi - lo))
        self.dist.all_to_all_single(received, send, output_split_sizes=[r * (hi - lo) for r in rows],
                                    input_split_sizes=[tensor.shape[0] * (b - a) for a, b in ranges])
        return received.view(sum(rows), hi - lo)

    def share(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor[self.rank :: self.world_size]

    def unshare(self, tensor: torch.Tensor) -> torch.Tensor:
        gathered = self.all_gather_rows(tensor)
        total, k = gathered.shape[0], self.world_size
        out = torch.empty_like(gathered)
        offset = 0
        for r in range(k):
            size = (total - r + k - 1) // k  # len(range(r, total, k))
            out[r::k] = gathered[offset : offset + size]
            offset += size
        return out

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        params = list(parameters)
        if not params:
            return
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        self.dist.all_reduce(flat)  # one call for the whole model
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def check_same_samples(self, configs: torch.Tensor, counts: torch.Tensor) -> None:
        position = torch.arange(1, configs.shape[1] + 1, device=configs.device)
        mine = torch.stack([
            torch.tensor(configs.shape[0], device=counts.device), counts.sum(),
            (configs.long() * position).sum(), (counts * configs.long().sum(1)).sum(),
        ])  # fmt: skip
        if not bool((self.all_reduce_sum(mine) == self.world_size * mine).all()):
            raise RuntimeError(f"rank {self.rank}: the ranks drew different samples (models out of sync)")

    def close(self) -> None:
        """Leave the process group: every rank meets at a barrier first, except on the way out of
        an exception (``close`` in a ``finally``), where the peers may be inside another collective
        and a barrier would wait for them until the group's timeout. The group is destroyed even if
        the barrier fails: a group left alive is torn down at interpreter exit (see
        :func:`init_process_group`)."""
        if not self.dist.is_initialized():
            return
        try:
            if sys.exc_info()[1] is None:
                self.dist.barrier()
        finally:
            self.dist.destroy_process_group()


def column_ranges(n_columns: int, world_size: int) -> list[tuple[int, int]]:
    """Contiguous column ranges ``(start, stop)``, one per rank in rank order, sizes differing by at most 1."""
    base, extra = divmod(n_columns, world_size)
    stops = list(itertools.accumulate(base + (r < extra) for r in range(world_size)))
    return list(zip([0, *stops[:-1]], stops))


def from_environment(device: str = "cpu") -> Communicator:
    """The communicator of this process: :class:`TorchDistributed` under ``torchrun`` with
    ``WORLD_SIZE`` > 1 (process group from ``MASTER_ADDR``/``MASTER_PORT``/``RANK``; gloo on
    CPU, NCCL on ``cuda`` with this process on ``cuda:LOCAL_RANK``), else :class:`SingleProcess`."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return SingleProcess(device)
    import torch.distributed as dist

    backend, options = "gloo", {}
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError("device cuda requested but CUDA is not available")
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
        # bound to its device, the group's barrier (an all-reduce under NCCL) needs no guess
        backend, options = "nccl", {"device_id": torch.device(device)}
    if not dist.is_initialized():
        init_process_group(backend, **options)
    return TorchDistributed(device)


def init_process_group(backend: str, **options: object) -> None:
    """``torch.distributed.init_process_group(backend, **options)``, with ``torch.distributed.nn``
    imported first.

    Why: ``torch.distributed.nn.functional`` binds ``group=group.WORLD`` as the default argument
    of ten functions when it is imported. torch imports it lazily, with ``torch._dynamo``, which
    the first ``torch.func`` transform loads (the per-sample Jacobian of SR). Imported after the
    group exists, those defaults hold the group: ``destroy_process_group`` then leaves it alive,
    with gloo's worker and I/O threads (and rank 0's TCPStore server thread) still running while
    the interpreter shuts down. A gloo worker that then releases a finished collective drops
    tensors whose Python objects need the GIL; a thread asking for the GIL during finalization
    is ended by ``pthread_exit``, whose unwinding through C++ calls ``std::terminate``: the rank
    dies by SIGABRT, "terminate called without an active exception" (now and then, more often on
    a loaded machine). Imported first, the defaults are None and the group dies with
    ``destroy_process_group``, which joins its threads.
    """
    import torch.distributed as dist
    import torch.distributed.nn  # noqa: F401  (see above)

    dist.init_process_group(backend, **options)


def process_group_threads(wait: float = 0.0) -> list[str]:
    """Names of the threads of torch.distributed (gloo, NCCL, TCPStore) still running in this
    process, after waiting up to ``wait`` seconds for them to end (a joined thread can stay listed
    for a moment); empty once :meth:`TorchDistributed.close` released the group (Linux; else empty)."""
    deadline = time.monotonic() + wait
    while True:
        names = _thread_names()
        left = sorted(n for n in names if n.startswith(("pt_gloo", "gloo_", "pt_tcpstore", "pt_nccl")))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.01)


def _thread_names() -> list[str]:
    """The names of this process's threads (Linux ``/proc``; else none)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return []
    names = []
    for task in tasks.iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # the thread ended meanwhile
            continue
    return names
