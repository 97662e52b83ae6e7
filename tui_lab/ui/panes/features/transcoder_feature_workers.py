"""The worker behind the Features pane's transcoder card (the Circuit pane's enter on a feature):
open the transcoder set on the model in hand, read one layer's features over the run's text
with the SAE feature table (``core/analysis/circuits/transcoder_cards.py`` adapts the layer),
and post the feature's card. A failure is one ``TranscoderFailed`` line, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.panes.features.features_workers import POST_EVERY_S, private_handle
from tui_lab.ui.worker_progress import Post, merged, worker_cancelled

if TYPE_CHECKING:
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.sae.feature_table import Context
    from tui_lab.ui.panes.features.browser import Card

NAMESPACE = "transcoder_feature"  # the panel's handlers: on_transcoder_feature_<message>
SEED = 0  # a task without text: the sequences the transcoder trainer's first windows are


@dataclass
class Progress(Message, namespace=NAMESPACE):
    done: int
    total: int


@dataclass
class Ready(Message, namespace=NAMESPACE):
    """The feature's card, its top contexts with their ids, and what it was read from."""

    card: Card
    contexts: list[Context]
    layer: int
    feature: int
    label: str  # the Circuit pane's label (the tokens its decoder row raises most)
    hook: str
    source: str
    cached: bool


@dataclass
class Failed(Message, namespace=NAMESPACE):
    text: str


def show(post: Post, run: ModelHandle, folder: Path | None, layer: int, feature: int, tokens: int,
         training: bool) -> None:
    """Read layer ``layer``'s features over about ``tokens`` tokens of the run's text (a task
    without text: its sequences) and post feature ``feature``'s card."""
    from tui_lab.core.analysis.circuits.feature_labels import top_tokens
    from tui_lab.core.analysis.circuits.transcoder_cards import as_sae, label_unembedding
    from tui_lab.core.errors import LabError
    from tui_lab.core.model.device import bulk_threads
    from tui_lab.core.sae.transcoder import open_transcoders
    from tui_lab.core.sae.transcoder_data import windows_of
    from tui_lab.core.verbs.sae_features import feature_table
    from tui_lab.ui.panes.features.browser import FeatureBrowser

    progress = merged(post, lambda done, total, _what: Progress(done, total), POST_EVERY_S)

    try:
        if folder is None:
            raise LabError("the graph's transcoder set has no folder to read the feature from")
        handle = private_handle(run)
        tset = open_transcoders(folder, handle)
        if not 0 <= layer < tset.n_layers:
            raise LabError(f"layer {layer}: the set has layers 0 to {tset.n_layers - 1}")
        if not 0 <= feature < tset[layer].d_tc:
            raise LabError(f"feature {feature}: layer {layer} has features 0 to {tset[layer].d_tc - 1}")
        hook = tset.input_hook(layer)
        sae = as_sae(tset[layer], hook)
        windows = windows_of(handle, None, tokens, SEED, run.config.name or "the model").ids
        with bulk_threads(training):
            table, cached = feature_table(handle, sae, windows, hook, tokens, progress=progress,
                                          cancelled=worker_cancelled)
        if table is None:
            return
        browser = FeatureBrowser(sae, table, handle.task.vocab.label, label_unembedding(handle))
        browser.jump_to(feature)
        card, contexts = browser.card(), table.contexts(feature)
        label = "/".join(top_tokens(handle, tset, layer, feature))
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(f"transcoder layer {layer}, feature {feature}: {one_line(exc)}"))
        return
    post(Ready(card, contexts, layer, feature, label, hook, str(folder), cached))
