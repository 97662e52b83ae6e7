"""The Decode pane's logit lens (``v``): a table that computes itself.

``LogitLens`` is the lens table (``LensView``) plus the work behind it: it
keeps the model copy and task the last decode used (so an ablated decode gets
an ablated lens), computes the lens of the decode on show in a thread, and
draws what its own ``Ready`` message brings back; a stale answer is dropped.
The pane tells it what was decoded (``decoded``) and when ``v`` is pressed
(``toggle``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import work
from textual.message import Message
from typing_extensions import TypeIs, Unpack

from tui_lab.core.errors import one_line
from tui_lab.ui.state.decoding import is_fill_result
from tui_lab.ui.widgets.lens_table import LensView
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.lenses.logit_lens import LensTable
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.tasks.protocol import Task

    Decode = DecodeResult | FillMaskResult


def _fills(result: Decode) -> TypeIs[FillMaskResult]:
    """Whether ``result`` is fill-mask's (the lens reads its masks) rather than a greedy decode's."""
    return is_fill_result(result)


class LogitLens(LensView):
    """Each layer's top token per decoding step of the decode on show (hidden until ``toggle``)."""

    @dataclass
    class Ready(Message):
        """The logit lens of ``result`` (``lens`` None and ``error`` set if it failed)."""

        result: Decode
        lens: LensTable | None = None
        error: str | None = None

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.shown = False
        self._lens_result: Decode | None = None
        self._lens_model: nn.Module | None = None  # the model (copy) the decode on show ran on
        self._lens_task: Task | None = None

    def decoded(self, result: Decode, model: nn.Module | None, task: Task | None) -> None:
        """A decode is on show: keep what the lens needs; recompute it if the lens shows."""
        self._lens_result, self._lens_model, self._lens_task = result, model, task
        if self.shown:
            self._request()

    def toggle(self) -> None:
        """Show (and compute) or hide the lens."""
        self.shown = not self.shown
        self.display = self.shown
        if self.shown:
            self._request()

    def _request(self) -> None:
        if self._lens_result is None or self._lens_model is None or self._lens_task is None:
            self.show_message("logit lens: decode an input first")
            return
        if _fills(self._lens_result) and not self._lens_result.masks:
            self.show_message("logit lens: no mask was filled (a bare encoder has no MLM head)")
            return
        self.show_message("logit lens: computing…")
        self._lens_worker(self._lens_model, self._lens_task, self._lens_result)

    @work(thread=True, exclusive=True, exit_on_error=False, group="lens")
    def _lens_worker(self, model: nn.Module, task: Task, result: Decode) -> None:
        """Read each layer's stream through the final norm and output head (thread)."""
        from tui_lab.core.analysis.lenses.logit_lens import fill_lens, logit_lens

        try:
            lens = fill_lens(model, task, result) if _fills(result) else logit_lens(model, task, result)
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            self.post_message(self.Ready(result, None, one_line(exc)))
            return
        self.post_message(self.Ready(result, lens))

    def on_logit_lens_ready(self, message: LogitLens.Ready) -> None:
        """Draw the lens of the decode on show (a stale one is dropped)."""
        message.stop()
        if message.result is not self._lens_result:
            return
        if message.lens is None:
            self.show_message(f"logit lens unavailable: {message.error}")
        else:
            self.show_lens(message.lens)
