"""The shared core: causality, KV cache vs full forward, padding, cache branching."""
import torch

from nnqs.nn import CoreConfig, TransformerCore


def make_core(**kw) -> TransformerCore:
    torch.manual_seed(0)
    cfg = CoreConfig(vocab_size=7, max_len=12, d_model=32, n_layers=2, n_heads=4, **kw)
    return TransformerCore(cfg).double().eval()


def test_cached_forward_equals_full_forward():
    core = make_core()
    tokens = torch.randint(0, 7, (5, 10))
    full = core(tokens)
    cache = core.new_cache()
    steps = [core(tokens[:, :3], cache=cache)]  # a multi-token prefill, then one token at a time
    steps += [core(tokens[:, i : i + 1], cache=cache) for i in range(3, 10)]
    assert len(cache) == 10
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)


def test_causal_output_ignores_later_tokens():
    core = make_core()
    a = torch.randint(0, 7, (3, 10))
    b = a.clone()
    b[:, 6:] = (b[:, 6:] + 1) % 7
    torch.testing.assert_close(core(a)[:, :6], core(b)[:, :6], atol=1e-12, rtol=0)
    assert not torch.allclose(core(a)[:, 6:], core(b)[:, 6:])


def test_bidirectional_core_sees_later_tokens():
    core = make_core(causal=False)
    a = torch.randint(0, 7, (3, 10))
    b = a.clone()
    b[:, -1] = (b[:, -1] + 1) % 7
    assert not torch.allclose(core(a)[:, 0], core(b)[:, 0])


def test_right_padding_does_not_change_real_positions():
    core = make_core()
    tokens = torch.randint(0, 7, (2, 6))
    padded = torch.cat([tokens, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 6, dtype=torch.bool), torch.zeros(2, 4, dtype=torch.bool)], dim=1)
    out = core(padded, key_padding_mask=mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[:, :6], core(tokens), atol=1e-12, rtol=0)


def test_cache_select_branches_rows():
    core = make_core()
    tokens = torch.randint(0, 7, (3, 8))
    cache = core.new_cache()
    core(tokens[:, :4], cache=cache)
    index = torch.tensor([2, 0, 0, 1])
    branched = cache.select(index)
    assert branched.batch_size == 4 and len(branched) == 4
    out = core(tokens[index, 4:5], cache=branched)
    torch.testing.assert_close(out[:, 0], core(tokens[index, :5])[:, 4], atol=1e-10, rtol=0)


def test_cross_attention_uses_memory():
    core = make_core(cross_attention=True)
    tokens = torch.randint(0, 7, (2, 5))
    mem = torch.randn(2, 3, 32, dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    out = core(tokens, memory=mem, memory_mask=mask)
    mem2 = mem.clone()
    mem2[0, 2] += 1.0  # a masked memory slot: no effect on row 0
    torch.testing.assert_close(core(tokens, memory=mem2, memory_mask=mask)[0], out[0], atol=1e-12, rtol=0)
    mem2[0, 0] += 1.0
    assert not torch.allclose(core(tokens, memory=mem2, memory_mask=mask)[0], out[0])
