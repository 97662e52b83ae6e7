"""The Features pane's crosscoder diff view by keyboard, in a host that is not the lab: c shows
it, e asks, two steps of the run in hand train a crosscoder, g cycles new / gone / shared,
the arrows move and the card follows with contexts at both snapshots; the list's column and the
card's "fires on" are the same density, checked against a re-encoding written here; / types text
and each token lists its features at every source, checked the same way; a crosscoder folder
given to the pane's open opens in the view; a bad answer is one line; e stops a training."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from textual.widgets import Input

from tests.conftest import tiny_config
from tests.ui.fake_host import STYLES, FakeHost
from tests.ui.helpers import SIZE, wait_until
from tui_lab.core.sae.crosscoder_norms import TITLES as CORE_TITLES
from tui_lab.core.training.train import TrainingRun
from tui_lab.ui.panes.features.crosscoder_diff import CrosscoderDiff
from tui_lab.ui.panes.features.crosscoder_view import TITLES, histogram_bars
from tui_lab.ui.panes.features.cursor_list import CursorList
from tui_lab.ui.panes.features.features_pane import FeaturesPane

PANE_CSS = Path(__file__).resolve().parents[4] / "tui_lab" / "ui" / "panes" / "features" / "features.tcss"


class DiffHost(FakeHost):
    def __init__(self, pane: FeaturesPane, runs_root: Path, run_dir: Path) -> None:
        super().__init__(lambda: pane, "features", runs_root)
        self.css_path = [STYLES / "app.tcss", PANE_CSS]
        self.state.travel.state.set_run(run_dir, [1, 2, 4, 8])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("xc-pane") / "run"
    cfg = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0},
                      train={"steps": 8, "eval_every": 4, "eval_examples": 8})
    TrainingRun(cfg, out).run()  # history: steps 1, 2, 4, 8
    return out


@pytest.fixture(scope="module")
def folder(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small crosscoder over the run's two snapshots, trained once by the command (the tests
    only read it)."""
    from tests.cli.helpers import tfx

    out = tmp_path_factory.mktemp("xc-folder") / "xc"
    assert tfx("crosscoder", "train", "--run", str(run_dir), "--d-sae", "32", "--train-steps", "40",
               "--tokens", "1000", "--out", str(out)).returncode == 0
    return out


def _small(diff: CrosscoderDiff) -> None:
    diff.train_steps, diff.tokens, diff.d_sae, diff.table_tokens = 60, 1500, 32, 400


def _text(host: DiffHost, selector: str) -> str:
    return str(host.query_one(selector).render())


