"""The lab opening a bfloat16 checkpoint in float32: its weights are widened while torch
loads (``core/pretrained/widening.py``), and the model it shows is the reference's."""

from __future__ import annotations

from pathlib import Path

import torch

from bench.hf_factory import hf_model, save_tokenizer
from tests.ui.real_model.helpers import SIZE, model_app, opened


async def test_a_bfloat16_checkpoint_opens_widened_and_matches_the_reference(tmp_path: Path) -> None:
    reference = hf_model("qwen2", seed=0).to(torch.bfloat16)
    reference.save_pretrained(tmp_path)
    save_tokenizer(tmp_path, reference.config.vocab_size)
    reference = reference.float()  # the same numbers, widened by torch
    app = model_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        loaded = app.opened
        assert loaded is not None
        assert "weights stored as bfloat16, widened to float32" in loaded.notes
        assert loaded.card is not None and loaded.card.dtype == "float32"
        assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
        loaded.settle()  # the re-layout, and the hand-back of the copies it replaced
        tokens = torch.randint(0, reference.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            want = reference(tokens).logits
            got = loaded.model(tokens)
        assert (got - want).abs().max() < 1e-4
