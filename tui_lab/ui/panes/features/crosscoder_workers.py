"""The crosscoder diff view's workers: train a crosscoder over two snapshots of the run in hand
(``core/verbs/crosscoder_train.py``) or open a crosscoder folder, then read every feature's
contexts at each source (``core/verbs/crosscoder_features.py``); each posts one message.

A failure is one ``DiffFailed`` line, never a traceback; progress is merged (at most a few
messages a second) and the worker's ``is_cancelled`` is read between steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.worker_progress import Post, ProgressReport, merged, worker_cancelled

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.crosscoder import Crosscoder
    from tui_lab.core.sae.crosscoder_contexts import CrosscoderTable

NAMESPACE = "crosscoder_diff"  # handlers: on_crosscoder_diff_<message>
POST_EVERY_S = 0.25



@dataclass
class DiffProgress(Message, namespace=NAMESPACE):
    done: int
    total: int
    what: str


@dataclass
class DiffReady(Message, namespace=NAMESPACE):
    """A crosscoder, its firing counts, its table over the text and the sources in hand."""

    folder: str
    crosscoder: Crosscoder
    fired: Tensor
    table: CrosscoderTable
    models: list[ModelInHand]
    seconds: float


@dataclass
class DiffFailed(Message, namespace=NAMESPACE):
    text: str


_cancelled = worker_cancelled


def _progress(post: Post) -> ProgressReport:
    return merged(post, DiffProgress, POST_EVERY_S)


def open_diff(post: Post, folder: str, tokens: int) -> None:
    """Open the crosscoder in ``folder`` and its sources; read every feature's contexts."""
    from tui_lab.core.sae.crosscoder_folder import load_crosscoder
    from tui_lab.core.verbs.crosscoder_features import source_table
    from tui_lab.core.verbs.crosscoder_train import open_sources

    started = time.monotonic()
    try:
        cc, fired = load_crosscoder(folder)
        models = open_sources(cc.cfg.sources, "cpu")
        table = source_table(cc, models, None, tokens, _progress(post), _cancelled)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(DiffFailed(one_line(exc)))
        return
    post(DiffReady(folder, cc, fired, table, models, time.monotonic() - started))


def train_diff(post: Post, run: str, steps: tuple[int, ...] | None, out: str, d_sae: int, train_steps: int,
               tokens: int, table_tokens: int) -> None:
    """Train a crosscoder over two snapshots of ``run`` into ``out``, then open it."""
    from tui_lab.core.verbs import crosscoder_train

    try:
        request = crosscoder_train.Request(out, run=run, steps=steps, d_sae=d_sae, train_steps=train_steps,
                                           tokens=tokens)
        crosscoder_train.run(request, progress=_progress(post), cancelled=_cancelled)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(DiffFailed(one_line(exc)))
        return
    open_diff(post, out, table_tokens)
