"""Masked-LM pretraining of the encoder-decoder's encoder (``--mlm-pretrain STEPS``).

Before teacher-forced training, the encoder (with the model's token head on top) is
trained for ``cfg.mlm_pretrain`` steps as a masked LM over "question answer" sequences
of the training pairs (BERT's 15% / 80/10/10 rule plus whole-answer masking, as for
``--arch encoder``), with its own AdamW at ``cfg.lr`` after a short warmup. The batches
and masks come from the run's generator, so the run stays seeded. Its time counts in
the run's clock (time to the target includes it). A run resumed past step 0 skips it.
"""
from __future__ import annotations

import torch

from nnqs.lm.encoder_lm import EncoderLM
from nnqs.lm.masking import mask_tokens
from nnqs.lm.models import masked_cross_entropy


def mlm_pretrain(run) -> list[float]:
    """Pretrain ``run.model.encoder`` (a Seq2SeqLM with ``mask_input``); the losses per step."""
    cfg, model = run.cfg, run.model
    params = list(model.encoder.parameters()) + list(model.head.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.98), weight_decay=cfg.weight_decay)
    warmup = max(1, min(cfg.warmup_steps, cfg.mlm_pretrain // 5))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    losses = []
    for _ in range(cfg.mlm_pretrain):
        batch = run.train_batch.select(run.batches.next().to(run.train_batch.questions.device))
        seq, real, a_pos = EncoderLM.pack(batch)
        span = torch.zeros((seq.shape[0], seq.shape[1] + 1), dtype=torch.bool, device=seq.device)
        span = span.scatter(1, a_pos[:, 1:], batch.answer_mask[:, 1:])[:, :-1]
        inputs, chosen = mask_tokens(seq, real, run.generator, span=span, span_prob=cfg.answer_mask_prob)
        logits = model.head(model.encoder(inputs, key_padding_mask=None if bool(real.all()) else real))
        loss = masked_cross_entropy(logits, seq, chosen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses
