"""The known circuit on the trained induction run (tests/data/induction-run: 2 attention-only
layers of 4 heads): the layer-0 previous-token heads' edges into the layer-1 induction heads'
key inputs are among the top edges, and the faithfulness curve rises to the whole model.
Heads are found with the head atlas, never by index; trained numbers are compared by order
and with margins, never exactly.

Measured on this run's ready pair (EAP-IG, 5 steps; 81 edges): the top 5% (4 edges) recover
0.14 of the logit difference, 10% 0.31, 20% 0.79, 50% 0.90 (CPR 0.80). That pair changes the
whole first copy while the answer and the wrong token sit at one position, so it asks what
the induction heads copy: its key edges from a0.h3 work against the answer (a0.h3->a1.h1<k>
-1.29) and the best one that carries it ranks 21st. The induction-key pairs move only where
the heads look; over 8 of them (the check's scores) the top 7 edges are the path's ends (the
layer-0 heads reading the moved token, the induction heads' outputs) and a0.h0->a1.h3<k> is
8th (+2.93; exact patching: 7th after 6 ends). An edge into a key cannot outrank its own
path's ends, which carry all it does. Four edges cannot carry the answer on this run: its
induction is spread over all four layer-1 heads, fed by four weak previous-token heads (atlas
scores 0.20-0.25), and a path needs its key edge as well as both ends.
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


def test_the_known_circuit_check_finds_it_right_after_its_paths_ends() -> None:
    from tui_lab.core.analysis.edges.known_circuit import known_circuit

    lab = open_model(DATA / "induction-run")
    check = known_circuit(lab)
    assert check.found and check.top == 16 and check.n_edges == 81 and check.score > 0
    assert check.edge is not None and check.edge.endswith("<k>")
    assert check.edge.split("->")[0] in check.previous and check.edge.split("->")[1][:-3] in check.induction
    assert check.ends_above == check.rank - 1 >= 4  # only its path's ends rank above it
    assert "known circuit found" in check.line() and "8 induction-key pairs" in check.line()


def test_an_edge_working_against_the_answer_is_not_the_circuit(
        induction: tuple[Any, EdgeScores, Faithfulness]) -> None:
    """Every edge's score made negative (its size kept): each key edge works against the answer,
    so none is the circuit, however high it ranks."""
    import dataclasses

    from tui_lab.core.analysis.edges.known_circuit import induction_check

    lab, scores, _ = induction
    check = induction_check(lab, dataclasses.replace(scores, scores=-scores.scores.abs()))
    assert check.edge is None and not check.found and "NOT found" in check.line()


def test_the_key_pair_moves_only_where_the_heads_look() -> None:
    """Two positions change; every token an induction head could copy stays where it was, and the
    model answers the clean run's block and the moved copy's successor."""
    from tui_lab.core.analysis.patching.patch_pair import induction_key_pair

    lab = open_model(DATA / "induction-run")
    for seed in range(4):
        pair = induction_key_pair(lab, seed=seed)  # a block of 8, its first 3 again
        assert [i for i, (a, b) in enumerate(zip(pair.clean, pair.corrupt, strict=True)) if a != b] == [2, 4]
        assert pair.corrupt[4] == pair.clean[2] == pair.clean[-1]  # the matching token, moved on by two
        assert pair.clean[3] == pair.corrupt[3] == pair.answer and pair.clean[5] == pair.corrupt[5] == pair.wrong
        scores = edge_attribution(lab, pair, "eap")
        assert scores.clean > 5 and scores.corrupt < -5  # logit differences: answer, then the wrong token
