"""Distributed alignment search (Geiger et al., 2023): a low-rank subspace whose
interchange moves the output as swapping the variable would.

Given a base and a source input, the interchange at one hook and position replaces
the base's activation's component in the subspace spanned by the orthonormal
columns of ``Q`` (d, k) with the source's::

    h' = h_base + (h_source - h_base) Q Q^T

``Q`` is learnt (``torch.nn.utils.parametrizations.orthogonal`` keeps its columns
orthonormal) by cross-entropy towards the *counterfactual* token: the task's answer
worked out again with the base's variable set to the source's value. Interchange
intervention accuracy (IIA) is the share of held-out pairs whose intervened
prediction is that token. Pairs are drawn so the counterfactual differs from the
base's own answer, so an intervention that does nothing scores about 0.

The controls, as TransformerLens 4.3's ``tools/analysis/interchange.py`` defines them:
a random subspace (its ``NormMatchedPlacebo``: each base moved exactly as far as the
learnt interchange moves it, but inside a random k-dim subspace) and random labels
(its ``arbitrary_targets``: a fixed pseudo-random class per source, drawn from the
targets' classes, on which a subspace is trained and scored the same way: what the
intervention's expressivity alone fits). ``full_swap`` is the whole activation
interchanged (k = d: activation patching); it carries every other variable of the
source along, so a subspace can score above it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import orthogonal

STEPS = 150
LR = 1e-2
BATCH = 256

# forward(rows, edit): logits (B, T, V) of the base rows with the hooked activation
# (B, T, d) replaced by edit(activation).
Forward = Callable[[Tensor, Callable[[Tensor], Tensor]], Tensor]


@dataclass
class Pairs:
    """Interchange pairs: the base's row, where it is intervened and read, the source's
    activation there, and the counterfactual token."""

    rows: Tensor  # (P,) long: the base example's row
    position: Tensor  # (P,) long: the intervened position in the base
    read: Tensor  # (P,) long: the position whose prediction is scored
    source: Tensor  # (P, d): the source's activation at its slot
    target: Tensor  # (P,) long: the counterfactual token id
    key: Tensor | None = None  # (P,) long: the source's identity (the random-label control's key)

    def __len__(self) -> int:
        return int(self.rows.numel())

    def take(self, index: Tensor) -> Pairs:
        """The pairs at ``index``."""
        return Pairs(self.rows[index], self.position[index], self.read[index], self.source[index],
                     self.target[index], None if self.key is None else self.key[index])

    def with_targets(self, target: Tensor) -> Pairs:
        return Pairs(self.rows, self.position, self.read, self.source, target, self.key)


def interchange(x: Tensor, position: Tensor, source: Tensor, basis: Tensor) -> Tensor:
    """``x`` (B, T, d) with each row's activation at ``position`` given ``source``'s (B, d)
    component in the span of ``basis`` (d, k, orthonormal columns)."""
    rows = torch.arange(x.size(0), device=x.device)
    base = x[rows, position]  # (B, d)
    delta = (source.to(x.dtype) - base) @ basis @ basis.T  # (B, d)
    at = F.one_hot(position, x.size(1)).to(x.dtype)[..., None]  # (B, T, 1)
    return x + at * delta[:, None, :]


def placebo(x: Tensor, position: Tensor, source: Tensor, basis: Tensor, random: Tensor) -> Tensor:
    """The norm-matched random-subspace placebo: each row moved as far as ``basis``'s
    interchange moves it, along the source's difference projected on ``random``'s span."""
    rows = torch.arange(x.size(0), device=x.device)
    diff = source.to(x.dtype) - x[rows, position]  # (B, d)
    distance = (diff @ basis @ basis.T).norm(dim=-1, keepdim=True)  # (B, 1)
    move = diff @ random @ random.T  # (B, d)
    delta = move * (distance / move.norm(dim=-1, keepdim=True).clamp_min(1e-8))
    at = F.one_hot(position, x.size(1)).to(x.dtype)[..., None]  # (B, T, 1)
    return x + at * delta[:, None, :]


Edit = Callable[[Tensor, Tensor, Tensor], Tensor]  # (x, position, source) -> x intervened


def _logits_at(forward: Forward, pairs: Pairs, basis: Tensor, edit: Edit | None = None) -> Tensor:
    def swap(x: Tensor) -> Tensor:
        position, source = pairs.position.to(x.device), pairs.source.to(x.device)
        if edit is not None:
            return edit(x, position, source)
        return interchange(x, position, source, basis.to(x.device))

    logits = forward(pairs.rows, swap)  # (B, T, V)
    rows = torch.arange(len(pairs), device=logits.device)
    return logits[rows, pairs.read.to(logits.device)].float().cpu()  # (B, V)


def iia(forward: Forward, pairs: Pairs, basis: Tensor, batch: int = BATCH, edit: Edit | None = None) -> float:
    """Interchange intervention accuracy of ``basis`` on ``pairs`` (``edit``: another intervention)."""
    if len(pairs) == 0:
        return float("nan")
    hits = 0
    with torch.no_grad():
        for lo in range(0, len(pairs), batch):
            part = pairs.take(torch.arange(lo, min(len(pairs), lo + batch)))
            hits += int((_logits_at(forward, part, basis, edit).argmax(-1) == part.target).sum())
    return hits / len(pairs)


def fit_basis(forward: Forward, pairs: Pairs, rank: int, *, steps: int = STEPS, lr: float = LR,
              batch: int = BATCH, seed: int = 0, cancelled: Callable[[], bool] | None = None) -> Tensor:
    """The (d, rank) orthonormal basis whose interchange best gives ``pairs``' targets."""
    d = pairs.source.size(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        rotation = orthogonal(nn.Linear(d, rank, bias=False))  # weight (rank, d): orthonormal rows
    opt = torch.optim.Adam(rotation.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    with torch.enable_grad():
        for _ in range(steps):
            if cancelled is not None and cancelled():
                break
            part = pairs.take(torch.randint(len(pairs), (min(batch, len(pairs)),), generator=gen))
            loss = F.cross_entropy(_logits_at(forward, part, _basis(rotation)), part.target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return _basis(rotation).detach().clone()


def _basis(rotation: nn.Module) -> Tensor:
    """The (d, rank) basis of a parametrized ``Linear(d, rank)``: its orthonormal rows as columns."""
    weight = rotation.weight
    assert isinstance(weight, Tensor)
    return weight.T


def random_basis(d: int, rank: int, seed: int) -> Tensor:
    """A (d, rank) orthonormal basis drawn at random (QR of a Gaussian matrix)."""
    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, rank, generator=gen))
    return q


@dataclass(frozen=True)
class DasScore:
    """IIA of the learnt subspace and of its controls, on held-out pairs."""

    iia: float
    random_subspace: float
    random_labels: float
    full_swap: float
    n_train: int
    n_test: int

    def to_dict(self) -> dict[str, object]:
        return {"iia": self.iia, "controls": {"random_subspace": self.random_subspace,
                                              "random_labels": self.random_labels},
                "full_swap": self.full_swap, "pairs": {"train": self.n_train, "test": self.n_test}}


def das_score(forward: Forward, train: Pairs, test: Pairs, rank: int, *, steps: int = STEPS, lr: float = LR,
              seed: int = 0, controls: bool = True,
              cancelled: Callable[[], bool] | None = None) -> tuple[DasScore, Tensor]:
    """(the score, the learnt basis): DAS fitted on ``train``, scored on ``test`` with its controls
    (``controls`` False: only the learnt subspace, the controls NaN: the history's cells)."""
    basis = fit_basis(forward, train, rank, steps=steps, lr=lr, seed=seed, cancelled=cancelled)
    nan = float("nan")
    score = iia(forward, test, basis)
    if not controls:
        return DasScore(score, nan, nan, nan, len(train), len(test)), basis
    d = train.source.size(1)
    classes = torch.unique(torch.cat([train.target, test.target]))
    arbitrary_train = train.with_targets(arbitrary_targets(train, classes, seed))
    arbitrary_test = test.with_targets(arbitrary_targets(test, classes, seed))
    arbitrary_fit = fit_basis(forward, arbitrary_train, rank, steps=steps, lr=lr, seed=seed, cancelled=cancelled)
    random = random_basis(d, rank, seed + 2)
    return DasScore(
        iia=score,
        random_subspace=iia(forward, test, basis, edit=lambda x, p, s: placebo(x, p, s, basis.to(x.device),
                                                                               random.to(x.device))),
        random_labels=iia(forward, arbitrary_test, arbitrary_fit),
        full_swap=iia(forward, test, torch.eye(d)),
        n_train=len(train),
        n_test=len(test),
    ), basis


def arbitrary_targets(pairs: Pairs, classes: Tensor, seed: int) -> Tensor:
    """A fixed pseudo-random class (one of ``classes``) per source key: equal keys, equal classes."""
    keys = pairs.key if pairs.key is not None else torch.arange(len(pairs))

    def draw(key: int) -> int:
        digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % len(classes)

    return classes[torch.tensor([draw(int(k)) for k in keys], dtype=torch.long)]
