"""A parameter breakdown: a preset's, counted before anything is built, or a model in hand's,
counted on its weights (rows, total, memory and FLOPs per token).

``tfx-lab params`` runs ``run`` with the model it opened (``--model``) or none (a preset).
A preset is read before torch is imported, so a bad one is refused at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from tui_lab.core.model.params import ParamReport
    from tui_lab.core.opening.in_hand import ModelInHand


@dataclass(frozen=True)
class Request:
    """The preset to count (a name or a YAML path; None: the default) when no model is given."""

    preset: str | None = None


@dataclass
class Result:
    """The core's ``ParamReport`` and what it counts: a preset's or a model's name."""

    report: ParamReport
    name: str
    of_model: bool

    def to_json(self) -> JSON:
        r = self.report
        return {
            "model" if self.of_model else "preset": self.name,
            "total": r.total,
            "rows": [{"name": row.name, "params": row.params, "group": row.group} for row in r.rows],
            "fp32_bytes": r.fp32_bytes,
            "bf16_bytes": r.bf16_bytes,
            "train_flops_per_token": r.train_flops_per_token,
            "infer_flops_per_token": r.infer_flops_per_token,
        }


def run(request: Request, model: ModelInHand | None = None, progress: Progress = no_progress,
        cancelled: Cancelled = never) -> Result:
    """Count the model in hand's weights, or (``model`` None) the preset's model on the meta device."""
    if model is not None:
        from tui_lab.core.model.params import report_for_model

        stop_if(cancelled)
        return Result(report_for_model(model.model, model.config.model.max_len), model.config.name, True)
    from tui_lab.core.config.presets import load_preset

    cfg = load_preset(request.preset)  # a bad preset is refused before torch is imported
    stop_if(cancelled)
    from tui_lab.core.model.params import parameter_report
    from tui_lab.core.tasks import make_task

    return Result(parameter_report(cfg.model, len(make_task(cfg.task).vocab)), cfg.name, False)
