"""A checkpoint's rotary settings, in either form config.json may hold them.

Older files: ``rope_theta`` (or a family's own key) at the top level and a
``rope_scaling`` object or null. transformers 5: ``rope_parameters`` with
``rope_type``, ``rope_theta`` and the scaling's own keys, or, where layers of
two kinds rotate differently (Gemma 3), one such object per layer type. Scaled
rotaries the lab implements: ``linear`` and ``llama3``; any other type is one
line naming it, never a silent approximation.
"""

from __future__ import annotations

from collections.abc import Callable

from tui_lab.core.config.model_values import ModelValues
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import HFConfig, setting
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

SCALINGS = ("default", "linear", "llama3")


def _parameters(config: HFConfig, layer_type: str | None) -> tuple[HFConfig, str]:
    """The rotary settings object and where it was found (for messages)."""
    params = config.get("rope_parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise PretrainedError(f"{CONFIG_FILE}: rope_parameters is {params!r}, expected an object")
        if layer_type is not None and isinstance(params.get(layer_type), dict):
            return params[layer_type], f"rope_parameters.{layer_type}"
        return params, "rope_parameters"
    scaling = config.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, dict):
        raise PretrainedError(f"{CONFIG_FILE}: rope_scaling is {scaling!r}, expected an object or null")
    return scaling or {}, "rope_scaling"


def rotary_settings(
    config: HFConfig,
    theta_key: str = "rope_theta",
    fraction_key: str | None = None,
    fraction_default: float = 1.0,
    layer_type: str | None = None,
    theta_default: float = 10000.0,
) -> ModelValues:
    """``ModelConfig`` values for the rotary positions: base, fraction and scaling."""
    params, where = _parameters(config, layer_type)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in SCALINGS:
        raise PretrainedError(
            f"{CONFIG_FILE}: {where} type {kind!r} is not supported (the lab implements {', '.join(SCALINGS)})"
        )
    base = setting(params, "rope_theta", float, None)
    if base is None:
        base = setting(config, theta_key, float, theta_default)
    fraction = setting(params, "partial_rotary_factor", float, None)
    if fraction is None:
        fraction = setting(config, fraction_key, float, fraction_default) if fraction_key else fraction_default
    values: ModelValues = {"rope_base": base, "rope_fraction": fraction}
    if kind == "default":
        return values
    values.update({"rope_scaling": kind, "rope_factor": setting(params, "factor", float)})
    if kind == "llama3":
        values.update({
            "rope_low_freq_factor": setting(params, "low_freq_factor", float, 1.0),
            "rope_high_freq_factor": setting(params, "high_freq_factor", float, 4.0),
            "rope_original_max_len": setting(params, "original_max_position_embeddings", int, 8192),
        })
    return values


def layer_windows(config: HFConfig, n_layers: int, default_sliding: Callable[[int], bool] | None = None) -> tuple[int, ...]:
    """Each layer's attention window (0: global) from ``layer_types`` and ``sliding_window``.

    ``default_sliding(i)``: whether layer i slides when the file has no ``layer_types``
    (an older file); None: every layer does, when ``sliding_window`` is set.
    """
    window = setting(config, "sliding_window", int, None)
    if window is None or window <= 0:
        return ()
    kinds = config.get("layer_types")
    if kinds is None:
        kinds = ["sliding_attention" if default_sliding is None or default_sliding(i) else "full_attention"
                 for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"sliding_attention", "full_attention"}:
        raise PretrainedError(
            f"{CONFIG_FILE}: layer_types must list sliding_attention or full_attention for each of {n_layers} layers"
        )
    windows = tuple(window if kind == "sliding_attention" else 0 for kind in kinds)
    return windows if any(windows) else ()
