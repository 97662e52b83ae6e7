"""Half-precision weights widened to float32 on another core while torch is imported.

``tfx-lab --model`` in float32 (the default) holds a bfloat16 or float16 file's
weights as float32 copies. Made by torch once it is imported, that copy is a second
of a core for a 0.5 B model (two gigabytes written, a page fault every 4 KiB), all of
it after the wait for torch. The bits need no torch: a bfloat16 number is the top
half of the float32 of the same value (widening is a 16-bit shift), and numpy
converts float16 exactly. Numpy does it on the second core while the import holds
the interpreter lock on the first. A safetensors file lays its tensors back to back,
so each run of same-dtype tensors is one numpy call: the thread asks for the lock a
few times, not once per tensor (each ask can wait a switch interval behind the import).

The copies go into private anonymous mappings, so the re-layout after opening hands
back the pages of a tensor it replaced (``TensorSource.release``), as it does with
the file's pages. The thread maps the file read-only for its reading and unmaps it
after, so the file's pages do not stay in the lab's resident memory.

Best effort, and torch-free (it runs before torch is in): anything it does not
expect (a hub name it cannot find, a ``pytorch_model.bin``, an odd header) leaves
the widening to ``open_model``, whose checks and messages stay the only ones.
"""

from __future__ import annotations

import mmap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import SAFETENSORS_FILE, SAFETENSORS_INDEX
from tui_lab.core.pretrained.source import resolve_source, weight_map_of
from tui_lab.core.runs.safetensors_check import (
    TensorEntry,
    open_regular,
    safetensors_layout,
    tensor_entries,
)

if TYPE_CHECKING:
    import numpy as np

HALF = ("BF16", "F16")  # safetensors' names of the dtypes widened here
# A tensor's (data offsets, name, entry) in its file's header.
Entry = tuple[list[int], str, TensorEntry]


@dataclass
class Widened:
    """Float32 copies by tensor name, each with the file it was read from (a sharded
    model's names are looked up in their own shard), and the mappings holding them."""

    arrays: dict[str, tuple[Path, np.ndarray]] = field(default_factory=dict)
    buffers: list[mmap.mmap] = field(default_factory=list)


class Widening:
    """Widens a model folder's half-precision safetensors in a daemon thread, started
    at once; ``take()`` waits for it and hands the copies over (once)."""

    def __init__(self, files: list[Path]) -> None:
        self._files = files
        self._result: Widened | None = None
        self._thread = threading.Thread(target=self._run, name="widening", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        result = Widened()
        try:
            for path in self._files:
                widen_file(path, result)
        except Exception:  # noqa: BLE001 - best effort: open_model widens, and reports, itself
            result = Widened()
        self._result = result

    def take(self) -> Widened:
        """The copies (empty when the thread gave up), once; later calls get none."""
        self._thread.join()
        result, self._result = self._result or Widened(), None
        return result


def start_widening(source: str, revision: str | None = None) -> Widening | None:
    """Start widening the model ``source`` names (a folder or a cached hub name), or
    None where there are no safetensors to widen."""
    try:
        folder = resolve_source(source, revision).folder
    except Exception:  # noqa: BLE001 - open_model says what is wrong with the source
        return None
    if (folder / SAFETENSORS_FILE).is_file():
        return Widening([folder / SAFETENSORS_FILE])
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            shards = dict.fromkeys(weight_map_of(index).values())
        except PretrainedError:  # open_model reports it
            return None
        return Widening([index.parent / shard for shard in shards])
    return None


def widen_file(path: Path, into: Widened) -> None:
    """Add float32 copies of ``path``'s bfloat16 and float16 tensors to ``into``."""
    import numpy as np  # here, in the thread: its import is a tenth of a second of the lock

    header, start = safetensors_layout(path, follow_symlinks=True)
    entries = sorted(
        ((info["data_offsets"], name, info) for name, info in tensor_entries(header).items()),
        key=lambda e: e[0][0],
    )
    with open_regular(path, follow_symlinks=True) as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as file:
        for run in _runs(entries):
            kind = run[0][2]["dtype"]
            begin, end = run[0][0][0], run[-1][0][1]
            out_map = mmap.mmap(-1, max(1, (end - begin) * 2), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            halves = np.frombuffer(file, dtype=np.uint16 if kind == "BF16" else np.float16,
                                   count=(end - begin) // 2, offset=start + begin)
            out = np.frombuffer(out_map, dtype=np.float32, count=(end - begin) // 2)
            if kind == "BF16":
                np.left_shift(halves, 16, out=out.view(np.uint32), dtype=np.uint32)
            else:
                out[...] = halves
            del halves  # the file's mapping closes only once nothing views it
            into.buffers.append(out_map)
            for (lo, hi), name, info in run:
                into.arrays[name] = (path, out[(lo - begin) // 2:(hi - begin) // 2].reshape(_dims(info)))


def _dims(info: TensorEntry) -> list[int]:
    """The entry's shape; ValueError (the widening gives up) when a dim is not a whole number."""
    dims = [d for d in info["shape"] if isinstance(d, int)]
    if len(dims) != len(info["shape"]):
        raise ValueError(f"a bad shape {info['shape']}")
    return dims


def _runs(entries: list[Entry]) -> list[list[Entry]]:
    """The half-precision entries grouped in runs of one dtype lying back to back."""
    runs: list[list[Entry]] = []
    for entry in entries:
        (lo, hi), _, info = entry
        kind = info.get("dtype")
        if kind not in HALF or (hi - lo) % 2:
            continue
        last = runs[-1][-1] if runs else None
        if last is not None and last[2]["dtype"] == kind and last[0][1] == lo:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs
