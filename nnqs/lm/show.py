"""``nnqs lm show``: what a trained LM attends to, and how sure it is of each answer token.

:func:`record_attention` hooks every attention module of a model and recomputes, from the
inputs it received, the weights ``softmax(q k^T / sqrt(D))`` under the module's own mask
(:func:`nnqs.nn.attention.build_mask`): ``(B, H, T, S)``, rows summing to 1, exactly 0 on
masked keys (padding, the future of a causal query). :func:`explain` answers one question
greedily and returns the maps of that answer's forward pass (decoder-only: the whole
sequence; encoder-decoder: encoder self-attention, decoder self-attention, and the
decoder's cross-attention over the question; encoder-only: the first pass, answer slots
[MASK]) and the top-3 probabilities of each answer token as it was chosen.
"""
from __future__ import annotations

import io
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from nnqs.common.atomic import atomic_write_bytes
from nnqs.common.errors import UserError
from nnqs.lm.tokenizer import ANSWER_LEN, ASSISTANT, BOS, EOS, MASK, MASK_TOKEN, USER, VOCAB, encode, encode_question
from nnqs.nn.attention import CrossAttention, SelfAttention, build_mask


@dataclass
class AttentionMap:
    """Weights ``(H, T, S)`` of one attention layer for one sequence, with its axis labels."""

    title: str
    weights: torch.Tensor
    rows: list[str]
    cols: list[str]


@dataclass
class Explanation:
    question: list[int]
    answer: list[int]
    steps: list[tuple[str, list[tuple[str, float]]]]  # (what was chosen where, top-3 (token, probability))
    maps: list[AttentionMap]


