"""Both LMs: shift without label leakage, answer-only loss mask, padding invariance."""
import pytest
import torch
import torch.nn.functional as F

from nnqs.lm.data import Batch, encode_pairs, generate_pairs, make_batch
from nnqs.lm.models import DecoderLM, ModelConfig, Seq2SeqLM
from nnqs.lm.build import build_model
from nnqs.lm.tokenizer import ADD, ASSISTANT, PAD, SUBTRACT, USER, VOCAB_SIZE

ARCHS = ["decoder", "seq2seq"]


def tiny_model(arch: str, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(ModelConfig(arch=arch, d_model=32, n_layers=2, n_heads=4)).double().eval()


def sample_batch(n: int = 6, seed: int = 1) -> Batch:
    return encode_pairs(generate_pairs(n, seed))


@pytest.mark.parametrize("arch", ARCHS)
def test_answer_logits_depend_on_the_prefix_only(arch):
    model, batch = tiny_model(arch), sample_batch()
    base = model.answer_logits(batch)  # position j predicts answers[:, j + 1]
    assert base.shape == (6, 4, VOCAB_SIZE)
    for k in range(1, 5):
        answers = batch.answers.clone()
        answers[:, k:] = (answers[:, k:] + 3) % 10  # change the answer from token k on
        changed = model.answer_logits(Batch(batch.questions, batch.question_mask, answers, batch.answer_mask))
        torch.testing.assert_close(changed[:, :k], base[:, :k], atol=1e-12, rtol=0)
        if k < 4:  # position k reads token k: it must see the change (the shift is by exactly one)
            assert not torch.allclose(changed[:, k], base[:, k])


@pytest.mark.parametrize("arch", ARCHS)
def test_answer_logits_depend_on_the_question(arch):
    model, batch = tiny_model(arch), sample_batch()
    questions = batch.questions.clone()
    questions[:, 2] = (questions[:, 2] + 1) % 10
    other = model.answer_logits(Batch(questions, batch.question_mask, batch.answers, batch.answer_mask))
    assert not torch.allclose(other[:, 0], model.answer_logits(batch)[:, 0])


def _reference_decoder_loss(model: DecoderLM, pairs_batch: Batch) -> torch.Tensor:
    """Per-row sequences built by hand; cross entropy on the answer tokens only."""
    terms = []
    for q, a in zip(pairs_batch.questions.tolist(), pairs_batch.answers.tolist()):
        seq = torch.tensor([[USER, *q, ASSISTANT, *a]])
        logp = F.log_softmax(model(seq[:, :-1]), dim=-1)[0]
        first = len(q) + 2  # index of the answer's first token
        terms += [-logp[t - 1, seq[0, t]] for t in range(first, seq.shape[1])]
    return torch.stack(terms).mean()


def test_decoder_loss_is_answer_only_and_reaches_question_embeddings():
    model, batch = tiny_model("decoder"), sample_batch()
    loss = model.loss(batch)
    torch.testing.assert_close(loss, _reference_decoder_loss(model, batch), atol=1e-12, rtol=0)
    seq, _, is_answer = DecoderLM.pack(batch)
    assert is_answer.sum() == 6 * 5 and not is_answer[:, :11].any()  # <user> + 9 + <assistant>
    loss.backward()
    grad = model.core.tok_emb.weight.grad
    for token in (USER, ASSISTANT, ADD if (batch.questions == ADD).any() else SUBTRACT):
        assert grad[token].abs().sum() > 0  # tokens seen only in the user turn still learn
    assert grad[PAD].abs().sum() == 0


def _reference_seq2seq_loss(model: Seq2SeqLM, batch: Batch) -> torch.Tensor:
    """One row and one answer position at a time: -log p(answer[t] | question, answer[:t]), averaged."""
    terms = []
    for q, a in zip(batch.questions.tolist(), batch.answers.tolist()):
        for t in range(1, len(a)):
            logits = model.next_logits(torch.tensor([q]), torch.tensor([a[:t]]))[0]  # a fresh forward per prefix
            terms.append(torch.logsumexp(logits, 0) - logits[a[t]])
    return torch.stack(terms).mean()


def test_seq2seq_loss_is_shifted_cross_entropy_and_reaches_the_encoder():
    model, batch = tiny_model("seq2seq"), sample_batch()
    loss = model.loss(batch)
    torch.testing.assert_close(loss, _reference_seq2seq_loss(model, batch), atol=1e-12, rtol=0)
    loss.backward()
    op = ADD if (batch.questions == ADD).any() else SUBTRACT
    assert model.encoder.tok_emb.weight.grad[op].abs().sum() > 0


def _pad(batch: Batch, extra_q: int, extra_a: int, fill: int) -> Batch:
    def grow(ids, mask, extra):
        b = ids.shape[0]
        ids = torch.cat([ids, torch.full((b, extra), fill, dtype=torch.long)], dim=1)
        return ids, torch.cat([mask, torch.zeros(b, extra, dtype=torch.bool)], dim=1)

    q, qm = grow(batch.questions, batch.question_mask, extra_q)
    a, am = grow(batch.answers, batch.answer_mask, extra_a)
    return Batch(q, qm, a, am)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fill", [PAD, 7])  # PAD, or any token: the masks alone must do the work
def test_padding_changes_neither_loss_nor_outputs(arch, fill):
    model, batch = tiny_model(arch), sample_batch()
    padded = _pad(batch, 3, 2, fill)
    torch.testing.assert_close(model.loss(padded), model.loss(batch), atol=1e-12, rtol=0)
    torch.testing.assert_close(model.answer_logits(padded)[:, :4], model.answer_logits(batch), atol=1e-12, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_of_different_lengths_match_their_unpadded_selves(arch):
    model = tiny_model(arch)
    long_q = [14, 10, 1, 2, 12, 10, 0, 3, 15]
    short_q = [14, 10, 4, 12, 10, 5, 15]  # not a valid question, but the model handles any lengths
    batch = make_batch([long_q, short_q], [[14, 10, 1, 5, 15], [14, 10, 9, 15]])
    both = model.answer_logits(batch)
    alone = model.answer_logits(make_batch([short_q], [[14, 10, 9, 15]]))
    torch.testing.assert_close(both[1:, :3], alone, atol=1e-12, rtol=0)
    rows = ([long_q, [14, 10, 1, 5, 15]], [short_q, [14, 10, 9, 15]])
    loss_rows = [model.loss(make_batch([q], [a])) for q, a in rows]
    n = (5, 4) if arch == "decoder" else (4, 3)  # the decoder also predicts the answer's BOS
    weighted = (loss_rows[0] * n[0] + loss_rows[1] * n[1]) / sum(n)
    torch.testing.assert_close(model.loss(batch), weighted, atol=1e-12, rtol=0)


def test_build_model_picks_the_architecture():
    assert isinstance(build_model(ModelConfig(arch="decoder")), DecoderLM)
    s2s = build_model(ModelConfig(arch="seq2seq"))
    assert isinstance(s2s, Seq2SeqLM)
    assert not s2s.encoder.cfg.causal and s2s.decoder.cfg.causal and s2s.decoder.cfg.cross_attention
