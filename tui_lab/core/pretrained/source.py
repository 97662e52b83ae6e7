"""Where a model's files are: a folder the user names, or a hub name in the local cache.

A hub name (``gpt2``, ``EleutherAI/pythia-14m``) is looked up in the Hugging Face
cache exactly as ``huggingface_hub`` lays it out (``models--org--name/refs/<branch>``
holding a commit, ``snapshots/<commit>/`` holding the files), through its cache
functions only: nothing is ever downloaded and no socket is opened. A model missing
from the cache gets one line naming the command that downloads it once.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tui_lab.core.errors import one_line
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class ModelSource:
    """A snapshot folder to read, and how it was found."""

    folder: Path
    name: str  # what the user typed
    origin: str  # "folder" | "cache"
    repo_id: str | None = None
    revision: str | None = None
    commit: str | None = None


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, from the environment now (as ``huggingface_hub`` reads it).

    ``huggingface_hub.constants`` reads these once, at its import; reading them here at
    each call lets a test (or a user's shell) point the lab at another cache.
    """
    env = os.environ
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    home = os.path.expandvars(os.path.expanduser(home))
    cache = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(cache)))


def resolve_source(source: str, revision: str | None = None) -> ModelSource:
    """The folder to read for ``source``: an existing folder, else a hub name in the cache."""
    if not source.strip():
        raise PretrainedError("no model named: give a folder holding config.json, or a hub name")
    path = Path(source).expanduser()
    if path.is_dir():
        if revision is not None:
            raise PretrainedError(
                f"{source}: a folder has no revisions; --revision applies to a hub name"
            )
        return ModelSource(folder=path.resolve(), name=source, origin="folder")
    if path.exists():
        raise PretrainedError(f"{source}: a file; give the folder holding config.json")
    return _from_cache(source, revision)


def _from_cache(repo_id: str, revision: str | None) -> ModelSource:
    """``repo_id`` at ``revision`` (default ``main``) from the local hub cache, or one line."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.file_download import repo_folder_name, try_to_load_from_cache
    from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise PretrainedError(
            f"{repo_id}: no such folder, and not a hub name (such as gpt2 or EleutherAI/pythia-14m)"
        ) from None
    cache = hub_cache_dir()
    wanted = revision or "main"
    repo = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    download = f"hf download {repo_id}" + (f" --revision {revision}" if revision else "")
    if not repo.is_dir():
        raise PretrainedError(
            f"{repo_id}: no such folder, and not in the local Hugging Face cache ({cache}); "
            f"download it once with `{download}`"
        )
    found = try_to_load_from_cache(repo_id, CONFIG_FILE, cache_dir=cache, revision=wanted)
    commit = _commit_of(repo, wanted)
    if not isinstance(found, str) and commit and (repo / "snapshots" / commit / CONFIG_FILE).is_file():
        found = str(repo / "snapshots" / commit / CONFIG_FILE)  # a ref file edited by hand (a newline)
    if not isinstance(found, str):
        if commit is None or not (repo / "snapshots" / commit).is_dir():
            have = ", ".join(_cached_revisions(repo)) or "none"
            raise PretrainedError(
                f"{repo_id}: revision {wanted} is not in the local cache ({repo}; cached: {have}); "
                f"download it once with `{download}`"
            )
        raise PretrainedError(
            f"{repo_id}: the cached snapshot {commit} has no {CONFIG_FILE} ({repo}); "
            f"download it once with `{download}`"
        )
    return ModelSource(
        folder=Path(found).parent,
        name=repo_id,
        origin="cache",
        repo_id=repo_id,
        revision=wanted,
        commit=commit,
    )


def _commit_of(repo: Path, revision: str) -> str | None:
    """The commit ``revision`` names in ``repo``: a ref's content, or the revision itself."""
    ref = repo / "refs" / revision
    if ref.is_file():
        return ref.read_text().strip()
    return revision if _COMMIT.fullmatch(revision) else None


def _cached_revisions(repo: Path) -> list[str]:
    """The branch names under ``refs/`` (else the snapshot commits) of a cached repo."""
    refs = repo / "refs"
    names = sorted(str(p.relative_to(refs)) for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
    if names:
        return names
    snapshots = repo / "snapshots"
    return sorted(p.name for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []


def weight_map_of(index: Path) -> dict[str, str]:
    """A sharded model's index's ``weight_map`` (tensor name -> shard file name), checked."""
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PretrainedError(f"{index}: not a readable JSON index ({one_line(exc)})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise PretrainedError(f"{index}: no weight_map (tensor name -> shard file)")
    for name, shard in weight_map.items():
        # A shard lies beside the index: a path elsewhere is not read, whatever the index says.
        if not isinstance(shard, str) or not shard or Path(shard).name != shard:
            raise PretrainedError(f"{index}: weight_map[{name!r}] is not a file name ({shard!r})")
    return weight_map
