"""Pilot test for the Decode pane's lens switch (V): logit, tuned, Jacobian, logit again;
the label says which lens is on show and the per-layer KL and top-1 agreement are the core's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from textual.widgets import Static

from tests.ui.helpers import SIZE, decode, open_trained, tiny_app, wait_until
from tui_lab.core.analysis.lenses.jacobian_lens import JacobianLens
from tui_lab.ui.panes.decode.logit_lens import LogitLens


def _kl_row(text: str) -> list[float]:
    line = next(line for line in text.splitlines() if line.startswith("KL to the output"))
    return [float(x) for x in line.removeprefix("KL to the output").split()]


async def test_v_switches_lens_and_the_display_changes(learned_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui_lab.ui.panes.decode import lens_workers

    monkeypatch.setattr(lens_workers, "TUNED_STEPS", 30)  # a short fit: the switch is under test
    monkeypatch.setattr(lens_workers, "JACOBIAN_PROMPTS", 4)
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "3141")
        lens = pane.query_one("#decode-lens", LogitLens)
        scores = pane.query_one("#decode-lens-scores", Static)

        def shown() -> str:
            return str(scores.render())

        await pilot.press("v")
        assert lens.display and scores.display
        await wait_until(pilot, lambda: "KL to the output" in shown(), 30, "the logit lens's scores")
        assert shown().startswith("logit lens (V: tuned lens)") and lens.border_title == lens.label
        logit_kl = _kl_row(shown())
        assert len(logit_kl) == 2 and logit_kl[-1] == 0.0  # the last layer is the output

        await pilot.press("V")  # tuned: fitted on the run's data the first time, then read
        assert lens.kind == "tuned" and "tuned lens" in str(lens.border_title)
        await wait_until(pilot, lambda: shown().startswith("tuned lens") and "KL to the output" in shown(),
                         120, "the tuned lens")
        tuned_kl = _kl_row(shown())
        assert tuned_kl != logit_kl and tuned_kl[-1] == 0.0

        # The numbers on show are the core's readout with the lens the pane fitted and kept.
        from tui_lab.core.analysis.lenses.lens_readout import readout_of_decode

        ((_, fitted),) = lens._fitted.values()
        core = readout_of_decode(pane.run.model, pane.run.task, pane.result, fitted)
        assert tuned_kl == pytest.approx([round(s.kl, 3) for s in core.scores], abs=1.5e-3)
        rows = [line.split() for line in lens.text.splitlines() if line.split()[:1] in (["decoder.0"], ["decoder.1"])]
        assert [r[1] for r in rows] == [row[0].token for row in core.table.rows]  # each layer's first step

        await pilot.press("V")  # Jacobian
        await wait_until(pilot, lambda: shown().startswith("Jacobian lens") and "KL to the output" in shown(),
                         120, "the Jacobian lens")
        assert _kl_row(shown())[-1] == 0.0

        await pilot.press("V")  # back to the logit lens: the same numbers as before, nothing refitted
        await wait_until(pilot, lambda: shown().startswith("logit lens") and "KL to the output" in shown(), 30)
        assert _kl_row(shown()) == logit_kl
        assert len(lens._fitted) == 2

        await pilot.press("v")
        assert not lens.display and not scores.display


def test_a_lens_is_kept_per_weights_an_ablated_view_shares_the_runs() -> None:
    import copy

    from tests.core.analysis.lenses.lens_models import tiny_in_hand
    from tui_lab.core.model.hook_points import bind_hooks
    from tui_lab.ui.panes.decode import lens_workers

    run = tiny_in_hand("decoder-only", layers=2)
    view = bind_hooks(run.model, [("blocks.0.attn.hook_z", lambda x, _n: x * 0)])  # an ablated decode's model
    snapshot = copy.deepcopy(run.model)  # a history snapshot's (or a training run's) copy
    assert lens_workers.key(view, "tuned") == lens_workers.key(run.model, "tuned")
    assert lens_workers.key(snapshot, "tuned") != lens_workers.key(run.model, "tuned")
    assert lens_workers.key(run.model, "tuned") != lens_workers.key(run.model, "jacobian")
    # The snapshot's lens is fitted on the snapshot: its weights changed, so is its lens.
    with torch.no_grad():
        for p in snapshot.parameters():
            p.mul_(1.5)
    mine = lens_workers.fitted(run, snapshot, "jacobian", "31", lambda *a: None, lambda: False)
    theirs = lens_workers.fitted(run, run.model, "jacobian", "31", lambda *a: None, lambda: False)
    assert isinstance(mine, JacobianLens) and isinstance(theirs, JacobianLens)
    assert float((mine.matrices - theirs.matrices).abs().max()) > 1e-3
