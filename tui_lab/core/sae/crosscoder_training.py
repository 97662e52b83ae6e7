"""Training a crosscoder on activations collected at its sources (``crosscoder_sources.py``).

The objective is Anthropic's for acausal crosscoders (and the model-diffing
replication's), per token, on activations scaled so each source's mean
squared norm is d (``Crosscoder.scale``)::

    loss = Σ_s ||x̂_s − x_s||²  +  λ · Σ_f f_f · Σ_s ||W_dec[f, s]||

The sparsity term weighs a feature's activation by the sum of its decoder
norms, so a feature that one source's reconstruction does not need loses its
decoder there. λ rises linearly from 0 over the first ``l1_warmup`` of the
steps; the learning rate decays linearly to 0 over the last ``lr_decay`` of
them. Batches are rows drawn at random from the collected activations.
Step records are the SAE trainer's (``SAEStepEvent``), so the runs table and
the TensorBoard export read a crosscoder's metrics as they read an SAE's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from tui_lab.core.sae.crosscoder import Crosscoder
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.events import SAEStepEvent

L1 = 2.0  # λ, on activations of mean squared norm d per source
LR = 1e-3
STEPS = 2000
BATCH = 256


@dataclass(frozen=True)
class CrosscoderSettings:
    """The training's numbers (see the module docstring)."""

    steps: int = STEPS
    batch_size: int = BATCH
    lr: float = LR
    l1_coefficient: float = L1
    l1_warmup: float = 0.05  # share of the steps over which λ rises from 0
    lr_decay: float = 0.2  # share of the steps, at the end, over which the lr falls to 0
    seed: int = 0
    log_every: int = 10

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every"):
            if getattr(self, name) < 1:
                raise SAEError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0 or not self.l1_coefficient >= 0:
            raise SAEError(f"lr must be > 0 and l1_coefficient >= 0, got {self.lr} and {self.l1_coefficient}")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def l1_at(self, step: int) -> float:
        """λ at ``step`` (0-based): the warmup's ramp, then the coefficient."""
        ramp = self.l1_warmup * self.steps
        return self.l1_coefficient * (min(1.0, (step + 1) / ramp) if ramp >= 1 else 1.0)

    def lr_at(self, step: int) -> float:
        """The learning rate at ``step`` (0-based): constant, then a linear decay."""
        decay = int(self.lr_decay * self.steps)
        left = self.steps - step
        return self.lr * (min(1.0, left / decay) if decay >= 1 else 1.0)


@dataclass(frozen=True)
class Losses:
    """One batch's loss and its parts (tensors, so the total can be differentiated)."""

    total: torch.Tensor
    reconstruction: torch.Tensor  # Σ_s ||x̂_s − x_s||², mean over rows
    sparsity: torch.Tensor  # Σ_f f_f Σ_s ||W_dec[f, s]||, mean over rows
    features: torch.Tensor  # (B, F)
    reconstructed: torch.Tensor  # (B, n, d), scaled units


def losses(cc: Crosscoder, xs: torch.Tensor, l1: float) -> Losses:
    """The objective on scaled activations ``xs`` (B, n, d) with sparsity coefficient ``l1``."""
    f = cc.encode_scaled(xs)
    xh = cc.decode_scaled(f)
    rec = (xh - xs).pow(2).sum(dim=(-2, -1)).mean()
    weight = cc.W_dec.norm(dim=-1).sum(dim=-1)  # (F,) Σ_s ||W_dec[f, s]||
    sparsity = (f * weight).sum(dim=-1).mean()
    return Losses(rec + l1 * sparsity, rec, sparsity, f, xh)


def fit_scale(cc: Crosscoder, rows: torch.Tensor) -> None:
    """Set ``cc.scale`` so each source's activations have mean squared norm d on ``rows`` (N, n, d)."""
    mean_sq = rows.float().pow(2).sum(dim=-1).mean(dim=0)  # (n,)
    if not bool((mean_sq > 0).all()):
        raise SAEError("a source's activations are all zero at this hook: nothing to reconstruct")
    with torch.no_grad():
        cc.scale.copy_((cc.cfg.d_in / mean_sq).sqrt().to(cc.scale))


@dataclass(frozen=True)
class TrainEnd:
    """How training ended: steps done, why, seconds, and each feature's firing count over the
    last rows seen (dead features never fired there)."""

    step: int
    reason: str
    elapsed: float
    fired: torch.Tensor  # (F,) int64


def train_crosscoder(cc: Crosscoder, rows: torch.Tensor, settings: CrosscoderSettings,
                     on_step: Callable[[SAEStepEvent], None] | None = None,
                     should_stop: Callable[[], bool] | None = None) -> TrainEnd:
    """Train ``cc`` on ``rows`` (N, n, d), raw activations; ``cc.scale`` is fitted first."""
    cc.check_input(rows)
    fit_scale(cc, rows)
    g = torch.Generator().manual_seed(settings.seed)
    opt = torch.optim.Adam(cc.parameters(), lr=settings.lr, betas=(0.9, 0.999))
    device = cc.W_enc.device
    fired = torch.zeros(cc.cfg.d_sae, dtype=torch.long)
    window = max(1, settings.steps // 10)  # the last tenth of the steps decides which features are dead
    start, step, reason = time.monotonic(), 0, "done"
    cc.train()
    while step < settings.steps:
        if should_stop is not None and should_stop():
            reason = "stopped"
            break
        idx = torch.randint(0, rows.shape[0], (settings.batch_size,), generator=g)
        xs = cc.scaled(rows[idx].to(device))
        for group in opt.param_groups:
            group["lr"] = settings.lr_at(step)
        out = losses(cc, xs, settings.l1_at(step))
        opt.zero_grad(set_to_none=True)
        out.total.backward()
        opt.step()
        if step >= settings.steps - window:
            fired += (out.features.detach() > 0).sum(dim=0).cpu()
        step += 1
        if on_step is not None and (step % settings.log_every == 0 or step == settings.steps):
            on_step(_event(cc, out, xs, settings, step, time.monotonic() - start, fired))
    cc.eval()
    return TrainEnd(step, reason, time.monotonic() - start, fired)


def _event(cc: Crosscoder, out: Losses, xs: torch.Tensor, settings: CrosscoderSettings, step: int,
           elapsed: float, fired: torch.Tensor) -> SAEStepEvent:
    """The step's record: MSE per element, L0, explained variance over all sources."""
    with torch.no_grad():
        err = (out.reconstructed - xs).pow(2).sum()
        var = (xs - xs.mean(dim=0)).pow(2).sum().clamp_min(1e-12)
        ev = float(1 - err / var)
        seen = bool(fired.any())
        return SAEStepEvent(
            step=step, tokens=step * settings.batch_size, total_tokens=settings.steps * settings.batch_size,
            loss=float(out.total), mse=float(err / xs.numel()), l0=float((out.features > 0).sum(-1).float().mean()),
            explained_variance=ev, fvu=1 - ev,
            dead_fraction=float((fired == 0).float().mean()) if seen else 0.0,
            sparsity_loss=float(out.sparsity), aux_loss=0.0, lr=settings.lr_at(step - 1), elapsed=elapsed)
