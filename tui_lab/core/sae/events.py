"""What training reports as it goes: steps (for live curves), checkpoints, and the end."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class SAEStepEvent:
    """One logged step: the batch's losses and metrics, for live curves and metrics.jsonl."""

    step: int
    tokens: int
    total_tokens: int
    loss: float
    mse: float  # mean squared error per element
    l0: float
    explained_variance: float
    fvu: float  # fraction of variance unexplained, 1 − explained_variance
    dead_fraction: float
    sparsity_loss: float
    aux_loss: float
    lr: float
    elapsed: float
    extra: dict[str, float] = field(default_factory=dict)  # the evaluation callback's numbers

    kind = "step"

    def record(self) -> dict[str, object]:
        out = {"kind": self.kind, **asdict(self)}
        out.update(out.pop("extra"))
        return out


@dataclass(frozen=True)
class SAECheckpointEvent:
    """The run folder now holds the SAE (SAELens's files) and the state to resume at ``step``."""

    step: int
    tokens: int
    folder: str

    kind = "checkpoint"

    def record(self) -> dict[str, object]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class SAEEndEvent:
    """Training stopped: ``reason`` is "done", "stopped", "interrupted" or "source ended"."""

    step: int
    tokens: int
    reason: str
    elapsed: float

    kind = "end"

    def record(self) -> dict[str, object]:
        return {"kind": self.kind, **asdict(self)}


SAEEvent = SAEStepEvent | SAECheckpointEvent | SAEEndEvent
