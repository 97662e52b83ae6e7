"""The first windows' activations at a hook, kept from an SAE's training for its feature table.

Training reads the text's windows in order on its first pass (``hook_activations``:
the first epoch is unshuffled), so the activations of the first windows go past
anyway. ``Recorder`` keeps those of the first ``n`` windows and, once it has them
all, writes them to the cache folder; the feature table of any SAE at that hook of
that model then reads them instead of running the model over the text again (the
forward passes are most of a table's cost: ``bench/sae.py``).

One file per model, hook and window length (a model's weights digest names it);
it holds the windows' ids too, and is used only for windows that are a prefix of
them. Float32, so a table built from it equals one built from the model. Kept
only up to ``MAX_BYTES``; written atomically; an unreadable file is ignored.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

MAX_BYTES = 256 * 2**20  # activations larger than this are not kept


def store_path(folder: Path, model_digest: str, hook: str, context: int) -> Path:
    name = hashlib.sha256(f"{model_digest}|{hook}|{context}".encode()).hexdigest()[:32]
    return folder / "sae-activations" / f"{name}.safetensors"


def save_activations(path: Path, windows: torch.Tensor, acts: torch.Tensor) -> None:
    """Write windows (n, T) and their activations (n, T, d) to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        save_file({"windows": windows.contiguous(), "acts": acts.contiguous()}, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_activations(path: Path, windows: torch.Tensor) -> torch.Tensor | None:
    """(n, T, d) activations of ``windows`` (n, T) when ``path`` holds a prefix match, else None."""
    if not path.is_file():
        return None
    try:
        kept = load_file(str(path))
        ids, acts = kept["windows"], kept["acts"]
    except Exception:  # torn or foreign: the model is run instead
        return None
    n = windows.shape[0]
    if ids.shape[0] < n or ids.shape[1:] != windows.shape[1:] or not torch.equal(ids[:n], windows.cpu()):
        return None
    return acts[:n]


def batches(acts: torch.Tensor, batch: int) -> Iterator[torch.Tensor]:
    """(batch, T, d) slices of stored activations, in order."""
    for start in range(0, acts.shape[0], batch):
        yield acts[start : start + batch]


class Recorder:
    """Passes (rows, d) activation chunks through, keeping the rows of the first ``n`` windows
    of T tokens; ``done(windows, acts)`` is called once they are all in."""

    def __init__(self, windows: torch.Tensor, n: int, done: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        self.windows = windows[:n].cpu()
        self.n, self.t = self.windows.shape[0], windows.shape[1]
        self.done = done
        self.rows = 0
        self.acts: torch.Tensor | None = None

    def wrap(self, source: Iterable[torch.Tensor]) -> Iterator[torch.Tensor]:
        for chunk in source:
            self._keep(chunk)
            yield chunk

    def _keep(self, chunk: torch.Tensor) -> None:
        total = self.n * self.t
        if self.rows >= total or self.n == 0:
            return
        rows = chunk.detach().reshape(-1, chunk.shape[-1])
        if self.acts is None:
            if total * rows.shape[-1] * 4 > MAX_BYTES:
                self.n = 0  # too large to keep: the table will run the model
                return
            self.acts = torch.empty(total, rows.shape[-1])
        take = min(rows.shape[0], total - self.rows)
        self.acts[self.rows : self.rows + take] = rows[:take].float().cpu()
        self.rows += take
        if self.rows == total:
            self.done(self.windows, self.acts.reshape(self.n, self.t, -1))
            self.acts = None
