"""Divergence guard: an injected NaN rolls the run back and lowers the learning rate; repeated
NaNs stop it with one clear line and the last good checkpoint intact."""
import copy
import csv
import json
import math

from dataclasses import dataclass

import pytest
import torch

import nnqs.vmc.vmc_loop
from nnqs.common.checkpoint import load_checkpoint
from nnqs.cli import main
from nnqs.common.guard import DivergenceError, DivergenceGuard, non_finite_reason, scale_learning_rate
from nnqs.common.loop import LoopState

ARGS = ["vmc", "H2", "--steps", "12", "--d-model", "8", "--n-layers", "1", "--final-samples", "10000",
        "--checkpoint-every", "4", "--no-exact", "--threads", "1", "--lr", "0.05"]


def inject(monkeypatch, bad_calls, what):
    """Make the step calls numbered ``bad_calls`` (0-based) end with a non-finite ``what``."""
    real = nnqs.vmc.vmc_loop.vmc_step
    calls = []

    def step(wf, *args, **kwargs):
        result = real(wf, *args, **kwargs)
        if len(calls) in bad_calls:
            if what == "energy":
                result.energy = float("nan")
            else:  # a bad update: a parameter becomes NaN
                with torch.no_grad():
                    next(wf.parameters()).view(-1)[0] = float("nan")
        calls.append(result.step)
        return result

    monkeypatch.setattr(nnqs.vmc.vmc_loop, "vmc_step", step)
    return calls