def _by_hand(diff: CrosscoderDiff, acts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(joint (N, F), alone (n, N, F)) of acts (N, n, d), written out source by source:
    f = ReLU(sum_s (scale_s x_s) W_enc[s] + b_enc), and each term alone."""
    assert diff.ready is not None
    cc = diff.ready.crosscoder
    with torch.no_grad():
        terms = [(acts[:, s, :] * cc.scale[s]) @ cc.W_enc[s] for s in range(acts.shape[1])]
        joint = torch.relu(sum(terms, torch.zeros(acts.shape[0], cc.cfg.d_sae)) + cc.b_enc)
        alone = torch.stack([torch.relu(t + cc.b_enc) for t in terms])
    return joint, alone


def _percent(line: str) -> float:
    return float(re.findall(r"([0-9.]+)%", line)[-1])


def _check_densities(host: DiffHost, diff: CrosscoderDiff) -> None:
    """Each line's share and the card's "fires on" equal the share of the table's tokens the
    crosscoder fires on, re-encoded here (within the 0.01% they are printed to)."""
    assert diff.ready is not None
    joint, _ = _by_hand(diff, diff.ready.table.acts)
    share = (joint > 0).float().mean(0) * 100
    slack = 0.005 + 100 / joint.shape[0]  # the rounding, and one token an ulp from zero
    lines = host.query_one("#xc-list", CursorList).lines
    assert len(lines) == len(diff.shown_rows)
    for line, row in zip(lines, diff.shown_rows, strict=True):
        assert abs(_percent(line.plain) - float(share[row["index"]])) <= slack, (line.plain, row)
    if diff.shown_rows:
        card = _text(host, "#xc-card")
        fires = float(re.search(r"fires on ([0-9.]+)% of the ([0-9,]+) tokens", card).group(1))  # type: ignore[union-attr]
        assert abs(fires - float(share[diff.shown_rows[0]["index"]])) <= slack
        assert f"share of the {joint.shape[0]:,} text tokens it fires on" in _text(host, "#xc-head")


def test_the_view_names_the_classes_as_the_core_does() -> None:
    assert TITLES == CORE_TITLES
    assert histogram_bars([0, 4, 8], height=2) == ["    ██", "  ████"]


async def test_train_browse_and_cycle_by_keyboard(run_dir: Path, tmp_path: Path) -> None:
    pane = FeaturesPane(id="features-pane")
    host = DiffHost(pane, tmp_path / "runs", run_dir)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        diff = host.query_one("#features-diff", CrosscoderDiff)
        _small(diff)
        assert not diff.display
        await pilot.press("c")
        assert diff.display and not host.query_one("#features-main").display
        ask = host.query_one("#xc-ask", Input)
        assert ask.has_focus and "A,B" in ask.placeholder
        for key in ("1", "comma", "8", "enter"):
            await pilot.press(key)
        await wait_until(pilot, lambda: diff.ready is not None, 120, "the crosscoder trained and read")
        (saved,) = (tmp_path / "runs" / "crosscoders").iterdir()
        assert (saved / "crosscoder_weights.safetensors").is_file()
        head = _text(host, "#xc-head")
        assert "Crosscoder diff" in head and "A = step 1, B = step 8" in head
        listing = host.query_one("#xc-list", CursorList)
        assert listing.has_focus
        seen = {}
        for group in ("b_only", "a_only", "shared"):
            assert diff.group == group
            rows = diff.shown_rows
            assert sorted(r["index"] for r in rows) == sorted(r["index"] for r in diff.rows[group])
            _check_densities(host, diff)
            if rows:
                seen[group] = rows
                card = _text(host, "#xc-card")
                assert card.startswith(f"feature {rows[0]['index']}")
                assert "at step 1" in card and "at step 8" in card
                if len(rows) > 1:
                    await pilot.press("down")
                    assert _text(host, "#xc-card").startswith(f"feature {rows[1]['index']}")
            await pilot.press("g")
        assert seen, "some feature in one of the three lists"
        assert diff.group == "b_only"
        await pilot.press("c")
        assert not diff.display and host.query_one("#features-main").display


async def test_a_crosscoder_folder_opens_in_the_view_and_bad_answers_are_one_line(
        run_dir: Path, folder: Path, tmp_path: Path) -> None:
    pane = FeaturesPane(id="features-pane")
    host = DiffHost(pane, tmp_path / "runs", run_dir)
    async with host.run_test(size=SIZE) as pilot:
        diff = host.query_one("#features-diff", CrosscoderDiff)
        _small(diff)
        pane.open_folder(str(folder))
        await wait_until(pilot, lambda: diff.ready is not None, 60, "the folder opened")
        assert diff.display and diff.ready is not None and diff.ready.folder == str(folder)
        await pilot.press("e")
        for key in ("x", "y", "enter"):
            await pilot.press(key)
        status = _text(host, "#xc-status")
        assert "'xy'" in status and len(status.strip().splitlines()) == 1
        await pilot.press("e")
        for key in ("3", "comma", "8", "enter"):
            await pilot.press(key)
        await wait_until(pilot, lambda: "no snapshot at step 3" in _text(host, "#xc-status"), 30, "the refusal")
        assert not (tmp_path / "runs" / "crosscoders").exists()
        # a long training, stopped by e: nothing written
        diff.train_steps = 10_000_000
        await pilot.press("e")
        for key in ("1", "comma", "8", "enter"):
            await pilot.press(key)
        assert diff.busy
        await pilot.pause(0.3)
        await pilot.press("e")
        await wait_until(pilot, lambda: "stopped" in _text(host, "#xc-status"), 30, "the stop")
        assert not diff.busy
        assert not (tmp_path / "runs" / "crosscoders").exists()


async def test_typed_text_lists_each_tokens_features_at_every_source(run_dir: Path, folder: Path,
                                                                    tmp_path: Path) -> None:
    """In the diff view / types into its own field (the SAE's is hidden): each token's features,
    the crosscoder's activation and each source's alone as a re-encoding here says; enter on one
    shows that feature in its list."""
    pane = FeaturesPane(id="features-pane")
    host = DiffHost(pane, tmp_path / "runs", run_dir)
    async with host.run_test(size=SIZE) as pilot:
        diff = host.query_one("#features-diff", CrosscoderDiff)
        _small(diff)
        pane.open_folder(str(folder))
        await wait_until(pilot, lambda: diff.ready is not None, 60, "the folder opened")
        assert not host.query_one("#features-prompt").display and not host.query_one("#features-tokens").display
        assert host.query_one("#xc-prompt").display and not host.query_one("#xc-tokens").display
        await pilot.press("slash")
        assert host.query_one("#xc-prompt", Input).has_focus
        await pilot.press("escape")
        assert host.query_one("#xc-list", CursorList).has_focus
        pane.focus_default()
        assert host.query_one("#xc-list", CursorList).has_focus
        await pilot.press("slash")
        for key in "31415":
            await pilot.press(key)
        await pilot.press("enter")
        tokens = host.query_one("#xc-tokens", CursorList)
        await wait_until(pilot, lambda: tokens.has_focus, 30, "the typed text's features")
        assert tokens.display
        assert diff.ready is not None
        models, hook = diff.ready.models, diff.ready.crosscoder.cfg.hook
        ids = models[0].to_tokens("31415")
        with torch.no_grad():
            acts = torch.stack([m.run_with_cache(ids, names=[hook])[1][hook][0].float() for m in models], dim=1)
        joint, alone = _by_hand(diff, acts)
        assert diff.token_rows and len(tokens.lines) == len(diff.token_rows)
        for line, row in zip(tokens.lines, diff.token_rows, strict=True):
            assert row.joint == pytest.approx(float(joint[row.t, row.feature]), abs=1e-4)
            assert row.alone == pytest.approx([float(a[row.t, row.feature]) for a in alone], abs=1e-4)
            assert max(row.joint, *row.alone) > 0
            assert f"feature {row.feature}" in line.plain and "step 1 alone" in line.plain
        # a token's strongest feature is listed first
        first = diff.token_rows[0]
        assert first.joint == pytest.approx(float(joint[first.t].max()), abs=1e-4) or float(joint[first.t].max()) == 0
        await pilot.press("enter")
        kind = diff.kinds[first.feature]
        assert _text(host, "#xc-card").startswith(f"feature {first.feature}")
        if kind in ("b_only", "a_only", "shared"):
            listing = host.query_one("#xc-list", CursorList)
            assert diff.group == kind and diff.shown_rows[listing.cursor]["index"] == first.feature
        # the SAE's own keys are off the footer here; text past the context is one line
        assert pane.check_action("cycle_sort", ()) is False and pane.check_action("train", ()) is True
        prompt = host.query_one("#xc-prompt", Input)
        prompt.value = "1" * 5000
        prompt.focus()
        await pilot.press("enter")
        status = host.query_one("#xc-status")
        await wait_until(pilot, lambda: "reads at most" in str(status.render()), 30, "the refusal")
        assert len(str(status.render()).strip().splitlines()) == 1 and not diff.busy
        await pilot.press("escape", "c")
        assert host.query_one("#features-prompt").display and pane.check_action("cycle_sort", ()) is True
