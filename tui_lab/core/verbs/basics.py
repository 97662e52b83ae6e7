"""The tutorials' pictures (positions, masks, scaling, schedule) of one model as numbers.

``tfx-lab basics TOPIC`` runs ``run`` on a model in hand (``--run``, ``--model``) or,
with none, on a preset's freshly built model (the schedule needs no model: none is
built). Each topic's numbers are a TypedDict of plain JSON values; the command line
says them in lines of its own. The lab's basics screen draws the same core pictures
(``analysis/basics``) as heatmaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from torch import Tensor, nn

    from tui_lab.core.analysis.basics.basics_scaling import ScalingRow
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task

TOPICS = ("positions", "masks", "scaling", "schedule")

Grid = list[list[float]]


class PositionsData(TypedDict):
    """``basics positions``: the positional table and its positions' dot products."""

    kind: str
    what: str
    length: int
    dims: int
    base: float | None
    rotated_dims: int | None
    table: Grid
    similarity: Grid


class MasksData(TypedDict):
    """``basics masks``: the padded batch, its three masks and one attention row before and after."""

    texts: list[str]
    lengths: list[int]
    row: int
    tokens: list[str]
    padding: list[list[int]]
    causal: list[list[int]]
    combined: list[list[int]]
    module: str
    head: int
    query: int
    before: list[float]
    after: list[float]
    encoder: bool


class ScalingFields(TypedDict):
    """One ``ScalingRow`` (a module's q.k, or random ones) with its fields as keys."""

    name: str
    d_k: int
    var_q: float
    var_k: float
    var_raw: float
    var_scaled: float
    entropy_raw: float
    entropy_scaled: float
    entropy_max: float
    model_scale: float | None


class ScalingData(TypedDict):
    """``basics scaling``: the model's modules and random q, k."""

    model: list[ScalingFields]
    random: list[ScalingFields]


class Peak(TypedDict):
    step: int
    lr: float


class ScheduleData(TypedDict):
    """``basics schedule``: the learning rate and Noam's over the steps, and their peaks."""

    schedule: str
    d_model: int
    warmup: int
    total: int
    by_time: bool
    steps: list[int]
    lr: list[float]
    noam: list[float]
    lr_peak: Peak
    noam_peak: Peak


@dataclass(frozen=True)
class Request:
    """One topic of one model: ``preset`` (None: copy) when no model is in hand; ``text`` an
    input for the masks and scaling; ``length`` positions; ``named`` what the user called
    the model in hand (a run folder or a model source), for the source line."""

    topic: str
    preset: str | None = None
    text: str | None = None
    length: int = 16
    named: str = ""

    def __post_init__(self) -> None:
        if self.length <= 0:
            raise LabError(f"--length: must be > 0, got {self.length}")
        if self.topic not in TOPICS:
            raise LabError(f"no such topic: {self.topic} (one of {', '.join(TOPICS)})")


@dataclass
class Result:
    """The topic's numbers (exactly one of the four set) and what model they are of."""

    topic: str
    source: str
    positions: PositionsData | None = None
    masks: MasksData | None = None
    scaling: ScalingData | None = None
    schedule: ScheduleData | None = None

    def to_json(self) -> JSON:
        data = self.positions or self.masks or self.scaling or self.schedule
        assert data is not None  # run sets the request's topic
        return {"topic": self.topic, "source": self.source, **data}


def run(request: Request, model: ModelInHand | None = None, progress: Progress = no_progress,
        cancelled: Cancelled = never) -> Result:
    """Work out ``request.topic``'s numbers for ``model`` (None: the preset's fresh model)."""
    stop_if(cancelled)
    if request.topic == "schedule" and model is None:
        # The schedule needs no model: skip building one.
        from tui_lab.core.config.presets import load_preset

        config = load_preset(request.preset)
        result = Result(request.topic, f"preset {config.name}", schedule=_schedule_data(config))
    else:
        config, module, task, source = _target(request, model)
        result = _topic(request, config, module, task, source)
    progress(1, 1, request.topic)
    return result


