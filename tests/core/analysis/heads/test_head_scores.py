"""Head atlas scores on hand-built attention patterns (worked by hand, no trained model).

The task-probe scores (diagonal, previous, first, alignment) on 4-token
patterns; the repeat-probe scores (previous, first, duplicate, induction) on
one row ``a b c d a b c d`` (L = 4), where each hand-made head does exactly one
thing and the others' scores are worked out by hand.
"""

from __future__ import annotations

import math

import pytest
import torch

from tui_lab.core.analysis.heads.atlas import NO_PATTERN
from tui_lab.core.analysis.heads.head_probes import REPEAT, RepeatProbe, alignment_sets, make_probe
from tui_lab.core.analysis.heads.head_scores import (
    entropy,
    head_scores,
    mass_on,
    repeat_patterns,
    task_patterns,
)
from tui_lab.core.analysis.heads.head_targets import (
    allowed_keys,
    duplicate_targets,
    first_targets,
    induction_targets,
    offset_targets,
)
from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.tasks import make_task

T = 4
ALL = torch.ones(1, T, dtype=torch.bool)


def _w(matrix: list[list[float]]) -> torch.Tensor:
    return torch.tensor(matrix).view(1, 1, len(matrix), len(matrix[0]))  # (B=1, H=1, Tq, Tk)


