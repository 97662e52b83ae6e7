"""The lab's encoder-only model: its stack against ``torch.nn.TransformerEncoder`` with the
same weights (post- and pre-LN, with padding), bidirectional reading, hook names and
what ``build_model`` builds for each arch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.encoder_only import EncoderOnly
from tui_lab.core.model.hook_points import using_hooks
from tui_lab.core.model.models import DecoderOnly, EncoderDecoder, build_model

MINI = dict(arch="encoder-only", d_model=32, n_heads=4, n_encoder_layers=2, d_ff=64, activation="gelu",
            positional="learned", max_len=16)


def _reference(model: EncoderOnly, norm_first: bool) -> nn.TransformerEncoder:
    """``nn.TransformerEncoder`` holding ``model``'s stack's weights."""
    c = model.config
    layer = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.d_ff, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=norm_first, layer_norm_eps=c.norm_eps)
    final = nn.LayerNorm(c.d_model, eps=c.norm_eps) if norm_first else None
    ref = nn.TransformerEncoder(layer, c.n_encoder_layers, norm=final, enable_nested_tensor=False)
    with torch.no_grad():
        for mine, theirs in zip(model.encoder.layers, ref.layers, strict=True):
            a = mine.self_attn
            theirs.self_attn.in_proj_weight.copy_(torch.cat([a.w_q.weight, a.w_k.weight, a.w_v.weight]))
            theirs.self_attn.in_proj_bias.copy_(torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias]))
            theirs.self_attn.out_proj.load_state_dict(a.w_o.state_dict())
            theirs.linear1.load_state_dict(mine.ff.lin1.state_dict())
            theirs.linear2.load_state_dict(mine.ff.lin2.state_dict())
            theirs.norm1.load_state_dict(mine.norm1.state_dict())
            theirs.norm2.load_state_dict(mine.norm2.state_dict())
        if final is not None:
            final.load_state_dict(model.encoder.norm.state_dict())
    return ref.eval()


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_stack_matches_torch_transformer_encoder(norm: str) -> None:
    torch.manual_seed(0)
    model = EncoderOnly(ModelConfig(**MINI, norm=norm), vocab_size=20).eval()
    with torch.no_grad():  # non-trivial norms, so a swapped norm shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ref = _reference(model, norm_first=norm == "pre")
    tokens = torch.randint(1, 20, (3, 9))
    tokens[1, 6:] = 0  # padding (PAD = 0) at the end of one row
    with torch.no_grad():
        x = model.embed(tokens)
        got = model.encoder(x, model.key_mask(tokens))
        want = ref(x, src_key_padding_mask=tokens == 0)
    real = tokens != 0
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=0)


def test_reads_both_ways_and_ignores_padding() -> None:
    torch.manual_seed(0)
    model = EncoderOnly(ModelConfig(**MINI), vocab_size=20).eval()
    tokens = torch.randint(1, 20, (1, 8))
    later = tokens.clone()
    later[0, 7] = (later[0, 7] % 19) + 1  # change only the last token
    padded = torch.cat([tokens, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a, b, c = model(tokens), model(later), model(padded)
    assert (a[0, 0] - b[0, 0]).abs().max() > 1e-4  # the first position sees the last: no triangle
    torch.testing.assert_close(c[:, :8], a, atol=1e-5, rtol=0)  # padding keys are hidden


def test_hook_points_are_transformer_lens_names() -> None:
    model = EncoderOnly(ModelConfig(**MINI, embed_norm=True, type_vocab_size=2), vocab_size=20).eval()
    seen: list[str] = []
    with torch.no_grad(), using_hooks([(lambda _n: True, lambda _x, n: seen.append(n))]):
        model(torch.randint(1, 20, (1, 5)))
    for name in ("hook_embed", "hook_pos_embed", "hook_token_type_embed", "hook_full_embed",
                 "blocks.0.hook_resid_pre", "blocks.1.attn.hook_pattern", "blocks.1.hook_mlp_out",
                 "blocks.1.hook_resid_post", "ln_final.hook_normalized", "mlm_head.hook_normalized"):
        assert name in seen, name
    assert not any(n.startswith(("encoder.", "decoder.")) for n in seen)


def test_build_model_dispatch_and_config_checks() -> None:
    assert isinstance(build_model(ModelConfig(**MINI), 20), EncoderOnly)
    assert isinstance(build_model(ModelConfig(arch="decoder-only"), 20), DecoderOnly)
    assert isinstance(build_model(ModelConfig(), 20), EncoderDecoder)
    tied = build_model(ModelConfig(**MINI), 20)
    assert tied.lm_head.weight is tied.tgt_embed.weight
    untied = build_model(ModelConfig(**MINI, tie_embeddings=False, mlm_head=False), 20)
    assert untied.lm_head.weight is not untied.tgt_embed.weight and untied.mlm is None
    from tui_lab.core.config.error import ConfigError

    with pytest.raises(ConfigError, match="encoder-only"):
        ModelConfig(arch="decoder-only", embed_norm=True)
    with pytest.raises(ConfigError, match="learned"):
        ModelConfig(**{**MINI, "positional": "rope"}, position_offset=2)
