"""The Patch pane by keyboard, mounted in a host that is not the lab: patch the induction run's
ready-made pair, cycle the site, toggle exact / attribution, read a cell under the cursor,
cancel with escape, the DLA bars, the pair typed by hand, and stepping through a history.

Every number the pane shows is checked against the core's own analysis of the same pair
(never against a number written here: trained weights round differently across CPUs)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.ui.helpers import SIZE, wait_until
from tests.ui.panes.patch.conftest import INDUCTION_RUN, PatchHost, in_hand
from tui_lab.ui.panes.patch import patch_jobs
from tui_lab.ui.panes.patch.patch_pane import PatchPane
from tui_lab.ui.panes.patch.patch_view import SITES, atlas_of
from tui_lab.ui.widgets.diverging_heatmap import DivergingHeatmap


def _host(run_dir: Path, tmp_path: Path) -> tuple[PatchHost, PatchPane]:
    pane = PatchPane(id="patch-pane")
    return PatchHost(pane, tmp_path / "runs", in_hand(run_dir)), pane


def _flat(grid: list[list[float]]) -> list[float]:
    return [v for row in grid for v in row]


def _text(host: PatchHost, selector: str) -> str:
    return str(host.query_one(selector).render())


async def _patched(pilot: Pilot, pane: PatchPane, key: str = "r") -> None:
    """Press ``key`` and wait for the worker to end."""
    await pilot.press(key)
    await wait_until(pilot, lambda: not pane.running, 120, f"patching after {key}")
    await pilot.pause()


def _reference(site: str, method: str = "exact") -> Any:
    """The core's own result for the induction run's ready-made pair."""
    from tui_lab.core.analysis.patching.activation_patching import activation_patch
    from tui_lab.core.analysis.patching.attribution_patching import attribution_patch
    from tui_lab.core.analysis.patching.patch_pair import ready_pair
    from tui_lab.core.opening.from_run import load_for_inference

    handle = load_for_inference(INDUCTION_RUN, "cpu")
    pair = ready_pair(handle, "induction")
    run = activation_patch if method == "exact" else attribution_patch
    return run(handle, pair, site)


async def test_site_cycling_and_method_toggle_by_keyboard(tmp_path: Path) -> None:
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        assert host.registered == {"patch": pane}
        pane.focus_default()
        assert "nothing patched at resid_pre yet" in _text(host, "#patch-heatmap")
        await _patched(pilot, pane)
        first = pane.view.shown
        assert first.site == "resid_pre" and first.method == "exact"
        assert _flat(first.values) == pytest.approx(_flat(_reference("resid_pre").values), abs=1e-5)
        heatmap = host.query_one(DivergingHeatmap)
        assert heatmap.rows == ["L0", "L1"] and heatmap.cols == first.tokens

        for _ in range(3):  # resid_pre -> attn_out -> mlp_out (none: attention-only) -> z
            await _patched(pilot, pane, "s")
        assert pane.view.site == "z"
        assert "mlp_out" not in _text(host, "#patch-status")
        z = pane.view.shown
        assert (z.rows, z.cols) == (["L0", "L1"], ["H0", "H1", "H2", "H3"])
        assert _flat(z.values) == pytest.approx(_flat(_reference("z").values), abs=1e-5)
        assert "z (layer × head)" in _text(host, "#patch-title")

        await _patched(pilot, pane, "m")
        attributed = pane.view.shown
        assert attributed.method == "attribution" and "attribution" in _text(host, "#patch-title")
        assert _flat(attributed.values) == pytest.approx(_flat(_reference("z", "attribution").values), abs=1e-5)
        from tui_lab.core.analysis.patching.attribution_patching import correlation

        r = correlation(_reference("z", "attribution"), _reference("z"))
        assert f"attribution vs exact: correlation {r:.3f}" in _text(host, "#patch-status")
        await _patched(pilot, pane, "m")
        assert pane.view.shown.method == "exact"

        await _patched(pilot, pane, "S")
        assert pane.view.site == "mlp_out"
        assert "no MLP" in _text(host, "#patch-status")  # one line, the pane goes on
        await _patched(pilot, pane, "S")
        assert pane.view.site == "attn_out" and pane.view.shown.site == "attn_out"
        assert SITES.index("attn_out") == pane.view.site_index


async def test_the_cursor_reads_value_metric_and_atlas_label(tmp_path: Path) -> None:
    from tui_lab.ui.widgets.atlas_scores import atlas_heads

    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        pane.view.site_index = SITES.index("z")
        await _patched(pilot, pane)
        await pilot.press("down", "right", "right")
        assert host.query_one(DivergingHeatmap).cursor == (1, 2)
        z = pane.view.shown
        readout = _text(host, "#patch-readout")
        assert readout.startswith(f"L1 · H2  {z.values[1][2]:+.3f}")
        assert f"corrupted {z.corrupt:.3f} → patched {z.raw[1][2]:.3f}" in readout
        assert f"(clean {z.clean:.3f})" in readout
        run = in_hand(INDUCTION_RUN)
        label, score = atlas_of(atlas_heads(run.model, run.task, run.config.model.arch))["L1H2"]
        assert f"atlas: L1H2 {label} {score:.2f}" in readout
        # the cursor cell itself shows the value with its sign
        assert f"{z.values[1][2]:+.2f}" in _text(host, "#patch-heatmap")

        pane.view.site_index = SITES.index("resid_pre")
        await _patched(pilot, pane)
        assert "a position: no single head" in _text(host, "#patch-readout")


async def test_escape_cancels_patching_between_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass's progress holds the worker until escape is heard; the core then
    stops at its next check (PatchingCancelled) and the pane shows nothing half done."""
    real = patch_jobs.patch_site
    seen: dict[str, Any] = {"passes": 0}
    first_pass = threading.Event()

    def held(handle: Any, pair: Any, site: str, method: str, progress: Any, cancelled: Any) -> Any:
        def slow(done: int, total: int) -> None:
            seen["passes"] += 1
            progress(done, total)
            first_pass.set()
            deadline = time.monotonic() + 20
            while not cancelled() and time.monotonic() < deadline:
                time.sleep(0.01)

        try:
            return real(handle, pair, site, method, slow, cancelled)
        except Exception as exc:
            seen["raised"] = type(exc).__name__
            raise

    monkeypatch.setattr(patch_jobs, "patch_site", held)
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press("r")
        await wait_until(pilot, first_pass.is_set, 60, "the first pass")
        await wait_until(pilot, lambda: host.query_one("#patch-progress").display, 10, "the bar")
        assert pane.running
        await pilot.press("escape")
        await host.workers.wait_for_complete()
        await pilot.pause()
        assert not pane.running and not host.query_one("#patch-progress").display
        assert seen == {"passes": 1, "raised": "PatchingCancelled"}
        assert "cancelled" in _text(host, "#patch-status")
        assert pane.view.shown is None and pane.pair is None


