"""What the Train pane shows of a run, Textual-free: the run on show and its figures
(``ShownRun``), and the pane's words (its title line, how a run ended).

``ShownRun`` keeps the run the pane shows, its folder, and the newest step and
evaluation the metrics and progress bar draw; the pane tells it what the
training process, a followed folder or an opened one reported, and redraws
when ``figures_dirty`` says something changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.runs.events import EvalEvent, StepEvent
from tui_lab.ui.panes.train.run_follow import MetricEvent, latest, resting_step

if TYPE_CHECKING:  # torch-backed: loaded by the time a run is built
    from tui_lab.core.config.sections import ModelConfig, TaskConfig, TrainConfig
    from tui_lab.core.training.remote import RemoteRun

Severity = Literal["information", "warning", "error"]  # a notification's (Textual's SeverityLevel)
DONE_TITLES: dict[str, tuple[str, Severity]] = {
    "finished": ("Run finished", "information"),
    "target": ("Target reached", "information"),
    "stopped": ("Training stopped", "information"),
    "time": ("Time limit reached", "information"),
    "nan": ("Training stopped: NaN", "error"),
    "error": ("Training failed", "error"),
}


def done_notice(reason: str) -> tuple[str, Severity]:
    """The title and severity of the notification that says why a run ended."""
    return DONE_TITLES.get(reason, ("Run ended", "information"))


def sections(config: LabConfig) -> tuple[ModelConfig, TaskConfig, TrainConfig]:
    """What a run trains on: a change of name alone does not make the shown run stale."""
    return (config.model, config.task, config.train)


def opened_model_line(source: str, encoder_only: bool, toggle_key: str) -> str:
    """The title line for a model opened from files (``--model``): not trained here, fine-tuned."""
    from rich.markup import escape

    what = (  # an encoder (BERT) is not fine-tuned here: action_start says why
        "an encoder-only (masked-LM) model: fine-tuning here trains decoder-only models"
        if encoder_only
        else f"{toggle_key} fine-tunes it on the text typed under its card in Build"
    )
    return f"[b]{escape(source)}[/b] · opened from files · {what}"


def finetune_refusal(config: LabConfig | None) -> str | None:
    """Why the opened model (its ``config``; None: none open) cannot be fine-tuned, or None."""
    if config is None:
        return None
    from tui_lab.core.training.finetune import finetune_refusal as refusal  # torch-backed

    return refusal(config)


def finetune_wanted(source: str, build_key: str) -> str:
    """What fine-tuning a model opened from files waits for: a text file typed in Build."""
    return (f"to fine-tune {source}, type a text file under its card in "
            f"Build ({build_key}), once it is open")


class ShownRun:
    """The run on show (None before one is built or opened) and the figures drawn of it."""

    def __init__(self) -> None:
        self.run: RemoteRun | None = None  # (a test may give a stand-in)
        self.run_dir: Path | None = None
        self.device = ""
        self.last_step: StepEvent | None = None
        self.last_eval: EvalEvent | None = None
        self.best: float | None = None
        self.figures_dirty = True
        self.config_dirty = False  # the lab's config no longer trains the run on show
        self._seen_step: StepEvent | None = None
        # An opened folder's newest records, shown once its run is restored (``ready``).
        self.opened_figures: tuple[StepEvent | None, EvalEvent | None] = (None, None)

    def clear(self) -> None:
        """Forget the run and its figures (a new, reset or opened run replaces them)."""
        self.run = None
        self.run_dir = None
        self.last_step = self.last_eval = self.best = None
        self.opened_figures = (None, None)
        self.config_dirty = False

    def config_or(self, config: LabConfig) -> LabConfig:
        """The config of the run on show, else the lab's."""
        return self.run.config if self.run is not None else config

    def status_line(self, config: LabConfig, runs_root: Path, hint: str, reset_key: str, speed: str = "") -> str:
        """The title line: the run's name, its speed (tokens/s, MFU) and folder, what the keys
        do now, a stale config."""
        name = self.config_or(config).name
        where = f" · {self.run_dir}" if self.run_dir else f" · new runs go to {runs_root}/"
        dirty = (
            f" · [b]config edited: {reset_key} resets to train it[/b]"
            if self.config_dirty and self.run is not None
            else ""
        )
        fast = f" · {speed}" if speed else ""
        return f"[b]{name}[/b]{fast}{where} · {hint}{dirty}"

    def config_edited(self, config: LabConfig) -> None:
        """The Build pane's config changed: the run on show is stale if it trains on other sections."""
        if self.run is not None:
            self.config_dirty = sections(config) != sections(self.run.config)
        self.figures_dirty = True

    def take_newest(self, newest: StepEvent | None) -> None:
        """The step the event thread recorded last (it posts no message per step)."""
        if newest is not None and newest is not self._seen_step:
            self._seen_step = self.last_step = newest
            self.figures_dirty = True

    def evaluated(self, event: EvalEvent) -> None:
        """Keep the newest evaluation and the best exact match."""
        self.last_eval = event
        if event.exact_match is not None:
            self.best = max(self.best or 0.0, event.exact_match)
        self.figures_dirty = True

    def watched(self, events: list[MetricEvent]) -> None:
        """A followed folder's records: its newest step and evaluation."""
        step, evaluation = latest(events)
        self.last_step = step or self.last_step
        self.last_eval = evaluation or self.last_eval
        self.figures_dirty = True

    def ready(self, run: RemoteRun, resumed: bool) -> None:
        """A run (new or restored) exists: show it; a restored one at rest on its last record."""
        self.run = run
        self.run_dir = run.out_dir
        self.device = run.device_name
        self.config_dirty = False
        if not resumed:
            return
        self.best = run.best_accuracy
        opened_step, opened_eval = self.opened_figures  # of a folder just opened
        self.opened_figures = (None, None)
        last = opened_step or self.last_step
        if run.last_step is None and run.step and last is not None:
            # Not trained since it was restored: its last record, at rest.
            self.last_step = resting_step(last, run.step, run.total_steps, run.elapsed)
        self.last_eval = opened_eval or self.last_eval
