"""A Hugging Face hub cache folder written by hand, laid out as ``huggingface_hub`` lays it out.

``<cache>/models--org--name/blobs/<hash>`` holds each file's bytes (git's blob sha1 for
small files, sha256 for LFS ones such as weights), ``snapshots/<commit>/<file>`` is a
relative symlink to its blob, and ``refs/<branch>`` holds the commit (no newline), as
``hf_hub_download`` leaves them. Nothing is downloaded: the files come from a folder
(``bench.hf_factory.save_family``'s, say).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

# Files the hub stores through LFS (its default .gitattributes): their blob is named by sha256.
_LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".model")


def blob_name(name: str, data: bytes) -> str:
    """The blob a file is stored under: sha256 for LFS files, else git's blob sha1."""
    if name.endswith(_LFS_SUFFIXES):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_cache(
    cache: Path, repo_id: str, source: Path, commit: str = "a" * 40, branch: str | None = "main"
) -> Path:
    """Put every file of ``source`` into ``cache`` as snapshot ``commit`` of ``repo_id``.

    ``branch`` (if not None) is written under ``refs/`` pointing at ``commit``.
    Returns the snapshot folder.
    """
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source).as_posix()
        data = path.read_bytes()
        blob = repo / "blobs" / blob_name(rel, data)
        if not blob.exists():
            shutil.copyfile(path, blob)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    if branch is not None:
        ref = repo / "refs" / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    return snapshot
