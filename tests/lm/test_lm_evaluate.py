"""evaluate() against its plain-Python twin and against hand-made predictions with known scores."""
import pytest
import torch
from torch import nn

from nnqs.lm.data import Pairs, encode_pairs, generate_pairs
from nnqs.lm.evaluate import evaluate, evaluate_reference
from nnqs.lm.models import ModelConfig
from nnqs.lm.build import build_model
from nnqs.lm.tokenizer import EOS, NEGATIVE, POSITIVE, VOCAB_SIZE, encode, encode_question


@pytest.mark.parametrize("arch", ["decoder", "seq2seq", "encoder"])
def test_evaluate_equals_the_slow_twin_on_an_untrained_model(arch):
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, d_model=16, n_layers=1, n_heads=2)).double()
    with torch.no_grad():  # spread the weights and favour answer-like tokens, so the argmax varies
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
        model.head.bias[:10] += 2.0
        model.head.bias[[POSITIVE, NEGATIVE, EOS]] += 3.0
    model.train()  # evaluate must switch to eval and back
    pairs = generate_pairs(40, seed=5)
    fast = evaluate(model, encode_pairs(pairs), chunk=16)
    assert model.training
    slow = evaluate_reference(model, pairs)
    assert fast == slow and fast.n_pairs == 40
    if arch == "encoder":  # both answering orders
        for fill in ("parallel", "iterative"):
            assert evaluate(model, encode_pairs(pairs), fill=fill) == evaluate_reference(model, pairs, fill)
    assert 0 < fast.token_accuracy < 1  # a mix of right and wrong tokens, so the count is exercised


class ScriptedLM(nn.Module):
    """Answers each question with a scripted token list, whatever it is fed (teacher forced or not)."""

    def __init__(self, script: dict[str, str]) -> None:
        super().__init__()
        self.script = {tuple(encode_question(q)): encode(a) + [EOS] * 5 for q, a in script.items()}
        self.weight = nn.Parameter(torch.zeros(1))

    def _logits(self, questions: torch.Tensor, position: int) -> torch.Tensor:
        out = torch.full((len(questions), VOCAB_SIZE), -5.0)
        for row, q in enumerate(questions.tolist()):
            out[row, self.script[tuple(q)][position]] = 5.0
        return out

    def answer_logits(self, batch):
        width = batch.answers.shape[1] - 1
        return torch.stack([self._logits(batch.questions, j + 1) for j in range(width)], dim=1)

    def start(self, questions):
        return {"questions": questions, "position": 1}, self._logits(questions, 1)

    def extend(self, state, tokens):
        state["position"] += 1
        return self._logits(state["questions"], state["position"])

    def next_logits(self, questions, answer_prefix):
        return self._logits(questions, answer_prefix.shape[1])


HAND_MADE = [  # question, reference, prediction, (exact?, right tokens of 4)
    ("BOS POSITIVE 05 add POSITIVE 07 EOS", "BOS POSITIVE 12 EOS", "BOS POSITIVE 12 EOS"),  # exact, 4/4
    ("BOS NEGATIVE 02 subtract POSITIVE 03 EOS", "BOS NEGATIVE 05 EOS", "BOS POSITIVE 05 EOS"),  # 3/4
    ("BOS POSITIVE 40 add NEGATIVE 10 EOS", "BOS POSITIVE 30 EOS", "BOS POSITIVE 31 EOS"),  # 3/4
    ("BOS NEGATIVE 49 add NEGATIVE 49 EOS", "BOS NEGATIVE 98 EOS", "BOS NEGATIVE EOS 8 EOS"),  # stops early; 3/4
    ("BOS POSITIVE 00 subtract POSITIVE 00 EOS", "BOS POSITIVE 00 EOS", "BOS POSITIVE 00 EOS"),  # exact, 4/4
    ("BOS POSITIVE 01 add POSITIVE 01 EOS", "BOS POSITIVE 02 EOS", "BOS NEGATIVE 13 add POSITIVE"),  # 0/4, no EOS
]


@pytest.mark.parametrize("chunk", [1, 4, 100])
def test_hand_made_predictions_have_the_scores_counted_by_hand(chunk):
    model = ScriptedLM({q: p for q, _, p in HAND_MADE})
    pairs = Pairs([q for q, _, _ in HAND_MADE], [a for _, a, _ in HAND_MADE])
    fast = evaluate(model, encode_pairs(pairs), chunk=chunk)
    assert fast.exact_match == pytest.approx(2 / 6) and fast.token_accuracy == pytest.approx(17 / 24)
    assert evaluate_reference(model, pairs) == fast
