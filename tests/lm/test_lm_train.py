"""Training: a handful of pairs is overfitted; schedule, data split and batching."""
import pytest
import torch

from nnqs.lm.data import encode_pairs, generate_pairs, save_pairs
from nnqs.lm.evaluate import evaluate
from nnqs.lm.train import BatchSampler, TrainConfig, lr_at, make_datasets, make_optimizer, train


@pytest.mark.parametrize("arch", ["decoder", "seq2seq"])
def test_tiny_set_is_overfitted_to_exact_match_one(arch, tmp_path):
    pairs = generate_pairs(6, 42)
    save_pairs(tmp_path / "tiny.json", pairs)
    cfg = TrainConfig(
        arch=arch, data=str(tmp_path / "tiny.json"), val_size=8, steps=150, batch_size=6, lr=3e-3,
        warmup_steps=10, weight_decay=0.0, d_model=32, n_layers=1, eval_every=50,
    )
    run = train(cfg)
    metrics = evaluate(run.model, encode_pairs(pairs))
    assert metrics.exact_match == 1.0 and metrics.token_accuracy == 1.0
    assert run.history[-1].train_loss < 0.05  # mean over the last 50 steps
    assert run.result()["train_pairs"] == 6 and run.step == 150


def test_training_is_seeded():
    cfg = TrainConfig(train_size=64, val_size=16, steps=5, batch_size=16, d_model=16, n_layers=1, eval_every=5)
    a, b = train(cfg), train(cfg)
    assert a.history[-1].train_loss == b.history[-1].train_loss
    state_a, state_b = a.model.state_dict(), b.model.state_dict()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)


def test_validation_is_disjoint_and_differently_seeded():
    train_pairs, val = make_datasets(TrainConfig(train_size=5000, val_size=2000))
    assert len(train_pairs) == 5000 and len(val) == 2000
    assert not set(train_pairs.questions) & set(val.questions)
    assert val.questions[:50] != generate_pairs(50, 0).questions


