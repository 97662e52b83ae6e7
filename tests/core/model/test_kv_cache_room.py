"""The decoding KV cache writes into buffers with room to spare: what it hands out must
still be every key and value so far, in order, however often the room grows."""

from __future__ import annotations

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.attention import KVCache
from tui_lab.core.model.models import build_model


def test_appending_past_the_room_keeps_every_key_and_value_in_order() -> None:
    torch.manual_seed(0)
    cache = KVCache()
    ks, vs, views = [], [], []
    with torch.no_grad():
        for n in (5, *([1] * 150), 7, 40):  # the first room is 75 positions: it grows twice
            k, v = torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)
            ks.append(k)
            vs.append(v)
            got_k, got_v = cache.update(k, v)
            views.append((got_k, torch.cat(ks, dim=-2)))
            assert torch.equal(got_k, torch.cat(ks, dim=-2))
            assert torch.equal(got_v, torch.cat(vs, dim=-2))
    assert cache.length == 5 + 150 + 7 + 40
    # What an earlier step was handed is never written over by a later one.
    for got, want in views:
        assert torch.equal(got, want)


def test_with_a_gradient_the_cache_concatenates_and_backward_runs() -> None:
    cache = KVCache()
    parts = [torch.randn(1, 2, n, 4, requires_grad=True) for n in (3, 1, 1)]
    cache.update(parts[0], parts[0])
    second, _ = cache.update(parts[1], parts[1])
    loss = (second * second).sum()  # autograd saves ``second``
    third, _ = cache.update(parts[2], parts[2])
    (loss + third.sum()).backward()  # a write into ``second``'s storage would raise here
    torch.testing.assert_close(parts[0].grad, 2 * parts[0].detach() + 1)
    torch.testing.assert_close(parts[1].grad, 2 * parts[1].detach() + 1)


def test_a_long_cached_decode_equals_the_full_pass() -> None:
    """200 positions one at a time (the room grows twice) against one uncached pass."""
    torch.manual_seed(2)
    config = ModelConfig(arch="decoder-only", positional="learned", d_model=16, n_heads=2,
                         n_decoder_layers=2, d_ff=32, max_len=256)
    model = build_model(config, 20).eval()
    tokens = torch.randint(0, 20, (2, 200))
    with torch.inference_mode():
        full = model(tokens)
        cache = model.new_cache()
        steps = [model(tokens[:, :3], cache=cache)]
        for t in range(3, tokens.size(1)):
            steps.append(model(tokens[:, t : t + 1], cache=cache))
    assert cache.length == 200
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
