"""Steering: a vector added to one activation, with a coefficient, while the model decodes.

The vector is the difference of two prompt sets' mean activations at a hook
(each prompt's activation averaged over its positions, then over the set: the
"activation addition" of Turner et al. 2023 with sets, as in contrastive
activation addition). ``steer`` decodes the same input twice with the lab's own
``generate``: plainly, and with ``x + coef * vector`` at the hook on every
position of every step (``using_hooks``: the hook lives for that call only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.patching.patch_pair import PatchError, model_shape
from tui_lab.core.config.shape import Shape
from tui_lab.core.decoding.decode import generate
from tui_lab.core.decoding.fill_mask import fill_mask
from tui_lab.core.errors import LabError
from tui_lab.core.model.hook_points import HookSpec, using_hooks

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand


@dataclass
class SteerResult:
    """The plain and the steered continuations of one input."""

    input: str
    hook: str
    coef: float
    norm: float  # the vector's length
    plain: str
    steered: str

    def to_dict(self) -> dict[str, object]:
        return {"input": self.input, "hook": self.hook, "coef": self.coef, "norm": self.norm,
                "plain": self.plain, "steered": self.steered}


def _check_hook(model: ModelInHand, hook: str) -> None:
    if hook not in set(model.hook_names()):
        import difflib

        near = difflib.get_close_matches(hook, model.hook_names(), n=2)
        hint = f" (did you mean {' or '.join(near)}?)" if near else " (tfx-lab hooks lists them)"
        raise PatchError(f"no hook point {hook!r} in this model{hint}")
    if not model_shape(model).one_stack and hook.startswith("decoder."):
        raise PatchError(f"{hook}: an encoder-decoder reads the prompt sets in its encoder; "
                         "steer at an encoder.{L} hook")
    if hook.endswith(("hook_pattern", "hook_attn_scores")):
        raise PatchError(f"{hook}: steering adds to an activation by position, not to attention weights")


def read_prompts(path: str | Path) -> list[str]:
    """The non-blank lines of ``path``, one prompt each; LabError (one line) when it cannot
    be read or holds none."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"{path}: cannot read the prompts ({exc.__class__.__name__})") from None
    prompts = [line for line in lines if line.strip()]
    if not prompts:
        raise LabError(f"{path}: no prompts (one a line)")
    return prompts


def mean_activation(model: ModelInHand, hook: str, prompts: Sequence[str]) -> Tensor:
    """The mean over ``prompts`` of each prompt's activation at ``hook`` averaged over
    its positions: (d,) for the residual stream, (heads, d_head) for q, k, v, z."""
    if not prompts:
        raise PatchError("a prompt set is empty: give at least one prompt per line")
    total: Tensor | None = None
    with torch.no_grad():
        for text in prompts:
            _, cache = model.run_with_cache(text, names=[hook])
            act = cache[hook][0].float().mean(0)  # (T, ...) -> (...)
            total = act if total is None else total + act
    assert total is not None
    return total / len(prompts)


def steering_vector(model: ModelInHand, hook: str, positive: Sequence[str], negative: Sequence[str]) -> Tensor:
    """mean(positive) - mean(negative) at ``hook``."""
    _check_hook(model, hook)
    return mean_activation(model, hook, positive) - mean_activation(model, hook, negative)


def steering_hooks(hook: str, vector: Tensor, coef: float) -> list[HookSpec]:
    """The hook that adds ``coef * vector`` at every position."""
    def add(x: Tensor, _name: str) -> Tensor:
        return x + coef * vector.to(x.dtype)  # broadcasts over (B, T)

    return [(hook, add)]


def steer(
    model: ModelInHand,
    text: str,
    hook: str,
    vector: Tensor,
    coef: float,
    *,
    max_new_tokens: int | None = 20,
) -> SteerResult:
    """Greedy continuations of ``text``, plain and with the vector added at ``hook``."""
    _check_hook(model, hook)
    vector = vector.to(model.device)

    def output() -> str:
        if model_shape(model) is Shape.ENCODER_ONLY:  # its "continuation": its masks filled
            return fill_mask(model.model, model.task, text).output
        return generate(model.model, model.task, text, max_new_tokens=max_new_tokens, capture=False).output

    plain = output()
    with using_hooks(steering_hooks(hook, vector, coef)):
        steered = output()
    return SteerResult(text, hook, coef, float(vector.norm()), plain, steered)
