"""Models: agreement with torch.nn.Transformer, KV cache, masks, names, building."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.models import DecoderCache, DecoderOnly, EncoderDecoder, build_model

VOCAB = 13
PAD = 0


def _copy_attn(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    d = ours.d_model
    for i, lin in enumerate((ours.w_q, ours.w_k, ours.w_v)):
        lin.weight.copy_(ref.in_proj_weight[i * d : (i + 1) * d])
        lin.bias.copy_(ref.in_proj_bias[i * d : (i + 1) * d])
    ours.w_o.weight.copy_(ref.out_proj.weight)
    ours.w_o.bias.copy_(ref.out_proj.bias)


def _copy_linear_norm(ours: nn.Module, ref: nn.Module) -> None:
    ours.load_state_dict(ref.state_dict())


def _map_weights(model: EncoderDecoder, ref: nn.Transformer) -> None:
    """Copy every weight of torch's layer stacks into ours, one module at a time."""
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, ref.encoder.layers, strict=True):
            _copy_attn(ours.self_attn, theirs.self_attn)
            _copy_linear_norm(ours.ff.lin1, theirs.linear1)
            _copy_linear_norm(ours.ff.lin2, theirs.linear2)
            _copy_linear_norm(ours.norm1, theirs.norm1)
            _copy_linear_norm(ours.norm2, theirs.norm2)
        for ours, theirs in zip(model.decoder.layers, ref.decoder.layers, strict=True):
            _copy_attn(ours.self_attn, theirs.self_attn)
            _copy_attn(ours.cross_attn, theirs.multihead_attn)
            _copy_linear_norm(ours.ff.lin1, theirs.linear1)
            _copy_linear_norm(ours.ff.lin2, theirs.linear2)
            for n in ("norm1", "norm2", "norm3"):
                _copy_linear_norm(getattr(ours, n), getattr(theirs, n))
        if model.encoder.norm is not None:
            _copy_linear_norm(model.encoder.norm, ref.encoder.norm)
            _copy_linear_norm(model.decoder.norm, ref.decoder.norm)


