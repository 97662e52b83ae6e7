"""The walkthrough on real families: one row written out equals the weights the model used.

Each family brings a case the lab's own models lack: GPT-Neo's unscaled scores and
local window, Llama's shared key/value heads, GPT-NeoX's rotary on part of each head.
"""

from __future__ import annotations

import pytest

from bench.hf_factory import save_family
from tui_lab.core.analysis.basics.walkthrough import collect_projections, walk
from tui_lab.core.decoding.decode import generate
from tui_lab.core.opening.from_files import open_files

TEXT = "Once upon a time there was a little girl who liked to read stories about cats"


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "llama", "gpt_neo"])
def test_every_heads_last_row_written_out_equals_the_captured_weights(tmp_path, family) -> None:
    save_family(tmp_path, family)
    loaded = open_files(str(tmp_path))
    result = generate(loaded.model, loaded.task, TEXT, max_new_tokens=3)
    projections = collect_projections(loaded.model, loaded.task, result, {"max_new_tokens": 3})
    rows = result.attention["decoder.1.self"].shape[1]
    assert rows > 8  # longer than GPT-Neo's local window of 8 (layer 1 is local)
    for layer in ("decoder.0.self", "decoder.1.self"):
        for head in range(4):
            row = walk(projections[layer], result, layer, head, rows - 1)
            assert row.max_diff < 1e-5, (layer, head)
    if family == "gpt_neo":
        local = walk(projections["decoder.1.self"], result, "decoder.1.self", 0, rows - 1)
        assert sum(not m for m in local.masked) == 8 and local.scale_label == "×1"