def _target(request: Request, model: ModelInHand | None) -> tuple[LabConfig, nn.Module, Task, str]:
    """(config, model, task, what it is) of the model in hand, or the preset's fresh model."""
    if model is not None:
        if model.card is not None:  # opened from files
            return model.config, model.model, model.task, f"{request.named} (opened from files)"
        return model.config, model.model, model.task, f"{request.named} at step {model.step:,}"
    from tui_lab.core.analysis.basics.basics_example import fresh_model
    from tui_lab.core.config.presets import load_preset

    config = load_preset(request.preset)
    module, task = fresh_model(config)
    return config, module, task, f"preset {config.name} (untrained: initial weights)"


def _topic(request: Request, config: LabConfig, model: nn.Module, task: Task, source: str) -> Result:
    topic, text = request.topic, request.text
    if topic == "positions":
        return Result(topic, source, positions=_positions_data(model, request.length))
    if topic == "masks":
        return Result(topic, source, masks=_masks_data(model, task, config, text))
    if topic == "scaling":
        return Result(topic, source, scaling=_scaling_data(model, task, config, text))
    return Result(topic, source, schedule=_schedule_data(config))


def _positions_data(model: nn.Module, length: int) -> PositionsData:
    from tui_lab.core.analysis.basics.basics_positions import position_picture

    p = position_picture(model, length)
    return {
        "kind": p.kind, "what": p.what, "length": p.length,
        "dims": int(p.table.size(1)) if p.table.ndim == 2 else 0,
        "base": p.base, "rotated_dims": p.rotated_dims,
        "table": _rounded_grid(p.table), "similarity": _rounded_grid(p.similarity),
    }


def _masks_data(model: nn.Module, task: Task, config: LabConfig, text: str | None) -> MasksData:
    from tui_lab.core.analysis.basics.basics_masks import mask_picture

    m = mask_picture(model, task, config.model.arch, text)
    return {
        "texts": m.batch.texts, "lengths": m.batch.lengths, "row": m.row, "tokens": m.labels,
        "padding": m.padding.int().tolist(), "causal": m.causal.int().tolist(),
        "combined": m.combined.int().tolist(), "module": m.module, "head": m.head,
        "query": m.query, "before": _numbers(m.before), "after": _numbers(m.after),
        "encoder": m.encoder,
    }


def _scaling_data(model: nn.Module, task: Task, config: LabConfig, text: str | None) -> ScalingData:
    from tui_lab.core.analysis.basics.basics_scaling import scaling_random, scaling_real

    return {"model": [_scaling_fields(r) for r in scaling_real(model, task, config.model.arch, text)],
            "random": [_scaling_fields(r) for r in scaling_random()]}


def _scaling_fields(r: ScalingRow) -> ScalingFields:
    """A row as ``dataclasses.asdict`` writes it (the JSON's key order)."""
    return {"name": r.name, "d_k": r.d_k, "var_q": r.var_q, "var_k": r.var_k, "var_raw": r.var_raw,
            "var_scaled": r.var_scaled, "entropy_raw": r.entropy_raw, "entropy_scaled": r.entropy_scaled,
            "entropy_max": r.entropy_max, "model_scale": r.model_scale}


def _schedule_data(config: LabConfig) -> ScheduleData:
    from tui_lab.core.analysis.basics.basics_schedule import schedule_picture

    s = schedule_picture(config)
    (lr_step, lr_top), (noam_step, noam_top) = s.lr_peak, s.noam_peak
    return {
        "schedule": s.schedule, "d_model": s.d_model, "warmup": s.warmup, "total": s.total,
        "by_time": s.by_time, "steps": s.steps, "lr": s.lr, "noam": s.noam,
        "lr_peak": {"step": lr_step, "lr": lr_top}, "noam_peak": {"step": noam_step, "lr": noam_top},
    }


def _numbers(t: Tensor) -> list[float]:
    """A 1-D tensor's numbers, each rounded to 6 places."""
    return [round(float(v), 6) for v in t.tolist()]


def _rounded_grid(t: Tensor) -> Grid:
    """A 2-D tensor's rows of numbers, each rounded to 6 places."""
    return [_numbers(row) for row in t]
