"""Generation: the KV-cached loop equals the re-run-everything loop; sampling filters; EOS stop."""
import pytest
import torch

from nnqs.common.errors import UserError
from nnqs.lm.data import encode_pairs, generate_pairs
from nnqs.lm.generate import GREEDY, GREEDY_BELOW, Sampling, answer_to_text, filtered_probs, generate, pick_next
from nnqs.lm.models import ModelConfig
from nnqs.lm.build import build_model
from nnqs.lm.tokenizer import BOS, EOS, PAD, VOCAB_SIZE


def tiny_model(arch: str):
    torch.manual_seed(0)
    return build_model(ModelConfig(arch=arch, d_model=32, n_layers=2, n_heads=4)).double().eval()


SAMPLINGS = [GREEDY, Sampling(1.0), Sampling(0.7, top_k=5), Sampling(1.3, top_p=0.8), Sampling(1.0, 4, 0.9)]


@pytest.mark.parametrize("arch", ["decoder", "seq2seq"])
@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_cached_generation_equals_no_cache_generation(arch, sampling):
    model = tiny_model(arch)
    questions = encode_pairs(generate_pairs(16, 5)).questions
    outs = []
    for use_cache in (True, False):
        gen = torch.Generator().manual_seed(11)
        outs.append(generate(model, questions, sampling, gen, max_new_tokens=8, use_cache=use_cache))
    assert outs[0].shape[1] > 2  # it really generated
    assert torch.equal(outs[0], outs[1])
    assert (outs[0][:, 0] == BOS).all()


def test_seeded_sampling_is_reproducible_and_seed_dependent():
    model, questions = tiny_model("decoder"), encode_pairs(generate_pairs(32, 5)).questions

    def run(seed):
        return generate(model, questions, Sampling(1.0), torch.Generator().manual_seed(seed), max_new_tokens=6)

    assert torch.equal(run(1), run(1)) and not torch.equal(run(1), run(2))


class StubModel:
    """Logits that pick token ``script[row][step]`` (no network), to test the loop itself."""

    def __init__(self, script):
        self.script, self.step = torch.tensor(script), 0

    def _logits(self):
        out = torch.full((self.script.shape[0], VOCAB_SIZE), -10.0)
        out[torch.arange(self.script.shape[0]), self.script[:, self.step]] = 10.0
        self.step += 1
        return out

    def start(self, questions):
        return None, self._logits()

    def extend(self, state, tokens):
        return self._logits()


def test_rows_stop_at_eos_and_the_loop_ends_when_all_stopped():
    stub = StubModel([[10, 1, EOS, 3, 3, 3], [11, EOS, 5, 5, 5, 5]])
    out = generate(stub, torch.zeros(2, 9, dtype=torch.long), max_new_tokens=6)
    assert out.tolist() == [[BOS, 10, 1, EOS], [BOS, 11, EOS, PAD]]
    assert answer_to_text(out[1]) == "BOS NEGATIVE EOS"
    assert answer_to_text(torch.tensor([BOS, 10, 0, 4, EOS])) == "BOS POSITIVE 04 EOS"


def test_top_k_and_top_p_filters():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert (filtered_probs(logits, Sampling(1.0, top_k=2)) > 0).tolist() == [[True, True, False, False]]
    assert (filtered_probs(logits, Sampling(1.0, top_p=0.7)) > 0).tolist() == [[True, True, False, False]]
    assert (filtered_probs(logits, Sampling(1.0, top_p=0.4)) > 0).tolist() == [[True, False, False, False]]
    torch.testing.assert_close(filtered_probs(logits, Sampling(1.0)), logits.exp())


def test_sampling_frequencies_follow_the_distribution():
    probs = torch.tensor([0.1, 0.6, 0.3])
    logits = probs.log().expand(20000, 3)
    picks = pick_next(logits, Sampling(1.0), torch.Generator().manual_seed(0))
    freq = torch.bincount(picks, minlength=3) / 20000.0
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)


@pytest.mark.parametrize(
    "kw", [dict(temperature=-1.0), dict(temperature=float("nan")), dict(temperature=1.0, top_k=0), dict(top_p=1.5)]
)
def test_bad_sampling_settings_are_user_errors(kw):
    with pytest.raises(UserError):
        Sampling(**kw)


def argmax_loop(model, questions: torch.Tensor, max_new_tokens: int) -> list[list[int]]:
    """Oracle: greedy decoding one question at a time, re-running the whole prefix, stopping at EOS."""
    answers = []
    for q in questions:
        answer = [BOS]
        while len(answer) <= max_new_tokens and answer[-1] != EOS:
            logits = model.next_logits(q.unsqueeze(0), torch.tensor([answer]))
            answer.append(int(logits[0].argmax()))
        answers.append(answer)
    return answers


@pytest.mark.parametrize("arch", ["decoder", "seq2seq"])
@pytest.mark.parametrize(
    "sampling",
    [GREEDY, Sampling(1e-40), Sampling(0.5 * GREEDY_BELOW, top_k=3), Sampling(1.0, top_p=1e-300), Sampling(2.0, top_k=1)],
)
def test_degenerate_knobs_decode_greedily(arch, sampling):
    """A temperature under the floor is greedy; a vanishing top-p (or top-k 1) keeps just the top token."""
    model = tiny_model(arch)
    questions = encode_pairs(generate_pairs(12, 8)).questions
    out = generate(model, questions, sampling, torch.Generator().manual_seed(0), max_new_tokens=6)
    expected = argmax_loop(model, questions, 6)
    width = max(map(len, expected))
    assert out.tolist() == [row + [PAD] * (width - len(row)) for row in expected]  # PAD after a row's EOS


def test_tiny_temperature_and_top_p_give_finite_one_hot_probabilities():
    logits = torch.tensor([[2.0, 7.5, -3.0, 7.0], [0.0, 0.0, 0.0, 1e-3]])
    one_hot = torch.nn.functional.one_hot(logits.argmax(-1), 4).float()
    for sampling in (Sampling(1.0, top_p=1e-300), Sampling(1e-30, top_p=1e-300)):
        assert torch.equal(filtered_probs(logits, sampling), one_hot)
    for t in (1e-30, 1e-40, GREEDY_BELOW):  # floored at GREEDY_BELOW: a gap of 1e-3 keeps e^-10
        probs = filtered_probs(logits, Sampling(t))
        assert torch.isfinite(probs).all() and torch.equal(probs[0], one_hot[0])
        torch.testing.assert_close(probs[1], torch.tensor([1.0, 1.0, 1.0, 22026.4658]) / 22029.4658)
    assert Sampling(1e-40).greedy and Sampling(0.0).greedy and not Sampling(GREEDY_BELOW).greedy
