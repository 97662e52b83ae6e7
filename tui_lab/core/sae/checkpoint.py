"""A training run's folder: SAELens's files plus what resuming needs, written together.

    cfg.json, sae_weights.safetensors, sparsity.safetensors   the SAE (``folder.py``)
    optimizer.safetensors   Adam's moments and step count, per parameter
    activity.safetensors    each feature's tokens since it fired and its firing count
    trainer_state.json      step, tokens, elapsed seconds, the settings
    metrics.jsonl           one event per line, appended as training goes

The folder opens with ``open_sae`` (and SAELens's ``load_from_disk``) at any
checkpoint. Nothing is pickled: the optimiser's state is tensors in safetensors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save as safetensors_bytes

from tui_lab.core.sae.activity import FeatureActivity
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.folder import load_sae, read_tensors, sae_files, write_files
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings

OPTIMIZER_FILE = "optimizer.safetensors"
ACTIVITY_FILE = "activity.safetensors"
STATE_FILE = "trainer_state.json"
METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class TrainerState:
    """Where a run stands: what ``trainer_state.json`` holds."""

    step: int
    tokens: int
    elapsed: float
    settings: TrainSettings

    def to_json(self) -> str:
        data = {"step": self.step, "tokens": self.tokens, "elapsed": self.elapsed,
                "settings": self.settings.to_dict()}
        return json.dumps(data, indent=2) + "\n"


def optimizer_tensors(sae: SparseAutoencoder, optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Adam's state as named tensors: ``<param>.exp_avg``, ``.exp_avg_sq``, ``.step``."""
    out: dict[str, torch.Tensor] = {}
    for name, param in sae.named_parameters():
        for key, value in optimizer.state.get(param, {}).items():
            tensor = value if isinstance(value, torch.Tensor) else torch.tensor(float(value))
            out[f"{name}.{key}"] = tensor.detach().cpu().contiguous()
    return out


def load_optimizer_tensors(sae: SparseAutoencoder, optimizer: torch.optim.Optimizer,
                           tensors: dict[str, torch.Tensor]) -> None:
    """Put ``optimizer_tensors``'s output back into ``optimizer`` (built over ``sae``'s parameters)."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for index, (name, param) in enumerate(sae.named_parameters()):
        entry = {key.removeprefix(f"{name}."): value for key, value in tensors.items()
                 if key.startswith(f"{name}.")}
        if entry:
            moved = {k: v if k == "step" else v.to(param.device, param.dtype) for k, v in entry.items()}
            state[index] = moved
    saved = optimizer.state_dict()
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})


def save_checkpoint(folder: Path, sae: SparseAutoencoder, optimizer: torch.optim.Optimizer,
                    activity: FeatureActivity, state: TrainerState) -> None:
    """Write every file of a checkpoint, staged together, then replaced (``folder.write_files``)."""
    files = sae_files(sae, activity.log10_density())
    files[OPTIMIZER_FILE] = safetensors_bytes(optimizer_tensors(sae, optimizer))
    files[ACTIVITY_FILE] = safetensors_bytes(activity.state())
    files[STATE_FILE] = state.to_json().encode("utf-8")  # last: it names the step the rest belong to
    write_files(folder, files)


def read_state(folder: Path) -> TrainerState:
    """The run's ``trainer_state.json``; SAEError if the folder is not a training run."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise SAEError(f"{folder}: no {STATE_FILE}, so nothing to resume (not an SAE training run)")
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
        return TrainerState(int(raw["step"]), int(raw["tokens"]), float(raw["elapsed"]),
                            TrainSettings.from_dict(raw["settings"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SAEError(f"{path}: not a trainer state ({exc})") from None


def load_checkpoint(folder: Path, device: torch.device | str = "cpu") -> tuple[
        SparseAutoencoder, dict[str, torch.Tensor], dict[str, torch.Tensor], TrainerState]:
    """(SAE, optimizer tensors, activity tensors, state) of the run in ``folder``."""
    state = read_state(folder)
    sae = load_sae(folder, device).train()
    optimizer = read_tensors(folder / OPTIMIZER_FILE)
    activity = read_tensors(folder / ACTIVITY_FILE)
    return sae, optimizer, activity, state


def append_record(folder: Path, record: dict[str, object]) -> None:
    """Append one event to ``metrics.jsonl`` (a line at a time, so a crash loses at most one)."""
    with open(folder / METRICS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
