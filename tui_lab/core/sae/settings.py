"""How an SAE is trained: the optimiser's, the sparsity terms' and the loop's settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.losses import Coefficients

B_DEC_INITS = ("geometric_median", "mean", "zeros")


@dataclass(frozen=True)
class TrainSettings:
    """The training loop's settings; ``validate`` raises SAEError naming a bad one."""

    tokens: int = 2_000_000  # training stops after this many activation rows
    batch_size: int = 4096
    buffer_rows: int = 65_536  # the shuffled buffer (rows held at once, never the whole set)
    lr: float = 4e-4
    lr_warmup_steps: int = 0  # linear from 0
    lr_decay_steps: int = 0  # linear to 0 over the last steps (Gao et al.; SAELens)
    l1_coefficient: float = 1.0  # standard: L1 weighted by decoder norms
    l0_coefficient: float = 1.0  # jumprelu
    aux_k_coefficient: float = 1.0 / 32  # topk: dead features' AuxK
    sparsity_warmup_steps: int = 0  # the L1/L0 coefficient ramps up from 0
    # BatchTopK: the first steps keep k features per token (TopK's selection), the rest k·N
    # over the batch (``batchtopk.py`` says why)
    topk_start_steps: int = 0
    jumprelu_bandwidth: float = 0.05  # the threshold estimator's window
    jumprelu_init_threshold: float = 0.01
    dead_window: int = 100_000  # a feature silent this many tokens is dead
    b_dec_init: str = "geometric_median"
    log_every: int = 10  # steps between step events
    eval_every: int = 0  # steps between calls of the evaluation callback (0: at the end only)
    checkpoint_every: int = 0  # steps between checkpoints (0: at the end only)
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("tokens", "batch_size", "buffer_rows", "dead_window", "log_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise SAEError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise SAEError(f"lr must be positive, got {self.lr}")
        for name in ("l1_coefficient", "l0_coefficient", "aux_k_coefficient", "lr_warmup_steps",
                     "lr_decay_steps", "sparsity_warmup_steps", "topk_start_steps", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise SAEError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.b_dec_init not in B_DEC_INITS:
            raise SAEError(f"b_dec_init {self.b_dec_init!r} is not one of {', '.join(B_DEC_INITS)}")

    @property
    def total_steps(self) -> int:
        return -(-self.tokens // self.batch_size)

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0-based): warm-up, constant, then decay."""
        scale = 1.0
        if self.lr_warmup_steps and step < self.lr_warmup_steps:
            scale = (step + 1) / self.lr_warmup_steps
        left = self.total_steps - step
        if self.lr_decay_steps and left < self.lr_decay_steps:
            scale = min(scale, max(left, 0) / self.lr_decay_steps)
        return self.lr * scale

    def coefficients_at(self, step: int) -> Coefficients:
        """The sparsity coefficients of step ``step``, ramped while warming up."""
        ramp = 1.0
        if self.sparsity_warmup_steps:
            ramp = min(1.0, (step + 1) / self.sparsity_warmup_steps)
        return Coefficients(l1=self.l1_coefficient * ramp, l0=self.l0_coefficient * ramp,
                            aux_k=self.aux_k_coefficient)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainSettings:  # its keys become the keyword arguments
        """Settings from a checkpoint's record, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})
