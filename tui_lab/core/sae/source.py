"""Where an SAE's files are: a folder, or a release's subfolder in the local Hugging Face cache.

SAELens's releases are hub repositories with one SAE per subfolder
(``jbloom/GPT2-Small-SAEs-Reformatted`` holds ``blocks.0.hook_resid_pre/`` ...).
``open_sae`` takes a folder, or ``REPO/SUBFOLDER`` (the repository's two path
parts, then the subfolder), or ``REPO`` with ``subfolder=``. The cache is the one
``tui_lab.core.pretrained.source`` reads for models, looked up through
``huggingface_hub``'s cache functions only: nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from tui_lab.core.pretrained.source import hub_cache_dir
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.folder import CFG_FILE, load_sae
from tui_lab.core.sae.sae import SparseAutoencoder


def split_release(source: str, subfolder: str | None) -> tuple[str, str]:
    """(repository, subfolder) of ``REPO/SUB...`` or of ``REPO`` with ``subfolder``."""
    parts = [p for p in source.strip().strip("/").split("/") if p]
    if subfolder is not None:
        return "/".join(parts), subfolder.strip("/")
    if len(parts) < 3:
        raise SAEError(
            f"{source}: no such folder; a release in the Hugging Face cache is named "
            "ORG/REPO/SUBFOLDER (such as jbloom/GPT2-Small-SAEs-Reformatted/blocks.8.hook_resid_pre)"
        )
    return "/".join(parts[:2]), "/".join(parts[2:])


def cached_release_folder(repo_id: str, subfolder: str, revision: str | None = None) -> Path:
    """The cached snapshot folder holding ``repo_id``'s ``subfolder/cfg.json``; SAEError if absent."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.file_download import try_to_load_from_cache
    from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise SAEError(f"{repo_id}: no such folder, and not a hub repository name") from None
    cache = hub_cache_dir()
    download = f"hf download {repo_id} --include '{subfolder}/*'"
    if revision:
        download += f" --revision {revision}"
    found = try_to_load_from_cache(repo_id, f"{subfolder}/{CFG_FILE}", cache_dir=cache, revision=revision or "main")
    if not isinstance(found, str):
        raise SAEError(
            f"{repo_id}: no {subfolder}/{CFG_FILE} in the local Hugging Face cache ({cache}); "
            f"download it once with `{download}`"
        )
    return Path(found).parent


def resolve_sae_folder(source: str | os.PathLike[str], subfolder: str | None = None,
                       revision: str | None = None) -> Path:
    """The folder to read for ``source``: itself (or its ``subfolder``) if on disk, else the cache's."""
    text = os.fspath(source)
    if not text.strip():
        raise SAEError("no SAE named: give a folder holding cfg.json, or ORG/REPO/SUBFOLDER")
    path = Path(text).expanduser()
    if path.is_dir():
        return path / subfolder if subfolder else path
    if path.exists():
        raise SAEError(f"{text}: a file; give the folder holding {CFG_FILE}")
    first = Path(text.split("/", 1)[0]).expanduser()
    if path.is_absolute() or text.startswith((".", "~")) or (first.is_dir() and "/" in text):
        raise SAEError(f"{text}: no such folder")  # a path, not a hub name
    repo_id, sub = split_release(text, subfolder)
    return cached_release_folder(repo_id, sub, revision)


def open_sae(source: str | os.PathLike[str], subfolder: str | None = None, revision: str | None = None,
             device: torch.device | str = "cpu") -> SparseAutoencoder:
    """The SAE in SAELens's format at ``source`` (a folder or a cached release), offline.

    It has ``cfg`` (its cfg.json), ``encode(x)`` (activations (..., d_in) to
    features (..., d_sae)) and ``decode(f)``; SAEError (one line) if it cannot be read.
    """
    return load_sae(resolve_sae_folder(source, subfolder, revision), device)
