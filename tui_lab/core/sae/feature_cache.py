"""The feature table of an SAE over a text, computed once and kept on disk.

The key is a SHA-256 of everything the table depends on: the SAE's weights, the
model's weights (the activations come through it), the text's ids, the hook,
the window length and the number of contexts kept. The weights are hashed as
the bytes of their tensors, the same bytes as their safetensors files, so an
SAE trained in the lab and never saved has a key too. Reopening the same SAE on
the same text reads one safetensors file instead of running the model again.

The folder is ``$TFX_LAB_CACHE`` if set, else the user's cache folder
(``platformdirs``) under ``sae-features/`` (training's kept activations under
``sae-activations/``: ``activation_store.py``). Files are written to a temporary
name and moved into place; a file that does not read back is ignored and
rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tui_lab.core.sae.activation_store import (
    Recorder,
    batches,
    load_activations,
    save_activations,
    store_path,
)
from tui_lab.core.sae.activations import HookedLike, hook_activations
from tui_lab.core.sae.feature_table import FeatureTable, Progress, build_feature_table
from tui_lab.core.sae.sae import SparseAutoencoder

CACHE_ENV = "TFX_LAB_CACHE"
VERSION = "1"  # bump when FeatureTable's contents change
TABLE_TOKENS = 200_000  # the browser's text: the tokens whose activations training keeps


def cache_root() -> Path:
    """The lab's cache folder: ``$TFX_LAB_CACHE``, else the user's (``platformdirs``)."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tfx-lab"))


def cache_dir() -> Path:
    """Where feature tables are kept."""
    return cache_root() / "sae-features"


def _hash_tensors(h: hashlib._Hash, tensors: Mapping[str, torch.Tensor]) -> None:
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def weights_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of named tensors' bytes (with their names, dtypes and shapes)."""
    h = hashlib.sha256()
    _hash_tensors(h, tensors)
    return h.hexdigest()


def table_key(sae: SparseAutoencoder, model_digest: str, windows: torch.Tensor, hook: str, top: int) -> str:
    """The cache key of the table of ``sae`` over ``windows`` (n, T) at ``hook``."""
    h = hashlib.sha256()
    h.update(f"v{VERSION}|{hook}|{top}|{tuple(windows.shape)}|{model_digest}|".encode())
    _hash_tensors(h, dict(sae.state_dict()))
    _hash_tensors(h, {"windows": windows.long()})
    return h.hexdigest()[:32]


def load_table(key: str) -> FeatureTable | None:
    """The cached table of ``key``, or None (absent or unreadable)."""
    path = cache_dir() / f"{key}.safetensors"
    if not path.is_file():
        return None
    try:
        return FeatureTable.from_tensors(load_file(str(path)))
    except Exception:  # a torn or foreign file: rebuild rather than fail
        return None


def save_table(key: str, table: FeatureTable) -> Path:
    """Write ``table`` under ``key`` (atomically); its path."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}.safetensors"
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    os.close(fd)
    try:
        save_file({k: v.contiguous() for k, v in table.tensors().items()}, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def model_digest(model: HookedLike) -> str:
    """The digest of a handle's model weights (empty when it has none in this process)."""
    weights = getattr(model, "model", None)
    return weights_digest(dict(weights.state_dict())) if isinstance(weights, torch.nn.Module) else ""


def cached_feature_table(model: HookedLike, sae: SparseAutoencoder, windows: torch.Tensor, hook: str,
                         top: int = 10, batch: int = 64, progress: Progress | None = None,
                         should_stop: Callable[[], bool] | None = None, use_cache: bool = True,
                         use_store: bool = True) -> tuple[FeatureTable | None, bool]:
    """(the table of ``sae`` over ``windows`` at ``hook`` of ``model``, whether it came from the cache).

    Built in one pass over the windows' activations when not cached, then saved:
    from the activations an SAE's training kept (``activation_store``) when they
    cover these windows, else from the model. (None, False) when ``should_stop()``
    ends the pass.
    """
    digest = model_digest(model)
    key = table_key(sae, digest, windows, hook, top)
    if use_cache:
        found = load_table(key)
        if found is not None:
            if progress is not None:
                progress(found.tokens, found.tokens)
            return found, True
    kept = load_activations(store_path(cache_root(), digest, hook, windows.shape[1]), windows) if use_store else None
    acts = batches(kept, batch) if kept is not None else hook_activations(model, windows, hook, batch, flat=False)
    table = build_feature_table(sae, windows, acts, top, progress, should_stop)
    if table is not None and use_cache:
        save_table(key, table)
    return table, False


def recorder(model: HookedLike, windows: torch.Tensor, hook: str, tokens: int = TABLE_TOKENS) -> Recorder:
    """A ``Recorder`` for training's activations of the first ``tokens`` of ``windows`` at ``hook``,
    saved where ``cached_feature_table`` looks for them."""
    n = max(1, tokens // windows.shape[1])

    def save(kept_windows: torch.Tensor, acts: torch.Tensor) -> None:
        try:
            save_activations(store_path(cache_root(), model_digest(model), hook, windows.shape[1]), kept_windows, acts)
        except OSError:
            pass  # a read-only cache folder: the table runs the model instead

    return Recorder(windows, n, save)
