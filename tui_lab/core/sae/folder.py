"""SAELens's on-disk format, both ways: a folder SAELens's ``SAE.load_from_disk`` reads.

    cfg.json                  the config (``config.py``)
    sae_weights.safetensors   W_enc (d_in, d_sae), b_enc (d_sae), W_dec (d_sae, d_in),
                              b_dec (d_in), and threshold (d_sae) for JumpReLU (and
                              BatchTopK, which is written as JumpReLU, as SAELens does)
    sparsity.safetensors      "sparsity": log10 of each feature's firing rate (optional)

Reading checks everything before any weight is used (the keys, each tensor's
shape, finite values) and says what is wrong in one line; it never writes. Writing
stages every file in the folder and then replaces them (``runs/atomic.py``), so a
reader sees whole files only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save as safetensors_bytes

from tui_lab.core.runs.atomic import commit, fsync_dir, stage, write_bytes_to
from tui_lab.core.runs.run_files import reason
from tui_lab.core.sae.batchtopk import inference_sae
from tui_lab.core.sae.config import BATCH_TOPK, SAEConfig, config_from_dict
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.sae import SparseAutoencoder

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"
SPARSITY_FILE = "sparsity.safetensors"


def expected_shapes(cfg: SAEConfig) -> dict[str, tuple[int, ...]]:
    """Each weight's name and shape for ``cfg``, as SAELens stores them."""
    shapes = {"W_enc": (cfg.d_in, cfg.d_sae), "b_enc": (cfg.d_sae,),
              "W_dec": (cfg.d_sae, cfg.d_in), "b_dec": (cfg.d_in,)}
    if cfg.architecture == "jumprelu":
        shapes["threshold"] = (cfg.d_sae,)
    if cfg.architecture in BATCH_TOPK:  # SAELens's training checkpoint (the lab writes JumpReLU)
        shapes["topk_threshold"] = ()
    return shapes


def read_config(folder: Path) -> SAEConfig:
    """``folder``'s cfg.json as an SAEConfig, or SAEError naming the file and the fault."""
    return config_from_dict(read_cfg_json(folder, f"an SAE folder holds {CFG_FILE} and {WEIGHTS_FILE}"),
                            str(folder / CFG_FILE))


def read_cfg_json(folder: Path, holds: str) -> object:
    """``folder``'s cfg.json, parsed, or SAEError (one line) naming the file and the fault;
    ``holds`` says what such a folder holds, for the missing file's message."""
    path = folder / CFG_FILE
    if not path.is_file():
        raise SAEError(f"{folder}: no {CFG_FILE} ({holds})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SAEError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SAEError(f"{path}: cannot read it ({reason(exc)})") from None


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, or SAEError (a truncated file is caught here)."""
    if not path.is_file():
        raise SAEError(f"{path.parent}: no {path.name}")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            return {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (not a dict)
    except Exception as exc:  # safetensors raises its own error type for torn headers/data
        raise SAEError(f"{path}: not a readable safetensors file, truncated? ({reason(exc)})") from None


def _check_tensor(path: Path, name: str, tensor: torch.Tensor | None, shape: tuple[int, ...]) -> None:
    if tensor is None:
        raise SAEError(f"{path}: no tensor {name!r} (expected shape {shape})")
    if tuple(tensor.shape) != shape:
        raise SAEError(f"{path}: {name} has shape {tuple(tensor.shape)}, cfg.json says {shape}")
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise SAEError(f"{path}: {name} holds NaN or infinite values")


def _check_scaling_factor(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Old SAELens files may hold ``scaling_factor``: all ones means nothing; else refuse."""
    factor = tensors.pop("scaling_factor", None)
    if factor is not None and not torch.allclose(factor.float(), torch.ones_like(factor.float())):
        raise SAEError(f"{path}: a scaling_factor other than 1 (a fine-tuned scale) is not supported")


def load_sae(folder: str | os.PathLike[str], device: torch.device | str = "cpu") -> SparseAutoencoder:
    """The SAE stored in ``folder`` in SAELens's format; SAEError (one line) if it is not one."""
    where = Path(folder).expanduser()
    if not where.is_dir():
        raise SAEError(f"{where}: no such folder")
    cfg = read_config(where)
    weights_path = where / WEIGHTS_FILE
    tensors = read_tensors(weights_path)
    _check_scaling_factor(weights_path, tensors)
    shapes = expected_shapes(cfg)
    for name, shape in shapes.items():
        _check_tensor(weights_path, name, tensors.get(name), shape)
    log_sparsity = None
    if (where / SPARSITY_FILE).exists():
        sparsity_path = where / SPARSITY_FILE
        log_sparsity = read_tensors(sparsity_path).get("sparsity")
        _check_tensor(sparsity_path, "sparsity", log_sparsity, (cfg.d_sae,))
    sae = SparseAutoencoder(cfg, device=device, seed=None)
    with torch.no_grad():
        for name in shapes:  # each in its own dtype (BatchTopK's topk_threshold is float64)
            getattr(sae, name).copy_(tensors[name])
    sae.folder = where
    sae.log_sparsity = log_sparsity
    return sae.eval()


def sae_files(sae: SparseAutoencoder, log_sparsity: torch.Tensor | None = None) -> dict[str, bytes]:
    """The bytes of each file of ``sae``'s folder (cfg.json, weights, and sparsity if given).

    A BatchTopK SAE is written as SAELens writes one for inference: a JumpReLU SAE
    whose thresholds are the running threshold (``batchtopk.inference_sae``).
    """
    if sae.cfg.architecture in BATCH_TOPK:
        sae = inference_sae(sae)
    weights = {name: getattr(sae, name).detach().cpu().contiguous() for name in expected_shapes(sae.cfg)}
    files: dict[str, bytes] = {
        CFG_FILE: (json.dumps(sae.cfg.to_dict(), indent=2) + "\n").encode("utf-8"),
        WEIGHTS_FILE: safetensors_bytes(weights),
    }
    if log_sparsity is not None:
        files[SPARSITY_FILE] = safetensors_bytes({"sparsity": log_sparsity.detach().float().cpu().contiguous()})
    return files


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Stage every file in ``folder``, then replace them all: no reader sees half of one."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SAEError(f"{folder}: cannot create it ({reason(exc)})") from None
    staged: list[tuple[Path, Path]] = []
    try:
        for name, data in files.items():
            staged.append((stage(folder / name, write_bytes_to(data)), folder / name))
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        commit(tmp, path)
    fsync_dir(folder)


def save_sae(sae: SparseAutoencoder, folder: str | os.PathLike[str], log_sparsity: torch.Tensor | None = None) -> Path:
    """Write ``sae`` to ``folder`` in SAELens's format (atomically, file by file); the folder."""
    where = Path(folder).expanduser()
    write_files(where, sae_files(sae, log_sparsity if log_sparsity is not None else sae.log_sparsity))
    return where

