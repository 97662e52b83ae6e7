"""Muon as ``torch.optim.Muon`` computes it, made fast where the lab runs.

The update is ``torch.optim.Muon``'s, term for term: the momentum buffer an
exponential average of the gradients (``buf.lerp_(grad, 1 - momentum)``), the
Nesterov blend ``grad.lerp(buf, momentum)``, five Newton-Schulz steps with Keller
Jordan's quintic coefficients on the wide orientation of the matrix (rows <=
columns) from ``X / max(||X||_F, eps)``, decoupled weight decay, and the rate
scaled by ``sqrt(max(1, rows / cols))``. Its groups carry the same keys
(``momentum``, ``nesterov``, ``ns_coefficients``, ``eps``, ``ns_steps``,
``adjust_lr_fn``) and its state the same ``momentum_buffer`` per parameter, so a
checkpoint written while ``torch.optim.Muon`` did the work loads unchanged.

Two things differ, both in how the products are run, not what they are:

- **Same-shaped matrices are orthogonalised together**: each group's matrices are
  bucketed by their wide shape (a tall 512 x 128 transposed joins the 128 x 512s)
  and every Newton-Schulz product is one batched ``baddbmm`` over the stack, as
  modded-nanogpt and nanochat do: one call instead of one per matrix.
- **The products run in the dtype the device multiplies fastest** (``ns_dtype``):
  bfloat16, as ``torch.optim.Muon`` always does, where the hardware has bfloat16
  dot products (CUDA from compute capability 8.0; a CPU with AVX512-BF16 or AMX,
  whose oneDNN kernels run bfloat16 at about twice float32's rate); float32
  elsewhere, where bfloat16 is emulated and 2-3x (AVX-512) to 20x (AVX2) slower than
  float32 (bench/RESULTS.md, "Muon made fast on a CPU"). The choice is made per
  step from the device alone, so a resumed run on the same machine continues with
  the same arithmetic.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from typing import Any

import torch

# Keller Jordan's quintic coefficients and torch.optim.Muon's defaults.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
EPS = 1e-7


def _cpu_has_bf16_dot() -> bool:
    """True where this CPU has bfloat16 dot-product instructions that oneDNN may use."""
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if isa and isa != "ALL" and "BF16" not in isa and "AMX" not in isa:
        return False  # oneDNN told to stay below them: bfloat16 would be emulated
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        check = getattr(torch.cpu, probe, None)  # private in torch 2.x: absent means no
        try:
            if check is not None and bool(check()):
                return True
        except RuntimeError:
            continue
    return False


def ns_dtype(device: torch.device) -> torch.dtype:
    """The dtype Newton-Schulz runs in on ``device`` (see the module docstring)."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.get_device_capability(device) >= (8, 0) else torch.float32
    if device.type == "cpu":
        return torch.bfloat16 if _cpu_has_bf16_dot() else torch.float32
    return torch.float32


def newton_schulz(stack: torch.Tensor, coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                  steps: int = NS_STEPS, eps: float = EPS) -> torch.Tensor:
    """Orthogonalise each wide matrix of ``stack`` (batch, rows <= cols), in its dtype.

    X <- a X + (b X X^T + c (X X^T)^2) X, from X / max(||X||_F, eps), as
    ``torch.optim.Muon`` iterates it, one batched product per term.
    """
    a, b, c = coefficients
    x = stack / stack.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT
        gram_update = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, gram_update, x, beta=a)
    return x


def _scale(shape: torch.Size, lr: float, adjust_lr_fn: str | None) -> float:
    """``torch.optim.Muon``'s rate for a matrix of ``shape`` (its ``_adjust_lr``)."""
    rows, cols = shape[0], shape[1]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


def orthogonalise(updates: list[torch.Tensor], dtype: torch.dtype,
                  coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                  steps: int = NS_STEPS, eps: float = EPS) -> list[torch.Tensor]:
    """Newton-Schulz of every matrix in ``updates``, same wide shapes stacked, in ``dtype``;
    each result in its matrix's own orientation and dtype (one conversion per stack)."""
    buckets: dict[tuple[int, int, torch.device], list[int]] = {}
    for i, u in enumerate(updates):
        rows, cols = u.shape
        buckets.setdefault((min(rows, cols), max(rows, cols), u.device), []).append(i)
    out: list[torch.Tensor] = [updates[0]] * len(updates)
    for members in buckets.values():
        wide = [updates[i].mT if updates[i].size(0) > updates[i].size(1) else updates[i] for i in members]
        result = newton_schulz(torch.stack(wide).to(dtype), coefficients, steps, eps).to(wide[0].dtype)
        for k, i in enumerate(members):
            out[i] = result[k].mT if updates[i].size(0) > updates[i].size(1) else result[k]
    return out


class Muon(torch.optim.Optimizer):
    """``torch.optim.Muon``'s update with batched Newton-Schulz in ``ns_dtype(device)``.

    ``dtype`` fixes the Newton-Schulz dtype instead (the tests compare both paths).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, weight_decay: float = 0.1,
                 momentum: float = 0.95, nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, eps: float = EPS,
                 ns_steps: int = NS_STEPS, adjust_lr_fn: str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        if not lr >= 0.0 or not momentum >= 0.0 or not weight_decay >= 0.0:
            raise ValueError(f"Muon: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}")
        defaults = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov,
                    "ns_coefficients": ns_coefficients, "eps": eps, "ns_steps": ns_steps,
                    "adjust_lr_fn": adjust_lr_fn}
        super().__init__(params, defaults)
        self.dtype = dtype
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon updates 2-D matrices only, got a parameter of shape {list(p.shape)}")

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One update of every group (the closure, if any, is evaluated once)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)
        return loss

    def _update(self, group: dict[str, Any], params: list[torch.Tensor]) -> None:
        grads = [p.grad for p in params if p.grad is not None]
        bufs = []
        for p in params:
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            bufs.append(state["momentum_buffer"])
        momentum, lr = group["momentum"], float(group["lr"])
        torch._foreach_lerp_(bufs, grads, 1 - momentum)
        updates = torch._foreach_lerp(grads, bufs, momentum) if group["nesterov"] else bufs
        dtype = self.dtype or ns_dtype(params[0].device)
        ortho = orthogonalise(list(updates), dtype, tuple(group["ns_coefficients"]), group["ns_steps"], group["eps"])
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1 - lr * group["weight_decay"])
        for p, o in zip(params, ortho, strict=True):
            p.add_(o, alpha=-_scale(p.shape, lr, group["adjust_lr_fn"]))
