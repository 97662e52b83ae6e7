"""Using a feature: ablation with the error term changes the logits only through that feature;
steering adds its decoder direction. Checked on a small decoder-only model at a hook."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.hook_points import bind_hooks, using_hooks
from tui_lab.core.model.models import DecoderOnly
from tui_lab.core.sae.config import SAEConfig, SAEMetadata
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.interventions import ablation_hooks, steering_hooks
from tui_lab.core.sae.sae import SparseAutoencoder

D, V, T = 16, 13, 9
HOOK = "blocks.0.hook_resid_post"


@pytest.fixture(scope="module")
def model() -> DecoderOnly:
    config = ModelConfig(arch="decoder-only", d_model=D, n_heads=2, n_decoder_layers=2, d_ff=32,
                         positional="learned", max_len=16, vocab_size=V)
    torch.manual_seed(0)
    return DecoderOnly(config, V).eval()


def _sae(arch: str, seed: int = 3) -> SparseAutoencoder:
    cfg = SAEConfig(d_in=D, d_sae=24, architecture=arch, k=6 if arch == "topk" else None,
                    metadata=SAEMetadata(hook_name=HOOK))
    sae = SparseAutoencoder(cfg, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        sae.W_enc.add_(0.3 * torch.randn(D, 24, generator=g))
        sae.W_dec.mul_(torch.rand(24, 1, generator=g) + 0.5)  # rows of different norms
        sae.b_enc.copy_(0.1 * torch.randn(24, generator=g))
        sae.b_dec.copy_(0.2 * torch.randn(D, generator=g))
    return sae


def _tokens() -> torch.Tensor:
    return torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))


def _logits(model: DecoderOnly, hooks: list) -> torch.Tensor:
    with torch.no_grad(), using_hooks(hooks):
        return model(_tokens())


@pytest.mark.parametrize("arch", ["standard", "topk", "jumprelu"])
def test_a_silent_feature_leaves_the_logits_identical(model: DecoderOnly, arch: str) -> None:
    sae = _sae(arch)
    with torch.no_grad():
        sae.b_enc[7] = -1e4  # feature 7 never fires
    plain = _logits(model, [])
    assert torch.equal(_logits(model, ablation_hooks(sae, 7)), plain)


def test_ablation_matches_the_hand_computation(model: DecoderOnly) -> None:
    """Standard SAE: the hook's x becomes x − f_i W_dec[i], f_i = ReLU((x − b_dec)·W_enc[:, i] + b_enc[i])."""
    sae = _sae("standard")
    i = 4
    with torch.no_grad():
        sae.b_enc[i] = 2.0  # fires on every token
    w_enc, b_enc = sae.W_enc.detach().double().numpy(), sae.b_enc.detach().double().numpy()
    w_dec, b_dec = sae.W_dec.detach().double().numpy(), sae.b_dec.detach().double().numpy()

    def by_hand(x: torch.Tensor, _name: str) -> torch.Tensor:
        xn = x.double().numpy()
        f_i = np.maximum((xn - b_dec) @ w_enc[:, i] + b_enc[i], 0.0)  # (B, T)
        assert (f_i > 0).all()
        return torch.from_numpy(xn - f_i[..., None] * w_dec[i]).to(x.dtype)

    plain = _logits(model, [])
    want = _logits(model, [(HOOK, by_hand)])
    got = _logits(model, ablation_hooks(sae, i))
    assert not torch.allclose(got, plain, atol=1e-3)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["topk", "jumprelu"])
def test_ablation_moves_the_activation_only_along_the_feature(model: DecoderOnly, arch: str) -> None:
    """The change at the hook is −f_i · W_dec[i], token by token: the other features are untouched."""
    sae = _sae(arch)
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str):
        return lambda x, _n: seen.__setitem__(name, x.clone())

    _logits(model, [(HOOK, keep("before")), *ablation_hooks(sae, [2, 5]), (HOOK, keep("after"))])
    f = sae.encode(seen["before"]).detach()
    assert (f[..., [2, 5]] > 0).any()  # the test means something
    want = seen["before"] - f[..., 2:3] * sae.W_dec[2] - f[..., 5:6] * sae.W_dec[5]
    torch.testing.assert_close(seen["after"], want.detach(), atol=1e-5, rtol=1e-5)


def test_ablation_through_bind_hooks_leaves_the_model_alone(model: DecoderOnly) -> None:
    sae = _sae("standard")
    with torch.no_grad():
        sae.b_enc[1] = 3.0
    ablated = bind_hooks(model, ablation_hooks(sae, 1))
    with torch.no_grad():
        assert torch.equal(ablated(_tokens()), _logits(model, ablation_hooks(sae, 1)))
        assert torch.equal(model(_tokens()), _logits(model, []))


def test_steering_adds_the_decoder_direction(model: DecoderOnly) -> None:
    sae = _sae("topk")

    def by_hand(x: torch.Tensor, _name: str) -> torch.Tensor:
        return x + 2.5 * sae.W_dec[3].detach()

    torch.testing.assert_close(_logits(model, steering_hooks(sae, 3, 2.5)), _logits(model, [(HOOK, by_hand)]))
    assert torch.equal(_logits(model, steering_hooks(sae, 3, 0.0)), _logits(model, []))


def test_bad_feature_or_no_hook_is_one_line() -> None:
    sae = _sae("standard")
    with pytest.raises(SAEError, match="features 0 to 23"):
        ablation_hooks(sae, 24)
    with pytest.raises(SAEError, match="features 0 to 23"):
        steering_hooks(sae, -1, 1.0)
    sae.cfg.metadata.hook_name = None
    with pytest.raises(SAEError, match="no hook_name"):
        ablation_hooks(sae, 1)
