"""The attention `generate` shows, against a step-by-step decode written out by hand.

`generate` decodes on the fused path and takes the attention from explicit
passes: a cached decoder-only model's prompt as it is read and the generated
tokens against its cached keys at the end, otherwise one pass at the end. Here a reference decodes the same sequence one token at a
time in float64, straight from the model's parameters and the formulas (layer
norm, projections, RoPE by angle, softmax(q k^T / sqrt(d)) over the keys so
far, pre-LN residuals), and keeps each step's attention row. The rows must be
the matrices `generate` returns, and the reference's greedy picks its tokens.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from tests.conftest import tiny_config
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import BOS, PAD, SEP

D = torch.float64


def _p(t: Tensor) -> Tensor:
    return t.detach().to(D)


def _norm(x: Tensor, ln: torch.nn.LayerNorm) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased var)."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + ln.eps) * _p(ln.weight) + _p(ln.bias)


def _lin(x: Tensor, lin: torch.nn.Linear) -> Tensor:
    out = x @ _p(lin.weight).T
    return out if lin.bias is None else out + _p(lin.bias)


def _rotate(x: Tensor, pos: int, base: float = 10000.0) -> Tensor:
    """RoPE by hand: pair (j, j + d/2) turned by pos * base^(-2j/d). x (H, d)."""
    half = x.size(-1) // 2
    out = x.clone()
    for j in range(half):
        theta = pos * base ** (-2 * j / x.size(-1))
        a, b = x[:, j], x[:, j + half]
        out[:, j], out[:, j + half] = a * math.cos(theta) - b * math.sin(theta), a * math.sin(theta) + b * math.cos(theta)
    return out


def _sinusoid(pos: int, d: int) -> Tensor:
    return torch.tensor(
        [math.sin(pos / 10000 ** ((j - j % 2) / d)) if j % 2 == 0 else math.cos(pos / 10000 ** ((j - j % 2) / d)) for j in range(d)],
        dtype=D,
    )


class _Attn:
    """One attention module by hand: keeps its keys/values, records one row per query."""

    def __init__(self, mha: torch.nn.Module, rope: bool) -> None:
        self.m, self.rope = mha, rope
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []
        self.rows: list[Tensor] = []  # (H, Tk) each

    def heads(self, x: Tensor) -> Tensor:
        return x.view(self.m.n_heads, self.m.d_head)  # (H, d_head)

    def add_kv(self, x: Tensor, pos: int) -> None:
        k = self.heads(_lin(x, self.m.w_k))
        self.keys.append(_rotate(k, pos) if self.rope else k)
        self.values.append(self.heads(_lin(x, self.m.w_v)))

    def query(self, x: Tensor, pos: int) -> Tensor:
        q = self.heads(_lin(x, self.m.w_q))
        q = _rotate(q, pos) if self.rope else q
        k, v = torch.stack(self.keys, 1), torch.stack(self.values, 1)  # (H, Tk, d_head)
        scores = (k @ q[:, :, None])[:, :, 0] / math.sqrt(self.m.d_head)  # (H, Tk)
        w = torch.exp(scores - scores.max(-1, keepdim=True).values)
        w = w / w.sum(-1, keepdim=True)
        self.rows.append(w)
        return _lin((w[:, None, :] @ v)[:, 0, :].reshape(-1), self.m.w_o)

    def matrix(self) -> Tensor:
        width = max(r.size(-1) for r in self.rows)
        rows = [torch.nn.functional.pad(r, (0, width - r.size(-1))) for r in self.rows]
        return torch.stack(rows, 1)  # (H, Tq, Tk), causal rows padded with zeros


def _ff(x: Tensor, ff: torch.nn.Module) -> Tensor:
    return _lin(torch.relu(_lin(x, ff.lin1)), ff.lin2)


def _embed(model: torch.nn.Module, weight: Tensor, tok: int, pos: int) -> Tensor:
    x = _p(weight[tok]) * math.sqrt(model.config.d_model)
    return x + _sinusoid(pos, model.config.d_model) if model.config.positional == "sinusoidal" else x


def _reference(model: torch.nn.Module, src: list[int], fed: list[int]) -> tuple[dict[str, Tensor], list[int]]:
    """Attention matrices and greedy picks of a one-token-at-a-time decode of ``fed``."""
    rope = model.config.positional == "rope"
    attn: dict[str, _Attn] = {}
    memory = None
    if hasattr(model, "encode"):
        enc = model.encoder.layers
        for i, layer in enumerate(enc):
            attn[f"encoder.{i}.self"] = _Attn(layer.self_attn, rope)
        xs = [_embed(model, model.src_embed.weight, t, p) for p, t in enumerate(src)]
        for i, layer in enumerate(enc):
            a = attn[f"encoder.{i}.self"]
            hs = [_norm(x, layer.norm1) for x in xs]
            for p, h in enumerate(hs):
                a.add_kv(h, p)
            xs = [x + a.query(h, p) for p, (x, h) in enumerate(zip(xs, hs, strict=True))]
            xs = [x + _ff(_norm(x, layer.norm2), layer.ff) for x in xs]
        memory = [_norm(x, model.encoder.norm) for x in xs]
    layers = model.decoder.layers
    for i, layer in enumerate(layers):
        attn[f"decoder.{i}.self"] = _Attn(layer.self_attn, rope)
        if memory is not None:
            cross = attn[f"decoder.{i}.cross"] = _Attn(layer.cross_attn, False)
            for p, m in enumerate(memory):
                cross.add_kv(m, p)
    picks = []
    for pos, tok in enumerate(fed):
        x = _embed(model, model.tgt_embed.weight, tok, pos)
        for i, layer in enumerate(layers):
            a = attn[f"decoder.{i}.self"]
            h = _norm(x, layer.norm1)
            a.add_kv(h, pos)
            x = x + a.query(h, pos)
            if memory is not None:
                x = x + attn[f"decoder.{i}.cross"].query(_norm(x, layer.norm2), pos)
            last = layer.norm3 if memory is not None else layer.norm2
            x = x + _ff(_norm(x, last), layer.ff)
        logits = _norm(x, model.decoder.norm) @ _p(model.lm_head.weight).T
        picks.append(int(logits.argmax()))
    return {name: a.matrix() for name, a in attn.items()}, picks


@pytest.mark.parametrize(
    ("arch", "positional"),
    [("decoder-only", "rope"), ("decoder-only", "sinusoidal"), ("encoder-decoder", "sinusoidal"), ("encoder-decoder", "rope")],
)
@pytest.mark.parametrize("new_tokens", [1, 9])  # the prompt's rows alone; with the generated tokens' rows
def test_generate_attention_equals_a_step_by_step_decode_by_hand(arch: str, positional: str, new_tokens: int) -> None:
    cfg = tiny_config(model={"arch": arch, "positional": positional, "max_len": 16, "n_decoder_layers": 2})
    torch.manual_seed(0)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.3)  # a sharp random model: varied tokens and peaked rows
    result = generate(model, task, "31415", max_new_tokens=new_tokens, capture=True)
    src = task.vocab.encode("31415")
    prompt = [*src, SEP] if arch == "decoder-only" else [BOS]
    fed = [*prompt, *result.tokens[:-1]]
    want, picks = _reference(model, src, fed)
    assert picks[len(prompt) - 1 :] == result.tokens
    assert list(result.attention) == list(want)
    for name, w in want.items():
        torch.testing.assert_close(result.attention[name], w.float(), atol=2e-6, rtol=1e-5)
        assert not result.attention[name].is_inference()  # ordinary tensors for the lab to keep
