"""The optimizers ``train.optimizer`` names, and which parameters each one updates.

``adamw``: AdamW on every parameter, in two groups, ``decay`` (matrices) and
``no_decay`` (biases, norm gains), as ``schedule.make_optimizer`` always made.

``muon``: as nanochat's MuonAdamW splits a model, in up to four groups:

- ``muon``: the hidden 2-D matrices, the weights of every ``nn.Linear`` inside
  the blocks (attention's q, k, v, o; the MLP's up, gate and down), updated by
  the lab's ``muon.Muon`` (``torch.optim.Muon``'s update: Nesterov momentum, then
  the update orthogonalised by five Newton-Schulz steps, same-shaped matrices
  batched, in the dtype the device multiplies fastest) at ``train.muon_lr``,
  scaled by sqrt(max(1, rows / cols)) as Keller Jordan's Muon does;
- ``embed``: embedding tables (token, position, token-type; a head tied to the
  token table is that table), AdamW with weight decay;
- ``head``: an untied output head's weight, AdamW with weight decay;
- ``no_decay``: biases and norm gains (every tensor that is not 2-D), AdamW
  without weight decay.

An embedding is never a Muon parameter: its gradient touches only the rows of
the tokens in the batch, which orthogonalising would smear over every row; nor
is the head, whose rows are per-token scores of the same kind. The AdamW
groups run at ``train.lr``; the schedule (``schedule.set_lr``) scales every
group's rate by the same factor, each group keeping its ``lr_scale``
(``muon_lr / lr`` for Muon, 1 for the rest).

Both halves live in one ``torch.optim.Optimizer`` (``MuonAdamW``) whose
``state_dict`` holds every group and every moment, so a checkpoint saves and
a resumed run restores Muon's momentum buffers as it does AdamW's moments. The
groups and state have ``torch.optim.Muon``'s layout, which the lab used before
``muon.Muon``: a checkpoint from then resumes unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from tui_lab.core.config.sections import TrainConfig
from tui_lab.core.model.positions import LearnedPositions
from tui_lab.core.training.muon import Muon

# Group names in the order groups are made (an empty group is left out).
MUON_GROUPS = ("muon", "embed", "head", "no_decay")


def _embedding_ids(model: nn.Module) -> set[int]:
    """Ids of every parameter of an embedding table (``nn.Embedding``, learned positions)."""
    ids: set[int] = set()
    for module in model.modules():
        if isinstance(module, nn.Embedding | LearnedPositions):
            ids.update(id(p) for p in module.parameters(recurse=False))
    return ids


def _head_ids(model: nn.Module) -> set[int]:
    """Ids of the output head's parameters (``lm_head``), where the model has one."""
    modules = dict(model.named_modules())
    head = modules.get("lm_head")
    return {id(p) for p in head.parameters()} if head is not None else set()


def muon_groups(model: nn.Module) -> dict[str, list[nn.Parameter]]:
    """The trainable parameters by group name (``MUON_GROUPS``), each listed once.

    A tied weight is one tensor under two names (``lm_head.weight`` is
    ``tgt_embed.weight``): it goes to ``embed``, once.
    """
    embeds, head = _embedding_ids(model), _head_ids(model)
    linears = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    groups: dict[str, list[nn.Parameter]] = {name: [] for name in MUON_GROUPS}
    seen: set[int] = set()
    for param in model.parameters():  # remove_duplicate: a tied weight comes once
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        if id(param) in embeds:
            groups["embed"].append(param)
        elif param.ndim != 2:
            groups["no_decay"].append(param)
        elif id(param) in head:
            groups["head"].append(param)
        elif id(param) in linears:
            groups["muon"].append(param)
        else:  # a 2-D tensor that is no layer's weight: AdamW's, decayed
            groups["head"].append(param)
    return groups


class MuonAdamW(torch.optim.Optimizer):
    """``muon.Muon`` on the groups whose ``kind`` is ``muon``, ``torch.optim.AdamW``
    on the rest, as one optimizer: one ``param_groups`` list, one ``state``, one
    ``state_dict``. The two inner optimizers share this one's group dictionaries and
    state, so whatever sets a group's ``lr`` (the schedule) or loads a state (resume)
    reaches them."""

    def __init__(
        self,
        groups: list[dict[str, Any]],
        muon: Callable[[list[dict[str, Any]]], torch.optim.Optimizer],
        adamw: Callable[[list[dict[str, Any]]], torch.optim.Optimizer],
    ) -> None:
        self._muon = muon([g for g in groups if g["kind"] == "muon"])
        self._adamw = adamw([g for g in groups if g["kind"] == "adamw"])
        super().__init__(groups, {})
        self._link()

    def _link(self) -> None:
        """Point the inner optimizers at this one's groups and state (after a load too)."""
        for inner, kind in ((self._muon, "muon"), (self._adamw, "adamw")):
            inner.param_groups = [g for g in self.param_groups if g["kind"] == kind]
            inner.state = self.state

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One update of every group (the closure, if any, is evaluated once)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._muon.param_groups:
            self._muon.step()
        if self._adamw.param_groups:
            self._adamw.step()
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._link()


def _adamw(train: TrainConfig) -> Callable[[list[dict[str, Any]]], torch.optim.Optimizer]:
    """A maker of AdamW over given groups, fused where the device allows."""
    betas = (train.betas[0], train.betas[1])  # a YAML list arrives as a list

    def make(groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
        # The fused kernel updates every tensor in one call: ~15x faster than the
        # per-tensor loop for a small model on a CPU, where that loop dominates a step.
        try:
            return torch.optim.AdamW(groups, lr=train.lr, betas=betas, eps=train.eps, fused=True)
        except (RuntimeError, ValueError):
            return torch.optim.AdamW(groups, lr=train.lr, betas=betas, eps=train.eps, fused=None)

    return make


def make_muon_adamw(model: nn.Module, train: TrainConfig,
                    muon_class: Callable[..., torch.optim.Optimizer] = Muon) -> MuonAdamW:
    """``train.optimizer: muon``: the groups of ``muon_groups`` under one ``MuonAdamW``.

    ``muon_class``: what updates the hidden matrices; ``torch.optim.Muon`` (same groups,
    same state) only for the bench and the tests that compare the two.
    """
    parts = muon_groups(model)
    decay = {"muon": train.weight_decay, "embed": train.weight_decay, "head": train.weight_decay, "no_decay": 0.0}
    groups: list[dict[str, Any]] = []
    for name in MUON_GROUPS:
        if parts[name]:
            is_muon = name == "muon"
            groups.append({
                "params": parts[name], "name": name, "kind": "muon" if is_muon else "adamw",
                "weight_decay": decay[name], "lr_scale": train.muon_lr / train.lr if is_muon else 1.0,
            })
    if not groups:
        raise ValueError("make_optimizer: the model has no trainable parameters")

    def muon(muon_groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
        return muon_class(muon_groups, lr=train.muon_lr, momentum=train.muon_momentum, nesterov=True)

    return MuonAdamW(groups, muon, _adamw(train))


def make_adamw(groups: Iterable[dict[str, Any]], train: TrainConfig) -> torch.optim.Optimizer:
    """AdamW over ``groups`` with ``train``'s betas and eps, fused where it can be."""
    return _adamw(train)(list(groups))
