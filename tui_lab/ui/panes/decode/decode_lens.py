"""The Decode pane's interventions: the logit lens (``v``) and the heads its decodes run without.

A mixin for ``DecodePane``: ``ablation`` is the lab's ``AblationState`` (the
Attention pane toggles heads in it, the decode worker applies it to a private
copy of the model); the lens is computed in a thread on the model copy the
last decode used, so an ablated decode gets an ablated lens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual import work
from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import Decoded
from tui_lab.ui.state.host import Hosted
from tui_lab.ui.widgets.lens_table import LensView

if TYPE_CHECKING:
    from tui_lab.ui.state.ablation import AblationState


class DecodeLensMixin(Hosted):
    """``ablation`` shared with Attention, ``v`` for the logit lens of the last decode."""

    @dataclass
    class LensReady(Message):
        """The logit lens of ``result`` (``lens`` None and ``error`` set if it failed)."""

        result: Any
        lens: Any = None
        error: str | None = None

    result: Any  # the decode on show (the pane's)
    _lens_model: Any = None  # the model (copy) the shown result was decoded with
    _lens_task: Any = None
    lens_shown = False

    @property
    def ablation(self) -> AblationState:
        """The heads the lab's decodes run without (the lab's: Attention switches them)."""
        return self.host.state.ablation

    def ablated_label(self, result: Any) -> str:
        """What ``result`` was decoded without ("decoder.0.cross:2 (zero)"), or empty."""
        return self.ablation.label_of(result)

    def on_decoded(self, message: Decoded) -> None:
        """Keep the decode's model for the lens; refresh the lens if it is on show."""
        self._lens_model, self._lens_task = message.model, message.task
        if self.lens_shown:
            self._request_lens()

    def action_toggle_lens(self) -> None:
        """Show or hide the logit lens: each layer's top token and probability per step."""
        self.lens_shown = not self.lens_shown
        view = self.query_one("#decode-lens", LensView)
        view.display = self.lens_shown
        if self.lens_shown:
            self._request_lens()

    def _request_lens(self) -> None:
        view = self.query_one("#decode-lens", LensView)
        if self.result is None or self._lens_model is None:
            view.show_message("logit lens: decode an input first")
            return
        view.show_message("logit lens: computing…")
        self._lens_worker(self._lens_model, self._lens_task, self.result)

    @work(thread=True, exclusive=True, exit_on_error=False, group="lens")
    def _lens_worker(self, model: Any, task: Any, result: Any) -> None:
        """Read each layer's stream through the final norm and output head (thread)."""
        from tui_lab.core.analysis.logit_lens import logit_lens

        try:
            lens = logit_lens(model, task, result)
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            self.post_message(self.LensReady(result, None, one_line(exc)))
            return
        self.post_message(self.LensReady(result, lens))

    def on_decode_lens_mixin_lens_ready(self, message: DecodeLensMixin.LensReady) -> None:
        """Draw the lens of the decode on show (a stale one is dropped)."""
        message.stop()
        if message.result is not self.result:
            return
        view = self.query_one("#decode-lens", LensView)
        if message.lens is None:
            view.show_message(f"logit lens unavailable: {message.error}")
        else:
            view.show_lens(message.lens)
