"""A run's metric curves (losses, exact match, training accuracy, weight norm), for overlay charts.

Each curve is indexed both by step and by training seconds, so a chart can
switch its x axis. A resumed run repeats the steps after its last checkpoint
in ``metrics.jsonl``; the later record of a step wins, as it is the one the
saved weights continue from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tui_lab.core.runs.log import read_metrics
from tui_lab.core.runs.run_files import RunDir


@dataclass
class Curve:
    """One metric of one run: ``steps[i]``, ``seconds[i]`` and ``values[i]`` go together."""

    steps: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def xs(self, by: str = "step") -> list[float]:
        """The x values for ``by`` = ``"step"`` or ``"seconds"``."""
        return [float(s) for s in self.steps] if by == "step" else self.seconds


@dataclass
class RunCurves:
    """Every curve of one run folder."""

    path: str
    train_loss: Curve
    val_loss: Curve
    exact_match: Curve
    # Per step (older runs have none): the update's training accuracy, the weights' L2 norm.
    train_accuracy: Curve = field(default_factory=Curve)
    weight_norm: Curve = field(default_factory=Curve)

    def curve(self, metric: str) -> Curve:
        """``metric`` is one of ``METRICS``."""
        return getattr(self, metric)


METRICS = ("train_loss", "val_loss", "exact_match", "train_accuracy", "weight_norm")


def first_step_at(curve: Curve, threshold: float) -> int | None:
    """The first step whose value is at least ``threshold`` (None if none is)."""
    return next((s for s, v in zip(curve.steps, curve.values, strict=True) if v >= threshold), None)


def read_curves(run_dir: RunDir) -> RunCurves:
    """The curves of ``run_dir``; empty curves when it has no metrics yet."""
    train: dict[int, tuple[float, float]] = {}
    per_step: dict[int, tuple[float | None, float | None]] = {}  # train accuracy, weight norm
    evals: dict[int, tuple[float | None, float | None]] = {}
    for rec in read_metrics(run_dir):
        step = rec.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            continue
        if rec.get("kind") == "step":
            loss, elapsed = _num(rec.get("loss")), _num(rec.get("elapsed"))
            if loss is not None:
                train.pop(step, None)  # re-insert: a repeated step moves to the end
                train[step] = (loss, elapsed if elapsed is not None else float("nan"))
                per_step[step] = (_num(rec.get("train_accuracy")), _num(rec.get("weight_norm")))
        elif rec.get("kind") == "eval":
            evals.pop(step, None)
            evals[step] = (_num(rec.get("val_loss")), _num(rec.get("exact_match")))
    train_loss, val_loss, exact, train_acc, norm = Curve(), Curve(), Curve(), Curve(), Curve()
    for step in sorted(train):
        loss, seconds = train[step]
        _add(train_loss, step, seconds, loss)
        acc, size = per_step[step]
        if acc is not None:
            _add(train_acc, step, seconds, acc)
        if size is not None:
            _add(norm, step, seconds, size)
    for step in sorted(evals):
        seconds = train[step][1] if step in train else float("nan")
        val, em = evals[step]
        if val is not None:
            _add(val_loss, step, seconds, val)
        if em is not None:
            _add(exact, step, seconds, em)
    return RunCurves(str(Path(run_dir)), train_loss, val_loss, exact, train_acc, norm)


def _add(curve: Curve, step: int, seconds: float, value: float) -> None:
    curve.steps.append(step)
    curve.seconds.append(seconds)
    curve.values.append(value)


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def mean_curve(curves: list[Curve]) -> Curve:
    """The mean of several runs' curves (an arm of a sweep over seeds).

    By step: at the steps every run has (seeds of one arm log the same steps;
    a run that stopped early ends the mean there). The seconds of a mean point
    are the mean of the runs' seconds at that step.
    """
    curves = [c for c in curves if c.steps]
    if not curves:
        return Curve()
    shared = set(curves[0].steps)
    for c in curves[1:]:
        shared &= set(c.steps)
    index = [{s: i for i, s in enumerate(c.steps)} for c in curves]
    out = Curve()
    for step in sorted(shared):
        n = len(curves)
        seconds = sum(c.seconds[ix[step]] for c, ix in zip(curves, index, strict=True)) / n
        value = sum(c.values[ix[step]] for c, ix in zip(curves, index, strict=True)) / n
        _add(out, step, seconds, value)
    return out
