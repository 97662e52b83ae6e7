"""Atomic file replacement: readers only ever see the old file or the new one.

Every file is first written to ``.<name>.tmp-<pid>`` in the same folder,
flushed and fsynced, then ``os.replace``d over the old one. A crash or a full
disk therefore leaves either the old file or the new one, never half of one.
Staging (``stage``) and publishing (``commit``) are separate so that a
checkpoint can stage all its files before it replaces any.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from tui_lab.core.runs.run_files import RunError, reason


def temp_path(path: Path) -> Path:
    """The staging name for ``path``: hidden, same folder (so ``os.replace`` is a rename)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _fsync_file(path: Path) -> None:
    """Force ``path``'s bytes to disk, so the rename that follows publishes complete data."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Persist the renames in ``folder`` (best effort: not every OS allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def stage(path: Path, write: Callable[[Path], None]) -> Path:
    """Write ``path``'s new content to its temp file with ``write`` and fsync it.

    On any failure the temp file is removed, ``path`` is untouched, and a
    ``RunError`` says which file could not be saved and why.
    """
    tmp = temp_path(path)
    try:
        write(tmp)
        _fsync_file(tmp)
    except BaseException as exc:
        unlink_quietly(tmp)
        if isinstance(exc, Exception):
            raise RunError(f"cannot save {path}: {reason(exc)}") from exc
        raise
    return tmp


def commit(tmp: Path, path: Path) -> None:
    """Atomically replace ``path`` with the staged ``tmp``."""
    try:
        os.replace(tmp, path)
    except BaseException as exc:
        unlink_quietly(tmp)
        if isinstance(exc, Exception):
            raise RunError(f"cannot save {path}: {reason(exc)}") from exc
        raise


def write_bytes_to(data: bytes) -> Callable[[Path], None]:
    """A ``stage`` writer that puts ``data`` in the temp file."""

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()

    return write


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers only ever see the old or the new bytes."""
    target = Path(path)
    commit(stage(target, write_bytes_to(data)), target)
    fsync_dir(target.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """``atomic_write_bytes`` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks (weights files can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def remove_stale_temps(folder: Path) -> None:
    """Delete temp files left by a process that died mid-save (never a live writer's)."""
    for tmp in folder.glob(".*.tmp-*"):
        pid_text = tmp.name.rsplit("-", 1)[-1]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if pid != os.getpid() and not pid_alive(pid):
            unlink_quietly(tmp)
