"""The Attention pane's interventions: switch the head on show off (``x``) and the importance table (``i``).

A mixin for ``AttentionPane``. The heads switched off live in the Decode
pane's ``AblationState`` (its decodes apply them, to a private model copy);
toggling one here reruns the decode on show. The importance table ablates
each head alone on N held-out examples in a thread worker, on its own copy
of the model, cached in the run folder per checkpoint (or history snapshot).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.message import Message

from tui_lab.ui.widgets.importance_view import ImportanceView

IMPORTANCE_N = 200  # held-out examples per head in the lab (the CLI's --n)
PROGRESS_EVERY = 0.1  # seconds between progress messages (the last one always goes)


@dataclass
class ImportanceProgress(Message):
    """``done`` of ``total`` heads measured."""

    done: int
    total: int
    what: str


@dataclass
class ImportanceReady(Message):
    """The importance table (``table`` None and ``error`` set if it failed)."""

    table: Any = None
    cached: bool = False
    where: str = ""
    error: str | None = None


class AttentionAblationMixin:
    """``x`` toggles the selected head, ``m`` cycles zero/mean, ``X`` restores all, ``i`` importance."""

    importance_n = IMPORTANCE_N
    importance_shown = False

    # ---- what is selected and what is ablated ------------------------------------------

    @property
    def selected_head(self) -> str | None:
        """The core name of the head on show (``decoder.0.cross:2``), None before a decode."""
        name = getattr(self, "capture_name", None)
        return None if name is None else f"{name}:{self.head_index}"  # type: ignore[attr-defined]

    def _decode_pane(self) -> Any:
        return self.app.pane("decode")  # type: ignore[attr-defined]

    def ablation_header(self, text: Text) -> None:
        """Append what the lab's decodes run without to the header line."""
        pane = self._decode_pane()
        if pane is not None and pane.ablation.active:
            text.append(f"   ablated: {pane.ablation.label()}", style="bold magenta")

    def _rerun(self) -> None:
        """Decode the input on show again, with the heads as they are switched now."""
        self._update_header()  # type: ignore[attr-defined]
        result = getattr(self, "result", None)
        if result is not None:
            self._decode_pane().decode(result.input)

    # ---- actions --------------------------------------------------------------------------

    def action_toggle_ablation(self) -> None:
        """Switch the head on show off (or back on) and decode the input again."""
        if not self._need_data() or self._decode_pane() is None:  # type: ignore[attr-defined]
            return
        head = self.selected_head
        off = self._decode_pane().ablation.toggle(head)
        self.notify(f"{head} switched {'off' if off else 'back on'}", timeout=2)  # type: ignore[attr-defined]
        self._rerun()

    def action_cycle_ablation_mode(self) -> None:
        """Ablate by zeroing the head's output or by its mean output (and decode again)."""
        pane = self._decode_pane()
        if pane is None:
            return
        mode = pane.ablation.cycle_mode()
        self.notify(f"ablation mode: {mode}", timeout=2)  # type: ignore[attr-defined]
        if pane.ablation.active:
            self._rerun()
        elif self.importance_shown:
            self._start_importance()

    def action_restore_heads(self) -> None:
        """Switch every ablated head back on and decode again."""
        pane = self._decode_pane()
        if pane is not None and pane.ablation.active:
            pane.ablation.clear()
            self._rerun()

    def action_toggle_importance(self) -> None:
        """Show or hide the exact-match drop of each head ablated alone (computed in the background)."""
        self.importance_shown = not self.importance_shown
        self.query_one(ImportanceView).display = self.importance_shown  # type: ignore[attr-defined]
        if self.importance_shown:
            self._start_importance()

    # ---- the importance table -------------------------------------------------------------

    def _start_importance(self) -> None:
        view = self.query_one(ImportanceView)  # type: ignore[attr-defined]
        pane = self._decode_pane()
        run = getattr(pane, "run", None)
        if run is None:
            view.show_message("no model yet: train one (2) or open a run")
            return
        mode = pane.ablation.mode
        view.show_message(f"importance: starting ({mode}, N={self.importance_n})…")
        training = bool(getattr(self.app, "training_active", False))  # type: ignore[attr-defined]
        self._importance_worker(run, mode, self.importance_n, training, self._snapshot_step())

    def _snapshot_step(self) -> int | None:
        """The history snapshot the lab has on show (time travel), None for the run's own model."""
        try:
            from tui_lab.ui.time_travel.travel import travel_for

            return travel_for(self.app).state.step  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - no time travel: the run's own model
            return None

    @work(thread=True, exclusive=True, exit_on_error=False, group="importance")
    def _importance_worker(
        self, run: Any, mode: str, n: int, training: bool, at_step: int | None
    ) -> None:
        """Ablate each head alone on ``n`` held-out examples; post progress and the table (thread)."""
        try:
            self.post_message(ImportanceReady(*self._importance(run, mode, n, training, at_step)))  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            lines = str(exc).strip().splitlines()
            self.post_message(ImportanceReady(error=lines[0] if lines else type(exc).__name__))  # type: ignore[attr-defined]

    def _importance(
        self, run: Any, mode: str, n: int, training: bool, at_step: int | None
    ) -> tuple[Any, bool, str]:
        from tui_lab.core.analysis.head_importance import (
            cached_importance,
            importance,
            probe_means,
            weights_key,
        )
        from tui_lab.core.training.evaluate import held_out_pairs

        run_dir = Path(run.out_dir) if run.out_dir is not None else None
        if at_step is not None and run_dir is not None:
            from tui_lab.ui.time_travel.travel import travel_for

            model = travel_for(self.app).snapshot_model(run_dir, at_step, run.model)  # type: ignore[attr-defined]
            where, key = f"snapshot at step {at_step:,}", weights_key(run_dir, at_step)
        else:
            model = copy.deepcopy(run.model)  # never the Train pane's model
            where = f"model at step {run.step:,}"
            # Cached per checkpoint: only when the weights are the checkpoint's.
            key = (
                None
                if training or run_dir is None or not _at_checkpoint(run_dir, run.step)
                else weights_key(run_dir)
            )
        pairs = held_out_pairs(run.task, run.config.train, n)
        arch = run.config.model.arch
        device = next(model.parameters()).device
        what = f"{mode}, N={len(pairs)}"
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done == total or now - last[0] >= PROGRESS_EVERY:  # merged: no flood of messages
                last[0] = now
                self.post_message(ImportanceProgress(done, total, what))  # type: ignore[attr-defined]

        def compute() -> Any:
            means = probe_means(model, run.task, arch, pairs, device) if mode == "mean" else None
            max_new = run.config.sequence_length_needed()
            return importance(model, run.task, pairs, max_new, mode, means, progress)

        table, cached = cached_importance(run_dir or ".", key, compute, mode=mode, n=len(pairs))
        return table, cached, where

    def on_importance_progress(self, message: ImportanceProgress) -> None:
        """Move the importance progress line."""
        message.stop()
        self.query_one(ImportanceView).show_progress(message.done, message.total, message.what)  # type: ignore[attr-defined]

    def on_importance_ready(self, message: ImportanceReady) -> None:
        """Show the importance table (or why there is none)."""
        message.stop()
        view = self.query_one(ImportanceView)  # type: ignore[attr-defined]
        if message.table is None:
            view.show_message(f"importance unavailable: {message.error}")
        else:
            view.show_table(message.table, message.cached, message.where)


def _at_checkpoint(run_dir: Path, step: int) -> bool:
    """Whether the run folder's checkpoint holds ``step``'s weights."""
    import json

    try:
        return int(json.loads((run_dir / "state.json").read_text())["step"]) == int(step)
    except (OSError, ValueError, KeyError, TypeError):
        return False
