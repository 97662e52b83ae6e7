"""The component graph: EAP-IG's and MIB's names, the edges that exist, one-line refusals."""

from __future__ import annotations

import pytest

from tui_lab.core.analysis.edges.component_graph import ComponentGraph, EdgeError


def test_names_and_counts_of_two_layers_of_two_heads_with_mlps() -> None:
    g = ComponentGraph(2, 2, mlp=True)
    assert g.writer_names == ["input", "a0.h0", "a0.h1", "m0", "a1.h0", "a1.h1", "m1"]
    assert g.reader_names[:7] == ["a0.h0<q>", "a0.h1<q>", "a0.h0<k>", "a0.h1<k>", "a0.h0<v>", "a0.h1<v>", "m0"]
    assert g.reader_names[-1] == "logits" and g.n_readers == 15
    # layer 0's heads read input (6); m0 reads input and a0's heads (3); layer 1's heads read
    # 4 writers (24); m1 reads 6; the logits read all 7
    assert g.n_edges == 6 + 3 + 24 + 6 + 7
    assert g.edge_name(*g.edge_index("a0.h1->a1.h0<k>")) == "a0.h1->a1.h0<k>"
    assert g.edge_index("m1->logits") == (6, 14)


def test_parallel_residual_and_attention_only() -> None:
    parallel = ComponentGraph(1, 2, mlp=True, parallel=True)
    assert not bool(parallel.allowed[parallel.head_writer(0, 0), parallel.mlp_reader(0)])
    attention_only = ComponentGraph(2, 4, mlp=False)
    assert attention_only.n_edges == 12 + 5 * 12 + 9  # the induction run's 81
    with pytest.raises(EdgeError, match="no reader 'm0'"):
        attention_only.reader_index("m0")


@pytest.mark.parametrize(("name", "words"), [
    ("a1.h0->a0.h1<q>", "writes after"),
    ("a0.h7->a1.h0<k>", "no head a0.h7: the model has 2 layers of 2 heads"),
    ("a0.h0->a9.h0<k>", "no head a9.h0"),
    ("a0.h0", "writer->reader"),
    ("x->logits", "no writer 'x'"),
])
def test_bad_edges_are_refused_in_one_line(name: str, words: str) -> None:
    with pytest.raises(EdgeError, match=words) as caught:
        ComponentGraph(2, 2).edge_index(name)
    assert "\n" not in str(caught.value)
