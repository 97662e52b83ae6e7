"""Fine-tuning the opened model from the lab: a text file under its card in Build, space in Train."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.widgets import Input

from bench.hf_factory import TEXT
from tests.ui.helpers import wait_until
from tests.ui.real_model.helpers import SIZE, model_app, opened


async def test_space_in_train_fine_tunes_the_opened_model_on_the_text_typed_in_build(
    gpt2_folder: tuple[Path, Any], lab_folders: Path
) -> None:
    folder, _ = gpt2_folder
    text = lab_folders / "story.txt"
    text.write_text(TEXT)
    app = model_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("1")
        await pilot.pause()
        app.query_one("#finetune-text", Input).value = str(text)
        app.query_one("#finetune-steps", Input).value = "6"
        await pilot.press("2", "space")
        train = app.pane("train")
        await wait_until(pilot, lambda: train.state == "done", 180, "the fine-tuning run to finish")
        runs = list((lab_folders / "runs").iterdir())
        assert len(runs) == 1 and runs[0].name.startswith("tiny-gpt2-finetune")
        state = json.loads((runs[0] / "state.json").read_text())
        assert state["step"] == 6
        assert json.loads((runs[0] / "source.json").read_text())["family"] == "gpt2"
        assert train.run.config.task.name == "token-lm"
