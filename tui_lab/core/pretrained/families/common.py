"""What the four families share: reading config.json settings, finding tensors
under a family's prefix with their shapes checked, and the ``Family`` record.

Every refusal is one ``PretrainedError`` line naming the file and the key or
tensor at fault (a tensor's file comes from ``TensorSource.tensor_file`` when
the mapping has it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, overload

import torch

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.model_values import ModelValues
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.files import TensorSource
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

if TYPE_CHECKING:
    from typing_extensions import Unpack

# Hugging Face's activation names (ACT2FN) -> the lab's. gelu_new, gelu_fast and
# gelu_pytorch_tanh are one function, GELU's tanh approximation, written three ways.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
_MISSING = object()

Tensors = Mapping[str, torch.Tensor]
# A config.json as read: open JSON, each setting checked by ``setting`` when taken.
HFConfig = dict[str, object]
T = TypeVar("T")
D = TypeVar("D")


@dataclass(frozen=True)
class Family:
    """One ``model_type``: how its config.json becomes a ``ModelConfig`` and its
    tensors the lab's parameter names."""

    model_type: str
    title: str  # for display: "GPT-2", "GPT-NeoX (Pythia)"...
    model_config: Callable[[HFConfig], ModelConfig]
    lab_state_dict: Callable[[Tensors, ModelConfig], dict[str, torch.Tensor]]


@overload
def setting(config: HFConfig, key: str, kind: type[T]) -> T: ...
@overload
def setting(config: HFConfig, key: str, kind: type[T], default: D) -> T | D: ...
def setting(config: HFConfig, key: str, kind: type[T], default: object = _MISSING) -> object:
    """``config[key]`` checked to be a ``kind`` (an int is a float too); ``default``
    when absent or null (no default: the key is required)."""
    value = config.get(key)
    if value is None:
        if default is _MISSING:
            raise PretrainedError(f"{CONFIG_FILE}: {key} is missing")
        return default
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    wanted = {float: "a number", int: "a whole number", bool: "true or false", str: "text"}
    raise PretrainedError(f"{CONFIG_FILE}: {key} is {value!r}, expected {wanted.get(kind, kind.__name__)}")


def positive(config: HFConfig, key: str, default: int | None = None) -> int:
    """A required (no ``default``) or defaulted whole number > 0."""
    value = setting(config, key, int) if default is None else setting(config, key, int, default)
    if value <= 0:
        raise PretrainedError(f"{CONFIG_FILE}: {key} is {value}, expected a whole number > 0")
    return value


def activation(config: HFConfig, key: str, default: str) -> str:
    """The lab's name for the family's activation setting."""
    name = setting(config, key, str, default)
    if name not in ACTIVATIONS:
        raise PretrainedError(
            f"{CONFIG_FILE}: {key} {name!r} is not supported (the lab has {', '.join(ACTIVATIONS)})"
        )
    return ACTIVATIONS[name]


def decoder_config(family: str, **values: Unpack[ModelValues]) -> ModelConfig:
    """A decoder-only, pre-norm ``ModelConfig`` of ``values``; a refusal becomes one line."""
    try:
        settings: ModelValues = {**values, "arch": "decoder-only", "norm": "pre", "n_encoder_layers": 0, "dropout": 0.0}
        return ModelConfig(**settings)
    except ConfigError as exc:
        raise PretrainedError(f"{CONFIG_FILE}: {family} settings the lab cannot build: {exc}") from None


class Weights:
    """A checkpoint's tensors under a family prefix, fetched by name with their shapes checked.

    ``prefix`` is taken from the first candidate under which ``probe`` exists
    (``transformer.wte.weight`` or the hub's bare ``wte.weight``); names are
    then looked up under it.
    """

    def __init__(self, tensors: Tensors, family: str, prefixes: tuple[str, ...], probe: str) -> None:
        self.tensors = tensors
        self.family = family
        self.prefix = next((p for p in prefixes if p + probe in tensors), prefixes[0])

    def file_of(self, name: str) -> str:
        tensors = self.tensors
        return str(tensors.tensor_file(name)) if isinstance(tensors, TensorSource) else "the weights"

    def get(self, name: str, shape: tuple[int, ...], top_level: bool = False) -> torch.Tensor:
        """Tensor ``name`` (under the prefix unless ``top_level``), of exactly ``shape``."""
        full = name if top_level else self.prefix + name
        if full not in self.tensors:
            raise PretrainedError(
                f"{self.file_of(full)}: tensor {full} is missing (a {self.family} checkpoint has it)"
            )
        tensor = self.tensors[full]
        if tuple(tensor.shape) != shape:
            raise PretrainedError(
                f"{self.file_of(full)}: tensor {full} has shape {list(tensor.shape)}, but config.json's "
                f"sizes need {list(shape)}"
            )
        return tensor

    def first(self, names: tuple[str, ...], shape: tuple[int, ...]) -> torch.Tensor:
        """The first of ``names`` (top-level names, e.g. ``embed_out.weight``/``lm_head.weight``) present."""
        for name in names:
            if name in self.tensors:
                return self.get(name, shape, top_level=True)
        return self.get(names[0], shape, top_level=True)


def head(weights: Weights, config: ModelConfig, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """``lm_head.weight`` when the head is untied (a tied head is the embedding itself)."""
    if config.tie_embeddings:
        return {}
    vocab = config.vocab_size or 0
    return {"lm_head.weight": weights.first(names, (vocab, config.d_model))}


def gpt_outer(weights: Weights, config: ModelConfig) -> dict[str, torch.Tensor]:
    """GPT-2's and GPT-Neo's shared outer tensors: ``wte``, ``wpe`` and the final ``ln_f``."""
    d, v = config.d_model, config.vocab_size or 0
    return {
        "tgt_embed.weight": weights.get("wte.weight", (v, d)),
        "pos.weight": weights.get("wpe.weight", (config.max_len, d)),
        "decoder.norm.weight": weights.get("ln_f.weight", (d,)),
        "decoder.norm.bias": weights.get("ln_f.bias", (d,)),
    }


def gpt_layer_norms(weights: Weights, src: str, lab: str, d: int) -> dict[str, torch.Tensor]:
    """A GPT-2 / GPT-Neo block's ``ln_1`` and ``ln_2`` as the lab's ``norm1`` and ``norm2``."""
    out = {}
    for norm, hf in (("norm1", "ln_1"), ("norm2", "ln_2")):
        out[f"{lab}{norm}.weight"] = weights.get(f"{src}{hf}.weight", (d,))
        out[f"{lab}{norm}.bias"] = weights.get(f"{src}{hf}.bias", (d,))
    return out
