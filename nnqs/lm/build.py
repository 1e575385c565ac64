"""The three arithmetic language models by name: decoder, seq2seq (:mod:`nnqs.lm.models`) and the
encoder-only masked LM (:mod:`nnqs.lm.encoder_lm`). Apart from both, so that neither imports the other."""
from __future__ import annotations

from nnqs.lm.encoder_lm import EncoderLM
from nnqs.lm.models import DecoderLM, ModelConfig, Seq2SeqLM

ArithmeticLM = DecoderLM | Seq2SeqLM | EncoderLM


def build_model(cfg: ModelConfig) -> ArithmeticLM:
    """The model named by ``cfg.arch``: ``decoder``, ``seq2seq`` or ``encoder``."""
    if cfg.arch == "encoder":
        return EncoderLM(cfg)
    return DecoderLM(cfg) if cfg.arch == "decoder" else Seq2SeqLM(cfg)