async def test_dla_view_is_bars_of_every_part(tmp_path: Path) -> None:
    from tui_lab.core.analysis.lenses.direct_logit_attribution import direct_logit_attribution
    from tui_lab.core.analysis.patching.patch_pair import ready_pair
    from tui_lab.core.opening.from_run import load_for_inference

    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await _patched(pilot, pane)
        await pilot.press("d")
        assert host.query_one("#patch-dla-scroll").display
        assert not host.query_one("#patch-map").display
        handle = load_for_inference(INDUCTION_RUN, "cpu")
        pair = ready_pair(handle, "induction")
        import torch

        want = direct_logit_attribution(handle, torch.tensor([pair.clean]), pair.answer, pair.wrong)
        text = _text(host, "#patch-dla")
        assert f"parts sum to {want.total:+.3f}, the model's own {want.model:+.3f}" in text
        lines = text.splitlines()
        for part in want.components:
            (line,) = [ln for ln in lines if ln.strip().startswith(f"{part['name']} ")]
            assert line.endswith(f"{part['value']:+.3f}")
            assert ("█" in line) == (round(24 * abs(part["value"]) / _limit(want)) > 0)
        assert "accumulated residual stream" in text
        # keys still reach the pane from the bars; d again is the heatmap
        await pilot.press("d")
        assert host.query_one("#patch-map").display
        assert host.focused is host.query_one(DivergingHeatmap)


def _limit(dla: Any) -> float:
    return max(abs(float(x["value"])) for x in [*dla.components, *dla.accumulated])


