"""The Decode pane's lens (``v``): a table that computes itself; ``V`` switches the lens
between the logit lens, a tuned lens and a Jacobian lens.

``LogitLens`` is the lens table (``LensView``) plus the work behind it: it
keeps the model copy and task the last decode used (so an ablated decode gets
an ablated lens), computes the lens of the decode on show in a thread, and
draws what its own ``Ready`` message brings back; a stale answer is dropped.
A tuned or Jacobian lens is fitted the first time it is asked for the weights on show
(on the run's own data, progress shown in the table) and kept for them: a history
snapshot gets a lens of its own, an ablated decode reads the run's.
Under the table, ``#decode-lens-scores`` gives each layer's KL to the output and
top-1 agreement. The pane tells it what was decoded (``decoded``), when ``v`` is
pressed (``toggle``) and when ``V`` is (``switch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import work
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker
from typing_extensions import TypeIs, Unpack

from tui_lab.core.errors import one_line
from tui_lab.ui.panes.decode import lens_view, lens_workers
from tui_lab.ui.state.decoding import is_fill_result
from tui_lab.ui.widgets.lens_table import LensView
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.lenses.lens_file import FittedLens
    from tui_lab.core.analysis.lenses.lens_readout import LayerScore
    from tui_lab.core.analysis.lenses.logit_lens import LensTable
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.tasks.protocol import Task

    Decode = DecodeResult | FillMaskResult


def _fills(result: Decode) -> TypeIs[FillMaskResult]:
    """Whether ``result`` is fill-mask's (the lens reads its masks) rather than a greedy decode's."""
    return is_fill_result(result)


class LogitLens(LensView):
    """Each layer's top token per decoding step of the decode on show (hidden until ``toggle``)."""

    @dataclass
    class Ready(Message):
        """The ``kind`` lens of ``result`` (``lens`` None and ``error`` set if it failed), each
        layer's KL to the output and top-1 agreement (none for a fill's logit lens)."""

        result: Decode
        lens: LensTable | None = None
        error: str | None = None
        kind: str = "logit"
        scores: list[LayerScore] | None = None

    @dataclass
    class Fitting(Message):
        """A tuned or Jacobian lens being fitted for ``result``'s model: how far along."""

        result: Decode
        what: str

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.shown = False
        self._lens_result: Decode | None = None
        self._lens_model: nn.Module | None = None  # the model (copy) the decode on show ran on
        self._lens_task: Task | None = None
        self._handle: ModelHandle | None = None  # the model on show: what a tuned or Jacobian lens is fitted for
        self.kind = "logit"  # logit, tuned or jacobian (V)
        # (weights, kind) -> (the model read, its lens): the model is kept so its storage,
        # the key, is never reused by another while the lens is kept
        self._fitted: dict[tuple[int, str], tuple[nn.Module, FittedLens]] = {}

    @property
    def label(self) -> str:
        """Which lens is on show, and what V switches to."""
        return lens_view.title(self.kind, lens_workers.next_kind(self.kind))

    def decoded(self, result: Decode, model: nn.Module | None, task: Task | None,
                handle: ModelHandle | None = None) -> None:
        """A decode is on show: keep what the lens needs; recompute it if the lens shows."""
        self._lens_result, self._lens_model, self._lens_task = result, model, task
        self._handle = handle
        if self.shown:
            self._request()

    def toggle(self) -> None:
        """Show (and compute) or hide the lens."""
        self.shown = not self.shown
        self.display = self.shown
        scores = self._scores()
        if scores is not None:
            scores.display = self.shown
        if self.shown:
            self._request()

    def switch(self) -> None:
        """The next lens (logit, tuned, Jacobian), shown and computed."""
        self.kind = lens_workers.next_kind(self.kind)
        if self.shown:
            self._request()
        else:
            self.toggle()

    def _scores(self) -> Static | None:
        try:
            return self.screen.query_one("#decode-lens-scores", Static)
        except NoMatches:  # a pane composed without the scores line
            return None

    def _say(self, text: str) -> None:
        """One dim line in the table, and the lens on show in the scores line."""
        self.show_message(text)
        scores = self._scores()
        if scores is not None:
            scores.update(lens_view.title(self.kind, lens_workers.next_kind(self.kind)))

    def _request(self) -> None:
        self.border_title = self.label
        name = lens_view.NAMES[self.kind]
        if self._lens_result is None or self._lens_model is None or self._lens_task is None:
            self._say(f"{name}: decode an input first")
            return
        if _fills(self._lens_result) and not self._lens_result.masks:
            self._say(f"{name}: no mask was filled (a bare encoder has no MLM head)")
            return
        if _fills(self._lens_result) and self.kind != "logit":
            self._say(f"{name}: reads a decoder's layers; an encoder-only model has the logit lens (V)")
            return
        kept = self._fitted.get(lens_workers.key(self._lens_model, self.kind))
        fitted = None if kept is None else kept[1]
        fitting = self.kind != "logit" and fitted is None
        self._say(f"{name}: {'fitting on the run' + chr(39) + 's data…' if fitting else 'computing…'}")
        self._lens_worker(self._lens_model, self._lens_task, self._lens_result, self.kind, self._handle, fitted)

    @work(thread=True, exclusive=True, exit_on_error=False, group="lens")
    def _lens_worker(self, model: nn.Module, task: Task, result: Decode, kind: str,
                     handle: ModelHandle | None, fitted: FittedLens | None) -> None:
        """Fit the lens when it is new, then read each layer through it (thread)."""
        try:
            self.post_message(self._computed(model, task, result, kind, handle, fitted))
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            if not get_current_worker().is_cancelled:
                self.post_message(self.Ready(result, None, one_line(exc), kind))

    def _computed(self, model: nn.Module, task: Task, result: Decode, kind: str,
                  handle: ModelHandle | None, fitted: FittedLens | None) -> LogitLens.Ready:
        from tui_lab.core.analysis.lenses.logit_lens import fill_lens

        if _fills(result):
            return self.Ready(result, fill_lens(model, task, result), kind=kind)
        if kind != "logit" and fitted is None:
            if handle is None:
                raise ValueError("no model to fit the lens for")
            worker = get_current_worker()

            def progress(done: int, total: int, what: str) -> None:
                if done == total or done % max(1, total // 10) == 0:
                    self.post_message(self.Fitting(result, what))

            fitted = lens_workers.fitted(handle, model, kind, result.input, progress, lambda: worker.is_cancelled)
            self.app.call_from_thread(self._keep, model, kind, fitted)
        out = lens_workers.readout(model, task, result, fitted)
        return self.Ready(result, out.table, kind=kind, scores=out.scores)

    def _keep(self, model: nn.Module, kind: str, lens: FittedLens) -> None:
        """Keep ``lens`` for ``model``'s weights (the oldest kept goes past ``KEPT``)."""
        self._fitted[lens_workers.key(model, kind)] = (model, lens)
        while len(self._fitted) > lens_workers.KEPT:
            del self._fitted[next(iter(self._fitted))]

    def on_logit_lens_fitting(self, message: LogitLens.Fitting) -> None:
        """How far the fit of a new lens is (a stale one is dropped)."""
        message.stop()
        if message.result is self._lens_result:
            self._say(f"{message.what}…")

    def on_logit_lens_ready(self, message: LogitLens.Ready) -> None:
        """Draw the lens of the decode on show (a stale one, or another lens's, is dropped)."""
        message.stop()
        if message.result is not self._lens_result or message.kind != self.kind:
            return
        if message.lens is None:
            self._say(f"{lens_view.NAMES[self.kind]} unavailable: {message.error}")
            return
        self.show_lens(message.lens)
        scores = self._scores()
        if scores is not None:
            following = lens_workers.next_kind(self.kind)
            scores.update(lens_view.scores_text(self.kind, following, message.scores)
                          if message.scores else lens_view.title(self.kind, following))
