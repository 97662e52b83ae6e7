"""``attribute(model, text, transcoders)``: a prompt's attribution graph, as circuit-tracer
computes it (``circuit_tracer/attribution/attribute.py``), on the lab's own frozen system.

Nodes: the input tokens, every active transcoder feature (position 0 never activates:
the start token's features are zeroed, as circuit-tracer does), an error node per
layer and position, and the top output logits (up to ``max_n_logits``, until
``desired_logit_prob`` of the probability). A feature's target is its pre-activation
without ``b_enc``, a logit's the logit less the mean logit. Logit rows come first;
then features are visited in order of their influence on the logits so far,
``update_interval`` batches between re-rankings, until ``max_feature_nodes`` have
rows (all of them when None). Each batch of rows is one pass down the replacement
model's transposed system (``replacement_model.pull_back``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from tui_lab.core.analysis.circuits.graph import AttributionGraph
from tui_lab.core.analysis.circuits.replacement_model import LocalReplacement, build_replacement
from tui_lab.core.errors import LabError
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet

Progress = Callable[[int, int, str], None]
Cancelled = Callable[[], bool]


class AttributionStopped(LabError):
    """The caller cancelled the attribution before it finished."""


@dataclass(frozen=True)
class Sources:
    """The active features (n, 3) (layer, position, feature) in that order, their
    activations (n,), encoder rows (n, d) and decoder rows times activation (n, d);
    the error vectors (L, T, d); ``bounds`` (L * T + 1,): features of (layer, pos) are
    ``bounds[layer * T + pos] : bounds[layer * T + pos + 1]``."""

    features: Tensor
    values: Tensor
    encoders: Tensor
    decoders: Tensor
    errors: Tensor
    bounds: list[int]
    padded: list[PaddedLayer]


@dataclass(frozen=True)
class PaddedLayer:
    """One layer's active decoder rows laid out (T, m, d) by position, m = the most any
    position has (zeros pad), and each slot's column in the edge rows (T, m), -1 for
    padding: a layer's features are scored with one batched matmul, not one per
    position (many small matmuls are slow on a busy machine's threads)."""

    decoders: Tensor
    columns: Tensor


def pad_layer(decoders: Tensor, bounds: list[int], layer: int, n_pos: int) -> PaddedLayer:
    """Layer ``layer``'s slice of ``decoders`` laid out by position."""
    cells = [(bounds[layer * n_pos + p], bounds[layer * n_pos + p + 1]) for p in range(n_pos)]
    m = max(1, max(b - a for a, b in cells))
    padded = decoders.new_zeros(n_pos, m, decoders.size(1))
    columns = torch.full((n_pos, m), -1, dtype=torch.long)
    for pos, (a, b) in enumerate(cells):
        padded[pos, : b - a] = decoders[a:b]
        columns[pos, : b - a] = torch.arange(a, b)
    return PaddedLayer(padded, columns)


def find_sources(replacement: LocalReplacement, transcoders: TranscoderSet) -> Sources:
    """Each layer's active features on the prompt and the error its transcoder leaves."""
    feats, values, encoders, decoders, errors = [], [], [], [], []
    with torch.no_grad():
        for layer, tc in enumerate(transcoders):
            x = replacement.inputs[layer]
            acts = tc.encode(x).float()  # (T, d_tc)
            acts[0] = 0  # the start token's features never activate
            pos, feat = acts.nonzero(as_tuple=True)  # row-major: by position, then feature
            value = acts[pos, feat]
            rebuilt = tc.decode(acts).float() + tc.skip(x).float()
            error = replacement.mlp_outputs[layer] - rebuilt
            error[0] = 0
            feats.append(torch.stack([torch.full_like(pos, layer), pos, feat], 1))
            values.append(value)
            encoders.append(tc.W_enc.detach().float()[feat])
            decoders.append(tc.W_dec.detach().float()[feat] * value[:, None])
            errors.append(error)
    features = torch.cat(feats)
    keys = features[:, 0] * replacement.n_pos + features[:, 1]
    bounds = torch.searchsorted(keys, torch.arange(replacement.n_layers * replacement.n_pos + 1)).tolist()
    decoders_all = torch.cat(decoders)
    padded = [pad_layer(decoders_all, bounds, layer, replacement.n_pos) for layer in range(replacement.n_layers)]
    return Sources(features, torch.cat(values), torch.cat(encoders), decoders_all, torch.stack(errors), bounds, padded)


@dataclass(frozen=True)
class LogitTargets:
    """The logits explained: vocabulary ids, probabilities, demeaned unembedding rows (k, d)."""

    ids: list[int]
    probabilities: Tensor
    vectors: Tensor


def logit_targets(replacement: LocalReplacement, max_n_logits: int, desired_prob: float) -> LogitTargets:
    """The most probable next tokens, until their probability reaches ``desired_prob``."""
    probs = torch.softmax(replacement.logits, dim=-1)
    top_p, top_idx = torch.topk(probs, min(max_n_logits, probs.numel()))
    cutoff = int(torch.searchsorted(torch.cumsum(top_p, 0), desired_prob)) + 1
    idx = top_idx[:cutoff]
    unembed = replacement.unembed
    return LogitTargets(idx.tolist(), probs[idx], unembed[idx] - unembed.mean(0, keepdim=True))


def edge_rows(
    replacement: LocalReplacement, sources: Sources, layers: Tensor, positions: Tensor, vectors: Tensor
) -> Tensor:
    """(B, n_active + (L + 1) * T) direct effects on B targets, each reading ``vectors[b]``
    at ``positions[b]`` of layer ``layers[b]``'s input (n_layers: the logits)."""
    n_layers, n_pos, n_feat = replacement.n_layers, replacement.n_pos, len(sources.values)
    order = torch.sort(layers, descending=True, stable=True).indices  # pull_back's order
    out = vectors.new_zeros(len(vectors), n_feat + (n_layers + 1) * n_pos)

    def score(layer: int, g: Tensor) -> None:
        n, t = g.size(0), g.size(1)
        pad = sources.padded[layer]
        scores = torch.bmm(g.transpose(0, 1), pad.decoders[:t].transpose(1, 2))  # (t, n, m)
        columns = pad.columns[:t]
        real = columns >= 0
        out[:n, columns[real]] = scores.permute(1, 0, 2)[:, real]
        start = n_feat + layer * n_pos
        out[:n, start: start + t] = torch.einsum("btd,td->bt", g, sources.errors[layer, :t])

    with torch.no_grad():
        g0 = replacement.pull_back(layers[order], positions[order], vectors[order], score)
    start = n_feat + n_layers * n_pos
    out[:, start: start + g0.size(1)] = torch.einsum("btd,td->bt", g0, replacement.token_vectors[: g0.size(1)])
    rows = torch.empty_like(out)
    rows[order] = out
    return rows


def partial_influences(edges: Tensor, logit_p: Tensor, row_to_node: Tensor, max_iter: int = 128) -> Tensor:
    """Each node's influence on the logits through the rows computed so far."""
    normalized = edges.abs()
    normalized /= normalized.sum(dim=1, keepdim=True).clamp(min=1e-8)
    influences = torch.zeros(edges.size(1))
    prod = torch.zeros(edges.size(1))
    prod[-len(logit_p):] = logit_p
    for _ in range(max_iter):
        prod = prod[row_to_node] @ normalized
        if not bool(prod.any()):
            return influences
        influences += prod
    raise RuntimeError("influence did not converge")


def _no_progress(done: int, total: int, what: str) -> None:
    return None


def _never() -> bool:
    return False


def attribute(
    model: ModelInHand,
    text: str | list[int],
    transcoders: TranscoderSet,
    *,
    max_feature_nodes: int | None = None,
    max_n_logits: int = 10,
    desired_logit_prob: float = 0.95,
    batch_size: int = 256,
    update_interval: int = 4,
    progress: Progress = _no_progress,
    cancelled: Cancelled = _never,
) -> AttributionGraph:
    """The attribution graph of ``text`` (or token ids) through ``transcoders``: every
    edge a source's direct effect on a target in the local replacement model."""
    ids = model.to_tokens(text)[0].tolist() if isinstance(text, str) else [int(i) for i in text]
    limit = int(model.config.model.max_len or 0)
    if limit and len(ids) > limit:
        raise LabError(f"the input is {len(ids)} tokens: the model reads at most {limit}")
    replacement = build_replacement(model, ids, transcoders)
    sources = find_sources(replacement, transcoders)
    targets = logit_targets(replacement, max_n_logits, desired_logit_prob)
    n_feat, n_logits = len(sources.values), len(targets.ids)
    logit_offset = n_feat + (replacement.n_layers + 1) * replacement.n_pos
    cap = n_feat if max_feature_nodes is None else min(max_feature_nodes, n_feat)
    edges = torch.zeros(cap + n_logits, logit_offset + n_logits)
    row_to_node = torch.zeros(cap + n_logits, dtype=torch.long)
    last = torch.full((n_logits,), replacement.n_pos - 1)
    edges[:n_logits, :logit_offset] = edge_rows(
        replacement, sources, torch.full((n_logits,), replacement.n_layers), last, targets.vectors)
    row_to_node[:n_logits] = torch.arange(n_logits) + logit_offset
    visited = _feature_rows(replacement, sources, targets, edges, row_to_node, cap,
                            batch_size, update_interval, progress, cancelled)
    selected = torch.where(visited)[0]
    if cap < n_feat:
        edges = edges[:, torch.cat([selected, torch.arange(n_feat, logit_offset + n_logits)])]
    edges = edges[row_to_node.argsort()]
    full = torch.zeros(edges.size(1), edges.size(1))
    full[:cap] = edges[:cap]
    full[full.size(0) - n_logits:] = edges[cap:]
    vocab = model.task.vocab
    return AttributionGraph(
        text=text if isinstance(text, str) else "".join(vocab.label(i) for i in ids),
        tokens=ids, token_labels=[vocab.label(i) for i in ids], n_layers=replacement.n_layers,
        active_features=sources.features, activation_values=sources.values, selected_features=selected,
        logit_tokens=targets.ids, logit_labels=[vocab.label(i) for i in targets.ids],
        logit_probabilities=targets.probabilities, adjacency=full, scan=transcoders.scan,
        model_name=model.config.name, step=model.step,
        token_texts=[vocab.decode([i], stop_at_eos=False) for i in ids],
    )


def _feature_rows(
    replacement: LocalReplacement, sources: Sources, targets: LogitTargets, edges: Tensor,
    row_to_node: Tensor, cap: int, batch_size: int, update_interval: int,
    progress: Progress, cancelled: Cancelled,
) -> Tensor:
    """Fill ``edges``' feature rows in order of influence (circuit-tracer's queue); the
    visited mask. Within a queue, rows are batched by position, so a batch reaches only
    the positions up to its targets', and each layer is visited by its rows only."""
    n_feat = len(sources.values)
    visited = torch.zeros(n_feat, dtype=torch.bool)
    row, n_logits = len(targets.ids), len(targets.ids)
    progress(0, cap, "features")
    while row - n_logits < cap:
        if cap == n_feat:
            pending = torch.arange(n_feat)
        else:
            influences = partial_influences(edges[:row], targets.probabilities, row_to_node[:row])
            rank = torch.argsort(influences[:n_feat], descending=True)
            pending = rank[~visited[rank]][: min(update_interval * batch_size, cap - (row - n_logits))]
        # batches by position (a batch reads no later than its last position); within a
        # batch pull_back visits each layer with only the rows reading there or above
        order = sources.features[pending, 1] * replacement.n_layers + sources.features[pending, 0]
        pending = pending[torch.sort(order, stable=True).indices]
        for batch in pending.split(batch_size):
            if cancelled():
                raise AttributionStopped("attribution stopped")
            rows = edge_rows(replacement, sources, sources.features[batch, 0], sources.features[batch, 1],
                             sources.encoders[batch])
            edges[row: row + len(batch), : rows.size(1)] = rows
            row_to_node[row: row + len(batch)] = batch
            visited[batch] = True
            row += len(batch)
            progress(row - n_logits, cap, "features")
    return visited
