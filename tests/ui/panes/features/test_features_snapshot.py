"""The Features pane's snapshot: an SAE and a text made by hand, so every number on screen is
exact (no trained weights: their floats differ between CPUs)."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.ui.helpers import SIZE
from tests.ui.panes.features.test_features_pane import FeaturesHost
from tui_lab.ui.panes.features.features_pane import FeaturesPane

TEXT = "the cat sat on the mat. a hat, a bat; that cat sat at the flat mat!  "
VOCAB = sorted(set(TEXT))
T = 10


def hand_made() -> tuple[object, object, object]:
    """(SAE, table, unembedding): four features reading four made-up directions of the text.

    Feature 0 fires on "t" (1.0) and more after "a" (2.0); feature 1 on "a" (0.5); feature 2
    on spaces (0.25); feature 3 on "m" (4.0). The identity SAE makes f = ReLU(x).
    """
    from tui_lab.core.sae.config import SAEConfig, SAEMetadata
    from tui_lab.core.sae.feature_table import build_feature_table
    from tui_lab.core.sae.sae import SparseAutoencoder

    sae = SparseAutoencoder(SAEConfig(d_in=4, d_sae=4, architecture="standard",
                                      metadata=SAEMetadata(hook_name="blocks.1.hook_resid_post")))
    with torch.no_grad():
        sae.W_enc.copy_(torch.eye(4))
        sae.W_dec.copy_(torch.eye(4))
    ids = torch.tensor([VOCAB.index(c) for c in TEXT[: len(TEXT) // T * T]])
    x = torch.zeros(len(ids), 4)
    for j, c in enumerate(TEXT[: len(ids)]):
        if c == "t":
            x[j, 0] = 2.0 if j and TEXT[j - 1] == "a" else 1.0
        x[j, 1] = 0.5 if c == "a" else 0.0
        x[j, 2] = 0.25 if c == " " else 0.0
        x[j, 3] = 4.0 if c == "m" else 0.0
    windows = ids.reshape(-1, T)
    table = build_feature_table(sae, windows, [x.reshape(-1, T, 4)], top=3)
    w_u = torch.zeros(4, len(VOCAB))
    for j, c in enumerate(VOCAB):
        w_u[0, j] = {"h": 2.0, " ": 1.0, "!": -1.0}.get(c, 0.0)
        w_u[1, j] = {"t": 1.5, "m": -0.5}.get(c, 0.0)
        w_u[3, j] = {"a": 3.0, "t": -2.0}.get(c, 0.0)
    return sae, table, w_u


class TestFeaturesPane:
    def test_browsing_hand_made_features(self, snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        from tui_lab.ui.panes.features.browser import FeatureBrowser

        sae, table, w_u = hand_made()
        pane = FeaturesPane(id="features-pane")
        host = FeaturesHost(pane, tmp_path / "runs", None)

        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            browser = FeatureBrowser(sae, table, VOCAB.__getitem__, w_u)
            pane.hook = "blocks.1.hook_resid_post"
            pane.post_message(FeaturesPane.TableReady(browser, True, 0.0, "hand-made"))
            await pilot.pause()
            pane.focus_default()
            await pilot.press("down")
            await pilot.pause()

        assert snap_compare(host, terminal_size=SIZE, run_before=run_before)
