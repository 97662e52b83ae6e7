"""The Features pane by keyboard, mounted in a host that is not the lab: train an SAE live,
browse its features, sort, type text and jump to a token's feature, open the saved folder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from textual.widgets import Input

from tests.ui.fake_host import STYLES, FakeHost
from tests.ui.helpers import SIZE, wait_until
from tui_lab.ui.panes.features.cursor_list import CursorList
from tui_lab.ui.panes.features.features_pane import FeaturesPane

PANE_CSS = Path(__file__).resolve().parents[4] / "tui_lab" / "ui" / "panes" / "features" / "features.tcss"
PRESET = """\
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 2, d_model: 32, n_heads: 2,
        d_ff: 64, positional: rope, max_len: 64}
task: {name: char-lm, block_size: 32}
train: {steps: 2, batch_size: 8, eval_every: 2, device: cpu, threads: 1}
"""


class FeaturesHost(FakeHost):
    """The fake host with the pane's own stylesheet, and a model in hand."""

    def __init__(self, pane: FeaturesPane, runs_root: Path, run: object) -> None:
        super().__init__(lambda: pane, "features", runs_root)
        self.css_path = [STYLES / "app.tcss", PANE_CSS]
        self.state.current_run = run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.train import TrainingRun

    root = tmp_path_factory.mktemp("features-run")
    (root / "tiny.yaml").write_text(PRESET)
    TrainingRun(load_preset(str(root / "tiny.yaml")), root / "run").run()
    return root / "run"


def _host(tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FeaturesHost, FeaturesPane]:
    from tui_lab.core.opening.from_run import load_for_inference

    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path / "cache"))
    pane = FeaturesPane(d_sae=64, k=4, train_tokens=6000, table_tokens=3000, id="features-pane")
    return FeaturesHost(pane, tmp_path / "runs", load_for_inference(tiny_run, "cpu")), pane


def _card(host: FeaturesHost) -> str:
    return str(host.query_one("#features-card").render())


