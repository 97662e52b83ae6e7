"""Direct logit attribution: how much each part of the residual stream adds, directly,
to the logit difference at the last position.

In a pre-LN decoder-only model the last block's output is a sum: the token
embeddings, the position vectors, every head's output (its ``z`` through its
slice of ``w_o``), every MLP's output and the attention output biases. The final
norm is not linear, but with its scale taken from this run and frozen (the
residual's own standard deviation, or RMS) it is: each part's share of the
logits is ``norm(part) . (W_U[answer] - W_U[wrong])``. The norm's shift and the
unembedding's bias are constants, counted with the biases. The parts then add
up to the model's own logit difference (its logit of ``answer`` without
``wrong``).

``accumulated``: the residual stream before each layer (and after the last)
through the same frozen norm: where the answer appears, layer by layer (the
logit lens read off the metric).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.patching.patch_pair import PatchError, logit_diff, model_shape
from tui_lab.core.analysis.patching.patch_rows import answer_stack, stack_layers
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.layers import CrossAttentionBlock, TransformerBlock
from tui_lab.core.model.models import DecoderOnly, EncoderDecoder

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand

Linear = Callable[[Tensor], Tensor]


@dataclass
class DlaResult:
    """Each part's direct share (``components``, in the residual stream's order), their
    sum, the model's own value, and the accumulated residual stream by layer."""

    components: list[dict[str, str | float]]
    total: float
    model: float
    accumulated: list[dict[str, str | float]] = field(default_factory=list)
    answer: str = ""
    wrong: str | None = None
    tokens: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "components": self.components, "total": self.total, "model": self.model,
            "accumulated": self.accumulated, "answer": self.answer, "wrong": self.wrong,
            "tokens": self.tokens,
        }


def _gamma(weight: Tensor | None, final: Tensor) -> Tensor:
    """A norm's scale (ones when it has none), in ``final``'s dtype."""
    return torch.ones_like(final) if weight is None else weight.detach().to(final.dtype)


def frozen_norm(norm: nn.Module | None, final: Tensor) -> tuple[Linear, Tensor]:
    """(the linear part of the final norm with its scale from ``final`` (d,), its constant
    (d,)); a stack without a final norm is the identity."""
    if norm is None:
        return (lambda c: c), torch.zeros_like(final)
    if isinstance(norm, nn.LayerNorm):
        gamma = _gamma(norm.weight, final)
        scale = torch.sqrt(final.var(unbiased=False) + float(norm.eps))
        bias = norm.bias
        shift = torch.zeros_like(final) if bias is None else bias.detach().to(final.dtype)
        return (lambda c: gamma * (c - c.mean(-1, keepdim=True)) / scale), shift
    if isinstance(norm, nn.RMSNorm):
        gamma = _gamma(norm.weight, final)
        eps = torch.finfo(final.dtype).eps if norm.eps is None else float(norm.eps)
        rms = torch.sqrt(final.pow(2).mean() + eps)
        return (lambda c: gamma * c / rms), torch.zeros_like(final)
    raise PatchError(f"direct logit attribution cannot freeze a {type(norm).__name__} final norm")


def _blocks(lab: DecoderOnly | EncoderDecoder) -> list[TransformerBlock | CrossAttentionBlock]:
    return cast("list[TransformerBlock | CrossAttentionBlock]", list(lab.decoder.layers))


def _residual_parts(lab: DecoderOnly | EncoderDecoder, cache: dict[str, Tensor], final: Tensor, stack: str) -> list[tuple[str, Tensor]]:
    """The last position's residual stream split into what wrote it: the embeddings, each
    head (its ``z`` through its slice of ``w_o``; an encoder-decoder's decoder's cross-attention
    heads too), each MLP, and the output biases."""
    embeds = ("hook_embed", "hook_pos_embed") if stack == "blocks" else (f"{stack}.hook_embed", f"{stack}.hook_pos_embed")
    parts: list[tuple[str, Tensor]] = [
        (name.split(".")[-1].removeprefix("hook_"), cache[name][0, -1].float()) for name in embeds if name in cache
    ]
    biases = torch.zeros_like(final)
    for i, block in enumerate(_blocks(lab)):
        cross = block.cross_attn if isinstance(block, CrossAttentionBlock) else None
        for kind, attn in (("attn", block.self_attn), ("cross_attn", cross)):
            if attn is None:
                continue
            z = cache[f"{stack}.{i}.{kind}.hook_z"][0, -1].float()  # (H, d_head)
            w_o = attn.w_o.weight.float().view(attn.d_model, attn.n_heads, attn.d_head)  # (d, H, d_head)
            per_head = torch.einsum("hk,dhk->hd", z, w_o)  # (H, d)
            tag = "" if kind == "attn" else "x"
            parts += [(f"L{i}{tag}H{h}", per_head[h]) for h in range(attn.n_heads)]
            if attn.w_o.bias is not None:
                biases = biases + attn.w_o.bias.float()
        if f"{stack}.{i}.hook_mlp_out" in cache:
            parts.append((f"L{i}.mlp", cache[f"{stack}.{i}.hook_mlp_out"][0, -1].float()))
    parts.append(("biases", biases))
    return parts


