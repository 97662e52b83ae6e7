"""The Build pane's card of an opened model, as a snapshot.

Only what the files say is on show (family, sizes, context, vocabulary, the
files read, config.json): no number worked out from the random weights. Masked:
the torch release (a placeholder), the folder (shown as the name typed, not this
machine's temporary path) and the transformers release that wrote config.json.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.ui.helpers import settle
from tests.ui.real_model.helpers import SIZE, model_app, opened

TORCH_PLACEHOLDER = "x.y.z"


@pytest.fixture
def masked_folder(
    gpt2_folder: tuple[Path, Any], lab_folders: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The model copied into the test's folder, opened by its relative name, masked as above."""
    from tui_lab.core.opening import from_files as opened_module
    from tui_lab.ui import core_access

    local = lab_folders / "tiny-gpt2"
    shutil.copytree(gpt2_folder[0], local)
    config = json.loads((local / "config.json").read_text())
    config.pop("transformers_version", None)
    (local / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))

    load, open_files = core_access.load_core, opened_module.open_files

    def load_placeholder() -> core_access.Core:
        core = load()
        core.version = TORCH_PLACEHOLDER
        return core

    def open_masked(source: str, device: str = "cpu", revision: str | None = None, **options: Any) -> Any:
        loaded = open_files(source, device, revision, **options)
        loaded.card = dataclasses.replace(loaded.card, folder=Path(source))
        return loaded

    monkeypatch.setattr(core_access, "load_core", load_placeholder)
    monkeypatch.setattr(opened_module, "open_files", open_masked)
    return "tiny-gpt2"


class TestRealModelBuildScreen:
    def test_build_card(self, snap_compare: Any, masked_folder: str) -> None:
        async def run_before(pilot: Any) -> None:
            await opened(pilot)
            await settle(pilot)

        assert snap_compare(model_app(masked_folder), terminal_size=SIZE, run_before=run_before)
