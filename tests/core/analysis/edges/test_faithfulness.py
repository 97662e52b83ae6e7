"""Faithfulness: a top-k% circuit's recovered fraction equals the tiny model run by hand with
every other edge reading its writer's corrupted value; CPR and CMD are the trapezoids
worked out by hand; a mean over the corrupted input alone is the corrupted ablation."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.core.analysis.edges import reference as R
from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
from tui_lab.core.analysis.edges.faithfulness import areas, faithfulness, kept_count
from tui_lab.core.analysis.patching.patch_pair import PatchPair


def test_a_circuit_is_the_model_with_the_other_edges_corrupted(tiny: Any, pair: PatchPair) -> None:
    scores = edge_attribution(tiny, pair, "eap")
    result = faithfulness(tiny, pair, scores, percents=(10.0, 50.0, 100.0))
    g = scores.graph
    with torch.no_grad():
        clean = R.forward(tiny.model, pair.clean, pair.answer, pair.wrong)
        corrupt = R.forward(tiny.model, pair.corrupt, pair.answer, pair.wrong)
    ranked = sorted(g.allowed.nonzero().tolist(), key=lambda e: -abs(float(scores.scores[e[0], e[1]])))
    for percent, got in zip(result.percents, result.recovered, strict=True):
        kept = {tuple(e) for e in ranked[: kept_count(percent, g.n_edges)]}
        outside = {(g.writer_names[w], g.reader_names[r]): corrupt.writers[g.writer_names[w]]
                   for w, r in g.allowed.nonzero().tolist() if (w, r) not in kept}
        with torch.no_grad():
            run = R.forward(tiny.model, pair.clean, pair.answer, pair.wrong, replace=outside)
        want = float((run.metric - corrupt.metric) / (clean.metric - corrupt.metric))
        assert got == pytest.approx(want, abs=1e-4), percent
    assert result.at(100.0) == pytest.approx(1.0, abs=1e-5)
    assert result.kept == [kept_count(p, g.n_edges) for p in (10.0, 50.0, 100.0)] == [5, 23, 46]


def test_cpr_and_cmd_are_the_trapezoids() -> None:
    # f = 0 at 0, 0.5 at 0.5, 1 at 1: CPR = 0.125 + 0.375 = 0.5; CMD = 0.375 + 0.125 = 0.5
    assert areas([0.0, 0.5, 1.0], [0.0, 0.5, 1.0]) == pytest.approx((0.5, 0.5))
    # overshooting counts against CMD: f = 1.5 on [0.5, 1] adds |1 - 1.5|
    cpr, cmd = areas([0.0, 0.5, 1.0], [1.0, 1.5, 1.5])
    assert cpr == pytest.approx(0.625 + 0.75) and cmd == pytest.approx(0.125 + 0.25)


def test_a_mean_over_the_corrupted_input_is_the_corrupted_ablation(tiny: Any, pair: PatchPair) -> None:
    scores = edge_attribution(tiny, pair, "eap")
    plain = faithfulness(tiny, pair, scores, percents=(5.0, 20.0))
    mean = faithfulness(tiny, pair, scores, percents=(5.0, 20.0), mean_over=[pair.corrupt, pair.corrupt])
    assert mean.recovered == pytest.approx(plain.recovered, abs=1e-5)
    other = faithfulness(tiny, pair, scores, percents=(5.0, 20.0), mean_over=[pair.corrupt, pair.clean])
    assert other.recovered != pytest.approx(plain.recovered, abs=1e-3)


def test_refusals_are_one_line(tiny: Any, pair: PatchPair) -> None:
    from tui_lab.core.analysis.edges.component_graph import EdgeError

    scores = edge_attribution(tiny, pair, "eap")
    with pytest.raises(EdgeError, match="percents"):
        faithfulness(tiny, pair, scores, percents=(0.0,))
    with pytest.raises(EdgeError, match="length"):
        faithfulness(tiny, pair, scores, mean_over=[[1, 2]])


def test_a_mean_ablation_is_measured_from_its_empty_circuit(tiny: Any, pair: PatchPair) -> None:
    scores = edge_attribution(tiny, pair, "eap")
    g = scores.graph
    got = faithfulness(tiny, pair, scores, percents=(20.0,), mean_over=[pair.corrupt, pair.clean])
    with torch.no_grad():
        a = R.forward(tiny.model, pair.corrupt, pair.answer, pair.wrong)
        b = R.forward(tiny.model, pair.clean, pair.answer, pair.wrong)
        means = {n: (a.writers[n] + b.writers[n]) / 2 for n in a.writers}
        edges = g.allowed.nonzero().tolist()
        ranked = sorted(edges, key=lambda e: -abs(float(scores.scores[e[0], e[1]])))
        kept = {tuple(e) for e in ranked[: kept_count(20.0, g.n_edges)]}

        def run(keep: set[tuple[int, ...]]) -> float:
            outside = {(g.writer_names[w], g.reader_names[r]): means[g.writer_names[w]]
                       for w, r in edges if (w, r) not in keep}
            return float(R.forward(tiny.model, pair.clean, pair.answer, pair.wrong, replace=outside).metric)

        empty, circuit = run(set()), run(kept)
    assert got.empty == pytest.approx(empty, abs=1e-5)
    assert got.at(20.0) == pytest.approx((circuit - empty) / (float(b.metric) - empty), abs=1e-4)


def test_the_circuit_followed_over_training_is_the_smallest_that_recovers_the_share() -> None:
    from tui_lab.core.analysis.edges.faithfulness import Faithfulness

    f = Faithfulness([1.0, 5.0, 10.0, 20.0, 100.0], [0.0, 0.3, 0.79, 0.81, 1.0], [1, 4, 8, 16, 81],
                     0.7, 0.3, 2.0, -1.0, -1.0)
    assert f.smallest(0.8) == 20.0 and f.smallest(0.3) == 5.0 and f.smallest(1.01) == 100.0
