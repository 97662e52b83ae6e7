"""The model families the lab opens, by config.json's ``model_type``.

Each family module maps its config onto a ``ModelConfig`` (``model_config``)
and its checkpoint's tensors onto the lab's parameter names
(``lab_state_dict``); ``build.py`` puts the two together.
"""

from __future__ import annotations

from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families import (
    bert,
    distilbert,
    gemma,
    gpt2,
    gpt_neo,
    gpt_neox,
    llama,
    marian,
    olmo2,
    phi3,
    qwen,
)
from tui_lab.core.pretrained.families.common import Family, HFConfig
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

__all__ = ["FAMILIES", "Family", "family_for"]

FAMILIES: dict[str, Family] = {
    family.model_type: family
    for family in (
        gpt2.FAMILY, gpt_neox.FAMILY, llama.FAMILY, gpt_neo.FAMILY, marian.FAMILY, qwen.QWEN2, qwen.QWEN3,
        gemma.GEMMA, gemma.GEMMA2, gemma.GEMMA3, llama.MISTRAL, phi3.FAMILY, olmo2.FAMILY,
        bert.BERT, distilbert.FAMILY, bert.ROBERTA,
    )
}


def family_for(config: HFConfig) -> Family:
    """The family of a config.json; one line naming an unknown ``model_type`` and the known ones."""
    model_type = config.get("model_type")
    if model_type is None:
        raise PretrainedError(f"{CONFIG_FILE}: model_type is missing (the lab opens {', '.join(FAMILIES)})")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise PretrainedError(
            f"{CONFIG_FILE}: model_type {model_type!r} is not one the lab opens "
            f"({', '.join(FAMILIES)})"
        )
    return FAMILIES[model_type]
