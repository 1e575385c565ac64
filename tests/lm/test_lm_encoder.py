"""The encoder-only masked LM: BERT's masking rule, masked-only loss, padding, answering."""
import pytest
import torch
import torch.nn.functional as F

from nnqs.lm.data import Batch, encode_pairs, generate_pairs, make_batch, save_pairs
from nnqs.lm.encoder_lm import EncoderLM
from nnqs.lm.evaluate import evaluate
from nnqs.lm.masking import mask_tokens
from nnqs.lm.models import ModelConfig
from nnqs.lm.build import build_model
from nnqs.lm.tokenizer import BOS, EOS, MASK, PAD, VOCAB_SIZE
from nnqs.lm.train import TrainConfig, train


def tiny_encoder(seed: int = 0) -> EncoderLM:
    torch.manual_seed(seed)
    return build_model(ModelConfig(arch="encoder", d_model=32, n_layers=2, n_heads=4)).double().eval()


def test_build_model_gives_a_bidirectional_encoder():
    model = tiny_encoder()
    assert isinstance(model, EncoderLM) and not model.core.cfg.causal and not model.core.cfg.cross_attention


def test_masking_rule_statistics_on_a_big_batch():
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 16, (40000, 14), generator=gen)
    real = torch.rand(40000, 14, generator=gen) < 0.8
    tokens[~real] = PAD
    inputs, chosen = mask_tokens(tokens, real, gen)
    n_real, n = int(real.sum()), int(chosen.sum())
    assert not bool((chosen & ~real).any()) and torch.equal(inputs[~real], tokens[~real])  # PAD never touched
    assert n / n_real == pytest.approx(0.15, abs=0.003)  # ~448,000 real tokens: sd of the rate ~0.0005
    masked = inputs[chosen] == MASK
    kept = (inputs[chosen] == tokens[chosen]) & ~masked
    replaced = ~masked & ~kept
    # a random replacement equals the original with probability 1/18: it then counts as "kept"
    assert float(masked.float().mean()) == pytest.approx(0.8, abs=0.01)  # ~67,000 chosen: sd ~0.0015
    assert float(kept.float().mean()) == pytest.approx(0.1 + 0.1 / 18, abs=0.01)
    assert float(replaced.float().mean()) == pytest.approx(0.1 * 17 / 18, abs=0.01)
    assert bool((inputs[chosen][replaced] < PAD).all())  # random ids are vocabulary tokens, never PAD/[MASK]
    assert torch.equal(inputs[~chosen], tokens[~chosen])  # unchosen tokens pass through


def _reference_mlm_loss(model: EncoderLM, batch: Batch, gen_seed: int) -> torch.Tensor:
    """By hand, row by row: the same corruption re-drawn, cross entropy on the chosen positions only."""
    seq, real, _ = EncoderLM.pack(batch)
    inputs, chosen = mask_tokens(seq, real, torch.Generator().manual_seed(gen_seed))
    terms = []
    for row in range(len(seq)):
        n = int(real[row].sum())
        expected = batch.questions[row][batch.question_mask[row]].tolist() + \
            batch.answers[row][batch.answer_mask[row]].tolist()
        assert seq[row, :n].tolist() == expected  # the packed sequence is "question answer"
        logp = F.log_softmax(model(inputs[row:row + 1, :n])[0], dim=-1)  # the row alone, unpadded
        terms += [-logp[t, seq[row, t]] for t in range(n) if chosen[row, t]]
    return torch.stack(terms).mean()


def test_loss_falls_on_the_masked_positions_only():
    model = tiny_encoder()
    batch = make_batch([[BOS, 10, 1, 2, 12, 10, 3, 4, EOS], [BOS, 11, 5, 12, 10, 6, EOS]],
                       [[BOS, 10, 4, 6, EOS], [BOS, 10, 1, EOS]])  # rows of different lengths: padding
    loss = model.loss(batch, torch.Generator().manual_seed(3))
    torch.testing.assert_close(loss, _reference_mlm_loss(model, batch, 3), atol=1e-12, rtol=0)
    # the targets at unchosen positions do not matter: change every unchosen answer token
    seq, real, a_pos = EncoderLM.pack(batch)
    _, chosen = mask_tokens(seq, real, torch.Generator().manual_seed(3))
    answers = batch.answers.clone()
    for row in range(len(answers)):
        for j in range(answers.shape[1]):
            if batch.answer_mask[row, j] and not chosen[row, a_pos[row, j]]:
                answers[row, j] = (answers[row, j] + 1) % 10
    other = Batch(batch.questions, batch.question_mask, answers, batch.answer_mask)
    assert torch.isfinite(model.loss(other, torch.Generator().manual_seed(3)))


@pytest.mark.parametrize("fill", [0, 7, MASK])
def test_attention_ignores_padding(fill):
    model = tiny_encoder()
    seq = torch.tensor([[BOS, 10, 1, 2, 12, 10, 3, 4, EOS, BOS, MASK, MASK, PAD, PAD],
                        [BOS, 11, 5, 5, 13, 10, 0, 6, EOS, BOS, MASK, MASK, MASK, MASK]])
    real = seq != PAD
    base = model(seq, real)
    changed = seq.masked_fill(~real, fill)
    torch.testing.assert_close(model(changed, real)[real], base[real], atol=1e-12, rtol=0)
    torch.testing.assert_close(model(seq[:1, :12])[0], base[0, :12], atol=1e-12, rtol=0)  # = the row unpadded