def _randomise(module: nn.Module) -> None:
    """Non-trivial norms and biases, so a swapped mapping could not pass by luck."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1:
                p.copy_(
                    torch.randn_like(p) * 0.1
                    + (1.0 if "norm" in name and "weight" in name else 0.0)
                )


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(5, VOCAB, (3, 7))
    src[0, 5:] = PAD
    src[2, 3:] = PAD
    tgt = torch.randint(5, VOCAB, (3, 6))
    return src, tgt


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_decoder_matches_torch_transformer(norm: str) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        norm=norm,
        activation="relu",
        dropout=0.0,
    )
    model = build_model(cfg, VOCAB, pad_id=PAD).eval()
    ref = nn.Transformer(
        d_model=32,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=64,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm == "pre",
    )
    _randomise(ref)
    if norm == "post":
        # nn.Transformer always ends each stack with a LayerNorm; a post-LN model
        # (the paper's) has none, since every layer already ends in one. Replace
        # them by identity so the comparison is between the two layer stacks.
        ref.encoder.norm = nn.Identity()
        ref.decoder.norm = nn.Identity()
    _map_weights(model, ref)
    # train() with dropout 0 keeps torch off its inference fast path, which
    # writes zeros at padded positions instead of computing them.
    ref.train()

    src, tgt = _batch()
    # Embeddings and positions are outside nn.Transformer: feed both the same inputs.
    x_src = model.pos(model.src_embed(src) * math.sqrt(32))
    x_tgt = model.pos(model.tgt_embed(tgt) * math.sqrt(32))
    causal = nn.Transformer.generate_square_subsequent_mask(6)
    ref_hidden = ref(
        x_src,
        x_tgt,
        tgt_mask=causal,
        tgt_is_causal=True,
        src_key_padding_mask=src == PAD,
        memory_key_padding_mask=src == PAD,
    )
    expected = model.lm_head(ref_hidden)
    with torch.no_grad():
        logits = model(src, tgt)
        memory = model.encode(src)
    torch.testing.assert_close(logits, expected.detach(), atol=1e-4, rtol=1e-4)
    ref_memory = ref.encoder(x_src, src_key_padding_mask=src == PAD)
    keep = (src != PAD)[..., None].expand_as(memory)  # padded rows are never read
    torch.testing.assert_close(memory[keep], ref_memory.detach()[keep], atol=1e-4, rtol=1e-4)


CONFIGS = [
    (arch, pos, norm)
    for arch in ("encoder-decoder", "decoder-only")
    for pos in ("sinusoidal", "learned", "rope")
    for norm in ("pre", "post")
]


def _small(arch: str, pos: str, norm: str, **kw: object) -> ModelConfig:
    return ModelConfig(
        arch=arch,
        positional=pos,
        norm=norm,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=32,
        max_len=32,
        **kw,
    )


@pytest.mark.parametrize(("arch", "pos", "norm"), CONFIGS)
def test_incremental_decoding_with_cache_equals_full_pass(arch: str, pos: str, norm: str) -> None:
    torch.manual_seed(1)
    model = build_model(_small(arch, pos, norm), VOCAB).eval()
    src, tgt = _batch()
    with torch.no_grad():
        if isinstance(model, EncoderDecoder):
            full = model(src, tgt)
            memory = model.encode(src)
            cache = model.new_cache()
            steps = [model.decode(tgt[:, :2], memory, src, cache=cache)]  # a 2-token prefix
            assert cache.length == 2
            for t in range(2, tgt.size(1)):
                steps.append(model.decode(tgt[:, t : t + 1], memory, src, cache=cache))
        else:
            full = model(tgt)
            cache = model.new_cache()
            steps = [model(tgt[:, :2], cache=cache)]
            for t in range(2, tgt.size(1)):
                steps.append(model(tgt[:, t : t + 1], cache=cache))
    assert cache.length == tgt.size(1)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_future_target_tokens_do_not_change_earlier_logits(arch: str) -> None:
    torch.manual_seed(2)
    model = build_model(_small(arch, "rope", "pre"), VOCAB).eval()
    src, tgt = _batch()
    tgt2 = tgt.clone()
    tgt2[:, 4:] = (tgt[:, 4:] + 1) % VOCAB
    run = (lambda t: model(src, t)) if arch == "encoder-decoder" else model
    with torch.no_grad():
        a, b = run(tgt), run(tgt2)
    torch.testing.assert_close(a[:, :4], b[:, :4], rtol=0, atol=0)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_source_padding_is_ignored() -> None:
    torch.manual_seed(3)
    model = build_model(_small("encoder-decoder", "learned", "pre"), VOCAB).eval()
    src, tgt = _batch()
    longer = torch.cat([src, torch.full((3, 4), PAD)], dim=1)  # more padding on the right
    with torch.no_grad():
        torch.testing.assert_close(model(longer, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
        # A row on its own (no padding, so no mask at all) equals the same row in the batch.
        alone = model(src[1:2], tgt[1:2])
        torch.testing.assert_close(alone, model(src, tgt)[1:2], atol=1e-5, rtol=1e-5)


def test_parameter_names_follow_the_architecture_contract() -> None:
    cfg = _small("encoder-decoder", "learned", "pre")
    names = {n for n, _ in build_model(cfg, VOCAB).named_parameters(remove_duplicate=False)}
    for expected in [
        "src_embed.weight",
        "tgt_embed.weight",
        "pos.weight",
        "lm_head.weight",
        "encoder.layers.0.self_attn.w_q.weight",
        "encoder.layers.1.self_attn.w_o.bias",
        "encoder.layers.0.ff.lin1.weight",
        "encoder.layers.0.norm2.weight",
        "encoder.norm.weight",
        "decoder.layers.1.self_attn.w_k.weight",
        "decoder.layers.1.cross_attn.w_v.bias",
        "decoder.layers.0.norm3.bias",
        "decoder.norm.bias",
    ]:
        assert expected in names
    assert "lm_head.bias" not in names
    post = {
        n
        for n, _ in build_model(
            _small("encoder-decoder", "sinusoidal", "post"), VOCAB
        ).named_parameters()
    }
    assert not any(n.startswith(("encoder.norm", "decoder.norm", "pos")) for n in post)
    gpt = {
        n for n, _ in build_model(_small("decoder-only", "rope", "pre"), VOCAB).named_parameters()
    }
    assert not any("src_embed" in n or "cross_attn" in n or n.startswith("pos") for n in gpt)
    assert "decoder.layers.1.norm2.weight" in gpt and "decoder.norm.weight" in gpt


def test_tied_and_shared_embeddings() -> None:
    m = build_model(_small("encoder-decoder", "sinusoidal", "pre"), VOCAB)
    assert m.lm_head.weight is m.tgt_embed.weight and m.src_embed is m.tgt_embed
    assert m.lm_head.bias is None
    m = build_model(
        _small(
            "encoder-decoder", "sinusoidal", "pre", tie_embeddings=False, share_embeddings=False
        ),
        VOCAB,
    )
    assert m.lm_head.weight is not m.tgt_embed.weight and m.src_embed is not m.tgt_embed


def test_build_model_vocab_rules_and_kinds() -> None:
    cfg = _small("decoder-only", "sinusoidal", "pre")
    assert isinstance(build_model(cfg, VOCAB), DecoderOnly)
    assert build_model(cfg, VOCAB).lm_head.out_features == VOCAB
    with_vocab = ModelConfig(d_model=16, n_heads=2, vocab_size=21)
    model = build_model(with_vocab, vocab_size=99)  # config.vocab_size wins
    assert isinstance(model, EncoderDecoder) and model.lm_head.out_features == 21
    with pytest.raises(ValueError, match="vocabulary"):
        build_model(ModelConfig())


def test_build_on_meta_device_allocates_nothing() -> None:
    cfg = ModelConfig(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048)
    with torch.device("meta"):
        model = build_model(cfg, 37000)
    assert all(p.is_meta for p in model.parameters())
    assert all(b.is_meta for b in model.buffers())


def test_new_cache_structure() -> None:
    ed = build_model(_small("encoder-decoder", "sinusoidal", "pre"), VOCAB)
    cache = ed.new_cache()
    assert isinstance(cache, DecoderCache) and cache.length == 0
    assert len(cache.self_attn) == 2 and all(c.static for c in cache.cross_attn)
    gpt = build_model(_small("decoder-only", "sinusoidal", "pre"), VOCAB)
    assert gpt.new_cache().cross_attn == []


def test_learned_positions_refuse_sequences_past_max_len() -> None:
    model = build_model(_small("decoder-only", "learned", "pre"), VOCAB)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 33, dtype=torch.long))


def test_sinusoidal_and_rope_models_run_past_max_len() -> None:
    for pos in ("sinusoidal", "rope"):
        model = build_model(_small("decoder-only", pos, "pre"), VOCAB).eval()
        assert model(torch.ones(1, 40, dtype=torch.long)).shape == (1, 40, VOCAB)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_training_step_gives_finite_gradients_everywhere(arch: str) -> None:
    torch.manual_seed(4)
    model = build_model(_small(arch, "rope", "pre", dropout=0.1, activation="gelu"), VOCAB).train()
    src, tgt = _batch()
    logits = model(src, tgt) if arch == "encoder-decoder" else model(tgt)
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
    assert abs(loss.item() - math.log(VOCAB)) < 1.5  # starts near uniform
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_dropout_is_applied_in_training_only() -> None:
    # Layers skip their dropout calls in eval or at p = 0; in training with p > 0
    # it still acts (two passes differ), and eval equals the same model at p = 0.
    torch.manual_seed(5)
    model = build_model(_small("decoder-only", "rope", "pre", dropout=0.3), VOCAB)
    torch.manual_seed(5)
    plain = build_model(_small("decoder-only", "rope", "pre", dropout=0.0), VOCAB)
    plain.load_state_dict(model.state_dict())
    _, tgt = _batch()
    model.train()
    assert not torch.allclose(model(tgt), model(tgt))
    model.eval()
    torch.testing.assert_close(model(tgt), plain.eval()(tgt))
