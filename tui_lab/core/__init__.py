"""The lab's core: pure PyTorch + PyYAML. Never imports textual or rich.

The names other code relies on are reachable from here, imported on first use:
``import tui_lab.core`` loads no torch until one of them is asked for. Each
lives in the subpackage of its concept (``config``, ``model``, ``tasks``,
``runs``, ``opening``, ``decoding``, ``training``, ``analysis``, ``verbs``, ...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that owns it
_FACE = {
    "scaled_dot_product_attention": "tui_lab.core.model.attention",
    "MultiHeadAttention": "tui_lab.core.model.attention",
    "capture_attention": "tui_lab.core.model.capture",
    "open_model": "tui_lab.core.opening.model_in_hand",
    "using_hooks": "tui_lab.core.model.hook_points",
    "parameter_report": "tui_lab.core.model.params",
    "LabConfig": "tui_lab.core.config.lab_config",
    "load_preset": "tui_lab.core.config.presets",
    "load_for_inference": "tui_lab.core.opening.from_run",
    "LabError": "tui_lab.core.errors",
    "open_sae": "tui_lab.core.sae.source",
    "probe": "tui_lab.core.verbs.probe",
    "probe_history": "tui_lab.core.verbs.probe",
    "das": "tui_lab.core.verbs.das",
    "fit_tuned_lens": "tui_lab.core.analysis.lenses.tuned_lens_training",
    "fit_jacobian_lens": "tui_lab.core.analysis.lenses.jacobian_lens",
    "lens_readout": "tui_lab.core.analysis.lenses.lens_readout",
    "edge_attribution": "tui_lab.core.analysis.edges.edge_attribution",
    "faithfulness": "tui_lab.core.analysis.edges.faithfulness",
    "attribute": "tui_lab.core.analysis.circuits.attribution",
    "open_transcoders": "tui_lab.core.sae.transcoder",
    "save_transcoders": "tui_lab.core.sae.transcoder",
}

__all__ = [
    "LabConfig", "LabError", "MultiHeadAttention", "capture_attention", "load_for_inference",
    "load_preset", "open_model", "parameter_report", "scaled_dot_product_attention", "using_hooks",
    "fit_jacobian_lens", "fit_tuned_lens", "lens_readout",
    "das", "probe", "probe_history", "edge_attribution", "faithfulness",
    "attribute", "open_sae", "open_transcoders", "save_transcoders",
]

if TYPE_CHECKING:
    from tui_lab.core.analysis.circuits.attribution import attribute
    from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
    from tui_lab.core.analysis.edges.faithfulness import faithfulness
    from tui_lab.core.analysis.lenses.jacobian_lens import fit_jacobian_lens
    from tui_lab.core.analysis.lenses.lens_readout import lens_readout
    from tui_lab.core.analysis.lenses.tuned_lens_training import fit_tuned_lens
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.errors import LabError
    from tui_lab.core.model.attention import MultiHeadAttention, scaled_dot_product_attention
    from tui_lab.core.model.capture import capture_attention
    from tui_lab.core.model.hook_points import using_hooks
    from tui_lab.core.model.params import parameter_report
    from tui_lab.core.opening.from_run import load_for_inference
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.source import open_sae
    from tui_lab.core.sae.transcoder import open_transcoders, save_transcoders
    from tui_lab.core.verbs.das import das
    from tui_lab.core.verbs.probe import probe, probe_history


def __getattr__(name: str) -> Any:
    owner = _FACE.get(name)
    if owner is None:
        raise AttributeError(f"module 'tui_lab.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(owner), name)
    globals()[name] = value  # later lookups skip this function
    return value
