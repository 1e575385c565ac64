"""Run folder files and the LM checkpoint round trip."""
import pytest
import torch

from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.common.errors import UserError
from nnqs.lm.artifacts import finish_run_folder, load_lm, run_hooks, start_run_folder
from nnqs.lm.data import encode_pairs
from nnqs.lm.train import TrainConfig, train


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("art")
    cfg = TrainConfig(arch="decoder", train_size=64, val_size=16, steps=6, eval_every=3, batch_size=16,
                      d_model=16, n_layers=1)  # fmt: skip
    start_run_folder(out, cfg)
    run = train(cfg, run_hooks(out, cfg.steps, progress=False))
    finish_run_folder(out, run)
    return out, run


def test_checkpoint_restores_the_model_exactly(finished):
    out, run = finished
    model, ckpt = load_lm(out)
    assert ckpt["step"] == 6 and ckpt["config"]["steps"] == 6 and ckpt["model_config"]["arch"] == "decoder"
    assert "state" in ckpt["optimizer"] and ckpt["vocabulary"][14] == "BOS"
    batch = encode_pairs(run.val_pairs)
    run.model.eval()
    torch.testing.assert_close(model.answer_logits(batch), run.model.answer_logits(batch), atol=0, rtol=0)


def test_foreign_or_broken_checkpoints_are_user_errors(finished, tmp_path):
    out, _ = finished
    data = load_checkpoint(out, "lm")
    save_checkpoint(tmp_path / "vmc.pt", "vmc", {"x": 1})
    with pytest.raises(UserError, match="expected 'lm'"):
        load_lm(tmp_path / "vmc.pt")
    broken = {k: v for k, v in data.items() if k not in ("format", "version", "kind")}
    broken["model_state"] = {}
    save_checkpoint(tmp_path / "broken.pt", "lm", broken)
    with pytest.raises(UserError, match="valid LM"):
        load_lm(tmp_path / "broken.pt")
    vocab = {**broken, "vocabulary": ["a", "b"]}
    save_checkpoint(tmp_path / "vocab.pt", "lm", vocab)
    with pytest.raises(UserError, match="vocabulary"):
        load_lm(tmp_path / "vocab.pt")
