"""--mlm-pretrain: masked-LM steps on the seq2seq encoder before teacher-forced training."""
import pytest
import torch

from nnqs.lm.pretrain import mlm_pretrain
from nnqs.lm.tokenizer import INPUT_VOCAB_SIZE, VOCAB_SIZE
from nnqs.lm.train import TrainConfig, start_run, train

TINY = dict(arch="seq2seq", train_size=64, val_size=16, steps=4, eval_every=2, batch_size=16, d_model=16,
            n_layers=1)


def test_pretraining_moves_the_encoder_and_head_only_and_lowers_the_loss():
    run = start_run(TrainConfig(**TINY, mlm_pretrain=60, lr=1e-2, warmup_steps=5))
    assert run.model.encoder.tok_emb.num_embeddings == INPUT_VOCAB_SIZE  # the encoder reads [MASK]
    assert run.model.decoder.tok_emb.num_embeddings == VOCAB_SIZE
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    losses = mlm_pretrain(run)
    after = run.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in after if k.startswith("decoder."))
    assert all(not torch.equal(before[k], after[k]) for k in after if k.startswith(("encoder.blocks", "head.")))
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10


def test_pretrained_runs_are_seeded_and_the_option_is_seq2seq_only():
    cfg = TrainConfig(**TINY, mlm_pretrain=5)
    a, b = train(cfg), train(cfg)
    assert all(torch.equal(a.model.state_dict()[k], b.model.state_dict()[k]) for k in a.model.state_dict())
    with pytest.raises(ValueError, match="mlm_pretrain"):
        TrainConfig(arch="decoder", mlm_pretrain=10)
    with pytest.raises(ValueError, match="mlm_pretrain"):
        TrainConfig(arch="seq2seq", mlm_pretrain=-1)
