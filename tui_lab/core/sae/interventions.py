"""Using a feature: ablate it at its hook, or steer the model along its decoder direction.

Both are hook functions ``fn(activation, name) -> replacement`` for
``hook_points.using_hooks``/``bind_hooks`` (and ``open_model``'s
``run_with_hooks``), at the SAE's own hook.

Ablation keeps the SAE's reconstruction error, so nothing but the feature changes:

    f  = encode(x)                    the features of the hook's activation x (..., d_in)
    f' = f with f_i = 0               the chosen features switched off
    x' = decode(f') + (x − decode(f)) reconstruction without them, plus the error
       = x + (decode(f') − decode(f))

computed in that last form, so where the features are already 0 the difference is
exactly 0 and x' is x bit for bit. With a linear decoder x' = x − Σ_i f_i W_dec[i]
(over the norms when TopK ranks by them), which the tests compute by hand.

Steering adds ``coef · W_dec[i]`` at every position (the feature's direction, as
written; the lab's decoder rows have unit norm for TopK and JumpReLU).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from tui_lab.core.model.hook_points import HookFn, HookSpec
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.sae import SparseAutoencoder


def _indices(sae: SparseAutoencoder, features: int | Iterable[int]) -> list[int]:
    """The feature indices asked for, each checked against d_sae (SAEError, one line)."""
    found = [features] if isinstance(features, int) else list(features)
    for i in found:
        if not 0 <= i < sae.cfg.d_sae:
            raise SAEError(f"feature {i}: the SAE has features 0 to {sae.cfg.d_sae - 1}")
    return found


def ablate_features_fn(sae: SparseAutoencoder, features: int | Iterable[int]) -> HookFn:
    """A hook fn replacing x (..., d_in) by the SAE's reconstruction without ``features``
    plus its reconstruction error (shape and dtype kept)."""
    index = torch.tensor(_indices(sae, features), dtype=torch.long, device=sae.W_dec.device)

    @torch.no_grad()
    def ablate(x: torch.Tensor, _name: str) -> torch.Tensor:
        flat = x.reshape(*x.shape[:2], -1) if x.dim() > 3 else x  # hook_z: (B, T, heads·d_head)
        f = sae.encode(flat)
        off = f.clone()
        off[..., index] = 0
        delta = sae.decode(off) - sae.decode(f)  # (..., d_in), exactly 0 where f_i was 0
        return (flat + delta.to(flat.dtype)).reshape(x.shape)

    return ablate


def steer_feature_fn(sae: SparseAutoencoder, feature: int, coef: float) -> HookFn:
    """A hook fn adding ``coef · W_dec[feature]`` to x (..., d_in) at every position."""
    (i,) = _indices(sae, feature)
    direction = sae.W_dec[i].detach()

    def steer(x: torch.Tensor, _name: str) -> torch.Tensor:
        flat = x.reshape(*x.shape[:2], -1) if x.dim() > 3 else x
        return (flat + coef * direction.to(device=x.device, dtype=x.dtype)).reshape(x.shape)

    return steer


def _hook_name(sae: SparseAutoencoder, hook: str | None) -> str:
    name = hook or sae.cfg.metadata.hook_name
    if not name:
        raise SAEError("the SAE's cfg.json names no hook_name: say which hook")
    return name


def ablation_hooks(sae: SparseAutoencoder, features: int | Sequence[int], hook: str | None = None
                   ) -> list[HookSpec]:
    """``[(hook, ablate)]`` at the SAE's hook (``cfg.metadata.hook_name`` unless given)."""
    return [(_hook_name(sae, hook), ablate_features_fn(sae, features))]


def steering_hooks(sae: SparseAutoencoder, feature: int, coef: float, hook: str | None = None
                   ) -> list[HookSpec]:
    """``[(hook, steer)]`` adding ``coef · W_dec[feature]`` at the SAE's hook."""
    return [(_hook_name(sae, hook), steer_feature_fn(sae, feature, coef))]
