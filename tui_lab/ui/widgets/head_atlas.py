"""The head atlas: every head with its best-fitting pattern and score, best first.

Scores come from the core's ``head_scores`` on the model of the decode on
show (the live model or a history snapshot), in a thread worker: a lab run's
task probes, or the standard repeat probe for a model opened from files.
A head whose best score does not clear the floor is shown as "no clear
pattern"; lines under the table say which probe each score was taken on. With a
history, each head's best-pattern score is also drawn over training steps
(``core.head_curves.score_curves``: computed once per run folder in a
background worker, progress shown, kept in memory for the lab's session).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import Static
from typing_extensions import Unpack

from tui_lab.core.errors import one_line
from tui_lab.ui.state.travel import sparkline
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.heads.atlas import Atlas, HeadScore
    from tui_lab.core.analysis.heads.head_curves import ScoreCurves
    from tui_lab.core.tasks.protocol import Task

BAR = 10
SPARK = 24


def bar(score: float, width: int = BAR) -> str:
    """A score in [0, 1] as a bar of eighths ``width`` cells long."""
    eighths = round(max(0.0, min(1.0, score)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width)


class HeadAtlas(Static):
    """All heads of the model on show, labelled and sorted; a score curve each with history."""

    DEFAULT_CSS = """
    HeadAtlas { height: auto; display: none; margin-bottom: 1; }
    """

    class Scored(Message):
        """Scores of the model on show arrived (``heads`` None: ``error`` says why not).

        ``heads``: the core's ``Atlas`` (its probes described) or its list of heads.
        """

        def __init__(
            self, model: nn.Module, heads: Atlas | list[HeadScore] | None, error: str | None = None
        ) -> None:
            super().__init__()
            self.model, self.error = model, error
            self.probes: dict[str, str] = {}
            self.heads: list[HeadScore] | None = None
            if heads is None or isinstance(heads, list):  # no probes described
                self.heads = heads
            else:
                self.probes, self.heads = heads.probes, heads.heads

    @dataclass
    class CurvesScored(Message):
        """Score curves of ``run_dir``: ``done`` of ``total`` snapshots scored so far."""

        run_dir: Path
        curves: ScoreCurves | None
        done: int
        total: int
        error: str | None = None

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.heads: list[HeadScore] | None = None
        self.probe_lines: list[str] = []  # which probe each score was taken on, and the floor
        self.error: str | None = None
        self._model: nn.Module | None = None  # the model the scores are (being) computed for
        self.run_dir: Path | None = None
        self.step: int | None = None
        self.curves: ScoreCurves | None = None
        self.progress: tuple[int, int] | None = None
        self._busy = False
        self._pending: tuple[nn.Module, Task, str] | None = None
        # Score curves of complete run folders, shared with the lab's other atlases (follow()).
        self.score_curves: dict[Path, ScoreCurves] = {}

    def follow(
        self,
        model: nn.Module | None,
        task: Task,
        arch: str,
        run_dir: Path | None,
        step: int | None,
        score_curves: dict[Path, ScoreCurves],
    ) -> None:
        """Score ``model`` unless it is the one scored already; start the curves of ``run_dir``.

        ``score_curves`` keeps each folder's complete curves (the lab's, so they are worked
        out once per folder whatever shows them).
        """
        self.step = step
        self.score_curves = score_curves
        if model is not None and model is not self._model:
            self._model, self.heads, self.error = model, None, None
            if self._busy:  # one scoring at a time: the newest model waits its turn
                self._pending = (model, task, arch)
            else:
                self._busy = True
                self._score_worker(model, task, arch)
        if run_dir is not None and run_dir != self.run_dir:
            self.run_dir, self.curves, self.progress = run_dir, None, None
            cached = score_curves.get(run_dir)
            if cached is not None:
                self.curves = cached
            else:
                self._curves_worker(run_dir)
        self._draw()

    @work(thread=True, exclusive=True, exit_on_error=False, group="atlas")
    def _score_worker(self, model: nn.Module, task: Task, arch: str) -> None:
        """Score every head of a copy of ``model`` on its task's probe, or on the standard
        probe for a model opened from files (thread)."""
        from tui_lab.ui.widgets.atlas_scores import atlas_heads

        try:
            heads = atlas_heads(model, task, arch)
        except Exception as exc:  # noqa: BLE001 - shown in the atlas, never a crash
            self.post_message(self.Scored(model, None, one_line(exc)))
            return
        self.post_message(self.Scored(model, heads))

    @work(thread=True, exclusive=True, exit_on_error=False, group="atlas-curves")
    def _curves_worker(self, run_dir: Path) -> None:
        """Score every history snapshot of ``run_dir``, posting progress after each (thread)."""
        from tui_lab.core.analysis.heads.head_curves import ScoreCurves, score_curves
        from tui_lab.core.runs.snapshots import list_snapshots

        total = len(list_snapshots(run_dir))
        if not total:
            return
        partial = ScoreCurves()

        def on_step(step: int, heads: list[HeadScore]) -> None:
            partial.add(step, heads)
            self.post_message(
                self.CurvesScored(run_dir, copy.deepcopy(partial), len(partial.steps), total)
            )

        try:
            score_curves(run_dir, on_step=on_step)
        except Exception as exc:  # noqa: BLE001
            self.post_message(self.CurvesScored(run_dir, None, 0, total, one_line(exc)))

    def on_head_atlas_scored(self, message: HeadAtlas.Scored) -> None:
        """Keep the scores of the model still on show, then draw."""
        message.stop()
        self._busy = False
        if self._pending is not None:
            pending, self._pending = self._pending, None
            if pending[0] is self._model:
                self._busy = True
                self._score_worker(*pending)
        if message.model is self._model:
            self.heads, self.error = message.heads, message.error
            self.probe_lines = [] if message.heads is None else self._probe_lines(message)
            self._draw()

    @staticmethod
    def _probe_lines(message: HeadAtlas.Scored) -> list[str]:
        """Which probe each score was taken on, and the label floor."""
        from tui_lab.core.analysis.heads.atlas import probe_lines

        return probe_lines(message.heads or [], message.probes)

    def on_head_atlas_curves_scored(self, message: HeadAtlas.CurvesScored) -> None:
        """Grow the score curves; keep them for the folder once every snapshot is scored."""
        message.stop()
        if message.run_dir != self.run_dir:
            return
        if message.error:
            self.progress, self.error = None, f"score curves: {message.error}"
        else:
            self.curves, self.progress = message.curves, (message.done, message.total)
            if message.done >= message.total and message.curves is not None:
                self.score_curves[message.run_dir] = message.curves
                self.progress = None
        self._draw()

    def _draw(self) -> None:
        if not self.display:
            return
        title = Text("Head atlas", style="bold")
        title.append(
            f" · step {self.step:,}" if self.step is not None else " · latest", style="dim"
        )
        if self.progress is not None:
            title.append(
                f" · score curves {self.progress[0]}/{self.progress[1]} snapshots…",
                style="dim italic",
            )
        if self.error:
            self.update(Text.assemble(title, "\n", (self.error, "red")))
            return
        if self.heads is None:
            self.update(Text.assemble(title, "\n", ("scoring every head…", "dim italic")))
            return
        title.append(f" · {len(self.heads)} heads, best first", style="dim")
        table = Table.grid(padding=(0, 1))
        for _ in range(5 if self.curves is not None else 4):
            table.add_column(no_wrap=True)
        for h in self.heads:
            clear = h.pattern is not None
            row = [
                Text(h.label, style="bold"),
                Text(h.shown, style="cyan" if clear else "dim italic"),
                Text(f"{h.best_score:.2f}", style="" if clear else "dim"),
                Text(bar(h.best_score), style="yellow" if clear else "dim"),
            ]
            if self.curves is not None:
                points = self.curves.curve(h.label, h.best)
                row.append(Text(sparkline([v for _, v in points], SPARK, 0.0, 1.0), style="green"))
            table.add_row(*row)
        parts: list[RenderableType] = [title, table, *(Text(line, style="dim") for line in self.probe_lines)]
        if self.curves is not None and self.curves.steps:
            steps = self.curves.steps  # snapshots are denser early (1, 2, 4, ...): say what x is
            parts.append(Text(
                f"curves: each head's score (0 to 1) at the run's {len(steps)} snapshots, "
                f"step {steps[0]:,} to {steps[-1]:,}",
                style="dim",
            ))
        self.update(Group(*parts))
