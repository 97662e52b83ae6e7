"""The Features pane's transcoder card: the Circuit pane's enter on a feature shows it here,
in place of the SAE's list and card, built in a worker with progress
(``transcoder_feature_workers.py``); escape cancels it and goes back (``Closed``)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from tui_lab.ui.panes.features import transcoder_feature_workers as jobs
from tui_lab.ui.panes.features.transcoder_feature_view import (
    failed_text,
    progress_text,
    transcoder_card_text,
)

if TYPE_CHECKING:
    from tui_lab.core.opening.model_handle import ModelHandle

GROUP = "features-transcoder"


class TranscoderFeaturePanel(VerticalScroll, can_focus=True):
    """One transcoder feature's card (up/down scroll it; escape: back)."""

    DEFAULT_CSS = """
    TranscoderFeaturePanel { height: 1fr; padding: 0 1; }
    TranscoderFeaturePanel > Static { width: 1fr; height: auto; }
    """

    class Closed(Message):
        """Escape: the pane shows its SAE features again."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: jobs.Ready | None = None  # the card on show, once read
        self.asked: tuple[int, int] | None = None  # (layer, feature) asked for

    def compose(self) -> ComposeResult:
        yield Static(id="features-transcoder-card")

    def _draw(self, text: Text) -> None:
        self.query_one("#features-transcoder-card", Static).update(text)

    def open(self, run: ModelHandle, folder: Path | None, layer: int, feature: int, tokens: int,
             training: bool) -> None:
        """Read ``feature`` of layer ``layer``'s transcoder in ``folder`` (the one before is cancelled)."""
        self.shown, self.asked = None, (layer, feature)
        self._draw(progress_text(layer, feature, 0, tokens))
        self.run_worker(partial(jobs.show, self.post_message, run, folder, layer, feature, tokens, training),
                        name=GROUP, group=GROUP, thread=True, exclusive=True, exit_on_error=False)

    def on_transcoder_feature_progress(self, message: jobs.Progress) -> None:
        message.stop()
        if self.asked is not None:
            self._draw(progress_text(*self.asked, message.done, message.total))

    def on_transcoder_feature_ready(self, message: jobs.Ready) -> None:
        message.stop()
        self.shown = message
        self._draw(transcoder_card_text(message.card, message.layer, message.feature, message.label,
                                        message.hook, Path(message.source).name))

    def on_transcoder_feature_failed(self, message: jobs.Failed) -> None:
        message.stop()
        self._draw(failed_text(message.text))

    def on_key(self, event: events.Key) -> None:
        """Escape: stop reading, go back."""
        if event.key == "escape":
            event.stop()
            self.workers.cancel_group(self, GROUP)
            self.post_message(self.Closed())
