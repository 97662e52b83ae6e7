"""JumpReLU and its step, with the straight-through estimators that train the threshold.

``jumprelu(z, θ) = z · H(z − θ)`` and ``step(z, θ) = H(z − θ)`` (H the Heaviside step)
have zero gradient with respect to θ almost everywhere, so θ could never learn.
Rajamanoharan et al. (2024, "Jumping Ahead") replace that gradient by a
kernel density estimate over a window of width ε (``bandwidth``) around θ:

    ∂ jumprelu / ∂θ ≈ −(θ / ε) · K((z − θ) / ε)
    ∂ step / ∂θ     ≈ −(1 / ε) · K((z − θ) / ε)

with K the rectangle kernel (1 on (−½, ½), else 0). The pre-activation z gets its
true gradient through jumprelu (H(z − θ)) and none through step: the L0 penalty
moves only the thresholds. SAELens's JumpReLU trainer does the same.
"""

from __future__ import annotations

from typing import Protocol

import torch


def rectangle(x: torch.Tensor) -> torch.Tensor:
    """The rectangle kernel: 1 where −½ < x < ½, else 0 (in ``x``'s dtype)."""
    return ((x > -0.5) & (x < 0.5)).to(x.dtype)


def _per_feature(grad: torch.Tensor, d_sae: int) -> torch.Tensor:
    """Sum a (..., d_sae) gradient over every leading dim: θ is one number per feature."""
    return grad.reshape(-1, d_sae).sum(dim=0)


class _Context(Protocol):
    """What the two functions keep on autograd's context between forward and backward."""

    bandwidth: float
    saved_tensors: tuple[torch.Tensor, ...]

    def save_for_backward(self, *tensors: torch.Tensor) -> None: ...

class _JumpReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx: _Context, z: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
        ctx.save_for_backward(z, threshold)
        ctx.bandwidth = bandwidth
        return z * (z > threshold).to(z.dtype)

    @staticmethod
    def backward(ctx: _Context, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        z, threshold = ctx.saved_tensors
        eps = ctx.bandwidth
        z_grad = (z > threshold).to(grad_out.dtype) * grad_out
        window = rectangle((z - threshold) / eps)
        theta_grad = _per_feature(-(threshold / eps) * window * grad_out, threshold.shape[-1])
        return z_grad, theta_grad, None


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx: _Context, z: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
        ctx.save_for_backward(z, threshold)
        ctx.bandwidth = bandwidth
        return (z > threshold).to(z.dtype)

    @staticmethod
    def backward(ctx: _Context, grad_out: torch.Tensor) -> tuple[None, torch.Tensor, None]:
        z, threshold = ctx.saved_tensors
        eps = ctx.bandwidth
        window = rectangle((z - threshold) / eps)
        theta_grad = _per_feature(-(1.0 / eps) * window * grad_out, threshold.shape[-1])
        return None, theta_grad, None


def jumprelu(z: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """``z`` where ``z > threshold``, else 0; θ trained by the estimator above."""
    out: torch.Tensor = _JumpReLU.apply(z, threshold, bandwidth)
    return out


def step(z: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """1 where ``z > threshold``, else 0 (its sum over features is L0); θ trained as above."""
    out: torch.Tensor = _Step.apply(z, threshold, bandwidth)
    return out