DIAGONAL = _w([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
PREVIOUS = _w([[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]])
UNIFORM_CAUSAL = _w([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4])


def test_pure_diagonal_scores_one_diagonal_zero_previous():
    assert float(mass_on(DIAGONAL, offset_targets(1, T, T, 0), ALL)[0]) == 1.0
    assert float(mass_on(DIAGONAL, offset_targets(1, T, T, 1), ALL)[0]) == 0.0
    # first: only query 0 looks at key 0, one of four queries
    assert float(mass_on(DIAGONAL, first_targets(1, T, T), ALL)[0]) == 0.25


def test_previous_token_pattern():
    # queries 1..3 have a previous token and put all their weight on it
    assert float(mass_on(PREVIOUS, offset_targets(1, T, T, 1), ALL)[0]) == 1.0
    # only query 0 (which has no previous token) looks at itself
    assert float(mass_on(PREVIOUS, offset_targets(1, T, T, 0), ALL)[0]) == 0.25


def test_uniform_causal_first_token_and_entropy():
    # row q spreads 1/(q+1) over q+1 keys: first = mean(1, 1/2, 1/3, 1/4) = 25/48
    assert float(mass_on(UNIFORM_CAUSAL, first_targets(1, T, T), ALL)[0]) == pytest.approx(25 / 48)
    # entropy of row q is ln(q+1): mean = (0 + ln2 + ln3 + ln4) / 4 = ln(24) / 4
    assert float(entropy(UNIFORM_CAUSAL, ALL)[0]) == pytest.approx(math.log(24) / 4, abs=1e-5)


def test_queries_without_a_target_or_masked_do_not_count():
    only_last = torch.tensor([[False, False, False, True]])
    assert float(mass_on(UNIFORM_CAUSAL, first_targets(1, T, T), only_last)[0]) == 0.25
    none = torch.zeros(1, T, dtype=torch.bool)
    assert float(mass_on(DIAGONAL, first_targets(1, T, T), none)[0]) == 0.0


def scores_for(weights: torch.Tensor, name: str, probe) -> list:  # type: ignore[no-untyped-def]
    found, queries = task_patterns(weights, name, probe)
    return head_scores(name, found, entropy(weights, queries))


def test_induction_targets_and_a_perfect_induction_head():
    # prefix of 3 then its repeat: tokens a b c a b c. Query 3 (second a) targets
    # key 1 (the b after the first a); query 4 (second b) targets key 2 (c); query 5
    # (second c) key 3: the a that followed the first c.
    targets = induction_targets(torch.tensor([3]), 6)
    assert targets[0].nonzero().tolist() == [[3, 1], [4, 2], [5, 3]]
    assert duplicate_targets(torch.tensor([3]), 6)[0].nonzero().tolist() == [[3, 0], [4, 1], [5, 2]]
    w = torch.zeros(1, 1, 6, 6)
    w[0, 0, :, 0] = 1.0
    w[0, 0, 3, :] = torch.tensor([0, 1.0, 0, 0, 0, 0])
    w[0, 0, 4, :] = torch.tensor([0, 0, 1.0, 0, 0, 0])
    w[0, 0, 5, :] = torch.tensor([0, 0, 0, 1.0, 0, 0])
    every = torch.ones(1, 6, dtype=torch.bool)
    assert float(mass_on(w, targets, every)[0]) == 1.0
    prev = torch.zeros(1, 1, 6, 6)
    prev[0, 0, 0, 0] = 1.0
    for q in range(1, 6):
        prev[0, 0, q, q - 1] = 1.0
    assert float(mass_on(prev, targets, every)[0]) == 0.0


def test_alignment_sets_worked_by_hand():
    assert alignment_sets("copy", "123", "123") == [[0], [1], [2]]
    assert alignment_sets("reverse", "123", "321") == [[2], [1], [0]]
    assert alignment_sets("sort", "3141", "1134") == [[1, 3], [1, 3], [0], [2]]
    # 57+8 = 65: the 6 (tens) comes from the 5 only; the 5 (units) from the 7 and the 8
    assert alignment_sets("addition", "57+8", "65") == [[0], [1, 3]]
    # 99+1 = 100: the leading 1 is a carry with no column of its own
    assert alignment_sets("addition", "99+1", "100") == [[], [0], [1, 3]]


def _cross_pattern(probe, reverse: bool) -> torch.Tensor:
    """(B, 1, T, S) cross attention: output i to input i (or n-1-i) for each probe row."""
    src, tgt = probe.inputs
    w = torch.zeros(src.size(0), 1, tgt.size(1), src.size(1))
    for b in range(src.size(0)):
        n = int(probe.src_valid[b].sum())
        for i in range(tgt.size(1)):
            w[b, 0, i, (n - 1 - i) if reverse and i < n else min(i, n - 1)] = 1.0
    return w


def test_copy_probe_diagonal_cross_attention_aligns_fully():
    task = make_task(TaskConfig(name="copy", min_len=3, max_len=6))
    probe = make_probe(task, "encoder-decoder", n=8, seed=0)
    [head] = scores_for(_cross_pattern(probe, reverse=False), "decoder.0.cross", probe)
    assert head.scores["alignment"] == 1.0 and head.best == "alignment"
    assert "diagonal" not in head.scores  # self-attention patterns only
    [rev] = scores_for(_cross_pattern(probe, reverse=True), "decoder.0.cross", probe)
    assert rev.scores["alignment"] < 0.5  # reversed attention does not fit copy


def test_decoder_self_attention_ignores_its_first_query():
    task = make_task(TaskConfig(name="copy", min_len=3, max_len=3))
    probe = make_probe(task, "decoder-only", n=2, seed=0)
    (tokens,) = probe.inputs
    t = tokens.size(1)  # 3 + SEP + 3 = 7
    w = torch.zeros(2, 1, t, t)
    w[:, 0, :, 0] = 1.0  # every query on the first token: a sink
    [head] = scores_for(w, "decoder.0.self", probe)
    assert head.best == "first" and head.scores["first"] == 1.0
    assert head.scores["diagonal"] == 0.0  # query 0's trivial self-attention is left out


L = 4
ROW = RepeatProbe(torch.tensor([[7, 8, 9, 10, 7, 8, 9, 10]]), torch.tensor([L]), REPEAT, "a b c d a b c d")


def _head(keys: dict[int, int]) -> torch.Tensor:
    """(1, 1, 2L, 2L): query q puts all its weight on key ``keys[q]`` (on itself when not given)."""
    w = torch.zeros(1, 1, 2 * L, 2 * L)
    for q in range(2 * L):
        w[0, 0, q, keys.get(q, q)] = 1.0
    return w


def _repeat_scores(w: torch.Tensor):  # type: ignore[no-untyped-def]
    [head] = head_scores("decoder.0.self", repeat_patterns(w, ROW, every=True), torch.zeros(1))
    return head


# Queries 1..7 are scored for previous and first; 4..7 (the repeat) for duplicate and induction.
PREVIOUS_HEAD = _head({q: q - 1 for q in range(1, 2 * L)})
DUPLICATE_HEAD = _head({q: q - L for q in range(L, 2 * L)})
INDUCTION_HEAD = _head({q: q - L + 1 for q in range(L, 2 * L)})
SINK_HEAD = _head({q: 0 for q in range(2 * L)})


def test_an_exact_previous_token_head():
    head = _repeat_scores(PREVIOUS_HEAD)
    assert head.scores["previous"] == 1.0
    assert head.scores["induction"] == 0.0 and head.scores["duplicate"] == 0.0
    assert head.scores["first"] == pytest.approx(1 / 7, abs=1e-4)  # only query 1's previous is key 0
    assert head.pattern == "previous" and head.shown == "previous"
    assert set(head.probes.values()) == {REPEAT}


def test_an_exact_induction_head():
    head = _repeat_scores(INDUCTION_HEAD)
    assert head.scores["induction"] == 1.0
    assert head.scores["previous"] == 0.0 and head.scores["duplicate"] == 0.0 and head.scores["first"] == 0.0
    assert head.pattern == "induction"


def test_an_exact_duplicate_token_head():
    head = _repeat_scores(DUPLICATE_HEAD)
    assert head.scores["duplicate"] == 1.0
    assert head.scores["induction"] == 0.0 and head.scores["previous"] == 0.0
    assert head.scores["first"] == pytest.approx(1 / 7, abs=1e-4)  # query 4 (second a) looks at key 0
    assert head.pattern == "duplicate"


def test_an_attention_sink():
    head = _repeat_scores(SINK_HEAD)
    assert head.scores["first"] == 1.0  # query 0 (which can only see itself) is not scored
    assert head.scores["previous"] == pytest.approx(1 / 7, abs=1e-4)  # query 1's previous is key 0
    assert head.scores["duplicate"] == pytest.approx(1 / 4, abs=1e-4)  # query 4's earlier copy is key 0
    assert head.scores["induction"] == 0.0
    assert head.pattern == "first"


def test_a_uniform_head_scores_chance_and_gets_no_label():
    w = torch.ones(2 * L, 2 * L).tril()
    w = (w / w.sum(-1, keepdim=True)).view(1, 1, 2 * L, 2 * L)
    head = _repeat_scores(w)
    # previous: mean over q = 1..7 of 1/(q+1) = (H(8) - 1) / 7; induction: q = 4..7
    h8 = sum(1 / k for k in range(1, 9))
    assert head.scores["previous"] == pytest.approx((h8 - 1) / 7, abs=1e-4)
    assert head.scores["induction"] == pytest.approx((1 / 5 + 1 / 6 + 1 / 7 + 1 / 8) / 4, abs=1e-4)
    for pattern, score in head.scores.items():
        assert head.chance[pattern] == pytest.approx(score, abs=1e-4)
    assert head.pattern is None and head.shown == NO_PATTERN
    # previous and first tie here (query q has 1/(q+1) on each): the nearest is still reported
    assert head.best in ("previous", "first") and head.best_score == head.scores[head.best]


def test_a_local_window_limits_the_keys_a_uniform_head_spreads_over():
    allowed = allowed_keys(True, 4, 4, None, window=2)  # each query sees itself and the key before
    assert allowed[0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    row = RepeatProbe(torch.tensor([[7, 8, 7, 8]]), torch.tensor([2]), REPEAT, "a b a b")
    uniform = (allowed.float() / allowed.float().sum(-1, keepdim=True))[:, None]  # (1, 1, 4, 4)
    found = repeat_patterns(uniform, row, every=True, window=2)
    assert found["previous"].chance == pytest.approx(0.5)  # half of each row's two keys
    assert found["duplicate"].chance == 0.0  # q - L = q - 2 lies outside a window of 2
    assert float(found["previous"].scores[0]) == pytest.approx(0.5)
