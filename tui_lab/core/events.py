"""What a training run reports, as small dataclasses (posted to the lab, printed by the CLI)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepEvent:
    step: int
    total_steps: int
    loss: float
    lr: float
    grad_norm: float
    tokens_per_s: float
    elapsed: float
    eta: float | None


@dataclass
class EvalEvent:
    step: int
    val_loss: float
    exact_match: float | None
    n: int
    overlap: int | None  # held-out examples also seen in training so far


@dataclass
class CheckpointEvent:
    step: int
    path: str


@dataclass
class LogEvent:
    message: str
    level: str = "info"  # info | warning | error


@dataclass
class DoneEvent:
    reason: str  # finished | target | stopped | nan | time | error
    message: str
    step: int


Event = StepEvent | EvalEvent | CheckpointEvent | LogEvent | DoneEvent
