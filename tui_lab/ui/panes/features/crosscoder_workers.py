"""The crosscoder diff view's workers: train a crosscoder over two snapshots of the run in hand
(``core/verbs/crosscoder_train.py``) or open a crosscoder folder, then read every feature's
contexts at each source (``core/verbs/crosscoder_features.py``); or read the typed text at
every source and encode it (``typed_text``). Each posts one message.

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


@dataclass
class TextFailed(Message, namespace=NAMESPACE):
    """The typed text refused or failed (one line); the crosscoder's own work is untouched."""

    text: str


@dataclass(frozen=True)
class TokenFeature:
    """Feature ``feature`` on token ``t``: the crosscoder's activation (its encoder reading every
    source at once) and, per source, the encoder reading that source alone."""

    t: int
    feature: int
    joint: float
    alone: tuple[float, ...]


@dataclass
class TextFeatures(Message, namespace=NAMESPACE):
    """The typed text's tokens and, on each, the features firing (``TokenFeature`` rows)."""

    labels: list[str]
    rows: list[TokenFeature]


PER_TOKEN = 3  # features listed on each token of the typed text


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


def token_features(joint: Tensor, alone: Tensor, per_token: int = PER_TOKEN) -> list[TokenFeature]:
    """The strongest ``per_token`` features of each token, ranked by the crosscoder's activation
    (joint (T, F)) and then by the largest reading one source alone (alone (n, T, F)); a feature
    is listed when it fires either way."""
    strongest = alone.amax(0)
    rows = []
    for t in range(joint.shape[0]):
        firing = ((joint[t] > 0) | (strongest[t] > 0)).nonzero().flatten().tolist()
        firing.sort(key=lambda j: (-float(joint[t, j]), -float(strongest[t, j])))
        rows += [TokenFeature(t, j, float(joint[t, j]), tuple(float(v) for v in alone[:, t, j]))
                 for j in firing[:per_token]]
    return rows


def typed_text(post: Post, cc: Crosscoder, models: list[ModelInHand], text: str) -> None:
    """The typed text read at every source at the crosscoder's hook, encoded jointly and at each
    source alone (text past the context refused in one line)."""
    import torch

    from tui_lab.core.sae.crosscoder_contexts import alone
    from tui_lab.core.sae.crosscoder_sources import collect
    from tui_lab.core.verbs.verb import check_text

    try:
        check_text(models[0], text, "the text")
        ids = models[0].to_tokens(text).cpu()
        acts = collect(models, ids, cc.cfg.hook)  # (T, n, d)
        if acts is None:  # not asked to stop: never None here
            return
        with torch.no_grad():
            joint = cc.encode(acts.to(cc.W_enc.device)).cpu()
            each = torch.stack([alone(cc, acts, s) for s in range(cc.cfg.n_sources)])
        rows = token_features(joint, each)
        labels = models[0].to_str_tokens(ids)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(TextFailed(one_line(exc)))
        return
    post(TextFeatures(labels, rows))
