"""The autoregressive Transformer wavefunction ψ(x) = sqrt(P(x)) · exp(i φ(x)).

Configurations follow :mod:`nnqs.vmc.configurations`: one token per spatial
orbital, ``state = n_alpha + 2 * n_beta`` (0 empty, 1 alpha, 2 beta, 3 double),
spin-orbital ``2p`` = orbital ``p`` alpha, ``2p + 1`` = beta.

Amplitude: the shared causal :class:`~nnqs.nn.TransformerCore` reads
``[START, x_0, ..., x_{n-2}]`` (vocabulary 5, START = 4); the hidden state at
position ``i`` goes through a linear head plus a learned per-orbital bias
``(n, 4)`` to 4 logits for orbital ``i``. States that can no longer reach
``N_alpha``/``N_beta`` get logit ``-inf`` before the log-softmax, so
``P(x) = prod_i P(x_i | x_<i)`` is exactly 0 outside the sector and sums to 1
inside it.

Phase: an MLP on the one-hot configuration ``(4n -> H -> H -> 1)``.

``log_psi(x) = 0.5 * log P(x) + i φ(x)`` is complex128; its real part is
``-inf`` (never NaN) outside the sector.

Real ansatz (``real=True``): ψ(x) = sqrt(P(x)) · cos φ(x), so
``log_psi = 0.5 log P + log|cos φ| + i π [cos φ < 0]``. The ground state of a real
Hamiltonian is real; the complex ansatz reaches it only where its phases sit exactly at 0 or
π, and the imaginary part it leaves elsewhere only adds energy (about 20% of the error of
the STO-3G runs, ``benchmarks/RESULTS.md``). Then ``|ψ|^2 = P cos^2 φ`` is not P: samples
drawn from P carry the weight ``cos^2 φ`` (:meth:`TransformerWavefunction.sampling_ratio`).

Initialisation: the per-orbital bias favours the Hartree–Fock determinant.
``hf_bias=None`` picks the bias so that P(HF) is ``HF_TARGET_PROB`` (0.95) at init
(:func:`hf_bias_for`); ``hf_bias=0`` gives near-uniform conditionals.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnqs.nn.branching_cache import BranchingKVCache
from nnqs.vmc.configurations import (
    N_STATES,
    all_configurations,
    allowed_states_table,
    electrons_before,
    hf_tokens,
    in_sector,
    occupations_to_tokens,
    sector_size,
    tokens_to_occupations,
)
from nnqs.common.errors import UserError
from nnqs.nn import AttentionCache, CoreConfig, TransformerCore
from nnqs.vmc.sampler import sample_unique

__all__ = [
    "START_TOKEN",
    "TransformerWavefunction",
    "all_configurations",
    "hf_bias_for",
    "hf_tokens",
    "in_sector",
    "masked_log_softmax",
    "occupations_to_tokens",
    "sector_size",
    "tokens_to_occupations",
]

START_TOKEN = 4  # the input token before orbital 0; vocabulary is 0..4
PHASE_INIT_STD = 1.0  # std of the phase head's last-layer weights (see _init_heads)
HF_TARGET_PROB = 0.95  # P(HF) at init aimed at by the automatic hf_bias (VMCConfig.hf_prob too)


def masked_log_softmax(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Log-softmax of ``logits`` ``(..., 4)`` over the ``allowed`` states only.

    Disallowed states get exactly ``-inf``. A row with no allowed state (a prefix
    that already left the sector) is all ``-inf``, never NaN.
    """
    alive = allowed.any(-1, keepdim=True)
    masked = logits.masked_fill(~allowed, float("-inf"))
    masked = torch.where(alive, masked, torch.zeros_like(logits))
    return F.log_softmax(masked, dim=-1).masked_fill(~allowed, float("-inf"))


