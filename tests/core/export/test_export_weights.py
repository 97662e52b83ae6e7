"""``invert``: a family's tensors written so that its reader maps them back onto exactly the lab's."""

from __future__ import annotations

import pytest
import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.export.export_choice import choose_writer
from tui_lab.core.export.export_weights import adapt, invert
from tui_lab.core.model.models import DecoderOnly
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.writer import SpecialIds

BASE = dict(arch="decoder-only", n_encoder_layers=0, n_decoder_layers=2, d_model=16, n_heads=4, d_ff=32,
            max_len=16, vocab_size=20)
CONFIGS = {
    "gpt2": dict(positional="learned"),
    "gpt_neo": dict(positional="learned", attention_windows=(4, 0), qkv_bias=False),
    "gpt_neox": dict(positional="rope", rope_fraction=0.5),
    "llama": dict(positional="rope", norm_kind="rmsnorm", gated_ff=True, n_kv_heads=2),
}


def written(name: str) -> tuple[object, ModelConfig, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    config = ModelConfig(**BASE, **CONFIGS[name])
    torch.manual_seed(0)
    model = DecoderOnly(config, 20).eval()
    writer = choose_writer(config)
    target = writer.family.model_config(writer.hf_config(config, SpecialIds(1, 2, 0)))
    state = adapt(model, target)
    return writer, target, state, invert(writer.family, writer.hf_layout(target), target, state)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_reader_maps_the_written_tensors_back_exactly(name: str) -> None:
    writer, target, state, tensors = written(name)
    assert writer.family.model_type == name
    back = writer.family.lab_state_dict(tensors, target)
    assert sorted(back) == sorted(state)
    for key, tensor in state.items():
        assert torch.equal(back[key], tensor), key
    assert sum(t.numel() for t in tensors.values()) == sum(t.numel() for t in state.values())


def test_a_layout_tensor_the_reader_never_reads_is_named() -> None:
    writer, target, state, _ = written("gpt2")
    layout = {**writer.hf_layout(target), "transformer.h.0.attn.extra": (3,)}
    with pytest.raises(PretrainedError, match=r"transformer\.h\.0\.attn\.extra is not written exactly once"):
        invert(writer.family, layout, target, state)
