"""Where a patching site's rows lie in a model of each shape.

A decoder-only or an encoder-only model has one stack of blocks, ``blocks.{L}``.
An encoder-decoder has two: ``encoder.{L}`` over the source and ``decoder.{L}``
over the decoder's input, whose blocks also attend to the source
(``decoder.{L}.cross_attn.hook_*``, ``decoder.{L}.hook_cross_attn_out``).

A site laid out by position (``resid_pre``, ``attn_out``, ``mlp_out``, ``z_pos``)
walks one stack, since the columns are that stack's tokens: an
encoder-decoder's encoder unless the decoder is asked for. A site laid out by
head (``z``, ``pattern``, ``q``, ``k``, ``v``) walks every stack, each row one
layer's self-attention or cross-attention (``enc L0``, ``dec L0``, ``cross L0``).
The layer counts come from the hook names, so every model the lab builds or
opens is read the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.analysis.patching.patch_pair import PatchError, model_shape

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand

STACK_LABELS = {"blocks": "", "encoder": "enc ", "decoder": "dec "}
FINAL_NORMS = ("ln_final.hook_normalized", "decoder_final_ln.hook_normalized")


@dataclass(frozen=True)
class Row:
    """One row of a site's grid: its label, its hook, its layer in its stack, the stack."""

    label: str
    hook: str
    layer: int
    stack: str


def stacks(model: ModelInHand) -> list[str]:
    """The stacks of blocks, in the order a forward pass runs them."""
    return ["blocks"] if model_shape(model).one_stack else ["encoder", "decoder"]


def answer_stack(model: ModelInHand) -> str:
    """The stack whose last layer the answer is read from."""
    return stacks(model)[-1]


def stack_layers(model: ModelInHand, stack: str) -> int:
    """How many blocks ``stack`` has (counted from its ``hook_resid_pre`` hooks)."""
    pattern = re.compile(rf"^{re.escape(stack)}\.(\d+)\.hook_resid_pre$")
    found = [int(m.group(1)) for n in model.hook_names() if (m := pattern.match(n))]
    return max(found) + 1 if found else 0


def final_hook(model: ModelInHand) -> str:
    """The last hook before the unembedding (and an MLM head): the final norm's output,
    or the last block's output when the stack has no final norm (post-LN)."""
    names = model.hook_names()
    for name in FINAL_NORMS:
        if name in names:
            return name
    stack = answer_stack(model)
    return f"{stack}.{stack_layers(model, stack) - 1}.hook_resid_post"


def _cross(hook: str) -> str | None:
    """The cross-attention twin of a self-attention hook (None for the rest)."""
    if hook.startswith("attn."):
        return f"cross_{hook}"
    return "hook_cross_attn_out" if hook == "hook_attn_out" else None


def position_stack(model: ModelInHand, stack: str | None) -> str:
    """The one stack a position-laid site walks; PatchError for a stack the model lacks."""
    own = stacks(model)
    if stack is None:
        return own[0]
    if stack not in own:
        raise PatchError(f"no {stack} stack in this model: it has {', '.join(own)}")
    return stack


def site_rows(model: ModelInHand, hook: str, by_position: bool, stack: str | None = None) -> list[Row]:
    """The rows of a site at ``hook`` (under each block): one stack's layers for a site
    laid out by position, every stack's (cross-attention too) for one laid out by head."""
    names = set(model.hook_names())
    walked = [position_stack(model, stack)] if by_position else stacks(model)
    if stack is not None and not by_position:
        walked = [position_stack(model, stack)]
    rows = []
    for st in walked:
        prefix = STACK_LABELS[st]
        for layer in range(stack_layers(model, st)):
            if f"{st}.{layer}.{hook}" in names:
                rows.append(Row(f"{prefix}L{layer}", f"{st}.{layer}.{hook}", layer, st))
            cross = _cross(hook) if st == "decoder" else None
            if cross is not None and f"{st}.{layer}.{cross}" in names:
                rows.append(Row(f"cross L{layer}", f"{st}.{layer}.{cross}", layer, st))
    return rows
