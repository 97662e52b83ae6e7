"""Enter on a feature in the Circuit pane opens it in Features: the lab routes the Circuit pane's
request to the Features pane, which reads that transcoder layer's features over the run's
sequences in a worker and shows the feature's card. Checked against the transcoder itself:
each context's activations are ``Transcoder.encode`` of the model's input hook on that
window, the contexts are the windows where the feature peaks highest, and the logit effects
are the decoder row through the final norm's gain and the unembedding, demeaned (written out
here), led by the Circuit pane's label. Escape goes back; an unreadable set is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from textual.widgets import Static

from tests.core.analysis.circuits.conftest import random_transcoders
from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
from tui_lab.core.analysis.circuits.feature_labels import top_tokens
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.transcoder import TranscoderSet, save_transcoders
from tui_lab.core.sae.transcoder_data import windows_of
from tui_lab.ui.messages import OpenFeatureRequested
from tui_lab.ui.panes.features.features_pane import FeaturesPane
from tui_lab.ui.panes.features.transcoder_feature_panel import TranscoderFeaturePanel

RUN = Path(__file__).resolve().parents[3] / "data" / "induction-mlp-run"
TOKENS = 2048  # the sequences the card reads: enough windows for ten contexts, fast
LAYER = 1  # random_transcoders makes odd layers JumpReLU (threshold 0.3): the threshold is read too


@torch.no_grad()
def _encoded(model: object, tset: TranscoderSet, ids: torch.Tensor) -> torch.Tensor:
    """(n, T, d_tc): Transcoder.encode of the input hook's activations on ``ids`` (n, T)."""
    hook = f"blocks.{LAYER}.ln2.hook_normalized"
    _, cache = model.run_with_cache(ids, names=[hook])  # type: ignore[attr-defined]
    return tset[LAYER].encode(cache[hook].float())


def _text(app: object) -> str:
    return str(app.query_one("#features-transcoder-card", Static).render())  # type: ignore[attr-defined]


