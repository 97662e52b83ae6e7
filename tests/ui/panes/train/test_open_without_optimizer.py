"""A run folder that cannot continue training (its optimizer state gone) still opens its
model: the Train pane says why in one line, and Decode decodes with the run's weights."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.ui.helpers import SIZE, ready, tiny_app, wait_until


async def test_a_run_without_optimizer_state_opens_for_decoding(learned_run: Path) -> None:
    from tui_lab.core.opening.from_run import load_for_inference

    (learned_run / "optimizer.pt").unlink()
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.current_run is not None, 60, "the run's model, read only")
        said = [n.message for n in app._notifications]
        assert any("opening its model for decoding" in m for m in said), said
        # the weights are the run's: the same logits as the core's own loader gives
        reference = load_for_inference(learned_run, "cpu")
        for a, b in zip(app.current_run.model.state_dict().values(), reference.model.state_dict().values(),
                        strict=True):
            assert torch.equal(a, b)
        # its history stays reachable: the panes that travel it find the run's folder
        from tui_lab.ui.time_travel.control import travel_run_dir

        assert travel_run_dir(app) == learned_run
