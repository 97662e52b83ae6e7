"""A run written in a format other tools read: a Hugging Face folder (``Request``,
``run``) or TensorBoard event files (``TensorboardRequest``, ``run_tensorboard``).

``tfx-lab export --hf`` and ``--tensorboard`` run these. The model is the run
folder itself (the writers read it, weights and metrics), so neither takes a model
in hand. The writing is ``core.export.export_hf``'s and ``core.runs.tensorboard_export``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from tui_lab.core.export.export_hf import ExportResult
    from tui_lab.core.runs.tensorboard_export import ExportResult as TensorboardExport


@dataclass(frozen=True)
class Request:
    """One run (its history snapshot ``at_step``, None: its weights now) to the new folder ``out``."""

    run: str
    out: str
    at_step: int | None = None

    def __post_init__(self) -> None:
        if not self.out:
            raise LabError("export --hf needs --out DIR (the folder to write)")


@dataclass
class Result:
    """What ``export_hf`` wrote, with the self-check's largest logit difference."""

    written: ExportResult

    def to_json(self) -> JSON:
        w = self.written
        return {
            "folder": str(w.folder), "family": w.family, "step": w.step,
            "params": w.n_params, "files": w.files, "max_logit_diff": w.max_logit_diff,
        }


def run(request: Request, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Write ``request.run`` as a Hugging Face folder that ``transformers`` opens with no custom code."""
    from tui_lab.core.export.export_hf import export_hf

    stop_if(cancelled)
    written = export_hf(request.run, request.out, at_step=request.at_step)
    progress(1, 1, "hugging face folder")
    return Result(written)


@dataclass(frozen=True)
class TensorboardRequest:
    """Run folders, each with the name of its event folder under ``out``."""

    runs: tuple[Path, ...]
    names: tuple[str, ...]
    out: Path

    def __post_init__(self) -> None:
        if len(self.runs) != len(self.names) or len(set(self.names)) != len(self.names):
            raise LabError("export --tensorboard: one distinct name per run")


@dataclass
class Exported:
    """One run's outcome: what was written, or the one-line reason it was not."""

    name: str
    written: TensorboardExport | None = None
    error: LabError | None = None

    def to_json(self) -> JSON:
        if self.written is None:
            return {"name": self.name, "error": str(self.error)}
        w = self.written
        return {"name": self.name, "folder": str(w.folder), "points": w.points, "steps": w.steps,
                "evals": w.evals, "replaced": w.replaced}


@dataclass
class TensorboardResult:
    """Every run's outcome in the request's order (a run that failed leaves the others)."""

    out: Path
    runs: list[Exported] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(e.written is None for e in self.runs)

    def to_json(self) -> JSON:
        return {"out": str(self.out), "runs": [e.to_json() for e in self.runs]}


def run_tensorboard(request: TensorboardRequest, progress: Progress = no_progress,
                    cancelled: Cancelled = never) -> TensorboardResult:
    """Write each run's metrics and config as TensorBoard event files under ``request.out``."""
    from tui_lab.core.runs.tensorboard_export import export_run, summary_writer_class

    summary_writer_class()  # a missing extra is one error, before any run is read
    result = TensorboardResult(request.out)
    for i, (folder, name) in enumerate(zip(request.runs, request.names, strict=True)):
        stop_if(cancelled)
        try:
            result.runs.append(Exported(name, written=export_run(folder, request.out, name)))
        except LabError as exc:
            result.runs.append(Exported(name, error=exc))
        progress(i + 1, len(request.runs), name)
    return result
