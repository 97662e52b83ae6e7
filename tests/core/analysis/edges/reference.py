"""An independent reference for the edge tests: the tiny decoder-only model written out by
hand as a sum of writers, with each reader's input its own tensor.

Nothing here calls the lab's attention, blocks or edge code: the weights are read from
the model's parameters and the forward is the textbook formula (layer norm, per-head
q/k/v projections, causal softmax, per-head output through its slice of ``w_o``, the
MLP, the final norm and the unembedding). Each reader's input is built as the explicit
sum of the writers' outputs before it plus the biases, so ``torch.autograd.grad``
with respect to it is that reader's gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

Edge = tuple[str, str]  # (writer, reader) names, as the lab names them


@dataclass
class Ref:
    metric: Tensor
    writers: dict[str, Tensor] = field(default_factory=dict)  # name -> (T, d)
    readers: dict[str, Tensor] = field(default_factory=dict)  # name -> (T, d)


def _ln(x: Tensor, norm: torch.nn.LayerNorm) -> Tensor:
    return F.layer_norm(x, (x.size(-1),), norm.weight, norm.bias, norm.eps)


def forward(net, ids: list[int], answer: int, wrong: int, inputs: Tensor | None = None,
            patch: dict[Edge, Tensor] | None = None, replace: dict[Edge, Tensor] | None = None) -> Ref:
    """The model on ``ids`` (or from the ``input`` writer ``inputs`` (T, d)); ``patch``: an
    amount added to one reader's input, by (writer, reader); ``replace``: the value the
    reader reads for that writer in place of this run's."""
    patch, replace = patch or {}, replace or {}
    t = len(ids)
    if inputs is None:
        tok = net.tgt_embed.weight[torch.tensor(ids)] * net.embed_scale
        inputs = tok + net.pos.weight[:t]  # learned positions
    ref = Ref(metric=torch.zeros(()))
    ref.writers["input"] = inputs
    biases = torch.zeros_like(inputs)
    causal = torch.ones(t, t, dtype=torch.bool).tril()

    def reader(name: str) -> Tensor:
        x = sum(ref.writers.values()) + biases
        for (_w, r), amount in patch.items():
            if r == name:
                x = x + amount
        for (w, r), value in replace.items():
            if r == name:
                x = x + value - ref.writers[w]
        x = x.clone()
        ref.readers[name] = x
        return x

    for layer, block in enumerate(net.decoder.layers):
        attn = block.self_attn
        h_n, dh = attn.n_heads, attn.d_head
        outs = {}
        for h in range(h_n):
            rows = slice(h * dh, (h + 1) * dh)
            xs = {x: _ln(reader(f"a{layer}.h{h}<{x}>"), block.norm1) for x in "qkv"}
            q = xs["q"] @ attn.w_q.weight[rows].T + attn.w_q.bias[rows]
            k = xs["k"] @ attn.w_k.weight[rows].T + attn.w_k.bias[rows]
            v = xs["v"] @ attn.w_v.weight[rows].T + attn.w_v.bias[rows]
            scores = (q @ k.T / math.sqrt(dh)).masked_fill(~causal, float("-inf"))
            z = torch.softmax(scores, -1) @ v
            outs[f"a{layer}.h{h}"] = z @ attn.w_o.weight[:, rows].T
        ref.writers.update(outs)
        biases = biases + attn.w_o.bias
        if block.ff is not None:
            x = _ln(reader(f"m{layer}"), block.norm2)
            ref.writers[f"m{layer}"] = block.ff.lin2(F.relu(block.ff.lin1(x)))
    final = _ln(reader("logits"), net.decoder.norm)[-1]
    logits = net.lm_head(final)
    ref.metric = logits[answer] - logits[wrong]
    return ref