def history(out):
    with open(out / "history.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("what", ["energy", "parameter"])
def test_one_nan_is_rolled_back_and_the_run_finishes(tmp_path, monkeypatch, capsys, what):
    out = tmp_path / "run"
    calls = inject(monkeypatch, {5}, what)
    assert main([*ARGS, "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert calls[5] == calls[6] == 5  # step 5 was rejected and tried again
    assert [e["step"] for e in result["rollbacks"]] == [5] and what in result["rollbacks"][0]["reason"]
    assert "rolled back" in captured.err and math.isfinite(result["energy"])
    rows = history(out)
    assert [int(r["step"]) for r in rows] == list(range(12))
    assert all(math.isfinite(float(r["energy"])) for r in rows)
    assert len((out / "events.log").read_text().splitlines()) == 1
    ckpt = load_checkpoint(out / "checkpoint.pt", "vmc")
    assert ckpt["scheduler"]["base_lrs"] == [pytest.approx(0.025)]  # the lowered rate is kept for a resume


def test_lowered_rate_applies_from_the_rejected_step(tmp_path, monkeypatch):
    clean, bad = tmp_path / "clean", tmp_path / "bad"
    assert main([*ARGS, "--out", str(clean)]) == 0
    inject(monkeypatch, {5}, "parameter")
    assert main([*ARGS, "--out", str(bad)]) == 0
    lr_clean = [float(r["lr"]) for r in history(clean)]
    lr_bad = [float(r["lr"]) for r in history(bad)]
    assert lr_bad[:5] == lr_clean[:5]
    assert lr_bad[5:] == pytest.approx([0.5 * lr for lr in lr_clean[5:]])


def test_repeated_nans_stop_cleanly_with_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    inject(monkeypatch, set(range(6, 100)), "energy")
    assert main([*ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("nnqs: error: run diverged 5 times in a row at step 6")
    assert f"last good checkpoint: {out / 'checkpoint.pt'}" in err[-1]
    assert sum("rolled back" in line for line in err) == 5
    ckpt = load_checkpoint(out / "checkpoint.pt", "vmc")
    assert ckpt["step"] == 4
    assert all(bool(torch.isfinite(t).all()) for t in ckpt["model"].values())
    assert [int(r["step"]) for r in history(out)] == list(range(6))
    assert not (out / "result.json").exists()
    assert len((out / "events.log").read_text().splitlines()) == 5


@dataclass(kw_only=True)
class _CountingState(LoopState):
    n_samples: int = 100

    def counters(self):
        return {"n_samples": self.n_samples}

    def set_counters(self, counters):
        self.n_samples = counters["n_samples"]


def _State():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return _CountingState(model=model, opt=opt, sched=sched, generator=torch.Generator(), step=3)


class _Result:
    def __init__(self, energy=-1.0, variance=0.1, grad_norm=0.5):
        self.energy, self.variance, self.grad_norm = energy, variance, grad_norm


class _LMResult:
    def __init__(self, loss=1.0, grad_norm=0.5):
        self.loss, self.grad_norm = loss, grad_norm


def test_guard_checks_every_quantity_and_restores_the_snapshot():
    state, guard = _State(), DivergenceGuard(max_failures=2, lr_factor=0.25)
    before = {k: v.clone() for k, v in state.model.state_dict().items()}
    assert non_finite_reason(_Result(), state.model) is None
    for bad in (_Result(energy=math.inf), _Result(variance=math.nan), _Result(grad_norm=math.nan)):
        assert non_finite_reason(bad, state.model) is not None
    guard.before_step(state)
    with torch.no_grad():
        state.model.weight.fill_(math.nan)
    state.n_samples = 7
    assert not guard.accept(_Result(), state)
    assert all(torch.equal(v, before[k]) for k, v in state.model.state_dict().items())
    assert state.n_samples == 100 and state.opt.param_groups[0]["lr"] == pytest.approx(0.025)
    guard.before_step(state)
    with pytest.raises(DivergenceError, match="diverged 2 times in a row at step 3"):
        guard.accept(_Result(grad_norm=math.inf), state)


def test_the_lm_loss_is_guarded_too():
    state, guard = _State(), DivergenceGuard()
    assert non_finite_reason(_LMResult(), state.model) is None
    assert non_finite_reason(_LMResult(loss=math.nan), state.model) == "loss nan"
    guard.before_step(state)
    assert not guard.accept(_LMResult(loss=math.inf), state)
    assert state.opt.param_groups[0]["lr"] == pytest.approx(0.05)


def test_a_snapshot_is_never_taken_of_non_finite_parameters():
    state, guard = _State(), DivergenceGuard()
    guard.before_step(state)
    good = state.model.weight.detach().clone()
    with torch.no_grad():
        state.model.weight[0, 0] = math.nan
    guard.before_step(state)  # keeps the older, finite snapshot
    assert not guard.accept(_Result(), state)
    assert torch.equal(state.model.weight, good)


def test_scale_learning_rate_scales_the_schedule():
    state = _State()
    scale_learning_rate(state.opt, state.sched, 0.5)
    state.opt.step()
    state.sched.step()
    assert state.opt.param_groups[0]["lr"] == pytest.approx(0.05)


def _adam_state():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return _CountingState(model=model, opt=opt, sched=sched, generator=torch.Generator(), step=0)


def _adam_step(state, x):
    state.opt.zero_grad()
    state.model(x).square().sum().backward()
    state.opt.step()
    state.sched.step()
    state.step += 1


def test_a_reused_snapshot_equals_a_fresh_deep_copy_and_restores_exactly():
    """The in-place snapshot (buffers reused from step to step) against the oracle: a fresh
    deepcopy of every state dict, taken at the same step; then a bad step restored from it."""
    state, guard, x = _adam_state(), DivergenceGuard(), torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    guard.before_step(state)  # the first snapshot: before AdamW has any state
    for _ in range(3):
        _adam_step(state, x)
        guard.before_step(state)
    oracle = (copy.deepcopy(state.model.state_dict()), copy.deepcopy(state.opt.state_dict()),
              copy.deepcopy(state.sched.state_dict()))
    _adam_step(state, x)  # the live state moves on; the snapshot must not
    with torch.no_grad():
        state.model[0].weight[0, 0] = math.nan
    assert not guard.accept(_Result(), state)
    assert _same(state.model.state_dict(), oracle[0]) and _same(state.opt.state_dict()["state"], oracle[1]["state"])
    assert state.sched.state_dict()["last_epoch"] == oracle[2]["last_epoch"] == 3


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b
