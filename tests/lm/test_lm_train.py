"""Training: a handful of pairs is overfitted; schedule, data split and batching."""
import pytest
import torch

from nnqs.lm.data import encode_pairs, generate_pairs, save_pairs
from nnqs.lm.evaluate import evaluate
from nnqs.lm.train import TrainConfig, batch_indices, lr_at, make_datasets, train


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


def test_batches_cover_each_epoch():
    it = batch_indices(10, 4, torch.Generator().manual_seed(0))
    epoch = torch.cat([next(it), next(it)])
    assert len(set(epoch.tolist())) == 8  # the short tail batch is dropped
    assert next(batch_indices(3, 8, torch.Generator())).numel() == 3


@pytest.mark.parametrize("kw", [dict(steps=0), dict(d_model=30, n_heads=4), dict(lr=-1.0), dict(dropout=1.0)])
def test_bad_settings_are_rejected(kw):
    with pytest.raises(ValueError):
        TrainConfig(**kw)