def test_warmup_then_cosine():
    cfg = TrainConfig(steps=1000, warmup_steps=100, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(1e-5)
    assert lr_at(99, cfg) == pytest.approx(1e-3)
    assert lr_at(550, cfg) == pytest.approx(0.55e-3)
    assert lr_at(1000, cfg) == pytest.approx(1e-4)
    values = [lr_at(s, cfg) for s in range(100, 1001)]
    assert all(x >= y for x, y in zip(values, values[1:]))


def test_the_lambdalr_schedule_gives_exactly_the_hand_set_rates():
    cfg = TrainConfig(steps=300, warmup_steps=20, lr=3e-3, min_lr_ratio=0.05)
    opt, sched = make_optimizer(torch.nn.Linear(2, 2), cfg)
    for step in range(310):
        assert [g["lr"] for g in opt.param_groups] == [lr_at(step, cfg)] * 2, step  # bit for bit
        opt.step()
        sched.step()


def test_batches_cover_each_epoch():
    sampler = BatchSampler(10, 4, torch.Generator().manual_seed(0))
    epoch = torch.cat([sampler.next(), sampler.next()])
    assert len(set(epoch.tolist())) == 8  # the short tail batch is dropped
    assert BatchSampler(3, 8, torch.Generator()).next().numel() == 3


def test_batches_follow_one_randperm_per_epoch_and_resume_from_their_state():
    expected, gen = [], torch.Generator().manual_seed(5)
    for _ in range(4):  # the plain twin: one permutation per epoch, cut into full batches
        order = torch.randperm(11, generator=gen)
        expected += [order[i : i + 3] for i in (0, 3, 6)]
    gen = torch.Generator().manual_seed(5)
    sampler = BatchSampler(11, 3, gen)
    got = [sampler.next() for _ in range(5)]
    state, gen_state = sampler.state_dict(), gen.get_state()
    gen2 = torch.Generator()
    gen2.set_state(gen_state)
    resumed = BatchSampler(11, 3, gen2)
    resumed.load_state_dict(state)
    got += [resumed.next() for _ in range(7)]
    assert all(torch.equal(a, b) for a, b in zip(got, expected)) and len(got) == len(expected)


@pytest.mark.parametrize("kw, words", [
    (dict(steps=0), "steps must be >= 1, got 0"),
    (dict(d_model=30, n_heads=4), "d_model (30) must be divisible by n_heads (4)"),
    (dict(lr=-1.0), "lr must be a number > 0 and at most 1e+06 (AdamW's float32 update overflows above), got -1.0"),
    (dict(lr=1e300), "lr must be a number > 0 and at most 1e+06 (AdamW's float32 update overflows above), got 1e+300"),
    (dict(min_lr_ratio=1.5), "min_lr_ratio must be in 0..1, got 1.5"),
    (dict(weight_decay=float("inf")), "weight_decay must be a finite number >= 0, got inf"),
    (dict(dropout=1.0), "dropout must be in [0, 1), got 1.0"),
    (dict(grad_clip=0.0), "grad_clip must be a finite number > 0, got 0.0"),
    (dict(threads=2000), "threads must be in 0..1024, got 2000"),
    (dict(checkpoint_seconds=-1.0), "checkpoint_seconds must be in 0..1e9, got -1.0"),
    (dict(device="meta"), "device must be 'cpu', 'cuda' or 'cuda:N', got 'meta'"),
    (dict(device="mps"), "device must be 'cpu', 'cuda' or 'cuda:N', got 'mps'"),
])
def test_bad_settings_are_rejected_naming_the_value(kw, words):
    with pytest.raises(ValueError) as exc:
        TrainConfig(**kw)
    assert str(exc.value) == words
    assert "grad_clip" not in str(exc.value) or "grad_clip" in kw



def _scripted_validation(monkeypatch, exact: list[float]) -> None:
    """Replace validation by a script of exact matches (one per evaluation)."""
    import nnqs.lm.train as train_module
    from nnqs.lm.evaluate import Metrics

    script = iter(exact)
    monkeypatch.setattr(train_module, "evaluate", lambda model, batch: Metrics(next(script), 0.5, len(batch)))


TINY_RUN = dict(train_size=32, val_size=8, steps=100, batch_size=8, d_model=16, n_layers=1, eval_every=10)


def test_target_exact_stops_after_two_validations_in_a_row(monkeypatch):
    _scripted_validation(monkeypatch, [0.2, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    run = train(TrainConfig(**TINY_RUN))  # target_exact defaults to 1.0
    assert run.step == 50 and [r.step for r in run.history] == [10, 20, 30, 40, 50]
    result = run.result()
    assert result["steps_to_target"] == 20 and result["seconds_to_target"] == round(run.history[1].elapsed_s, 3)
    assert result["stopped_at"] == 50 and result["stopped_early"] is True


def test_target_exact_below_one_and_off(monkeypatch):
    _scripted_validation(monkeypatch, [0.5, 0.96, 0.97] + [0.1] * 7)
    run = train(TrainConfig(**TINY_RUN, target_exact=0.95))
    assert run.step == 30 and run.result()["steps_to_target"] == 20
    _scripted_validation(monkeypatch, [1.0] * 10)
    run = train(TrainConfig(**TINY_RUN, target_exact=0.0))
    assert run.step == 100 and len(run.history) == 10
    assert run.result()["stopped_early"] is False and run.result()["steps_to_target"] is None


def test_target_never_reached_runs_every_step(monkeypatch):
    _scripted_validation(monkeypatch, [1.0, 0.9] * 5)
    run = train(TrainConfig(**TINY_RUN, tail_steps=0))
    assert run.step == 100 and run.result()["steps_to_target"] == 10 and run.result()["stopped_early"] is False


def test_a_run_short_of_tail_exact_at_its_last_step_goes_on_at_the_final_lr(monkeypatch):
    """Below tail_exact at step 100: on at the final learning rate until a validation reaches it."""
    _scripted_validation(monkeypatch, [0.5] * 9 + [0.99, 0.995, 0.9991, 0.2])
    cfg = TrainConfig(**TINY_RUN, tail_steps=40, warmup_steps=10)
    run = train(cfg)
    assert run.step == 120 and [r.step for r in run.history][-3:] == [100, 110, 120]
    assert run.result()["tail_steps_run"] == 20 and run.result()["stopped_early"] is False
    final_lr = cfg.lr * cfg.min_lr_ratio
    assert [r.lr for r in run.history[-2:]] == pytest.approx([final_lr, final_lr])
    _scripted_validation(monkeypatch, [0.5] * 9 + [0.96] * 11)  # never: the tail ends at its budget, validated there
    run = train(TrainConfig(**TINY_RUN, tail_steps=35))
    assert run.step == 135 and run.history[-1].step == 135 and run.result()["tail_steps_run"] == 35
    _scripted_validation(monkeypatch, [0.5] * 9 + [0.999])  # at tail_exact at step 100: no tail
    assert train(TrainConfig(**TINY_RUN, tail_steps=40)).step == 100
    _scripted_validation(monkeypatch, [0.5] * 10)  # below tail_from: other settings are needed, not a tail
    assert train(TrainConfig(**TINY_RUN, tail_steps=40)).step == 100
    _scripted_validation(monkeypatch, [0.5] * 9 + [0.99])  # the rule off: no tail either
    assert train(TrainConfig(**TINY_RUN, tail_steps=40, target_exact=0.0)).step == 100


def test_target_exact_out_of_range_is_refused():
    with pytest.raises(ValueError, match="target_exact"):
        TrainConfig(target_exact=1.5)
