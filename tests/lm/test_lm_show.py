"""`nnqs lm show`: recomputed attention weights are the ones the model used; the PNG; bad input."""
import pytest
import torch

from nnqs.cli import main
from nnqs.common.checkpoint import save_checkpoint
from nnqs.lm.data import encode_pairs, generate_pairs
from nnqs.lm.models import DecoderLM, ModelConfig
from nnqs.lm.build import build_model
from nnqs.lm.show import explain, record_attention
from nnqs.lm.tokenizer import ANSWER_LEN, encode_question
from nnqs.nn.attention import SelfAttention

QUESTION = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"


def tiny(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(ModelConfig(arch=arch, d_model=16, n_layers=2, n_heads=2)).double().eval()


def test_recorded_weights_reproduce_the_attention_output_and_ignore_padding():
    model = tiny("decoder")
    batch = encode_pairs(generate_pairs(3, 1))
    seq, mask, _ = DecoderLM.pack(batch)
    mask[0, -4:] = False  # pretend the end of row 0 is padding
    outputs = []
    handle = model.core.blocks[1].attn.register_forward_hook(lambda mod, args, out: outputs.append((args, out)))
    with torch.no_grad(), record_attention(model) as found:
        model(seq, mask)
    handle.remove()
    weights = found[1][1]  # (B, H, T, S) of layer 1
    assert [n for n, _ in found] == ["core.blocks.0.attn", "core.blocks.1.attn"]
    (x, *_), out = outputs[0]
    attn: SelfAttention = model.core.blocks[1].attn
    v = attn.qkv(x).chunk(3, dim=-1)[2]
    v = v.view(*v.shape[:2], 2, -1).transpose(1, 2)
    again = attn.proj((weights @ v).transpose(1, 2).reshape(x.shape))
    real_rows = mask.unsqueeze(-1).expand_as(out)
    torch.testing.assert_close(again[real_rows], out[real_rows], atol=1e-10, rtol=0)
    t = seq.shape[1]
    torch.testing.assert_close(weights.sum(-1)[:, :, :t - 4], torch.ones(3, 2, t - 4, dtype=torch.double))
    assert bool((weights[0, :, :t - 4, -4:] == 0).all())  # padded keys get weight 0
    assert bool((weights.triu(1) == 0).all())  # causal: no weight on the future


@pytest.mark.parametrize("arch,n_maps", [("decoder", 2), ("seq2seq", 6), ("encoder", 2)])
def test_explain_gives_every_layer_and_head_with_rows_summing_to_one(arch, n_maps):
    model = tiny(arch)
    result = explain(model, encode_question(QUESTION))
    assert len(result.maps) == n_maps and result.question == encode_question(QUESTION)
    assert 2 <= len(result.answer) <= ANSWER_LEN and len(result.steps) >= 1
    for amap in result.maps:
        h, t, s = amap.weights.shape
        assert h == 2 and (t, s) == (len(amap.rows), len(amap.cols))
        torch.testing.assert_close(amap.weights.sum(-1), torch.ones(h, t, dtype=torch.double))
        if "cross" in amap.title:
            assert amap.cols[0] == "BOS" and len(amap.cols) == 9 and len(amap.rows) == len(result.answer)
    for _, top in result.steps:
        probs = [p for _, p in top]
        assert len(top) == 3 and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-9


def test_show_cli_writes_the_png_and_prints_the_top3(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["lm", "train", "--arch", "seq2seq", "--steps", "4", "--eval-every", "2", "--d-model", "16",
            "--n-layers", "1", "--train-size", "64", "--val-size", "16", "--batch-size", "16", "--no-progress",
            "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["lm", "show", "--ckpt", str(out), QUESTION]) == 0
    printed = capsys.readouterr().out
    assert (out / "attention.png").stat().st_size > 10_000 and str(out / "attention.png") in printed
    assert printed.startswith(f"question: {QUESTION}\n") and "token 1:" in printed
    assert main(["lm", "show", "--ckpt", str(out), QUESTION, "--out", str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").is_file()
    long = "BOS " + "POSITIVE 12 add " * 8 + "POSITIVE 12 EOS"
    assert main(["lm", "show", "--ckpt", str(out), long]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "context" in err


def test_show_on_a_vmc_checkpoint_exits_2_with_one_line(tmp_path, capsys):
    save_checkpoint(tmp_path / "checkpoint.pt", "vmc", {"model": {}, "step": 0})
    assert main(["lm", "show", "--ckpt", str(tmp_path), QUESTION]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'vmc'" in err and "Traceback" not in err