def hf_bias_for(n_orbitals: int, n_alpha: int, n_beta: int, target: float = HF_TARGET_PROB) -> float:
    """Bias ``h`` on each HF state such that P(HF) = ``target`` when the head outputs 0.

    Along the HF path orbital ``i`` has ``k_i`` allowed states, so
    ``P(HF) = prod_i e^h / (e^h + k_i - 1)``; solved for ``h`` by bisection.
    """
    table = allowed_states_table(n_orbitals, n_alpha, n_beta)
    hf = hf_tokens(n_orbitals, n_alpha, n_beta).unsqueeze(0)
    a, b = electrons_before(hf, n_alpha, n_beta)
    k = table[torch.arange(n_orbitals), a[0], b[0]].sum(-1).double()

    def p_hf(h: float) -> float:
        return float(torch.prod(math.exp(h) / (math.exp(h) + k - 1)))

    lo, hi = 0.0, 60.0
    if p_hf(lo) >= target:
        return 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if p_hf(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def _check_sizes(n_orbitals: int, n_alpha: int, n_beta: int) -> None:
    if n_orbitals < 1:
        raise UserError(f"n_orbitals must be >= 1, got {n_orbitals}")
    for name, n in (("n_alpha", n_alpha), ("n_beta", n_beta)):
        if not 0 <= n <= n_orbitals:
            raise UserError(f"{name} must be in 0..n_orbitals={n_orbitals}, got {n}")


def _log_abs_cos(phase: torch.Tensor) -> torch.Tensor:
    """``log|cos φ|`` ``(U,)`` float64; at an exact zero of cos the smallest normal float64 stands in
    for it, so log ψ stays finite (a weight of 0 to working precision, never NaN in a gradient)."""
    return torch.log(torch.cos(phase).abs().clamp_min(torch.finfo(torch.float64).tiny))


class TransformerWavefunction(nn.Module):
    """Autoregressive Transformer NNQS over ``n_orbitals`` spatial orbitals in the
    ``(n_alpha, n_beta)`` sector. ``hparams`` rebuilds it: ``TransformerWavefunction(**hparams)``.
    """

    def __init__(
        self,
        n_orbitals: int,
        n_alpha: int,
        n_beta: int,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        phase_hidden: int = 64,
        d_ff: int | None = None,
        hf_bias: float | None = None,
        real: bool = False,
        dtype: torch.dtype | str = torch.float32,
        device: torch.device | str | None = None,
        **unknown: Any,
    ) -> None:
        super().__init__()
        if unknown:  # hparams have held exactly the named arguments since the first checkpoint
            raise UserError(f"TransformerWavefunction: unknown option(s) {', '.join(sorted(unknown))}")
        _check_sizes(n_orbitals, n_alpha, n_beta)
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype, None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise UserError(f"dtype must be a floating torch dtype such as 'float32', got {dtype!r}")
        self.n_orbitals, self.n_alpha, self.n_beta = n_orbitals, n_alpha, n_beta
        self.real = bool(real)
        if hf_bias is None:
            hf_bias = hf_bias_for(n_orbitals, n_alpha, n_beta)
        self.hparams: dict[str, Any] = dict(
            n_orbitals=n_orbitals, n_alpha=n_alpha, n_beta=n_beta, d_model=d_model, n_layers=n_layers,
            n_heads=n_heads, phase_hidden=phase_hidden, d_ff=d_ff, hf_bias=float(hf_bias), real=self.real,
            dtype=str(dtype).removeprefix("torch."),
        )  # fmt: skip
        cfg = CoreConfig(N_STATES + 1, n_orbitals, d_model, n_layers, n_heads, d_ff)
        self.core = TransformerCore(cfg)
        self.head = nn.Linear(d_model, N_STATES)
        self.orbital_bias = nn.Parameter(torch.zeros(n_orbitals, N_STATES))
        self.phase_net = nn.Sequential(
            nn.Linear(N_STATES * n_orbitals, phase_hidden), nn.GELU(),
            nn.Linear(phase_hidden, phase_hidden), nn.GELU(),
            nn.Linear(phase_hidden, 1),
        )  # fmt: skip
        self._init_heads(float(hf_bias))
        self.register_buffer("allowed", allowed_states_table(n_orbitals, n_alpha, n_beta), persistent=False)
        self.register_buffer("state_ids", torch.arange(N_STATES), persistent=False)
        self.to(device=device, dtype=dtype)

    def _init_heads(self, hf_bias: float) -> None:
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        hf = hf_tokens(self.n_orbitals, self.n_alpha, self.n_beta)
        with torch.no_grad():
            self.orbital_bias[torch.arange(self.n_orbitals), hf] = hf_bias
        # Phases start spread (std ~1 rad over configurations), not all equal: with equal phases a
        # configuration that needs the opposite sign sits at a saddle (sin(0) = 0), its amplitude
        # is pushed to zero before its phase can turn, and VMC collapses onto HF. Measured on
        # LiH STO-3G, SR, 300 steps: weight std 0.02 -> 24 mHa error, 0.3 -> 1.2 mHa, 1.0 -> 1.0 mHa.
        last = self.phase_net[-1]
        nn.init.normal_(last.weight, std=PHASE_INIT_STD)
        nn.init.zeros_(last.bias)

    @property
    def device(self) -> torch.device:
        return self.orbital_bias.device

    @property
    def dtype(self) -> torch.dtype:
        return self.orbital_bias.dtype

    def hf_config(self) -> torch.Tensor:
        """The Hartree–Fock determinant ``(n,)`` long on the module's device."""
        return hf_tokens(self.n_orbitals, self.n_alpha, self.n_beta).to(self.device)

    def new_cache(self, branching: bool = False) -> AttentionCache:
        """An empty KV cache for :meth:`next_log_conditional`; ``branching=True`` gives the
        sampler's :class:`~nnqs.nn.branching_cache.BranchingKVCache` (fused branch-and-append)."""
        if branching:
            return BranchingKVCache(self.core.cfg.n_layers)
        return self.core.new_cache()

    # -- amplitude ----------------------------------------------------------------------------
    def _check_configs(self, configs: torch.Tensor) -> torch.Tensor:
        if configs.dim() != 2 or configs.shape[1] != self.n_orbitals:
            raise UserError(f"configs must have shape (U, {self.n_orbitals}), got {tuple(configs.shape)}")
        configs = configs.to(self.device, torch.long)
        if configs.numel() and (configs.min() < 0 or configs.max() >= N_STATES):
            raise UserError("configs must hold tokens in 0..3")
        return configs

    def _logits(self, hidden: torch.Tensor, orbitals: torch.Tensor | slice) -> torch.Tensor:
        """Hidden ``(..., C)`` -> logits ``(..., 4)`` plus the bias of ``orbitals``."""
        return self.head(hidden) + self.orbital_bias[orbitals]

    def conditionals(self, configs: torch.Tensor) -> torch.Tensor:
        """``log P(x_i = s | x_<i)`` for every orbital, ``(U, n, 4)``, one parallel masked forward."""
        return self._conditionals(self._check_configs(configs))

    def _conditionals(self, configs: torch.Tensor) -> torch.Tensor:
        start = torch.full_like(configs[:, :1], START_TOKEN)
        hidden = self.core(torch.cat([start, configs[:, :-1]], dim=1))  # (U, n, C)
        a, b = electrons_before(configs, self.n_alpha, self.n_beta)
        allowed = self.allowed[torch.arange(self.n_orbitals, device=self.device), a, b]  # (U, n, 4)
        return masked_log_softmax(self._logits(hidden, slice(None)), allowed)

    def next_log_conditional(
        self,
        prefix: torch.Tensor,
        n_up: torch.Tensor,
        n_dn: torch.Tensor,
        cache: AttentionCache | None = None,
    ) -> torch.Tensor:
        """``log P(x_i = s | prefix)`` ``(B, 4)`` for orbital ``i = prefix.shape[1]``.

        ``prefix`` ``(B, i)`` holds orbitals ``0..i-1``; ``n_up``/``n_dn`` ``(B,)`` are
        their alpha/beta electron counts. With ``cache`` (holding positions ``0..i-1``)
        only the newest input token is fed; without, the whole ``[START, prefix]``.
        """
        i = prefix.shape[1]
        start = prefix.new_full((prefix.shape[0], 1), START_TOKEN)
        if cache is None:
            tokens = torch.cat([start, prefix], dim=1)
        else:
            assert len(cache) == i, f"cache holds {len(cache)} positions, prefix has {i}"
            tokens = prefix[:, -1:] if i else start
        hidden = self.core(tokens, cache=cache)[:, -1]  # (B, C)
        allowed = self.allowed[i, n_up.clamp(max=self.n_alpha + 1), n_dn.clamp(max=self.n_beta + 1)]
        return masked_log_softmax(self._logits(hidden, i), allowed)

    def log_prob(self, configs: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
        """``log P(x)`` ``(U,)`` float64; ``-inf`` outside the sector."""
        return self._chunked(self._log_prob, self._check_configs(configs), chunk_size)

    def _log_prob(self, configs: torch.Tensor) -> torch.Tensor:
        logp = self._conditionals(configs).gather(-1, configs.unsqueeze(-1))  # (U, n, 1)
        return logp.squeeze(-1).double().sum(-1)

    # -- phase ----------------------------------------------------------------------------------
    def phase(self, configs: torch.Tensor) -> torch.Tensor:
        """``φ(x)`` ``(U,)`` in the model dtype, from the MLP on the one-hot configuration."""
        return self._phase(self._check_configs(configs))

    def _phase(self, configs: torch.Tensor) -> torch.Tensor:
        onehot = (configs.unsqueeze(-1) == self.state_ids).to(self.dtype).flatten(1)  # (U, 4n); vmap-safe one-hot
        return self.phase_net(onehot).squeeze(-1)

    def log_psi(self, configs: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
        """``log ψ(x) = 0.5 log P(x) + i φ(x)`` ``(U,)`` complex128, differentiable (the real
        ansatz: ``0.5 log P + log|cos φ| + i π [cos φ < 0]``, see :meth:`combine`).

        ``chunk_size`` bounds the rows per forward (same result, less memory).
        """
        return self._chunked(self._log_psi, self._check_configs(configs), chunk_size)

    def _log_psi(self, configs: torch.Tensor) -> torch.Tensor:
        return self.combine(self._log_prob(configs), self._phase(configs))

    def combine(self, log_prob: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        """log ψ ``(U,)`` complex128 from ``log P`` and ``φ`` ``(U,)``: ``0.5 log P + i φ``, or with
        the real ansatz ``0.5 log P + log|cos φ| + i π [cos φ < 0]`` (the sign carries no gradient)."""
        phase = phase.double()
        if not self.real:
            return torch.complex(0.5 * log_prob, phase)
        return torch.complex(0.5 * log_prob + _log_abs_cos(phase), torch.pi * (torch.cos(phase) < 0).double())

    def _log_abs(self, configs: torch.Tensor) -> torch.Tensor:
        half = 0.5 * self._log_prob(configs)  # the complex ansatz: no phase parameter in this graph
        return half + _log_abs_cos(self._phase(configs).double()) if self.real else half

    def sampling_ratio(self, configs: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor | None:
        """``|ψ(x)|^2 / P(x)`` ``(U,)`` float64, the weight a sample drawn from P carries: ``cos^2 φ``
        for the real ansatz, None (1 everywhere) for the complex one."""
        if not self.real:
            return None
        phase = self._chunked(self._phase, self._check_configs(configs), chunk_size).double()
        return torch.cos(phase).square()

    def jacobian_parts(self) -> tuple[str, str | None]:
        """The :meth:`forward` parts whose parameter derivatives are those of Re log ψ and Im log ψ
        (``None``: Im log ψ is piecewise constant, no derivative)."""
        return ("log_abs", None) if self.real else ("log_abs", "phase")

    def forward(self, configs: torch.Tensor, part: str = "log_psi") -> torch.Tensor:
        """``part`` of the wavefunction for ``configs`` ``(U, n)`` long -> ``(U,)``: ``"log_psi"``
        (complex128), ``"log_prob"`` (float64), ``"phase"`` (model dtype) or ``"log_abs"``
        (``Re log ψ``, float64).

        Unchecked (no value tests on ``configs``), so ``torch.func`` transforms can trace it,
        e.g. per-sample gradients through :func:`torch.func.functional_call` (see
        :mod:`nnqs.vmc.sr`). Use :meth:`log_psi`, :meth:`log_prob`, :meth:`phase` otherwise.
        """
        parts = {"log_psi": self._log_psi, "log_prob": self._log_prob, "phase": self._phase, "log_abs": self._log_abs}
        return parts[part](configs)

    @staticmethod
    def _chunked(fn: Any, configs: torch.Tensor, chunk_size: int | None) -> torch.Tensor:
        if chunk_size is None or configs.shape[0] <= chunk_size:
            return fn(configs)
        if chunk_size < 1:
            raise UserError(f"chunk_size must be >= 1, got {chunk_size}")
        return torch.cat([fn(c) for c in configs.split(chunk_size)])

    # -- sampling -------------------------------------------------------------------------------
    def sample(
        self,
        n_samples: int,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
        max_frontier: int = 2**16,
        max_unique: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Unique configurations ``(U, n)`` long and their counts ``(U,)`` long (sum ``n_samples``).

        See :func:`nnqs.vmc.sampler.sample_unique`.
        """
        return sample_unique(self, n_samples, generator, use_cache, max_frontier, max_unique)


def in_dtype(wf: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """``wf`` itself when it already is in ``dtype`` (or ``dtype`` is None), else a copy of it in ``dtype``
    (the float32 copies of the teacher fit, the set's passes and the prefix tree)."""
    import copy

    if dtype is None or dtype == next(wf.parameters()).dtype:
        return wf
    return copy.deepcopy(wf).to(dtype)
