"""A model folder's config and weights, read without copying and without writing anything.

``open_tensors`` memory-maps ``model.safetensors`` (or the shards its index names)
and makes each tensor a view of the mapped bytes (``torch.frombuffer`` at its
offset): a 500 MB file costs no memory until its pages are read, and is never held
twice. The mapping is copy-on-write (``ACCESS_COPY``), so a tensor can be written
in place without the file changing. ``pytorch_model.bin`` is read only when no
safetensors exist, and only through ``torch.load(weights_only=True, mmap=True)``,
which unpickles tensors and plain containers but never runs code.
"""

from __future__ import annotations

import json
import mmap
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tui_lab.core.errors import one_line
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import (
    CONFIG_FILE,
    SAFETENSORS_FILE,
    SAFETENSORS_INDEX,
    TORCH_FILE,
    TORCH_INDEX,
)
from tui_lab.core.pretrained.source import weight_map_of
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.safetensors_check import (
    TensorEntry,
    open_regular,
    safetensors_layout,
    tensor_entries,
)

if TYPE_CHECKING:
    from tui_lab.core.pretrained.widening import Widened

_REMEDY = "download or save it again"

# safetensors' dtype names (its format spec); the float8/uint kinds only where torch has them.
_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
for _name, _attr in (
    ("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"),
    ("U16", "uint16"), ("U32", "uint32"), ("U64", "uint64"),
):
    if hasattr(torch, _attr):
        _DTYPES[_name] = getattr(torch, _attr)


