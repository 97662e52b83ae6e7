"""Checks on a weights file before any tensor is loaded from it.

- ``read_safetensors_header`` parses the header by hand, so that a pickle (or
  any other file) where weights belong is named as such and a truncated file
  is reported as truncated, instead of surfacing a Rust deserialisation error.
  ``safetensors_layout`` is the same check, also giving where the tensors'
  bytes begin (a pretrained model's files are memory-mapped from there).
- ``fingerprint`` is the settings a set of weights was trained for, stored in
  the file's metadata: shapes alone cannot tell rope from sinusoidal, gelu
  from relu, or a reverse model from a copy one. ``check_fingerprint`` refuses
  weights whose settings differ from ``config.yaml``.
- ``check_names_and_shapes`` refuses weights whose names or shapes differ from
  the model just built, naming the first culprit.

Free of torch imports: the header is plain JSON.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypedDict, cast

from tui_lab.core.runs.run_files import CONFIG_FILE, RunError, reason

if TYPE_CHECKING:
    import torch
    from torch import nn

    from tui_lab.core.config.lab_config import LabConfig

# Key, in the safetensors metadata and in optimizer.pt, holding the save id.
SAVE_ID_KEY = "tfx_lab_save"
# Key, in the safetensors metadata, holding the settings the weights were trained for.
MODEL_KEY = "tfx_lab_model"
# Settings that may change between save and load: they do not change what the weights mean.
_FINGERPRINT_SKIP = ("dropout", "max_len")
# A safetensors header larger than this is not one we wrote (ours are a few KB).
MAX_HEADER_BYTES = 100 * 2**20


def _not_safetensors(path: Path) -> RunError:
    return RunError(f"{path}: {path.name} is not a safetensors file; refusing to load it")


def open_regular(path: Path, follow_symlinks: bool = False) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file, else RunError.

    Never a FIFO or device: opening a FIFO for reading would wait for a writer
    forever (O_NONBLOCK, then fstat refuses it). Never a symlink either (O_NOFOLLOW)
    unless ``follow_symlinks``: a run folder holds saved files only, while the
    Hugging Face cache's snapshot files are all symlinks to its blobs.
    """
    nofollow = 0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | nofollow
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and (exc.errno == errno.ELOOP or path.is_symlink()):
            raise RunError(f"{path}: a symlink, not a saved file; refusing to follow it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunError(f"{path}: not a regular file (a FIFO, device or folder); refusing to read it")
    return os.fdopen(fd, "rb")


def read_safetensors_header(path: Path) -> dict[str, object]:
    """Parse and check a safetensors header by hand, without loading any tensor."""
    return safetensors_layout(path)[0]


def safetensors_layout(
    path: Path, follow_symlinks: bool = False, remedy: str = "train again"
) -> tuple[dict[str, object], int]:
    """The checked header of a safetensors file, and the offset where its tensors' bytes begin.

    ``remedy`` ends the messages of a damaged file (a run's: train again; a
    downloaded model's: download it again).
    """
    try:
        with open_regular(path, follow_symlinks) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(9)
            if size == 0:
                raise RunError(f"{path}: empty (a save was cut short); {remedy}")
            n = int.from_bytes(head[:8], "little") if len(head) >= 8 else 0
            if len(head) >= 9 and head[8:9] == b"{" and n > MAX_HEADER_BYTES:
                raise RunError(
                    f"{path}: not a safetensors file (its header claims {n} bytes, over the "
                    f"{MAX_HEADER_BYTES >> 20} MiB limit); refusing to load it"
                )
            if len(head) < 9 or head[8:9] != b"{" or not 2 <= n <= MAX_HEADER_BYTES:
                raise _not_safetensors(path)
            if 8 + n > size:
                raise RunError(
                    f"{path}: truncated ({size} bytes, header alone needs {8 + n}); {remedy}"
                )
            f.seek(8)
            header_bytes = f.read(n)
    except OSError as exc:
        raise RunError(f"{path}: cannot read it ({reason(exc)})") from exc
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _not_safetensors(path) from None
    if not isinstance(header, dict):
        raise _not_safetensors(path)
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not isinstance(info.get("shape"), list)
        ):
            raise RunError(f"{path}: corrupted header (entry {name!r}); {remedy}")
        end = max(end, offsets[1])
    if 8 + n + end > size:
        raise RunError(f"{path}: truncated ({size} of {8 + n + end} bytes); {remedy}")
    if 8 + n + end < size:
        raise RunError(f"{path}: corrupted ({size - 8 - n - end} unexpected trailing bytes)")
    return header, 8 + n


class TensorEntry(TypedDict):
    """A tensor's header entry once ``safetensors_layout`` has checked it: two whole-number
    data offsets and a shape list (its dims and the dtype are the reader's to check)."""

    dtype: object
    shape: list[object]
    data_offsets: list[int]


def tensor_entries(header: dict[str, object]) -> dict[str, TensorEntry]:
    """The tensors' entries of a header ``safetensors_layout`` returned (``__metadata__`` left out)."""
    return {name: cast(TensorEntry, info) for name, info in header.items() if name != "__metadata__"}


def metadata(header: dict[str, object]) -> dict[str, object]:
    """The header's ``__metadata__`` (empty when absent or not a mapping)."""
    meta = header.get("__metadata__")
    return meta if isinstance(meta, dict) else {}


def fingerprint(config: LabConfig) -> dict[str, object]:
    """The settings a set of weights belongs to: the model section and the task."""
    model = config.to_dict()["model"]
    out = {f"model.{k}": v for k, v in model.items() if k not in _FINGERPRINT_SKIP}
    out["task.name"] = config.task.name
    return out


def check_fingerprint(path: Path, meta: dict[str, object], config: LabConfig) -> None:
    """Refuse weights trained for other settings than ``config`` (config.yaml now) holds.

    Catches a config edited after training and weights copied in from another
    preset even when every shape still matches. Checkpoints without the record
    (older ones) pass.
    """
    saved_text = meta.get(MODEL_KEY)
    if not saved_text or not isinstance(saved_text, (str, bytes, bytearray)):  # json.loads' TypeError
        return
    try:
        saved = json.loads(saved_text)
    except (TypeError, ValueError):
        return
    if not isinstance(saved, dict):
        return
    for key, value in fingerprint(config).items():
        if key in saved and saved[key] != value:
            raise RunError(
                f"{path}: weights were trained with {key}: {saved[key]}, {CONFIG_FILE} now says "
                f"{value}; put {saved[key]} back in {CONFIG_FILE}, or train a new run"
            )


def _tensor_key(t: torch.Tensor) -> tuple[object, ...]:
    """Identity of the memory behind ``t``: tied names share one key."""
    ptr = t.untyped_storage().data_ptr() if t.device.type != "meta" else 0
    if ptr == 0:
        return ("id", id(t))
    return (t.device.type, t.device.index, ptr, t.storage_offset(), tuple(t.shape), t.stride())


def check_names_and_shapes(path: Path, header: dict[str, object], model: nn.Module) -> None:
    """Refuse weights whose names or shapes differ from ``model``'s, naming the first culprit."""
    expected = model.state_dict()
    saved = {k: tuple(v["shape"]) for k, v in tensor_entries(header).items()}
    groups: dict[tuple[object, ...], list[str]] = {}
    for name, tensor in expected.items():
        groups.setdefault(_tensor_key(tensor), []).append(name)
    where = f"{path}: weights do not match {CONFIG_FILE}"
    for names in groups.values():
        present = [n for n in names if n in saved]
        if not present:
            raise RunError(f"{where} (the model has {names[0]}, the file does not)")
        for name in present:
            want = tuple(expected[name].shape)
            if saved[name] != want:
                raise RunError(f"{where} ({name}: {list(saved[name])} saved vs {list(want)} built)")
    extra = sorted(set(saved) - set(expected))
    if extra:
        raise RunError(f"{where} (the file has {extra[0]}, the model does not)")
