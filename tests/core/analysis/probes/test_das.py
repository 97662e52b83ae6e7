"""DAS on a hand-built model whose output reads one direction: the learnt subspace is that
direction and moves the output as the variable would; the random controls do not."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from tui_lab.core.analysis.probes.das import Pairs, das_score, interchange, random_basis

D = 32


def _model(seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Callable[[Tensor, Callable[[Tensor], Tensor]], Tensor]]:
    """(activations (N, 1, D), the variable (N,), its direction u, forward): the variable is written
    along u, the other directions are noise, and the output's logit for class 1 is 8 (x.u - 0.5)."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.nn.functional.normalize(torch.randn(D, generator=gen), dim=0)
    n = 300
    v = torch.randint(0, 2, (n,), generator=gen)
    noise = torch.randn(n, D, generator=gen)
    noise -= (noise @ u)[:, None] * u
    x = (noise + v[:, None] * u)[:, None, :]  # (N, T=1, D)

    def forward(rows: Tensor, edit: Callable[[Tensor], Tensor]) -> Tensor:
        h = edit(x[rows])  # (B, 1, D)
        score = 8.0 * (h @ u - 0.5)  # (B, 1)
        return torch.stack([torch.zeros_like(score), score], dim=-1)  # (B, 1, 2)

    return x, v, u, forward


def _pairs(x: Tensor, v: Tensor, seed: int) -> Pairs:
    """Base/source pairs whose variables differ: the counterfactual output is the source's value."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.randint(0, len(v), (400,), generator=gen)
    source = torch.randint(0, len(v), (400,), generator=gen)
    keep = v[base] != v[source]
    base, source = base[keep], source[keep]
    zeros = torch.zeros_like(base)
    return Pairs(base, zeros, zeros, x[source, 0], v[source], key=source)


def test_das_finds_the_planted_direction_and_the_controls_fail() -> None:
    x, v, u, forward = _model()
    train, test = _pairs(x, v, 1), _pairs(x, v, 2)
    score, basis = das_score(forward, train, test, rank=1, steps=150)
    assert score.iia >= 0.95
    assert abs(float(basis[:, 0] @ u)) >= 0.95  # the subspace is the planted direction
    assert score.random_subspace <= 0.2  # a random direction barely moves the readout
    assert score.random_labels <= 0.7  # shuffled targets: about chance for two classes
    assert score.full_swap == 1.0  # the whole activation carries the variable too
    assert score.n_train == len(train) and score.n_test == len(test)


def test_interchange_is_the_rotated_swap() -> None:
    """h' = h_base + (h_src - h_base) Q Q^T equals pyvene's form: rotate by R = [Q, Q_perp],
    take the first k rotated coordinates from the source and the rest from the base, rotate back."""
    gen = torch.Generator().manual_seed(4)
    k = 3
    full, _ = torch.linalg.qr(torch.randn(D, D, generator=gen))
    basis = full[:, :k]
    x = torch.randn(5, 4, D, generator=gen)
    source = torch.randn(5, D, generator=gen)
    position = torch.tensor([0, 3, 1, 2, 3])
    out = interchange(x, position, source, basis)
    for b in range(5):
        p = int(position[b])
        rotated_base, rotated_source = x[b, p] @ full, source[b] @ full
        want = torch.cat([rotated_source[:k], rotated_base[k:]]) @ full.T
        torch.testing.assert_close(out[b, p], want)
        others = [t for t in range(4) if t != p]
        torch.testing.assert_close(out[b, others], x[b, others])  # only the intervened position changes


def test_random_basis_is_orthonormal() -> None:
    q = random_basis(D, 3, seed=0)
    torch.testing.assert_close(q.T @ q, torch.eye(3))
