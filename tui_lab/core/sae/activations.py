"""Activations at a hook point, from any model with ``run_with_cache``/``run_with_hooks``.

The model is anything shaped like ``tui_lab.core.open_model``'s handle (a
Protocol below, so this module imports no model code): activations stream
window by window, never the whole text at once, and the model's logits with a
replacement at the hook feed ``metrics.ce_losses``. A site with more than one
trailing dimension (``attn.hook_z``: (B, T, heads, d_head)) is flattened to
(B, T, heads·d_head), as SAELens's ``hook_z`` SAEs read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from tui_lab.core.config.shape import Shape
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.metrics import LogitsUnder, Replacement
from tui_lab.core.sae.sae import SparseAutoencoder

if TYPE_CHECKING:
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.model.hook_points import HookFn
    from tui_lab.core.tasks.protocol import Task


class HookedLike(Protocol):
    """What the SAE code needs of a model in hand (``tui_lab.core.open_model``'s ``ModelInHand``)."""

    config: LabConfig
    task: Task

    @property
    def decoder_only(self) -> bool: ...

    def hook_names(self) -> list[str]: ...

    def to_tokens(self, text: str) -> torch.Tensor: ...

    def run_with_cache(
        self, text_or_ids: torch.Tensor, names: list[str]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]: ...

    def run_with_hooks(
        self, text_or_ids: torch.Tensor, hooks: list[tuple[str, HookFn]], *, target: torch.Tensor | None = None
    ) -> torch.Tensor: ...


def flat_site(act: torch.Tensor) -> torch.Tensor:
    """(B, T, ...) activations as (B, T, d): trailing dims joined (hook_z's heads and d_head)."""
    return act.reshape(*act.shape[:2], -1) if act.dim() > 3 else act


def token_windows(ids: torch.Tensor, context: int) -> torch.Tensor:
    """A long (N,) id sequence cut into (n, context) windows, the last partial one dropped."""
    n = ids.numel() // context
    if n == 0:
        raise SAEError(f"the text has {ids.numel()} tokens, fewer than one context of {context}")
    return ids[: n * context].reshape(n, context)


def site_width(model: HookedLike, hook: str, sample: torch.Tensor) -> int:
    """The width d of the activations at ``hook`` (one forward on ``sample``). An
    encoder-decoder reads the text in its encoder: its decoder's hooks (which would see
    only its start token) are refused in one line."""
    if hook.startswith(("decoder.", "decoder_final_ln.")) and not model.decoder_only:
        raise SAEError(f"{hook}: an encoder-decoder reads the text in its encoder; "
                       "train at an encoder.{L} hook (its decoder would see only its start token)")
    with torch.no_grad():
        _, cache = model.run_with_cache(sample, names=[hook])
    return int(flat_site(cache[hook]).shape[-1])


def check_width(sae: SparseAutoencoder, hook: str, width: int) -> None:
    """SAEError (one line, naming both) when the SAE's d_in is not the hook's width."""
    if sae.cfg.d_in != width:
        raise SAEError(f"the SAE reads d_in={sae.cfg.d_in} but {hook} has width {width}")


def hook_activations(model: HookedLike, windows: torch.Tensor, hook: str, batch: int,
                     epochs: int | None = 1, seed: int = 0, flat: bool = True) -> Iterator[torch.Tensor]:
    """(batch·T, d) activations at ``hook`` (``flat=False``: (batch, T, d)), ``batch`` windows a pass.

    ``epochs=None`` goes round the windows for ever, each pass in a new order
    (the trainer stops at its token count).
    """
    g = torch.Generator().manual_seed(seed)
    done = 0
    while epochs is None or done < epochs:
        order = torch.randperm(windows.shape[0], generator=g) if done else torch.arange(windows.shape[0])
        for start in range(0, windows.shape[0], batch):
            ids = windows[order[start : start + batch]]
            with torch.no_grad():
                _, cache = model.run_with_cache(ids, names=[hook])
            act = flat_site(cache[hook])
            yield act.reshape(-1, act.shape[-1]) if flat else act
        done += 1


def reconstruction(sae: SparseAutoencoder, features: Callable[[torch.Tensor], torch.Tensor] | None = None
                   ) -> Replacement:
    """The hook's activation replaced by the SAE's reconstruction (shape and dtype kept).

    ``features`` may edit the feature activations first (ablation, steering).
    """

    def replace(act: torch.Tensor) -> torch.Tensor:
        f = sae.encode(flat_site(act))
        if features is not None:
            f = features(f)
        return sae.decode(f).reshape(act.shape).to(act.dtype)

    return replace


def logits_under(model: HookedLike, ids: torch.Tensor, hook: str, target: torch.Tensor | None = None
                 ) -> LogitsUnder:
    """``metrics.ce_losses``'s callable: the model's logits on ``ids`` (an encoder-decoder's
    decoder reading ``target``) with ``hook`` replaced."""
    more = {} if target is None else {"target": target}

    def run(replacement: Replacement | None) -> torch.Tensor:
        if replacement is None:
            return model.run_with_hooks(ids, hooks=[], **more)
        return model.run_with_hooks(ids, hooks=[(hook, lambda act, _name: replacement(act))], **more)

    return run


@dataclass(frozen=True)
class ScoredText:
    """What CE loss recovered scores: the model's input, an encoder-decoder's decoder input,
    the tokens predicted and how far on (``metrics.next_token_ce``'s ``shift``)."""

    ids: torch.Tensor
    target: torch.Tensor | None
    tokens: torch.Tensor
    shift: int


def scored_text(model: HookedLike, ids: torch.Tensor, steps: int = 32) -> ScoredText:
    """A decoder-only model predicts each next token; an encoder-only one each token at its
    own place (its MLM head reading the unmasked text); an encoder-decoder, which has no
    target text, its own greedy output of ``steps`` tokens for each window, teacher-forced."""
    config = model.config.model
    if config.shape is Shape.ENCODER_ONLY:
        return ScoredText(ids, None, ids, 0)
    if model.decoder_only:
        return ScoredText(ids, None, ids, 1)
    task = model.task
    target = torch.full((ids.size(0), 1), int(task.decoder_start_id), device=ids.device)
    banned = list(task.banned_ids)
    with torch.no_grad():
        for _ in range(max(1, min(steps, int(config.max_len) - 1))):
            logits = model.run_with_hooks(ids, hooks=[], target=target)[:, -1].float()
            if banned:
                logits[:, banned] = float("-inf")  # a translator's pad is never an output
            target = torch.cat([target, logits.argmax(-1, keepdim=True)], dim=1)
    return ScoredText(ids, target[:, :-1], target[:, 1:], 0)
