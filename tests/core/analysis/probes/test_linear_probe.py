"""Linear probes: perfect on a planted linear variable, chance on shuffled labels, the same
accuracy as an independent logistic regression, and the split never leaks an example."""

from __future__ import annotations

import torch

from tui_lab.core.analysis.probes.linear_probe import fit_logistic, probe_layers, score_probe, split
from tui_lab.core.analysis.probes.slot_activations import SlotData


def _planted(n: int = 600, d: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Activations whose label is the sign of one direction, with a margin of 2 either side."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=gen)
    u = torch.nn.functional.normalize(torch.randn(d, generator=gen), dim=0)
    noise = torch.randn(n, d, generator=gen)
    noise -= (noise @ u)[:, None] * u  # nothing along u but the label
    x = noise + (4.0 * y - 2.0)[:, None] * u
    return x, y, torch.arange(n)


def test_a_planted_linear_variable_is_read_perfectly_and_its_shuffle_is_not() -> None:
    x, y, example = _planted()
    score = score_probe(x, y, example, seed=0)
    assert score is not None
    assert score.accuracy == 1.0
    assert abs(score.control - 0.5) < 0.12  # shuffled labels: chance for two balanced classes
    assert score.n_train + score.n_test == len(y) and score.n_classes == 2
    # chance is the held-out share of the commonest label
    test = split(example, 0)
    assert abs(score.chance - max(int((y[test] == k).sum()) for k in (0, 1)) / int(test.sum())) < 1e-12


def test_the_fit_agrees_with_plain_gradient_descent() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(400, 6, generator=gen)
    y = (x @ torch.tensor([1.0, -2.0, 0.5, 0.0, 0.0, 1.0]) + 0.7 * torch.randn(400, generator=gen) > 0).long()
    probe = fit_logistic(x[:300], y[:300], 2)
    # an independent fit: raw features, a bias, full-batch gradient descent on the same loss
    w = torch.zeros(6, requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.5)
    for _ in range(2000):
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(x[:300] @ w + b, y[:300].float()).backward()
        opt.step()
    ours = probe(x[300:]).argmax(-1)
    theirs = ((x[300:] @ w + b) > 0).long()
    assert float((ours == theirs).float().mean()) >= 0.97


def test_the_split_keeps_every_slot_of_an_example_on_one_side() -> None:
    example = torch.arange(50).repeat_interleave(3)
    test = split(example, 1)
    for e in range(50):
        assert test[example == e].all() or (~test[example == e]).all()
    assert int(test.sum()) == 30  # a fifth of 50 examples, 3 slots each


def test_probe_layers_finds_the_layer_that_holds_the_variable() -> None:
    x, y, example = _planted(n=400)
    gen = torch.Generator().manual_seed(9)
    noise = torch.randn(x.shape, generator=gen)
    data = SlotData("blocks", ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post"], [], [],
                    ["column 1" if i % 2 else "column 2" for i in range(len(y))], example, example, y,
                    resid={"blocks.0.hook_resid_pre": noise, "blocks.0.hook_resid_post": x})
    table = probe_layers(data)
    assert table.classes == ["column 2", "column 1", "all"]
    pre, post = table.scores
    assert all(s is not None and s.accuracy == 1.0 for s in post)
    assert all(s is not None and s.accuracy < 0.75 for s in pre)  # noise: about chance
    assert table.best() is not None and table.best()[0] == 1  # type: ignore[index]


def test_one_value_only_is_no_probe() -> None:
    x = torch.randn(40, 4)
    assert score_probe(x, torch.ones(40, dtype=torch.long), torch.arange(40)) is None