def _heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, c = x.shape
    return x.view(b, t, n_heads, c // n_heads).transpose(1, 2)


def attention_weights(module: torch.nn.Module, args: tuple) -> torch.Tensor:
    """The weights ``(B, H, T, S)`` an attention module used for call arguments ``args`` (no cache)."""
    if isinstance(module, SelfAttention):
        x, causal, key_mask = args[0], args[1], args[2] if len(args) > 2 else None
        q, k, _ = (_heads(z, module.n_heads) for z in module.qkv(x).chunk(3, dim=-1))
        mask = build_mask(q.shape[2], k.shape[2], causal, key_mask, x.device)
    else:
        x, memory, memory_mask = args[0], args[1], args[2] if len(args) > 2 else None
        q = _heads(module.q(x), module.n_heads)
        k, _ = (_heads(z, module.n_heads) for z in module.kv(memory).chunk(2, dim=-1))
        mask = None if memory_mask is None else memory_mask.view(memory_mask.shape[0], 1, 1, -1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


@contextmanager
def record_attention(model: torch.nn.Module) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Collect ``(module name, weights (B, H, T, S))`` for every attention call inside the block."""
    found: list[tuple[str, torch.Tensor]] = []
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, (SelfAttention, CrossAttention)):
            hook = (lambda n: lambda mod, args: found.append((n, attention_weights(mod, args).detach())))(name)
            handles.append(module.register_forward_pre_hook(hook))
    try:
        yield found
    finally:
        for h in handles:
            h.remove()


def labels(ids: list[int]) -> list[str]:
    """One label per token id (``[MASK]`` included)."""
    return [MASK_TOKEN if i == MASK else VOCAB[i] for i in ids]


def _title(name: str) -> str:
    """``decoder.blocks.1.cross`` -> ``decoder layer 1 cross-attention``."""
    parts = name.split(".")
    core = {"core": "self", "encoder": "encoder self", "decoder": "decoder self"}[parts[0]]
    kind = "cross-attention" if parts[-1] == "cross" else "attention"
    core = "decoder" if kind == "cross-attention" else core
    return f"{core} {kind}, layer {parts[2]}"


def check_question(text: str, model: torch.nn.Module) -> list[int]:
    """Token ids of ``text``: it must fit the model's context, then have the question's form."""
    ids = encode(text)
    arch, max_len = model.cfg.arch, model.cfg.max_len
    need = {"decoder": len(ids) + ANSWER_LEN + 1, "seq2seq": len(ids), "encoder": len(ids) + ANSWER_LEN}[arch]
    if need > max_len:
        raise UserError(f"question of {len(ids)} tokens does not fit the model's context: the {arch} model "
                        f"needs {need} positions, it has {max_len}")
    return encode_question(text)


def _top3(logits: torch.Tensor) -> list[tuple[str, float]]:
    probs = torch.softmax(logits.float(), dim=-1)
    values, ids = probs.topk(3)
    return [(VOCAB[int(i)], float(v)) for v, i in zip(values, ids)]


def _autoregressive(model: torch.nn.Module, q: list[int]) -> tuple[list[int], list]:
    """Greedy answer (no cache) and the top-3 at each step."""
    answer, steps = [BOS], []
    while len(answer) < ANSWER_LEN and answer[-1] != EOS:
        logits = model.next_logits(torch.tensor([q]), torch.tensor([answer]))[0]
        steps.append((f"token {len(answer)}", _top3(logits)))
        answer.append(int(logits.argmax()))
    return answer, steps


def _fill(model: torch.nn.Module, q: list[int], order: str) -> tuple[list[int], list, list[int]]:
    """Encoder-only: the slots filled in ``order``, the top-3 of each slot as it was filled, the first input."""
    seq = q + [BOS] + [MASK] * (ANSWER_LEN - 1)
    first, open_slots, steps = list(seq), list(range(len(q) + 1, len(seq))), []
    for n_pass in range(1, ANSWER_LEN):
        logits = model(torch.tensor([seq]))[0]
        if order == "parallel":
            chosen = list(open_slots)
        else:
            chosen = [max(open_slots, key=lambda t: float(torch.softmax(logits[t].float(), dim=-1).max()))]
        for t in chosen:
            steps.append((f"slot {t - len(q)} (pass {n_pass})", _top3(logits[t])))
            seq[t] = int(logits[t].argmax())
            open_slots.remove(t)
        if not open_slots:
            break
    answer = seq[len(q):]
    return (answer[: answer.index(EOS) + 1] if EOS in answer else answer), steps, first


@torch.no_grad()
def explain(model: torch.nn.Module, q: list[int], fill: str | None = None) -> Explanation:
    """Answer question ids ``q`` greedily; the top-3 of every choice and the attention maps (see module doc)."""
    from nnqs.lm.encoder_lm import DEFAULT_FILL

    arch, ql = model.cfg.arch, labels(q)
    if arch == "encoder":
        answer, steps, seq = _fill(model, q, fill or DEFAULT_FILL)
        with record_attention(model) as found:
            model(torch.tensor([seq]))
        maps = [AttentionMap(_title(n), w[0], labels(seq), labels(seq)) for n, w in found]
    elif arch == "decoder":
        answer, steps = _autoregressive(model, q)
        seq = [USER, *q, ASSISTANT, *answer]
        with record_attention(model) as found:
            model(torch.tensor([seq]))
        maps = [AttentionMap(_title(n), w[0], labels(seq), labels(seq)) for n, w in found]
    else:
        answer, steps = _autoregressive(model, q)
        al = labels(answer)
        with record_attention(model) as found:
            model.decode(torch.tensor([answer]), model.encode(torch.tensor([q])))
        maps = [AttentionMap(_title(n), w[0], ql if n.startswith("encoder") else al,
                             al if n.startswith("decoder") and not n.endswith("cross") else ql) for n, w in found]
    return Explanation(q, answer, steps, maps)


def plot_attention(path: str | Path, maps: list[AttentionMap], title: str) -> None:
    """Every map (one row each) and head (one column each) as heatmaps with token labels, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_heads = maps[0].weights.shape[0]
    fig, axes = plt.subplots(len(maps), n_heads, figsize=(2.7 * n_heads, 2.9 * len(maps)), squeeze=False)
    for row, amap in enumerate(maps):
        for head in range(n_heads):
            ax = axes[row][head]
            ax.imshow(amap.weights[head].numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_xticks(range(len(amap.cols)), amap.cols, rotation=90, fontsize=5)
            ax.set_yticks(range(len(amap.rows)), amap.rows, fontsize=5)
            ax.set_title(f"{amap.title}, head {head}", fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, lambda fh: fh.write(buf.getvalue()))
