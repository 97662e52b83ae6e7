"""What a family needs to write a lab model back in its own format: the inverse of a reader.

A ``Writer`` states the family's ``config.json`` for a ``ModelConfig``
(``hf_config``) and the names and shapes of its checkpoint's tensors
(``hf_layout``). How each tensor is cut, transposed or interleaved is not
restated: ``export_weights.py`` runs the family's own reader over numbered
tensors of that layout and inverts what it sees, so a writer can only ever be
the exact inverse of its reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families.common import Family

# The lab's activation -> the Hugging Face name written (each reads back to the
# lab's through ``common.ACTIVATIONS``). gelu_pytorch_tanh is F.gelu(approximate="tanh"), the
# lab's own kernel; gelu_new is the same function written out by hand.
HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "silu": "silu"}

Layout = dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class SpecialIds:
    """The ids written into config.json and generation_config.json."""

    bos: int | None
    eos: int | None
    pad: int | None

    def config_keys(self) -> dict[str, int | None]:
        return {"bos_token_id": self.bos, "eos_token_id": self.eos, "pad_token_id": self.pad}


@dataclass(frozen=True)
class Writer:
    """A family's way back: its config.json and tensor layout for a lab ``ModelConfig``.

    ``hf_config`` may choose the family's own form of a setting (an untied
    head, no embedding scale): the model the file describes is the one its
    reader builds from it, and ``export_weights.py`` turns the lab's weights
    into that model's.
    """

    family: Family
    hf_config: Callable[[ModelConfig, SpecialIds], dict[str, object]]
    hf_layout: Callable[[ModelConfig], Layout]


def tied(config: ModelConfig) -> bool:
    """Whether the file can keep the head tied: a tied head reads the embedding as
    stored, so a lab embedding scaled by sqrt(d_model) needs its own, unscaled head."""
    return config.tie_embeddings and not config.scale_embeddings


def common_keys(config: ModelConfig, architecture: str, model_type: str, ids: SpecialIds) -> dict[str, object]:
    """The keys every family's config.json has."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "tie_word_embeddings": tied(config),
        "dtype": "float32",
        "use_cache": True,
        **ids.config_keys(),
    }