async def test_enter_on_a_feature_shows_its_card_in_features(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path / "cache"))
    model = open_model(RUN)
    tset = random_transcoders(model)
    save_transcoders(tset, tmp_path / "tc")
    windows = windows_of(model, None, TOKENS, 0, "the run").ids
    windows = windows[: TOKENS // windows.shape[1]]
    acts = _encoded(model, tset, windows)  # (n, T, d_tc)
    peaks = acts.amax(dim=1)  # (n, d_tc) each window's peak
    feature = int((peaks > 0).sum(dim=0).argmax())  # the feature that fires in the most windows
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.state.opened = model
        pane = app.query_one(FeaturesPane)
        pane.table_tokens = TOKENS
        app.post_message(OpenFeatureRequested(tmp_path / "tc", LAYER, feature))  # the Circuit pane's enter
        await wait_until(pilot, lambda: bool(pane.query(TranscoderFeaturePanel))
                         and pane.query_one(TranscoderFeaturePanel).shown is not None, 120, "the card")
        await pilot.pause()
        panel = pane.query_one(TranscoderFeaturePanel)
        shown = panel.shown
        assert shown is not None and app.active_pane == "features"
        assert (shown.layer, shown.feature) == (LAYER, feature)
        assert f"transcoder layer {LAYER} · feature {feature}" in _text(app)
        assert not pane.query_one("#features-main").display and panel.has_focus
        # contexts: Transcoder.encode on each window's own tokens, the highest-peaking windows
        assert len(shown.contexts) == min(10, int((peaks[:, feature] > 0).sum()))
        for ctx, row in zip(shown.contexts, shown.card["contexts"], strict=True):
            mine = _encoded(model, tset, torch.tensor([ctx.ids]))[0, :, feature]
            assert ctx.activations == pytest.approx(mine.tolist(), abs=1e-5)
            assert row["activations"] == ctx.activations and row["peak"] == pytest.approx(float(mine.max()))
        expected_peaks = peaks[:, feature].topk(len(shown.contexts)).values
        assert [c.peak for c in shown.contexts] == pytest.approx(expected_peaks.tolist(), abs=1e-5)
        assert shown.card["max"] == pytest.approx(float(peaks[:, feature].max()), abs=1e-5)
        assert shown.card["density"] == pytest.approx(float((acts[..., feature] > 0).float().mean()), abs=1e-6)
        # logit effects: the decoder row scaled by ln_final's gain, through lm_head, demeaned
        gain = model.model.decoder.norm.weight.detach()
        effect = model.model.lm_head.weight.detach() @ (tset[LAYER].W_dec.detach()[feature] * gain)
        effect = effect - effect.mean()
        top = effect.topk(8)
        effects = shown.card["effects"]
        assert effects is not None
        label = model.task.vocab.label
        assert [t for t, _ in effects["promoted"]] == [label(int(i)) for i in top.indices]
        assert [v for _, v in effects["promoted"]] == pytest.approx(top.values.tolist(), abs=1e-5)
        assert shown.label == "/".join(top_tokens(model, tset, LAYER, feature))
        await pilot.press("escape")
        await pilot.pause()
        assert pane.query_one("#features-main").display and not panel.display
        # a set that cannot be read: one line where the card would be, and back again
        app.post_message(OpenFeatureRequested(tmp_path / "nowhere", 0, 3))
        await wait_until(pilot, lambda: panel.display and "transcoder layer 0, feature 3:" in _text(app), 30,
                         "the refusal")
        first = _text(app).splitlines()[0]
        assert first.startswith("transcoder layer 0, feature 3: ") and "nowhere" in first
        await pilot.press("escape")
        await pilot.pause()
        assert pane.query_one("#features-main").display


async def test_enter_in_the_circuit_pane_opens_the_feature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole way: trace in the Circuit pane, move to a feature, enter; Features shows it."""
    from tui_lab.ui import pane_registry
    from tui_lab.ui.panes.circuit.circuit_pane import CircuitPane

    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path / "cache"))
    model = open_model(RUN)
    tset = random_transcoders(model)
    save_transcoders(tset, tmp_path / "tc")
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.state.opened = model
        app.query_one(FeaturesPane).table_tokens = TOKENS
        await pilot.press(pane_registry.spec("circuit").key)
        await pilot.pause()
        circuit = app.query_one(CircuitPane)
        circuit.focus_default()
        await pilot.press(*"rujAnignar", "tab", *str(tmp_path / "tc"), "enter")
        await wait_until(pilot, lambda: circuit.view.graph is not None and not circuit.running, 120, "the graph")
        await pilot.pause()
        for _ in range(8):  # down the rows (right past error nodes) to a feature
            node = circuit.view.node()
            if node is not None and node.kind.value == "feature":
                break
            await pilot.press("right" if node is not None and node.kind.value == "error" else "down")
        node = circuit.view.node()
        assert node is not None and node.kind.value == "feature"
        await pilot.press("enter")
        pane = app.query_one(FeaturesPane)
        await wait_until(pilot, lambda: bool(pane.query(TranscoderFeaturePanel))
                         and pane.query_one(TranscoderFeaturePanel).shown is not None, 120, "the card")
        shown = pane.query_one(TranscoderFeaturePanel).shown
        assert shown is not None and app.active_pane == "features"
        assert (shown.layer, shown.feature) == (node.layer, node.id) and shown.contexts
        assert f"transcoder layer {node.layer} · feature {node.id}" in _text(app)
        for ctx in shown.contexts[:2]:
            hook = f"blocks.{node.layer}.ln2.hook_normalized"
            _, cache = model.run_with_cache(torch.tensor([ctx.ids]), names=[hook])
            mine = tset[node.layer].encode(cache[hook].float())[0, :, node.id]
            assert ctx.activations == pytest.approx(mine.tolist(), abs=1e-5)
