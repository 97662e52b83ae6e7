"""A fitted lens on disk: a folder holding ``lens.safetensors`` (the translators, or the
Jacobian matrices) and ``lens.json`` (its kind and the shape of the model it was fitted
for: ``d_model``, ``n_layers``, ``vocab``; the model's name, step and how it was fitted).

``open_lens`` refuses, in one line, a folder that is not a lens or a lens fitted for a
model of another shape. Both files are written to temporary names first, then moved
into place, so a fit interrupted midway never leaves half a lens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors.torch import load_file, save_file
from torch import Tensor

from tui_lab.core.analysis.lenses.jacobian_lens import JacobianLens
from tui_lab.core.analysis.lenses.lens_data import lab_module
from tui_lab.core.analysis.lenses.logit_lens import resid_post_names
from tui_lab.core.analysis.lenses.tuned_lens import TunedLens
from tui_lab.core.errors import LabError, one_line

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand

WEIGHTS = "lens.safetensors"
CONFIG = "lens.json"
FORMAT = "tfx-lab lens 1"

FittedLens = TunedLens | JacobianLens


def model_shape(model: ModelInHand) -> dict[str, int]:
    """What a lens file must match: ``d_model``, ``n_layers`` (the decoder's) and ``vocab``."""
    module = lab_module(model)
    return {"d_model": int(model.config.model.d_model), "n_layers": len(resid_post_names(module)),
            "vocab": int(module.vocab_size)}


def save_lens(lens: FittedLens, folder: str | Path, model: ModelInHand, fit: dict[str, object] | None = None) -> Path:
    """Write ``lens`` (fitted for ``model``) into ``folder`` (made if missing); its path."""
    path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise LabError(f"--out {path}: a file is there, not a folder")
    path.mkdir(parents=True, exist_ok=True)
    if isinstance(lens, TunedLens):
        tensors = {k: v.detach().cpu().contiguous() for k, v in lens.state_dict().items()}
    else:
        tensors = {"jacobians": lens.matrices.contiguous()}
    config = {"format": FORMAT, "kind": lens.kind, **model_shape(model), "model": model.config.name,
              "step": model.step, "n_prompts": lens.n_prompts if isinstance(lens, JacobianLens) else None,
              "fit": fit or {}}
    save_file(tensors, str(path / (WEIGHTS + ".tmp")))
    (path / (CONFIG + ".tmp")).write_text(json.dumps(config, indent=2) + "\n")
    os.replace(path / (WEIGHTS + ".tmp"), path / WEIGHTS)
    os.replace(path / (CONFIG + ".tmp"), path / CONFIG)
    return path


def read_lens_config(folder: str | Path) -> dict[str, object]:
    """``lens.json`` of ``folder``; one-line LabError when it is missing or not a lens's."""
    path = Path(folder).expanduser()
    try:
        config = json.loads((path / CONFIG).read_text())
    except FileNotFoundError:
        raise LabError(f"--lens-file {path}: no {CONFIG} there (a folder written by tfx-lab lens --out)") from None
    except (OSError, ValueError) as exc:
        raise LabError(f"--lens-file {path}: {CONFIG} is unreadable ({type(exc).__name__})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT or config.get("kind") not in ("tuned", "jacobian"):
        raise LabError(f"--lens-file {path}: {CONFIG} is not a tuned or Jacobian lens's")
    return config


def open_lens(folder: str | Path, model: ModelInHand) -> FittedLens:
    """The lens saved in ``folder``, checked against ``model``'s shape (refused in one line
    when it was fitted for another model)."""
    path = Path(folder).expanduser()
    config = read_lens_config(path)
    have = model_shape(model)
    want = {k: config.get(k) for k in have}
    if want != have:
        def said(s: dict[str, object]) -> str:
            return f"d_model {s['d_model']}, {s['n_layers']} layers, vocabulary {s['vocab']}"

        raise LabError(f"--lens-file {path}: a {config['kind']} lens for another model ({config.get('model')}: "
                       f"{said(dict(want))}; this model: {said(dict(have))})")
    try:
        tensors = load_file(str(path / WEIGHTS))
    except (OSError, ValueError) as exc:
        raise LabError(f"--lens-file {path}: {WEIGHTS} is missing or unreadable ({type(exc).__name__})") from None
    return _built(config, tensors, have, path)


def _built(config: dict[str, object], tensors: dict[str, Tensor], shape: dict[str, int], path: Path) -> FittedLens:
    try:
        if config["kind"] == "tuned":
            lens = TunedLens(shape["d_model"], shape["n_layers"])
            lens.load_state_dict(tensors)  # strict: a missing or odd-shaped tensor is refused
            return lens
        matrices = tensors["jacobians"]
        expected = (shape["n_layers"] - 1, shape["d_model"], shape["d_model"])
        if tuple(matrices.shape) != expected:
            raise ValueError(f"jacobians of shape {tuple(matrices.shape)}, expected {expected}")
        n_prompts = config.get("n_prompts")
        return JacobianLens(matrices, shape["n_layers"], int(n_prompts) if isinstance(n_prompts, int) else 0)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise LabError(f"--lens-file {path}: {WEIGHTS} does not hold this lens ({one_line(exc)[:160]})") from None

