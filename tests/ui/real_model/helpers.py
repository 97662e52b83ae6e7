"""Opening the lab on a real model and waiting until every pane has it."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from tests.ui.helpers import wait_until
from tui_lab.ui.app import LabApp

SIZE = (120, 40)


def model_app(source: str | Path) -> LabApp:
    """The lab opened with ``--model source``."""
    app = LabApp(model_source=str(source), warm_hidden_panes=False)  # see tests/ui/helpers.tiny_app
    app.animation_level = "none"
    return app


async def opened(pilot: Pilot) -> LabApp:
    """Wait for torch, the model, and its parameter report (or the failure to open it)."""
    app = pilot.app
    assert isinstance(app, LabApp)
    await wait_until(
        pilot, lambda: app.opened is not None or app.model_source is None, 60, "the model to open"
    )
    await wait_until(pilot, lambda: app.last_report is not None, 30, "the parameter report")
    await app.workers.wait_for_complete()
    await pilot.pause()
    return app