def _dla_hooks(model: ModelInHand, stack: str, n: int) -> list[str]:
    names = set(model.hook_names())
    embeds = ("hook_embed", "hook_pos_embed") if stack == "blocks" else (f"{stack}.hook_embed", f"{stack}.hook_pos_embed")
    wanted = [h for h in embeds if h in names]
    for i in range(n):
        wanted += [h for h in (f"{stack}.{i}.hook_resid_pre", f"{stack}.{i}.attn.hook_z",
                               f"{stack}.{i}.cross_attn.hook_z", f"{stack}.{i}.hook_mlp_out") if h in names]
    return [*wanted, f"{stack}.{n - 1}.hook_resid_post"]


def direct_logit_attribution(model: ModelInHand, ids: Tensor, answer: int, wrong: int | None = None,
                             target: Tensor | None = None) -> DlaResult:
    """Each head's, each MLP's, the embeddings' and the biases' direct contribution to
    ``logit[answer] - logit[wrong]`` at the last position of ``ids`` (1, T); an
    encoder-decoder's at its decoder's last position (``target``: its decoder input)."""
    shape = model_shape(model)
    if shape is Shape.ENCODER_ONLY:
        raise PatchError("direct logit attribution reads the logits as linear in the residual stream; "
                         "an encoder-only model's MLM head (dense, activation, norm) is not")
    lab = model.model
    if not isinstance(lab, (DecoderOnly, EncoderDecoder)):
        raise PatchError(f"direct logit attribution reads the lab's own models, not {type(lab).__name__}")
    stack = answer_stack(model)
    n = stack_layers(model, stack)
    if not _blocks(lab)[0].norm_first:
        raise PatchError("direct logit attribution needs a pre-LN model (a post-LN stack normalises inside it)")
    with torch.no_grad():
        logits, cache = model.run_with_cache(ids, names=_dla_hooks(model, stack, n), target=target)
        own = float(logit_diff(logits, answer, wrong)[0])
        head = lab.lm_head
        direction = head.weight[answer] - (head.weight[wrong] if wrong is not None else 0)  # (d,)
        head_bias = 0.0
        if head.bias is not None:
            head_bias = float(head.bias[answer] - (head.bias[wrong] if wrong is not None else 0))
        final = cache[f"{stack}.{n - 1}.hook_resid_post"][0, -1].float()  # (d,)
        linear, shift = frozen_norm(lab.decoder.norm, final)
        direction = direction.float()

        parts = _residual_parts(lab, cache, final, stack)
        summed = torch.stack([v for _, v in parts]).sum(0)
        if not torch.allclose(summed, final, atol=1e-3 * (1 + float(final.abs().max())), rtol=1e-4):
            raise PatchError("this model's residual stream is not the sum of its heads, MLPs and embeddings: "
                             "no direct logit attribution")
        constant = float(shift @ direction) + head_bias
        components: list[dict[str, str | float]] = []
        for name, vec in parts:
            value = float(linear(vec) @ direction) + (constant if name == "biases" else 0.0)
            components.append({"name": name, "value": value})
        total = float(sum(float(c["value"]) for c in components))
        if abs(total - own) > 1e-3 * (1 + abs(own)):
            raise PatchError("this model's logits are not linear in its final residual stream "
                             "(soft-capped?): no direct logit attribution")
        accumulated: list[dict[str, str | float]] = [
            {"name": f"{stack}.{i}.hook_resid_pre", "value": float(linear(cache[f"{stack}.{i}.hook_resid_pre"][0, -1].float()) @ direction) + constant}
            for i in range(n)
        ]
        accumulated.append({"name": "final", "value": float(linear(final) @ direction) + constant})
    vocab = model.task.vocab
    return DlaResult(
        components, total, own, accumulated, vocab.label(answer),
        None if wrong is None else vocab.label(wrong), [vocab.label(int(i)) for i in ids[0]],
    )
