"""The edge forward on real families' layouts (random-weight folders as Hugging Face writes
them: GPT-2, GPT-NeoX with its parallel residual and partial rotary, Llama with RMSNorm, a
gated MLP and grouped key/value heads, GPT-Neo with local layers): with no patch it gives the
model's own logit difference, and a writer's outgoing EAP scores sum to its attribution
patching score; grouped key/value heads are refused in one line (as TransformerLens 4.3 does)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.core.analysis.patching.test_activation_patching import family, make_pair  # noqa: F401  (fixture)
from tui_lab.core.analysis.edges.component_graph import EdgeError
from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
from tui_lab.core.analysis.edges.edge_forward import edge_forward, embed, graph_of
from tui_lab.core.analysis.patching.attribution_patching import attribution_patch


def test_the_edge_forward_is_the_model_and_nodes_are_attribution(family: tuple[str, Any, Any]) -> None:  # noqa: F811
    name, lab, _ref = family
    pair = make_pair()
    c = lab.config.model
    if c.n_kv_heads not in (None, c.n_heads):
        with pytest.raises(EdgeError, match="one key/value head per query head"):
            edge_attribution(lab, pair, "eap")
        return
    g = graph_of(lab.model)
    clean, corrupt = pair.ids()
    with torch.no_grad():
        run = edge_forward(lab.model, g, embed(lab.model, torch.cat([clean, corrupt])), pair)
        logits = lab.model(torch.cat([clean, corrupt]))
    want = logits[:, -1, pair.answer] - logits[:, -1, pair.wrong]
    torch.testing.assert_close(run.metric, want, atol=1e-4, rtol=1e-4)
    nodes = edge_attribution(lab, pair, "eap").node_scores()
    z = attribution_patch(lab, pair, "z")
    for layer in range(g.n_layers):
        for head in range(g.n_heads):
            assert float(nodes[g.head_writer(layer, head)]) == pytest.approx(
                z.raw[layer][head] - z.corrupt, abs=1e-4), (name, layer, head)
