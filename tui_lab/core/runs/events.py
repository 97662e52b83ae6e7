"""What a training run reports, as small dataclasses (posted to the lab, printed by the CLI)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload


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
    # Teacher-forced accuracy of this update's batch (the whole training set under
    # train.full_batch): the share of rows whose every scored token is the argmax
    # (language models: of scored tokens). The L2 norm of every weight after the
    # update, which weight decay shrinks. None in older records.
    train_accuracy: float | None = None
    weight_norm: float | None = None


@dataclass
class EvalEvent:
    step: int
    val_loss: float
    exact_match: float | None
    n: int
    overlap: int | None  # held-out examples also seen in training so far
    # Language models (char-lm): validation loss in bits (val_loss / ln 2) and the
    # share of validation characters the argmax predicts. Defaults keep older
    # records, and algorithmic tasks, valid without them.
    bits_per_char: float | None = None
    next_char_accuracy: float | None = None


@dataclass
class OptimizerEvent:
    """Every few steps (training/group_stats.py): per parameter group its ``lr``,
    ``grad_norm`` (before clipping) and ``update_ratio`` (||dW|| / ||W||), and the
    speed then: tokens per second and MFU (training/mfu.py; None where unknown)."""

    step: int
    groups: dict[str, dict[str, float]]
    tokens_per_s: float
    mfu: float | None = None


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


Event = StepEvent | EvalEvent | OptimizerEvent | CheckpointEvent | LogEvent | DoneEvent


# ---- reading events back from a run folder's metrics.jsonl -------------------------------

_NAN = float("nan")


@overload
def _number(value: object, default: float) -> float: ...
@overload
def _number(value: object, default: None = None) -> float | None: ...
def _number(value: object, default: float | None = None) -> float | None:
    """``value`` as a float, ``default`` when it is missing; a bool or text is refused."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


@overload
def _count(value: object, default: int) -> int: ...
@overload
def _count(value: object, default: None = None) -> int | None: ...
def _count(value: object, default: int | None = None) -> int | None:
    """``value`` as a whole number (a float like 30.0 too), ``default`` when missing."""
    number = _number(value)
    if number is None:
        return default
    if number != int(number):
        raise ValueError(f"not a whole number: {value!r}")
    return int(number)


def event_from_record(record: object) -> StepEvent | EvalEvent | None:
    """The event a ``metrics.jsonl`` record stands for; None if it stands for none.

    Records are written as ``{"kind": "step" | "eval", **asdict(event)}``. Lines
    from older versions or cut short by a crash may lack keys or carry extra
    ones: extra keys are ignored; a missing figure reads as unknown (NaN, or
    None where the event allows it). Only what a chart cannot do without --
    the step and its loss -- is required; without it the record is skipped.
    """
    if not isinstance(record, dict):
        return None
    try:
        kind = record.get("kind")
        step = _count(record.get("step"))
        if step is None:
            return None
        if kind == "step":
            loss = _number(record.get("loss"))
            if loss is None:
                return None
            return StepEvent(
                step=step,
                total_steps=_count(record.get("total_steps"), 0),
                loss=loss,
                lr=_number(record.get("lr"), _NAN),
                grad_norm=_number(record.get("grad_norm"), _NAN),
                tokens_per_s=_number(record.get("tokens_per_s"), 0.0),
                elapsed=_number(record.get("elapsed"), _NAN),
                eta=_number(record.get("eta")),
                train_accuracy=_number(record.get("train_accuracy")),
                weight_norm=_number(record.get("weight_norm")),
            )
        if kind == "eval":
            val_loss = _number(record.get("val_loss"))
            if val_loss is None:
                return None
            return EvalEvent(
                step=step,
                val_loss=val_loss,
                exact_match=_number(record.get("exact_match")),
                n=_count(record.get("n"), 0),
                overlap=_count(record.get("overlap")),
                bits_per_char=_number(record.get("bits_per_char")),
                next_char_accuracy=_number(record.get("next_char_accuracy")),
            )
    except (TypeError, ValueError, OverflowError):
        return None  # a damaged figure: the record is skipped, the run stays readable
    return None