async def test_train_browse_sort_prompt_and_reopen_by_keyboard(
        tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host, pane = _host(tiny_run, tmp_path, monkeypatch)
    async with host.run_test(size=SIZE) as pilot:
        assert host.registered == {"features": pane}
        pane.focus_default()
        assert "t  train an SAE" in _card(host)
        await pilot.press("t")
        await wait_until(pilot, lambda: pane.browser is not None, 120, "the SAE trained and its table")
        b = pane.browser
        assert b is not None and b.table.tokens == 3000 - 3000 % 32
        # live curves came as merged messages: one point per message, the last at the end
        assert pane.history["l0"] and pane.history["l0"][-1] == pytest.approx(4.0)
        (saved,) = (tmp_path / "runs" / "saes").iterdir()
        assert (saved / "cfg.json").is_file() and (saved / "sae_weights.safetensors").is_file()
        first = b.feature
        assert _card(host).startswith(f"feature {first}")
        densities = [float(b.table.density[i]) for i in b.order]
        assert densities == sorted(densities, reverse=True)

        # moving between features: a lookup, well under 50 ms a key here
        started = time.perf_counter()
        await pilot.press("down")
        assert b.feature == b.order[1] and _card(host).startswith(f"feature {b.order[1]}")
        await pilot.press("end")
        assert b.cursor == len(b.order) - 1
        await pilot.press("home")
        assert b.cursor == 0
        assert (time.perf_counter() - started) / 3 < 0.5  # pilot's own pauses dominate
        costs = []
        for _ in range(40):  # what a key costs the pane itself: the card of the next feature
            t0 = time.perf_counter()
            b.move(1)
            pane.show_feature()
            costs.append(time.perf_counter() - t0)
        assert sorted(costs)[int(0.95 * len(costs)) - 1] < 0.05
        b.cursor = 0

        await pilot.press("s")
        assert b.sort == "max"
        maxes = [float(b.table.max[i]) for i in b.order]
        assert maxes == sorted(maxes, reverse=True)
        assert "sorted by largest activation" in str(host.query_one("#features-title").render())

        # type text: each token's features; enter on one jumps to it
        await pilot.press("slash", *"def st(o)", "enter")  # s, t, o are the pane's keys: typed here
        await wait_until(pilot, lambda: bool(b.prompt), 30, "the typed text's features")
        assert "".join(row.token for row in b.prompt).replace("␣", " ") == "def st(o)"
        assert not pane.training and b.sort == "max"
        tokens = host.query_one("#features-tokens", CursorList)
        assert tokens.has_focus and tokens.lines
        await pilot.press("down", "enter")
        wanted = b.prompt_pairs()[1][2]
        assert b.feature == wanted and _card(host).startswith(f"feature {wanted}")
        listing = host.query_one("#features-list", CursorList)
        assert listing.has_focus and listing.cursor == b.cursor == b.order.index(wanted)
        await pilot.press("s")
        assert b.sort == "prompt"
        assert float(b.prompt_max[b.order[0]]) == pytest.approx(float(b.prompt_max.max()))

        # use the feature: decode the typed text without it, then steered along it
        status = host.query_one("#features-status")
        await pilot.press("x")
        await wait_until(pilot, lambda: "ablated" in str(status.render()), 60, "the ablated decode")
        assert str(status.render()).startswith("plain")
        await pilot.press("v")
        await wait_until(pilot, lambda: "steered (+" in str(status.render()), 60, "the steered decode")

        # switch it off in the lab's Decode pane, and on again
        shown = b.feature
        await pilot.press("a")
        assert [(f.sae, f.index) for f in host.state.ablation.features] == [(b.sae, shown)]
        assert f"off in Decode: {shown}" in str(host.query_one("#features-title").render())
        assert host.state.ablation.label() == f"feature {shown} of {pane.source}"
        await pilot.press("a")
        assert not host.state.ablation.features and "off in Decode" not in str(
            host.query_one("#features-title").render())

        # open the saved folder: its table comes from the cache this time
        pane.browser = None
        await pilot.press("o", *str(saved), "enter")
        await wait_until(pilot, lambda: pane.browser is not None, 60, "the opened SAE's table")
        assert "from the cache" in str(host.query_one("#features-status").render())
        await pilot.press("o", *str(tmp_path / "nowhere"), "enter")
        await wait_until(pilot, lambda: "no such folder" in str(host.query_one("#features-status").render()),
                         30, "one line for a missing folder")


async def test_training_can_be_stopped_and_no_model_is_one_line(
        tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host, pane = _host(tiny_run, tmp_path, monkeypatch)
    pane.train_tokens = 10_000_000
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press("t")
        await wait_until(pilot, lambda: bool(pane.history["mse"]), 60, "the first steps")
        await pilot.press("t")
        await wait_until(pilot, lambda: not pane.training, 30, "training to stop")
        assert pane.history["mse"] and len(pane.history["mse"]) < 1000
        await host.workers.wait_for_complete()
        host.state.current_run = None
        pane.browser = None
        await pilot.press("t")
        assert "no model yet" in str(host.query_one("#features-status").render())


def test_browser_sorts_and_jumps_without_textual() -> None:
    from tui_lab.core.sae.config import SAEConfig
    from tui_lab.core.sae.feature_table import build_feature_table
    from tui_lab.core.sae.sae import SparseAutoencoder
    from tui_lab.ui.panes.features.browser import FeatureBrowser

    sae = SparseAutoencoder(SAEConfig(d_in=6, d_sae=10, k=2))
    acts = torch.randn(8, 5, 6, generator=torch.Generator().manual_seed(0))
    table = build_feature_table(sae, torch.zeros(8, 5, dtype=torch.long), [acts])
    b = FeatureBrowser(sae, table, str)
    assert b.sort == "density" and b.cycle_sort() == "max" and b.cycle_sort() == "density"  # no text yet
    b.move(3)
    kept = b.feature
    b.cycle_sort()
    assert b.feature == kept  # the cursor follows its feature across a re-sort
    b.set_prompt(["a", "b"], torch.tensor([[0.0] * 9 + [2.0], [1.0] + [0.0] * 9]))
    assert [(r.token, r.features) for r in b.prompt] == [("a", [(9, 2.0)]), ("b", [(0, 1.0)])]
    b.sort = "density"
    b.cycle_sort()
    assert b.cycle_sort() == "prompt" and b.order[:2] == [9, 0]
    b.jump_to(0)
    assert b.feature == 0 and b.card()["effects"] is None


async def test_typed_text_past_the_context_is_one_line(
        tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 55: text typed at / longer than the model's context (64) is refused in one line
    saying the limit, as ``tfx-lab sae features --input`` refuses it."""
    from tui_lab.core.opening.from_run import load_for_inference
    from tui_lab.core.sae.folder import save_sae
    from tui_lab.core.sae.recipe import new_sae

    loaded = load_for_inference(tiny_run, "cpu")
    save_sae(new_sae(int(loaded.config.model.d_model), 16, "topk", 4, "blocks.1.hook_resid_post", None, 32, seed=1),
             tmp_path / "sae")
    host, pane = _host(tiny_run, tmp_path, monkeypatch)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        pane.open_folder(str(tmp_path / "sae"))
        await wait_until(pilot, lambda: pane.browser is not None, 60, "the SAE's table")
        prompt = host.query_one("#features-prompt", Input)
        prompt.value = "a" * 5000
        prompt.focus()
        await pilot.press("enter")
        status = host.query_one("#features-status")
        await wait_until(pilot, lambda: "reads at most" in str(status.render()), 30, "the refusal")
        said = str(status.render()).strip()
        assert said == "the text of 5000 tokens: the model reads at most 64"
        assert pane.browser is not None and not pane.browser.prompt


def test_the_architectures_and_prefixes_are_the_commands() -> None:
    """A's choices are tfx-lab sae train's --arch names; the prefixes it announces are the recipe's."""
    from tui_lab.core.sae.recipe import matryoshka_widths
    from tui_lab.core.verbs.sae_train import ARCHS
    from tui_lab.ui.panes.features.card_view import ARCHS as PANE_ARCHS
    from tui_lab.ui.panes.features.card_view import matryoshka_widths as pane_widths

    assert set(PANE_ARCHS) <= set(ARCHS)
    assert [ARCHS[a] for a in PANE_ARCHS] == ["topk", "batchtopk", "matryoshka_batchtopk"]
    for d_sae in (1, 8, 64, 1000, 1024, 4096):
        assert pane_widths(d_sae) == matryoshka_widths(d_sae)


async def test_a_picks_the_architecture_t_trains(
        tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A twice: Matryoshka BatchTopK, said in the card and the status; t trains one, saved as the
    command saves it (its architecture and nested prefixes in cfg.json), with the command's k."""
    import json

    host, pane = _host(tiny_run, tmp_path, monkeypatch)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        assert "in hand: TopK, 64 features, k = 4," in _card(host) and "prefixes 4/16/64)" in _card(host)
        await pilot.press("A")
        assert pane.arch == "batchtopk" and "in hand: BatchTopK, 64 features, k = 4," in _card(host)
        await pilot.press("A")
        assert pane.arch == "matryoshka"
        assert "t trains Matryoshka BatchTopK, 64 features, k = 4 per token on average over a batch, " \
               "nested prefixes 4/16/64" in str(host.query_one("#features-status").render())
        await pilot.press("t")
        await wait_until(pilot, lambda: pane.browser is not None, 120, "the SAE trained and its table")
        (saved,) = (tmp_path / "runs" / "saes").iterdir()
        meta = json.loads((saved / "cfg.json").read_text())["metadata"]
        # written for inference as SAELens writes a BatchTopK SAE: JumpReLU, the training recorded
        assert meta["training_architecture"] == "matryoshka_batchtopk"
        assert meta["training_architecture_details"]["matryoshka_widths"] == [4, 16, 64]
        assert meta["training_architecture_details"]["k"] == 4
        assert "trained as Matryoshka BatchTopK" in str(host.query_one("#features-title").render())
        await pilot.press("A")
        assert pane.arch == "topk"
