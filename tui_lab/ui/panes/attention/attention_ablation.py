"""The Attention pane's interventions: switch the head on show off (``x``) and the importance table (``i``).

A mixin for ``AttentionPane``. The heads switched off live in the lab's
``AblationState`` (``host.state.ablation``: the Decode pane's decodes apply them, to a
private model copy); toggling one here asks Decode, through the app, to
decode the input on show again. The importance table ablates
each head alone on N held-out examples in a thread worker, on its own copy
of the model, cached in the run folder per checkpoint (or history snapshot).
A real model opened from files has no held-out examples: its table is the
rise of its loss on the text on show with each head switched off.
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

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import DecodeRequested
from tui_lab.ui.state.host import Hosted
from tui_lab.ui.widgets.importance_view import ImportanceView

IMPORTANCE_N = 200  # held-out examples per head in the lab (the CLI's --n)
PROGRESS_EVERY = 0.1  # seconds between progress messages (the last one always goes)


class AttentionAblation(Hosted):
    """``x`` toggles the selected head, ``m`` cycles zero/mean, ``X`` restores all, ``i`` importance."""

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
        loss: bool = False  # ``table`` is a TextImportance (a real model's loss on the text)

    importance_n = IMPORTANCE_N
    importance_shown = False
    head_index: int  # the pane's: the head on show
    result: Any  # the pane's: the decode on show

    @property
    def capture_name(self) -> str | None:
        """The capture name on show (the pane's)."""
        raise NotImplementedError

    def _update_header(self) -> None:
        """Redraw the pane's header line (the pane's)."""
        raise NotImplementedError

    def _need_data(self) -> bool:
        """True when there is a decode to act on, else a notification (the pane's)."""
        raise NotImplementedError

    # ---- what is selected and what is ablated ------------------------------------------

    @property
    def selected_head(self) -> str | None:
        """The core name of the head on show (``decoder.0.cross:2``), None before a decode."""
        name = self.capture_name
        return None if name is None else f"{name}:{self.head_index}"

    def ablation_header(self, text: Text) -> None:
        """Append what the lab's decodes run without to the header line."""
        ablation = self.host.state.ablation
        if ablation.active:
            text.append(f"   ablated: {ablation.label()}", style="bold magenta")

    def _rerun(self) -> None:
        """Decode the input on show again, with the heads as they are switched now."""
        self._update_header()
        if self.result is not None:
            self.post_message(DecodeRequested(self.result.input))

    # ---- actions --------------------------------------------------------------------------

    def action_toggle_ablation(self) -> None:
        """Switch the head on show off (or back on) and decode the input again."""
        head = self.selected_head
        if not self._need_data() or head is None:
            return
        off = self.host.state.ablation.toggle(head)
        self.notify(f"{head} switched {'off' if off else 'back on'}", timeout=2)
        self._rerun()

    def action_cycle_ablation_mode(self) -> None:
        """Ablate by zeroing the head's output or by its mean output (and decode again)."""
        ablation = self.host.state.ablation
        mode = ablation.cycle_mode()
        self.notify(f"ablation mode: {mode}", timeout=2)
        if ablation.active:
            self._rerun()
        elif self.importance_shown:
            self._start_importance()

    def action_restore_heads(self) -> None:
        """Switch every ablated head back on and decode again."""
        ablation = self.host.state.ablation
        if ablation.active:
            ablation.clear()
            self._rerun()

    def action_toggle_importance(self) -> None:
        """Show or hide the exact-match drop of each head ablated alone (computed in the background)."""
        self.importance_shown = not self.importance_shown
        self.query_one(ImportanceView).display = self.importance_shown
        if self.importance_shown:
            self._start_importance()

    # ---- the importance table -------------------------------------------------------------

    def _start_importance(self) -> None:
        view = self.query_one(ImportanceView)
        run = self.host.state.current_run
        if run is None:
            view.show_message("no model yet: train one (2) or open a run")
            return
        mode = self.host.state.ablation.mode
        if getattr(run, "card", None) is not None:  # opened from files: the loss on the text
            if self.result is None:
                view.show_message("importance: decode a text first (3); each head is scored on it")
                return
            view.show_message(f"importance: starting ({mode}, on the text on show)…")
            self._text_importance_worker(run, mode, self.result.input)
            return
        view.show_message(f"importance: starting ({mode}, N={self.importance_n})…")
        at_step = self.host.state.travel.state.step  # a history snapshot on show, else None
        self._importance_worker(run, mode, self.importance_n, self.host.training_active, at_step)

    @work(thread=True, exclusive=True, exit_on_error=False, group="importance")
    def _importance_worker(
        self, run: Any, mode: str, n: int, training: bool, at_step: int | None
    ) -> None:
        """Ablate each head alone on ``n`` held-out examples; post progress and the table (thread)."""
        try:
            self.post_message(self.ImportanceReady(*self._importance(run, mode, n, training, at_step)))
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            self.post_message(self.ImportanceReady(error=one_line(exc)))

    @work(thread=True, exclusive=True, exit_on_error=False, group="importance")
    def _text_importance_worker(self, run: Any, mode: str, text: str) -> None:
        """Switch each head of a real model off alone; its loss on ``text`` (thread)."""
        from tui_lab.core.analysis.text_ablation import text_ids, text_importance
        from tui_lab.ui.state.model_copies import settled, shared_clone

        what = f"{mode}, loss on the text"
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done == total or now - last[0] >= PROGRESS_EVERY:  # merged: no flood of messages
                last[0] = now
                self.post_message(self.ImportanceProgress(done, total, what))

        try:
            ids = text_ids(run.task, text, run.config.model.max_len)
            table = text_importance(shared_clone(settled(run).model), ids, mode, progress)
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            self.post_message(self.ImportanceReady(error=one_line(exc)))
            return
        where = f"on the input {text[:40]!r}" + ("…" if len(text) > 40 else "")
        self.post_message(self.ImportanceReady(table, where=where, loss=True))

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
            model = self.host.state.travel.snapshot_model(run_dir, at_step, run.model)
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
                self.post_message(self.ImportanceProgress(done, total, what))

        def compute() -> Any:
            means = probe_means(model, run.task, arch, pairs, device) if mode == "mean" else None
            max_new = run.config.sequence_length_needed()
            return importance(model, run.task, pairs, max_new, mode, means, progress)

        table, cached = cached_importance(run_dir or ".", key, compute, mode=mode, n=len(pairs))
        return table, cached, where

    def on_attention_ablation_importance_progress(
        self, message: AttentionAblation.ImportanceProgress
    ) -> None:
        """Move the importance progress line."""
        message.stop()
        self.query_one(ImportanceView).show_progress(message.done, message.total, message.what)

    def on_attention_ablation_importance_ready(
        self, message: AttentionAblation.ImportanceReady
    ) -> None:
        """Show the importance table (or why there is none)."""
        message.stop()
        view = self.query_one(ImportanceView)
        if message.table is None:
            view.show_message(f"importance unavailable: {message.error}")
        elif message.loss:
            view.show_loss_table(message.table, message.where)
        else:
            view.show_table(message.table, message.cached, message.where)


def _at_checkpoint(run_dir: Path, step: int) -> bool:
    """Whether the run folder's checkpoint holds ``step``'s weights."""
    import json

    try:
        return int(json.loads((run_dir / "state.json").read_text())["step"]) == int(step)
    except (OSError, ValueError, KeyError, TypeError):
        return False