def read_config(folder: Path) -> dict[str, object]:
    """``config.json`` of a model folder as a dict, or one line naming what is wrong."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise PretrainedError(f"{folder}: no {CONFIG_FILE} (a model folder holds it beside its weights)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PretrainedError(f"{path}: cannot read it ({one_line(exc)})") from None
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise PretrainedError(f"{path}: not JSON ({one_line(exc)})") from None
    if not isinstance(config, dict):
        raise PretrainedError(f"{path}: not a JSON object ({type(config).__name__} at the top)")
    return config


class TensorSource(Mapping[str, torch.Tensor]):
    """A model's tensors by name, read-only, each a view of its memory-mapped file."""

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        files: dict[str, Path],
        searched: Path,
        buffers: tuple[mmap.mmap, ...] = (),
    ):
        self._tensors = tensors
        self._files = files
        self.searched = searched  # the file (or index) a missing name was looked for in
        self.paths = tuple(dict.fromkeys(files.values()))
        self._buffers = buffers
        # (address, size, mapping) of each mapped file, to find a tensor's pages.
        self._maps = [(_address(b), len(b), b) for b in buffers if len(b)]

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._tensors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def tensor_file(self, name: str) -> str:
        """The file holding ``name``; for a name it lacks, the file (or index) searched."""
        return str(self._files.get(name, self.searched))

    def widened(self, copies: Widened) -> TensorSource:
        """These tensors with the float32 ``copies`` (``widening.py``) in place of the
        half-precision ones they copy (same file, same shape); their mappings are
        released as the files' are. The others stay views of their files."""
        tensors = dict(self._tensors)
        for name, (path, array) in copies.arrays.items():
            old = tensors.get(name)
            if (
                old is not None
                and old.dtype in (torch.bfloat16, torch.float16)
                and tuple(old.shape) == array.shape
                and self._files.get(name) == path
            ):
                tensors[name] = torch.from_numpy(array)
        return TensorSource(tensors, self._files, self.searched, (*self._buffers, *copies.buffers))

    @property
    def nbytes(self) -> int:
        """Bytes of all the tensors (the weights' size on disk, less headers)."""
        return sum(t.numel() * t.element_size() for t in self._tensors.values())

    def release(self, tensor: torch.Tensor) -> int:
        """Hand back this process's pages of ``tensor``'s bytes in its mapped file, once
        a copy of it has replaced it (``pretrained/layout.py``): they leave the resident
        memory, so the weights are still held once. Pages that the tensor shares with a
        neighbour at either end are kept. Should anything read the old tensor again, its
        pages are read back from the file (the same bytes, as nothing wrote to them).
        Returns the bytes released (0 for a tensor of no mapped file)."""
        if tensor.numel() == 0:
            return 0
        start = tensor.data_ptr()
        span = 1 + sum((n - 1) * st for n, st in zip(tensor.shape, tensor.stride(), strict=True))
        end = start + span * tensor.element_size()
        page = mmap.PAGESIZE
        for base, size, buffer in self._maps:
            if base <= start and end <= base + size:
                lo = -(-(start - base) // page) * page  # whole pages inside the tensor only
                hi = (end - base) // page * page
                if hi <= lo:
                    return 0
                buffer.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
                return hi - lo
        return 0


def _address(buffer: mmap.mmap) -> int:
    return torch.frombuffer(buffer, dtype=torch.uint8, count=1).data_ptr()


def open_tensors(folder: Path) -> TensorSource:
    """The weights of a model folder: safetensors (single or sharded), else pytorch_model.bin."""
    folder = Path(folder)
    for name, index, reader in (
        (SAFETENSORS_FILE, SAFETENSORS_INDEX, _map_safetensors),
        (TORCH_FILE, TORCH_INDEX, _load_torch),
    ):
        if (folder / name).exists() or (folder / name).is_symlink():  # a dangling link: named below
            tensors, buffer = reader(folder / name)
            return TensorSource(
                tensors, dict.fromkeys(tensors, folder / name), folder / name,
                () if buffer is None else (buffer,),
            )
        if (folder / index).exists():
            return _sharded(folder / index, reader)
    raise PretrainedError(
        f"{folder}: no weights ({SAFETENSORS_FILE}, {SAFETENSORS_INDEX}, {TORCH_FILE} "
        f"or {TORCH_INDEX})"
    )


def _sharded(index: Path, reader: Callable[[Path], tuple[dict[str, torch.Tensor], mmap.mmap | None]]) -> TensorSource:
    """The tensors of every shard ``index``'s weight_map names, each from its shard."""
    weight_map = weight_map_of(index)
    tensors: dict[str, torch.Tensor] = {}
    files: dict[str, Path] = {}
    buffers: list[mmap.mmap] = []
    for shard_name in dict.fromkeys(weight_map.values()):
        shard = index.parent / shard_name
        if not shard.exists():
            first = next(k for k, v in weight_map.items() if v == shard_name)
            raise PretrainedError(
                f"{index}: names shard {shard_name} (for {first}), which is missing; {_REMEDY}"
            )
        shard_tensors, buffer = reader(shard)
        if buffer is not None:
            buffers.append(buffer)
        for name, tensor in shard_tensors.items():
            if weight_map.get(name, shard_name) == shard_name:
                tensors.setdefault(name, tensor)
                files.setdefault(name, shard)
    for name, shard_name in weight_map.items():
        if name not in tensors:
            raise PretrainedError(
                f"{index.parent / shard_name}: has no tensor {name}, which {index.name} places there"
            )
    return TensorSource(tensors, files, index, tuple(buffers))


def _map_safetensors(path: Path) -> tuple[dict[str, torch.Tensor], mmap.mmap]:
    """Every tensor of one safetensors file, as views of its copy-on-write mapping (returned too)."""
    if path.is_symlink() and not path.exists():
        raise PretrainedError(f"{path}: a link to a missing file (a cache blob deleted?); {_REMEDY}")
    try:
        header, start = safetensors_layout(path, follow_symlinks=True, remedy=_REMEDY)
        with open_regular(path, follow_symlinks=True) as f:
            buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except RunError as exc:
        raise PretrainedError(str(exc)) from None
    except OSError as exc:
        raise PretrainedError(f"{path}: cannot map it ({one_line(exc)})") from None
    if sys.byteorder != "little":
        raise PretrainedError(f"{path}: safetensors is little-endian; this machine is not")
    if len(buffer) < start:
        raise PretrainedError(f"{path}: changed while it was read; {_REMEDY}")
    tensors: dict[str, torch.Tensor] = {}
    for name, info in tensor_entries(header).items():
        tensors[name] = _view(path, buffer, start, name, info)
    return tensors, buffer


def _view(path: Path, buffer: mmap.mmap, start: int, name: str, info: TensorEntry) -> torch.Tensor:
    """Tensor ``name`` of the header as a view of ``buffer`` (no copy), its size checked."""
    raw = info.get("dtype")
    dtype = _DTYPES.get(raw) if isinstance(raw, str) else None
    if dtype is None:
        raise PretrainedError(
            f"{path}: tensor {name} has dtype {info.get('dtype')!r}, which the lab cannot read "
            f"(it reads {', '.join(_DTYPES)})"
        )
    shape = info["shape"]
    begin, end = info["data_offsets"]
    dims = [d for d in shape if isinstance(d, int) and d >= 0]
    if len(dims) != len(shape):
        raise PretrainedError(f"{path}: tensor {name} has a bad shape {shape}; {_REMEDY}")
    count = 1
    for d in dims:
        count *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    if not 0 <= begin <= end or end - begin != count * itemsize or start + end > len(buffer):
        raise PretrainedError(
            f"{path}: tensor {name}: bytes {begin}..{end} do not hold {info['dtype']} {shape}; "
            f"{_REMEDY}"
        )
    if count == 0:  # frombuffer refuses an empty view
        return torch.empty(dims, dtype=dtype)
    flat = torch.frombuffer(buffer, dtype=dtype, count=count, offset=start + begin)
    return flat.view(dims)


def _load_torch(path: Path) -> tuple[dict[str, torch.Tensor], None]:
    """A ``pytorch_model.bin`` state dict, memory-mapped, with no code run while unpickling."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one line for the user
        raise PretrainedError(
            f"{path}: not loadable as weights-only PyTorch tensors ({one_line(exc)})"
        ) from None
    if not isinstance(state, dict):
        raise PretrainedError(f"{path}: holds a {type(state).__name__}, not a state dict")
    for name, tensor in state.items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise PretrainedError(f"{path}: entry {name!r} is not a named tensor")
    return state, None
