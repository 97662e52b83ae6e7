"""The known circuit on the trained induction run (tests/data/induction-run: 2 attention-only
layers of 4 heads): the layer-0 previous-token head's edge into a layer-1 induction head's
key input is among the top edges, and the faithfulness curve rises to the whole model.
Heads are found with the head atlas, never by index; trained numbers are compared by order
and with margins, never exactly.

Measured on this run's ready pair (EAP-IG, 5 steps; 81 edges): the previous-token head a0.h3
into induction head a1.h1's key ranks 11th; the top 5% (4 edges) recover 0.14 of the logit
difference, 10% 0.31, 20% 0.79, 50% 0.90 (CPR 0.80). The issue asked 0.8 at 5%: this
run spreads induction over all four layer-1 heads and four weak previous-token heads
(atlas scores 0.20-0.25), so four edges cannot carry it: a head's path needs its key, query
and value inputs and its output. Scores averaged over 16 induction pairs (seeds 0-15) put
the four heads' outputs to the logits on top, and that top 5% recovers 0.06 on average
(each pair's own top 5%: 0.26; CPR 0.69-0.73).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.helpers import DATA
from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
from tui_lab.core.analysis.edges.edge_scores import EdgeScores
from tui_lab.core.analysis.edges.faithfulness import Faithfulness, faithfulness
from tui_lab.core.analysis.heads.head_scores import atlas_for
from tui_lab.core.analysis.patching.patch_pair import ready_pair
from tui_lab.core.opening.model_in_hand import open_model


@pytest.fixture(scope="module")
def induction() -> tuple[Any, EdgeScores, Faithfulness]:
    lab = open_model(DATA / "induction-run")
    pair = ready_pair(lab)
    scores = edge_attribution(lab, pair, "eap-ig", ig_steps=5)
    return lab, scores, faithfulness(lab, pair, scores)


def test_previous_token_head_feeds_an_induction_heads_key(induction: tuple[Any, EdgeScores, Faithfulness]) -> None:
    lab, scores, _ = induction
    atlas = atlas_for(lab.model, lab.task, "decoder-only")
    layer0 = [h for h in atlas.heads if h.name == "decoder.0.self"]
    previous = max(layer0, key=lambda h: h.scores.get("previous", 0.0)).head
    inducers = {h.head for h in atlas.heads if h.name == "decoder.1.self" and h.best == "induction"}
    assert inducers
    wanted = {f"a0.h{previous}->a1.h{i}<k>" for i in inducers}
    top = [e.name for e in scores.top(round(0.2 * scores.graph.n_edges))]  # the top 20%: 16 of 81
    assert wanted & set(top), top


def test_the_curve_rises_to_the_whole_model(induction: tuple[Any, EdgeScores, Faithfulness]) -> None:
    _, _, f = induction
    assert f.at(100.0) == pytest.approx(1.0, abs=1e-4)
    assert f.at(50.0) > 0.6 and f.at(20.0) > f.at(5.0)
    assert 0.6 < f.cpr < 1.0 and f.cmd == pytest.approx(1 - f.cpr, abs=0.05)


def test_the_known_circuit_check_finds_it(induction: tuple[Any, EdgeScores, Faithfulness]) -> None:
    from tui_lab.core.analysis.edges.known_circuit import induction_check

    lab, scores, _ = induction
    check = induction_check(lab, scores)
    assert check.found and check.top == 16 and check.n_edges == 81
    assert check.edge.startswith(check.previous + "->a1.") and check.edge.endswith("<k>")
    assert "known circuit found" in check.line()