async def test_a_typed_pair_and_its_one_line_errors(tmp_path: Path) -> None:
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press("e")
        form = host.query_one("#patch-form")
        assert form.display
        assert host.focused is host.query_one("#patch-pairs")
        await pilot.press("down", "down", "enter")  # past induction-key to "typed": the first field
        assert host.focused is host.query_one("#patch-clean")
        for text in ("abcdefab", "enter", "ghijklab", "enter", "c", "enter", "i"):
            await pilot.press(*(list(text) if text != "enter" else ["enter"]))
        await _patched(pilot, pane, "enter")
        assert not form.display and pane.pair is not None and pane.pair.name == "custom"
        assert pane.view.shown.tokens == list("abcdefab")
        # unequal lengths: one line naming both
        await pilot.press("e", "down", "down", "enter")
        host.query_one("#patch-corrupt").value = "ghijk"
        await _patched(pilot, pane, "enter")
        assert "8 tokens and the corrupted one 5" in _text(host, "#patch-status")
        await pilot.press("escape")
        assert not form.display


async def test_history_stepping_and_the_view_over_training(tmp_path: Path, history_run: Path) -> None:
    from tui_lab.core.analysis.heads.head_curves import score_curves
    from tui_lab.core.analysis.patching.patch_pair import ready_pair
    from tui_lab.core.analysis.patching.patching_history import patch_history
    from tui_lab.core.opening.from_run import load_for_inference

    handle = load_for_inference(history_run, "cpu")
    want = patch_history(handle, history_run, ready_pair(handle, "induction"), "z")
    assert want.steps == [4, 8, 12]
    host, pane = _host(history_run, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        pane.view.site_index = SITES.index("z")
        await _patched(pilot, pane)
        assert pane.view.step is None
        await _patched(pilot, pane, "left_square_bracket")  # worked out, then the last snapshot
        assert pane.view.step == 12
        for key, step in (("left_square_bracket", 8), ("left_curly_bracket", 4),
                          ("right_square_bracket", 8), ("right_curly_bracket", 12)):
            await pilot.press(key)
            assert pane.view.step == step, key
            assert f"step {step} (3 snapshots)" in _text(host, "#patch-title")
            i = want.steps.index(step)
            assert _flat(pane.view.shown.values) == pytest.approx(_flat(want.results[i].values), abs=1e-5)
            assert host.query_one(DivergingHeatmap).weights == pane.view.shown.values
        await pilot.press("right_square_bracket")  # past the last: the model in hand
        assert pane.view.step is None and "the model in hand" in _text(host, "#patch-title")

        curves = score_curves(history_run)
        assert pane.host.state.travel.score_curves[history_run].scores == curves.scores
        await pilot.press("t")
        text = _text(host, "#patch-history")
        assert "exact patching of z over 3 snapshots (steps 4-12)" in text
        for head in ("L0H0", "L0H1", "L1H0", "L1H1"):
            (line,) = [ln for ln in text.splitlines() if ln.startswith(head)]
            now = want.cell_curves()[f"L{head[1]}:H{head[3]}"][-1]
            assert f"{now:+.2f}" in line
            per = curves.scores[f"decoder.{head[1]}.self:{head[3]}"]
            best = max(per, key=lambda p: per[p][-1])
            assert line.endswith(f"{best} {per[best][-1]:.2f}")


async def test_no_history_is_one_line(tmp_path: Path) -> None:
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await _patched(pilot, pane)
        await pilot.press("left_square_bracket")
        assert "no history snapshots" in _text(host, "#patch-status")
        assert not pane.running and pane.view.history is None


async def test_an_encoder_decoder_run_patches_by_its_ready_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """The lab's copy model (an encoder-decoder): its ready-made pair, the encoder's rows
    by source position, and every stack's heads (cross-attention too), as the core has them."""
    from tui_lab.core.analysis.patching.activation_patching import activation_patch
    from tui_lab.core.analysis.patching.patch_pair import ready_pair
    from tui_lab.core.opening.from_run import load_for_inference

    learned = Path(__file__).resolve().parents[3] / "data" / "learned-copy"
    handle = load_for_inference(learned, "cpu")
    pair = ready_pair(handle)
    host, pane = _host(learned, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await _patched(pilot, pane)
        shown = pane.view.shown
        assert shown.rows == ["enc L0"] and shown.tokens == activation_patch(handle, pair, "resid_pre").tokens
        assert _flat(shown.values) == pytest.approx(_flat(activation_patch(handle, pair, "resid_pre").values),
                                                    abs=1e-5)
        for _ in range(3):  # resid_pre -> attn_out -> mlp_out -> z
            await _patched(pilot, pane, "s")
        heads = pane.view.shown
        assert heads.site == "z" and "cross L1" in heads.rows
        # the cursor on a cross-attention head names it as the atlas scores it
        from tui_lab.ui.widgets.atlas_scores import atlas_heads

        r = heads.rows.index("cross L1")
        host.query_one(DivergingHeatmap).cursor = (r, 1)
        pane.show_grid()
        await pilot.pause()
        run = in_hand(learned)
        label, score = atlas_of(atlas_heads(run.model, run.task, run.config.model.arch))["cross L1 H1"]
        assert f"atlas: cross L1 H1 {label} {score:.2f}" in _text(host, "#patch-readout")
        assert _flat(heads.values) == pytest.approx(_flat(activation_patch(handle, pair, "z").values), abs=1e-5)
        # a pair whose decoder input holds more than its start token: the bars explain the
        # answer after it (the decoder's parts, cross-attention heads too)
        import torch

        from tui_lab.core.analysis.lenses.direct_logit_attribution import direct_logit_attribution
        from tui_lab.core.analysis.patching import patch_pair

        later = patch_pair.make_pair(handle, "31415", "31915", "4", "9", target="31")
        monkeypatch.setattr(patch_jobs, "make_pair", lambda h, _source: patch_pair.make_pair(
            h, "31415", "31915", "4", "9", target="31"))
        await _patched(pilot, pane)
        await pilot.press("d")
        want = direct_logit_attribution(handle, torch.tensor([later.clean]), later.answer, later.wrong,
                                        later.target_ids(1))
        assert pane.view.dla is not None and pane.view.dla.model == pytest.approx(want.model, abs=1e-5)
        assert "L1xH0" in _text(host, "#patch-dla")


async def test_an_encoder_decoder_pair_typed_with_its_decoder_input(tmp_path: Path) -> None:
    """The typed pair's last field is the decoder's input before the answer: the pane patches
    the pair the core makes of the same five texts."""
    from tui_lab.core.analysis.patching import patch_pair
    from tui_lab.core.analysis.patching.activation_patching import activation_patch
    from tui_lab.core.opening.from_run import load_for_inference

    learned = Path(__file__).resolve().parents[3] / "data" / "learned-copy"
    handle = load_for_inference(learned, "cpu")
    want = activation_patch(handle, patch_pair.make_pair(handle, "31415", "31915", "4", "9", target="31"))
    host, pane = _host(learned, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press("e")
        await pilot.press("down", "enter")  # "typed": the first field
        for text in ("31415", "enter", "31915", "enter", "4", "enter", "9"):
            await pilot.press(*(list(text) if text != "enter" else ["enter"]))
        host.query_one("#patch-target").value = "31"
        await _patched(pilot, pane, "enter")
        assert pane.pair is not None
        shown = pane.view.shown
        assert pane.pair.target[1:] == tuple(handle.task.vocab.encode("31"))
        assert _flat(shown.raw) == pytest.approx(_flat(want.raw), abs=1e-5)
        await pilot.press("e")
        assert host.query_one("#patch-target").value == "31"  # the pair's texts, shown back


async def test_a_typed_pair_past_the_context_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 55: 5,000 characters typed into the pair (the run reads 64 positions) are refused
    at once, in one line saying the limit, as ``tfx-lab patch`` refuses them: nothing is patched."""
    def no_patching(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("patched a pair past the context")

    monkeypatch.setattr("tui_lab.core.analysis.patching.activation_patching.activation_patch", no_patching)
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press("e", "down", "down", "enter")  # past induction-key to "typed"
        for field, value in (("clean", "abcd" * 1250), ("corrupt", "abce" * 1250), ("answer", "a"), ("wrong", "b")):
            host.query_one(f"#patch-{field}").value = value
        await _patched(pilot, pane, "enter")
        status = _text(host, "#patch-status")
        assert "the clean input of 5000 tokens: the model reads at most 64" in status
        assert len(status.strip().splitlines()) == 1 and pane.pair is None
