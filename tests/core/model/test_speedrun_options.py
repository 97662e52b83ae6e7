"""The GPT-2 speedrun's options, each checked by hand on a tiny model: ReLU squared,
QK-norm (an RMSNorm of each head's q and k), zero-initialised output projections,
the logit soft-cap and the untied head; and QK-norm refused on a model from files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bench.hf_factory import TEXT, save_family
from tui_lab.core.config.lab_config import ConfigError, ModelConfig
from tui_lab.core.errors import LabError
from tui_lab.core.model.layers import FeedForward, make_attention
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.from_files import open_files
from tui_lab.core.training.finetune import finetune_config

TINY = {"arch": "decoder-only", "d_model": 8, "n_heads": 2, "n_encoder_layers": 0, "n_decoder_layers": 2,
        "d_ff": 16, "positional": "rope", "max_len": 16}


def _model(**options: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(ModelConfig(**{**TINY, **options}), 10).eval()  # type: ignore[arg-type]


def test_relu2_squares_the_relu() -> None:
    torch.manual_seed(0)
    ff = FeedForward(4, 6, activation="relu2")
    x = torch.randn(2, 3, 4)
    h = x @ ff.lin1.weight.T + ff.lin1.bias
    expected = (torch.where(h > 0, h, 0.0) * torch.where(h > 0, h, 0.0)) @ ff.lin2.weight.T + ff.lin2.bias
    torch.testing.assert_close(ff(x), expected)


def test_qk_norm_is_an_rms_norm_of_each_heads_q_and_k_before_the_scores() -> None:
    config = ModelConfig(**{**TINY, "qk_norm": "head", "positional": "sinusoidal"})  # no rotary: plain scores
    torch.manual_seed(1)
    attn = make_attention(config, None)
    assert attn.q_norm is not None and attn.k_norm is not None
    with torch.no_grad():  # gains away from one, so a missing gain would show
        attn.q_norm.weight.copy_(torch.tensor([0.5, 2.0, -1.0, 1.5]))
        attn.k_norm.weight.copy_(torch.tensor([1.5, 0.25, 1.0, -2.0]))
    x = torch.randn(1, 5, 8)
    out, _ = attn(x, x, x, is_causal=True)

    def heads(h: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        h = h.view(1, 5, 2, 4).transpose(1, 2)  # (B, H, T, d_head)
        return h / torch.sqrt((h * h).mean(-1, keepdim=True) + config.norm_eps) * gain

    lin = lambda m, h: h @ m.weight.T + m.bias  # noqa: E731
    q, k = heads(lin(attn.w_q, x), attn.q_norm.weight), heads(lin(attn.w_k, x), attn.k_norm.weight)
    v = lin(attn.w_v, x).view(1, 5, 2, 4).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(4)
    scores = scores.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf"))
    z = (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, 5, 8)
    torch.testing.assert_close(out, lin(attn.w_o, z), atol=1e-5, rtol=1e-5)


def test_zero_init_proj_makes_every_block_the_identity_at_the_start() -> None:
    model = _model(zero_init_proj=True)
    for block in model.decoder.layers:
        assert block.self_attn.w_o.weight.abs().max() == 0 and block.ff.lin2.weight.abs().max() == 0
        assert block.self_attn.w_q.weight.abs().max() > 0  # the inputs keep their init
    ids = torch.tensor([[1, 4, 2, 7]])
    x = model.tgt_embed(ids) * math.sqrt(8)  # rope: nothing added to the stream
    expected = model.lm_head(F.layer_norm(x, (8,), model.decoder.norm.weight, model.decoder.norm.bias))
    torch.testing.assert_close(model(ids), expected)
    model(ids).sum().backward()  # zero outputs still pass gradient to themselves
    assert model.decoder.layers[0].self_attn.w_o.weight.grad.abs().max() > 0
    assert _model().decoder.layers[0].ff.lin2.weight.abs().max() > 0  # off by default


def test_logit_softcap_is_cap_tanh_of_the_raw_logits() -> None:
    plain, capped = _model(), _model(logit_softcap=2.0)
    capped.load_state_dict(plain.state_dict())
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad():
        plain.lm_head.weight.mul_(5)  # logits past the cap
        capped.lm_head.weight.mul_(5)
        raw, got = plain(ids), capped(ids)
    assert raw.abs().max() > 4
    torch.testing.assert_close(got, 2.0 * torch.tanh(raw / 2.0))
    assert got.abs().max() <= 2.0


def test_an_untied_head_is_its_own_matrix() -> None:
    tied, untied = _model(), _model(tie_embeddings=False)
    assert tied.lm_head.weight is tied.tgt_embed.weight
    assert untied.lm_head.weight is not untied.tgt_embed.weight
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(untied) - n(tied) == 10 * 8  # one more (vocab, d_model) matrix
    ids = torch.tensor([[2, 5]])
    with torch.no_grad():
        before = untied(ids)
        untied.tgt_embed.weight[9].add_(1.0)  # a token not in the input: only a tied head would see it
        torch.testing.assert_close(untied(ids), before)


def test_the_options_are_off_by_default() -> None:
    c = ModelConfig()
    assert (c.activation, c.qk_norm, c.logit_softcap, c.zero_init_proj, c.tie_embeddings) == (
        "relu", "none", None, False, True)


def test_zero_init_proj_is_refused_for_encoder_only() -> None:
    with pytest.raises(ConfigError, match="model.zero_init_proj"):
        ModelConfig(arch="encoder-only", zero_init_proj=True)


def test_qk_norm_is_refused_on_a_model_from_files_that_has_none(tmp_path: Path) -> None:
    save_family(tmp_path / "gpt2", "gpt2")
    (tmp_path / "t.txt").write_text(TEXT)
    loaded = open_files(str(tmp_path / "gpt2"))
    with pytest.raises(LabError) as err:
        finetune_config(loaded, str(tmp_path / "t.txt"), overrides={"model.qk_norm": "head"})
    assert "\n" not in str(err.value) and "q/k norms" in str(err.value)
    with pytest.raises(LabError, match="model.activation"):
        finetune_config(loaded, str(tmp_path / "t.txt"), overrides={"model.activation": "relu2"})
    assert finetune_config(loaded, str(tmp_path / "t.txt"), overrides={"train.steps": 5}).train.steps == 5
