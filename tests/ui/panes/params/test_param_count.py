"""Params' counter on a fine-tuned real model's config (task token-lm: no task to build)."""

from __future__ import annotations

from tui_lab.core.config.lab_config import LabConfig, ModelConfig, TaskConfig
from tui_lab.core.model.models import build_model
from tui_lab.ui.panes.params.param_count import ParamCounter


def test_a_token_lm_config_is_counted_from_its_models_vocabulary() -> None:
    model = ModelConfig(arch="decoder-only", d_model=32, n_heads=4, n_decoder_layers=2, d_ff=64,
                        positional="learned", max_len=64, vocab_size=300, scale_embeddings=False,
                        activation="gelu_tanh")
    config = LabConfig(name="tiny-gpt2", model=model, task=TaskConfig(name="token-lm", block_size=64))
    message = ParamCounter().count(config, edited=False)
    assert message.report is not None, message.error
    built = build_model(model)
    assert message.report.total == sum(p.numel() for p in {id(p): p for p in built.parameters()}.values())
    assert message.vocab_size == 300 and message.task is None
