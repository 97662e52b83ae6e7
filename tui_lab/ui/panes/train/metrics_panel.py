"""The Train pane's figures: step, losses, accuracy, lr, grad norm, speed, time, device."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from tui_lab.core.runs.events import EvalEvent, StepEvent
from tui_lab.ui.panes.train.train_state import Phase, TrainState
from tui_lab.ui.widgets.model_summary import human

STATE_STYLES = {
    Phase.IDLE: ("○ idle", "dim"),
    Phase.LOADING: ("◌ loading torch", "yellow"),
    Phase.BUILDING: ("◌ building model", "yellow"),
    Phase.READY: ("○ ready", "cyan"),
    Phase.RUNNING: ("● training", "green"),
    Phase.PAUSED: ("‖ paused", "yellow"),
    Phase.STOPPING: ("◌ stopping", "yellow"),
    Phase.DONE: ("■ done", "cyan"),
    Phase.FOLLOWING: ("◉ following", "magenta"),
}


def number(value: float | None, spec: str) -> str:
    """A figure formatted with ``spec``; '-' when unknown (None or NaN)."""
    if value is None or value != value:
        return "-"
    return format(value, spec)


def clock(seconds: float | None) -> str:
    """Seconds as m:ss or h:mm:ss; '-' when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = int(seconds + 0.5)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class MetricsPanel(Static):
    """A two-column grid of the run's latest numbers."""

    _rows: int | None = None  # the grid's rows as last drawn (None: never drawn)

    def show(
        self,
        state: TrainState,
        step: StepEvent | None = None,
        evaluation: EvalEvent | None = None,
        total_steps: int | None = None,
        device: str = "",
        best: float | None = None,
    ) -> None:
        """Render the latest StepEvent/EvalEvent and the run state."""
        label, style = STATE_STYLES[state.phase]
        if state.phase is Phase.DONE and state.reason:
            label = f"■ {state.reason}"  # finished, stopped, nan, ...: more telling than "done"
        elif state.phase is Phase.FOLLOWING and state.reason:
            label = f"◉ followed: {state.reason}"  # the other process's run has ended
        grid = Table.grid(padding=(0, 1), expand=True)
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_row("state", Text(label, style=f"bold {style}"))
        total = step.total_steps if step is not None else total_steps
        grid.add_row(
            "step", f"{step.step:,} / {total:,}" if step is not None else f"0 / {total or 0:,}"
        )
        grid.add_row("loss", number(step.loss if step is not None else None, ".4f"))
        grid.add_row(
            "val loss", number(evaluation.val_loss if evaluation is not None else None, ".4f")
        )
        bpc = evaluation.bits_per_char if evaluation is not None else None
        acc = evaluation.exact_match if evaluation is not None else None
        if bpc is not None and acc is None:
            # A language model has no exact answer: its next-character accuracy stands in.
            acc = evaluation.next_char_accuracy if evaluation is not None else None
        acc_text = Text(f"{acc:.1%}" if acc is not None else "-", style="bold" if acc else "")
        if acc is not None and acc >= 0.99:
            acc_text.stylize("green")
        grid.add_row("next char" if bpc is not None else "accuracy", acc_text)
        if bpc is not None:
            grid.add_row("bits/char", number(bpc, ".3f"))
        if best is not None:
            grid.add_row("best", f"{best:.1%}")
        grid.add_row("lr", number(step.lr if step is not None else None, ".2e"))
        grid.add_row("grad norm", number(step.grad_norm if step is not None else None, ".3f"))
        tps = step.tokens_per_s if step is not None else None
        grid.add_row("tokens/s", human(tps) if tps else "-")
        grid.add_row("elapsed", clock(step.elapsed) if step is not None else "-")
        grid.add_row(
            "ETA", clock(step.eta) if step is not None and state.phase in (Phase.RUNNING, Phase.PAUSED) else "-"
        )
        grid.add_row("device", device or "-")
        # A re-layout of the whole screen costs tens of milliseconds on a busy
        # machine: only ask for one when the panel gains or loses a row.
        rows = grid.row_count
        self.update(grid, layout=rows != self._rows)
        self._rows = rows