def test_padding_changes_neither_loss_nor_answer_logits():
    model, batch = tiny_encoder(), encode_pairs(generate_pairs(6, 1))
    wide = Batch(*(F.pad(t, (0, 3), value=v) for t, v in zip(
        (batch.questions, batch.question_mask, batch.answers, batch.answer_mask), (PAD, False, PAD, False))))
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    torch.testing.assert_close(model.loss(wide, gen()), model.loss(batch, gen()), atol=1e-12, rtol=0)
    torch.testing.assert_close(model.answer_logits(wide)[:, :4], model.answer_logits(batch), atol=1e-12, rtol=0)


def test_answer_logits_read_the_question_not_the_answer():
    model, batch = tiny_encoder(), encode_pairs(generate_pairs(6, 1))
    base = model.answer_logits(batch)
    assert base.shape == (6, 4, VOCAB_SIZE)
    answers = batch.answers.clone()
    answers[:, 1:] = (answers[:, 1:] + 3) % 10  # every answer slot after BOS is masked: no leak
    other = model.answer_logits(Batch(batch.questions, batch.question_mask, answers, batch.answer_mask))
    torch.testing.assert_close(other, base, atol=1e-12, rtol=0)
    questions = batch.questions.clone()
    questions[:, 2] = (questions[:, 2] + 1) % 10
    assert not torch.allclose(model.answer_logits(Batch(questions, batch.question_mask, batch.answers,
                                                        batch.answer_mask)), base)


def _fill_by_hand(model: EncoderLM, question: list[int], order: str) -> list[int]:
    """One question, plain Python: the answer slots filled in ``order``."""
    seq = question + [BOS] + [MASK] * 4
    open_slots = list(range(len(question) + 1, len(seq)))
    while open_slots:
        logits = model(torch.tensor([seq]))[0]
        if order == "parallel":
            for t in open_slots:
                seq[t] = int(logits[t].argmax())
            break
        best = max(open_slots, key=lambda t: float(torch.softmax(logits[t], -1).max()))
        seq[best] = int(logits[best].argmax())
        open_slots.remove(best)
    answer = seq[len(question):]
    return answer[: answer.index(EOS) + 1] + [PAD] * (4 - answer.index(EOS)) if EOS in answer else answer


@pytest.mark.parametrize("order", ["parallel", "iterative"])
def test_fill_matches_a_plain_loop(order):
    model = tiny_encoder(2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
        model.head.bias[EOS] += 1.0  # some EOS in the middle, so the PAD tail is exercised
    questions = encode_pairs(generate_pairs(12, 4)).questions
    with torch.no_grad():
        got = model.fill(questions, 4, order)
        want = [_fill_by_hand(model, q, order) for q in questions.tolist()]
    assert got.tolist() == want


@pytest.mark.parametrize("order", ["parallel", "iterative"])
def test_tiny_set_is_overfitted_to_exact_match_one(order, tmp_path):
    pairs = generate_pairs(6, 42)
    save_pairs(tmp_path / "tiny.json", pairs)
    cfg = TrainConfig(arch="encoder", data=str(tmp_path / "tiny.json"), val_size=8, steps=400, batch_size=6,
                      lr=3e-3, warmup_steps=10, weight_decay=0.0, d_model=32, n_layers=2, eval_every=100,
                      target_exact=0.0)
    run = train(cfg)
    metrics = evaluate(run.model, encode_pairs(pairs), fill=order)
    assert metrics.exact_match == 1.0 and metrics.token_accuracy == 1.0


def test_answering_rows_keep_the_question_and_mask_the_whole_answer():
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 16, (20000, 14), generator=gen)
    real = torch.ones(20000, 14, dtype=torch.bool)
    span = torch.zeros(20000, 14, dtype=torch.bool)
    span[:, 10:] = True  # the answer slots after BOS
    inputs, chosen = mask_tokens(tokens, real, gen, span=span, span_prob=0.3)
    answering = (inputs[:, 10:] == MASK).all(dim=1) & ~chosen[:, :10].any(dim=1)
    # a BERT row looks like this with probability 0.12**4 * 0.85**10 (about 4e-5): negligible
    assert float(answering.float().mean()) == pytest.approx(0.3, abs=0.015)  # sd ~0.003
    assert bool(chosen[answering][:, 10:].all())  # the loss covers every masked answer slot ...
    assert torch.equal(inputs[answering][:, :10], tokens[answering][:, :10])  # ... of an intact question
    bert = ~answering
    assert float(chosen[bert].float().mean()) == pytest.approx(0.15, abs=0.005)  # the others: BERT's 15%
    assert torch.equal(inputs[bert][~chosen[bert]], tokens[bert][~chosen[bert]])
    _, plain_chosen = mask_tokens(tokens, real, torch.Generator().manual_seed(5), span=span)
    assert float(plain_chosen.float().mean()) == pytest.approx(0.15, abs=0.005)  # span_prob 0: BERT alone
