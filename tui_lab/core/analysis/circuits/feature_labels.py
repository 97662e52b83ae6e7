"""Short labels for a graph's features: the tokens each one's decoder row pushes up most.

A transcoder feature's output direction read through the final norm's weight and the
unembedding (its direct logit effect, as the SAE browser's logit effects are) names
what it promotes; three tokens fit a node's box. The SAE feature cache indexes an
SAE's activations at one hook, which a transcoder (reading one hook, writing another)
does not fit, so the labels come from the decoder alone: no pass over a corpus.
"""

from __future__ import annotations

import torch

from tui_lab.core.analysis.circuits.graph import AttributionGraph
from tui_lab.core.analysis.circuits.replacement_model import decoder_only, final_norm
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet


def top_tokens(model: ModelInHand, transcoders: TranscoderSet, layer: int, feature: int, k: int = 3) -> list[str]:
    """The ``k`` tokens ``feature``'s decoder row at ``layer`` raises most (demeaned logits)."""
    head = decoder_only(model).lm_head.weight.detach().float()  # (V, d)
    gain = getattr(final_norm(model), "weight", None)
    direction = transcoders[layer].W_dec.detach().float()[feature]
    if isinstance(gain, torch.Tensor):
        direction = direction * gain.detach().float()
    effect = head @ direction
    effect = effect - effect.mean()
    vocab = model.task.vocab
    return [vocab.label(int(i)) for i in torch.topk(effect, min(k, effect.numel())).indices]


def label_features(graph: AttributionGraph, model: ModelInHand, transcoders: TranscoderSet,
                   nodes: list[int] | None = None) -> None:
    """Fill ``graph.feature_labels`` for the feature nodes ``nodes`` (all when None)."""
    wanted = range(graph.n_features) if nodes is None else [i for i in nodes if i < graph.n_features]
    for index in wanted:
        layer, _, feat = (int(v) for v in graph.active_features[graph.selected_features[index]])
        if (layer, feat) not in graph.feature_labels:
            graph.feature_labels[(layer, feat)] = "/".join(top_tokens(model, transcoders, layer, feat))
