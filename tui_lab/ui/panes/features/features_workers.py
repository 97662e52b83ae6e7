"""The Features pane's workers: each runs a verb in a thread (``core/verbs/sae_train.py``,
``sae_features.py``, ``decode.py``) and posts what it found as one of the messages here.

The pane starts them with ``run_worker(..., thread=True)``; each reads its worker's
``is_cancelled`` between steps. A failure is one ``Failed`` line, never a traceback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.panes.features.browser import FeatureBrowser
from tui_lab.ui.worker_progress import Post, worker_cancelled

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.sae.sae import SparseAutoencoder

POST_EVERY_S = 0.25  # progress messages at most this often (a fast loop must not flood the UI)
DECODE_TOKENS = 40  # characters (tokens) decoded by x and v
NAMESPACE = "features_pane"  # the pane's handlers: on_features_pane_<message>



@dataclass
class TrainProgress(Message, namespace=NAMESPACE):
    """A training step's curves (merged: at most one message per POST_EVERY_S)."""

    curves: dict[str, float]
    tokens: int
    total_tokens: int
    hook: str


@dataclass
class TrainEnded(Message, namespace=NAMESPACE):
    """Training stopped; the SAE is saved in ``folder``."""

    sae: SparseAutoencoder
    handle: ModelInHand
    windows: Tensor
    folder: str
    reason: str
    hook: str


@dataclass
class TableProgress(Message, namespace=NAMESPACE):
    done: int
    total: int


@dataclass
class TableReady(Message, namespace=NAMESPACE):
    """Every feature's table is built (or read from the cache); ``handle`` and ``hook`` the
    model and site it was read on (None: the pane keeps its own)."""

    browser: FeatureBrowser
    cached: bool
    seconds: float
    source: str
    handle: ModelInHand | None = None
    hook: str | None = None


@dataclass
class PromptReady(Message, namespace=NAMESPACE):
    labels: list[str]
    features: Tensor  # (T, d_sae)


@dataclass
class Intervened(Message, namespace=NAMESPACE):
    """The typed text decoded plainly and with the feature ablated or steered."""

    feature: int
    mode: str
    coef: float
    plain: str
    changed: str


@dataclass
class Failed(Message, namespace=NAMESPACE):
    text: str


_cancelled = worker_cancelled


def private_handle(run: ModelHandle) -> ModelInHand:
    """The run as a model in hand of its own: copied unless it was opened from files
    (``model_copies.private_in_hand``)."""
    from tui_lab.ui.state.model_copies import private_in_hand

    return private_in_hand(run)


def train(post: Post, run: ModelHandle, out: Path, d_sae: int, k: int, tokens: int, keep_tokens: int,
          training: bool, arch: str = "topk") -> None:
    """Train an SAE of ``arch`` (``tfx-lab sae train --arch``'s names) at the last residual stream
    (``core/verbs/sae_train.py``, its other settings the command's defaults), posting merged progress."""
    from tui_lab.core.model.device import bulk_threads
    from tui_lab.core.sae.events import SAEStepEvent
    from tui_lab.core.sae.recipe import last_resid
    from tui_lab.core.verbs import sae_train

    try:
        handle = private_handle(run)
        hook = last_resid(handle)
        request = sae_train.Request(str(out), hook, d_sae=d_sae, arch=arch, k=k, tokens=tokens, model_name=run.config.name,
                                    score_ce=False, keep_tokens=keep_tokens)  # the table reads them after
        last = [0.0]

        def on_event(event: object) -> None:
            if not isinstance(event, SAEStepEvent):
                return
            if event.tokens >= event.total_tokens or time.monotonic() - last[0] >= POST_EVERY_S:
                last[0] = time.monotonic()
                curves = {"mse": event.mse, "l0": event.l0, "explained_variance": event.explained_variance,
                          "dead_fraction": event.dead_fraction}
                post(TrainProgress(curves, event.tokens, event.total_tokens, hook))

        with bulk_threads(training):
            end = sae_train.run(request, handle, cancelled=_cancelled, on_event=on_event)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    post(TrainEnded(end.sae.eval(), handle, end.windows, str(out), end.reason, hook))


def open_folder(post: Post, run: ModelHandle, folder: str, table_tokens: int, training: bool) -> None:
    """Open an SAE folder, then build its table."""
    from tui_lab.core.sae.recipe import last_resid
    from tui_lab.core.sae.source import open_sae
    from tui_lab.core.verbs.sae_features import windows_for

    try:
        sae = open_sae(folder)
        handle = private_handle(run)
        hook = sae.cfg.metadata.hook_name or last_resid(handle)
        windows = windows_for(sae, hook, handle, name=run.config.name or "the model")
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    build_table(post, sae.eval(), handle, windows, hook, folder, table_tokens, training)


def build_table(post: Post, sae: SparseAutoencoder, handle: ModelInHand, windows: Tensor, hook: str,
                source: str, table_tokens: int, training: bool) -> None:
    """Build (or read back) every feature's table (``sae_features.feature_table``)."""
    from tui_lab.core.model.device import bulk_threads
    from tui_lab.core.sae.feature_table import unembedding
    from tui_lab.core.verbs.sae_features import feature_table

    last = [0.0]

    def progress(done: int, total: int, _what: str) -> None:
        if done >= total or time.monotonic() - last[0] >= POST_EVERY_S:
            last[0] = time.monotonic()
            post(TableProgress(done, total))

    try:
        t0 = time.perf_counter()
        with bulk_threads(training):
            table, cached = feature_table(handle, sae, windows, hook, table_tokens, progress=progress,
                                          cancelled=_cancelled)
        if table is None:
            return
        browser = FeatureBrowser(sae, table, handle.task.vocab.label, unembedding(handle.model))
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    post(TableReady(browser, cached, time.perf_counter() - t0, source, handle, hook))


def prompt(post: Post, handle: ModelInHand, sae: SparseAutoencoder, hook: str | None, text: str) -> None:
    """The typed text's feature activations (text past the context refused in one line)."""
    from tui_lab.core.verbs.sae_features import on_text

    try:
        labels, features = on_text(handle, sae, hook or "", text)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    post(PromptReady(labels, features))


def intervene(post: Post, handle: ModelInHand, sae: SparseAutoencoder, hook: str | None, feature: int,
              text: str, mode: str, coef: float) -> None:
    """Greedy decodes of ``text`` as ``tfx-lab decode`` makes them (``core/verbs/decode.py``):
    plain, then with the feature ablated or steered at the SAE's hook."""
    from tui_lab.core.model.hook_points import using_hooks
    from tui_lab.core.sae.interventions import ablation_hooks, steering_hooks
    from tui_lab.core.verbs.decode import Request, decoded

    try:
        hooks = (ablation_hooks(sae, feature, hook) if mode == "ablate"
                 else steering_hooks(sae, feature, coef, hook))
        request = Request(text, max_new=DECODE_TOKENS, capture=False)
        plain = decoded(handle.model, handle.task, request)
        with using_hooks(hooks):
            changed = decoded(handle.model, handle.task, request)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    post(Intervened(feature, mode, coef, plain.output, changed.output))
