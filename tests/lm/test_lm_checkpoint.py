"""The LM checkpoint round trip, and the refusal of broken ones."""
import pytest
import torch

import nnqs.common.checkpoint as checkpoint
from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.common.errors import UserError
from nnqs.common.runfolder import claim
from nnqs.lm.checkpoint import load_lm
from nnqs.lm.data import encode_pairs
from nnqs.lm.run import train_in_folder
from nnqs.lm.train import TrainConfig, start_run, train


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("art")
    cfg = TrainConfig(arch="decoder", train_size=64, val_size=16, steps=6, eval_every=3, batch_size=16,
                      d_model=16, n_layers=1)  # fmt: skip
    with claim(out, "new") as folder:
        train_in_folder(cfg, folder, progress=False)
    return out, train(cfg)  # the same run again, in memory


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
    broken["model"] = {}
    save_checkpoint(tmp_path / "broken.pt", "lm", broken)
    with pytest.raises(UserError, match="valid LM"):
        load_lm(tmp_path / "broken.pt")
    vocab = {**broken, "vocabulary": ["a", "b"]}
    save_checkpoint(tmp_path / "vocab.pt", "lm", vocab)
    with pytest.raises(UserError, match="vocabulary"):
        load_lm(tmp_path / "vocab.pt")


def test_a_checkpoint_of_another_shape_names_the_tensor(finished, tmp_path):
    out, _ = finished
    data = load_checkpoint(out, "lm")
    wider = start_run(TrainConfig(train_size=64, val_size=16, d_model=32, n_layers=1)).model
    save_checkpoint(tmp_path / "wide.pt", "lm", {**{k: v for k, v in data.items() if k not in ("format", "version", "kind")},
                                                 "model": wider.state_dict()})
    with pytest.raises(UserError, match=r"has shape \(\d+, 32\) there, \(\d+, 16\) here"):
        load_lm(tmp_path / "wide.pt")


def test_an_older_layout_still_loads_for_its_weights(finished, tmp_path):
    out, run = finished
    data = load_checkpoint(out, "lm")
    old = {"model_state": data["model"], "model_config": data["model_config"], "optimizer": data["optimizer"],
           "step": data["step"], "config": data["config"], "vocabulary": data["vocabulary"], "history": [],
           "wall_s": 1.0, "torch_rng": torch.get_rng_state()}  # the keys of format version 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint, "VERSION", 1)  # written as the older code wrote it
        save_checkpoint(tmp_path / "old.pt", "lm", old)
    assert load_checkpoint(tmp_path / "old.pt", "lm")["layout"] == 1
    model, _ = load_lm(tmp_path / "old.pt")
    batch = encode_pairs(run.val_pairs)
    run.model.eval()
    torch.testing.assert_close(model.answer_logits(batch), run.model.answer_logits(batch), atol=0, rtol=0)
