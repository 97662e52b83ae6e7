"""QK tracing and the heads that carry an edge, checked against the model's own numbers.

- Completeness: the terms of a head's score sum to the score the model computed, read two
  ways here (``attn.hook_attn_scores``, and q . k from ``hook_q``/``hook_k`` times the
  scale), on small random models: LayerNorm with skip transcoders, a parallel-residual
  RMSNorm model with grouped keys, GPT-2 opened from files, the trained induction run.
- The bilinear split by hand on a one-layer model: the token and position terms written
  out from the weights and the LayerNorm's definition.
- Carrying shares: they add up to the edge (between positions all of it is attention's),
  the edge is the graph's, and one share is recomputed by a FORWARD replay of the frozen
  model (``conftest.Reference``) with the patterns the definition names.
- Hostile input, one line each; and the induction run's story (a trained run, orders and
  margins only).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from tests.core.analysis.circuits.conftest import PROMPT, Off, make_reference, random_transcoders
from tests.core.sae.transcoder_fixtures import random_set, tiny_handle
from tui_lab.core.analysis.circuits.attribution import attribute
from tui_lab.core.analysis.circuits.edge_heads import earlier_sources, edge_carriers
from tui_lab.core.analysis.circuits.qk_tracing import QKError, qk_trace
from tui_lab.core.errors import LabError
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.transcoder import TranscoderSet

RUN = Path(__file__).resolve().parents[3] / "data" / "induction-mlp-run"
TINY_IDS = [3, 7, 5, 9, 3, 7, 5, 11, 3, 7]


def _model_scores(model: ModelInHand, ids: list[int], layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the hooked scores (T, T), q . k * scale from hook_q and hook_k (T, T)) of one head."""
    p = f"blocks.{layer}.attn."
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([ids]), [p + "hook_attn_scores", p + "hook_q", p + "hook_k"])
    attn = model.model.decoder.layers[layer].self_attn
    kv = head // (attn.n_heads // attn.n_kv_heads)
    q, k = cache[p + "hook_q"][0, :, head].double(), cache[p + "hook_k"][0, :, kv].double()
    scale = attn.score_scale if attn.score_scale is not None else 1 / math.sqrt(attn.d_head)
    return cache[p + "hook_attn_scores"][0, head].double(), q @ k.T * scale


def _complete(model: ModelInHand, tset: TranscoderSet, ids: list[int], layer: int, head: int, q: int, k: int,
              hops: int = 1) -> None:
    traced = qk_trace(model, ids, tset, layer, head, q, k, hops)
    hooked, recomputed = _model_scores(model, ids, layer, head)
    tol = 1e-5 * max(1.0, abs(float(hooked[q, k])))
    assert traced.score == pytest.approx(float(hooked[q, k]), abs=tol)  # another forward: float32 rounding may differ by CPU
    assert traced.total == pytest.approx(float(hooked[q, k]), abs=tol)
    assert traced.total == pytest.approx(float(recomputed[q, k]), abs=tol)
    assert float(traced.q_marginals().sum()) == pytest.approx(traced.total, abs=tol)
    assert float(traced.k_marginals().sum()) == pytest.approx(traced.total, abs=tol)
    assert traced.terms.shape == (len(traced.q_parts), len(traced.k_parts))


@pytest.mark.parametrize(("keys", "reads"), [
    ({}, "ln2.hook_normalized"),
    ({}, "hook_resid_mid"),  # transcoders reading the stream itself: no norm before the skip
    ({"parallel_residual": True, "norm_kind": "rmsnorm", "n_kv_heads": 1}, "ln2.hook_normalized"),
])
def test_terms_sum_to_the_models_score(keys: dict[str, object], reads: str) -> None:
    model = tiny_handle(d_model=16, layers=3, **keys)
    tset = dataclasses.replace(random_set(16, 24, 3, "relu", skip=True, seed=4), feature_input_hook=reads)
    for tc in tset:  # MLP-sized outputs, so the stream does not blow up
        with torch.no_grad():
            tc.W_dec.mul_(0.2)
            tc.W_skip.mul_(0.2)  # type: ignore[union-attr]
    for layer, head, q, k in ((2, 1, 9, 6), (2, 0, 9, 0), (1, 1, 7, 7), (0, 0, 5, 2), (2, 1, 4, 1)):
        _complete(model, tset, TINY_IDS, layer, head, q, k)
    for hops in (0, 2):  # earlier heads left whole; traced back two moves (layer 0 through layer 1)
        _complete(model, tset, TINY_IDS, 2, 1, 9, 6, hops)
    two = qk_trace(model, TINY_IDS, tset, 2, 1, 9, 6, hops=2)
    assert not any(p.kind == "head" for p in two.k_parts)  # nothing left whole
    assert any(len(p.route) == 2 and p.route[0][0] == 0 and p.route[1][0] == 1 for p in two.k_parts)
    whole = qk_trace(model, TINY_IDS, tset, 2, 1, 9, 6, hops=0)
    assert {p.label for p in whole.k_parts if p.kind == "head"} >= {"L0.H0@6", "L1.H1@6"}


def test_terms_sum_to_the_score_on_gpt2_from_files(gpt2) -> None:  # type: ignore[no-untyped-def]
    _, model, tset = gpt2
    n_layers = len(model.model.decoder.layers)
    _complete(model, tset, PROMPT, n_layers - 1, 1, len(PROMPT) - 1, 3)
    _complete(model, tset, PROMPT, 1, 0, 6, 2)


def test_terms_sum_to_the_score_on_the_trained_run() -> None:
    model = open_model(RUN)
    tset = random_transcoders(model)
    ids = model.to_tokens("qwertyuqwerty")[0].tolist()
    _complete(model, tset, ids, 1, 3, 12, 6)


def test_the_bilinear_split_by_hand_on_one_layer() -> None:
    """One layer: each side is token + position + the constant; every term written out."""
    model = tiny_handle(d_model=8, layers=1, seed=3)
    tset = random_set(8, 12, 1, "relu", seed=1)
    ids = [4, 9, 6, 4, 9]
    traced = qk_trace(model, ids, tset, 0, 1, 4, 1)
    decoder = model.model.decoder
    attn, ln = decoder.layers[0].self_attn, decoder.layers[0].norm1
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([ids]), ["hook_embed", "blocks.0.hook_resid_pre"])
    embed, resid = cache["hook_embed"][0].double(), cache["blocks.0.hook_resid_pre"][0].double()
    w = {n: getattr(attn, n).weight.detach().double()[8 // 2:] for n in ("w_q", "w_k")}  # head 1 of 2
    b = {n: getattr(attn, n).bias.detach().double()[8 // 2:] for n in ("w_q", "w_k")}
    gain, shift = ln.weight.detach().double(), ln.bias.detach().double()

    def side(pos: int, name: str) -> dict[str, torch.Tensor]:
        std = torch.sqrt(resid[pos].var(unbiased=False) + ln.eps)
        centred = {"token": embed[pos], "position": resid[pos] - embed[pos]}
        out = {kind: w[name] @ ((v - v.mean()) / std * gain) for kind, v in centred.items()}
        out["bias"] = w[name] @ shift + b[name]
        return out

    q, k = side(4, "w_q"), side(1, "w_k")
    assert [p.kind for p in traced.q_parts] == ["token", "position", "bias"]
    assert [p.kind for p in traced.k_parts] == ["token", "position", "bias"]
    for i, qk in enumerate(("token", "position", "bias")):
        for j, kk in enumerate(("token", "position", "bias")):
            assert float(traced.terms[i, j]) == pytest.approx(float(q[qk] @ k[kk]) / 2.0, abs=1e-9)  # 1/sqrt(4)
    assert traced.q_parts[0].label == f"tok {model.task.vocab.label(ids[4])!r}@4"
    assert traced.constant == pytest.approx(float(q["bias"] @ k["bias"]) / 2.0, abs=1e-9)


def test_known_weights_give_the_terms_worked_by_hand() -> None:
    """d_model 4, two heads of 2, no embedding scale; head 1's W_Q picks coordinates 0 and 2,
    W_K 0 and 1; b_Q (0.5, 0), b_K (0, 1); the norm's gain 1, bias (0.1, 0, 0, 0).
    Query: token (2, 0, -2, 0) at position 2 (no position vector): sigma sqrt 2, so q's
    token part is (2, -2) / sqrt 2 and its constant (0.6, 0). Key: token (1, -1, 1, -1)
    plus position (.5, .5, -.5, -.5) at position 1: sigma sqrt 1.25; k's token part
    (1, -1) / sqrt 1.25, position part (.5, .5) / sqrt 1.25, constant (0.1, 1). Each term
    is q_part . k_part / sqrt 2 (rows: token, position, constant; columns likewise)."""
    model = tiny_handle(d_model=4, layers=1, scale_embeddings=False)
    m = model.model
    attn, ln = m.decoder.layers[0].self_attn, m.decoder.layers[0].norm1
    with torch.no_grad():
        m.tgt_embed.weight.zero_()
        m.tgt_embed.weight[4] = torch.tensor([1.0, -1.0, 1.0, -1.0])
        m.tgt_embed.weight[9] = torch.tensor([2.0, 0.0, -2.0, 0.0])
        m.pos.weight.zero_()
        m.pos.weight[1] = torch.tensor([0.5, 0.5, -0.5, -0.5])
        ln.weight.fill_(1.0)
        ln.bias.copy_(torch.tensor([0.1, 0.0, 0.0, 0.0]))
        attn.w_q.weight[2:] = torch.tensor([[1.0, 0, 0, 0], [0, 0, 1.0, 0]])
        attn.w_q.bias[2:] = torch.tensor([0.5, 0.0])
        attn.w_k.weight[2:] = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
        attn.w_k.bias[2:] = torch.tensor([0.0, 1.0])
    traced = qk_trace(model, [9, 4, 9], random_set(4, 6, 1), 0, 1, 2, 1)
    hand = [[1.78885, 0.0, -0.9], [0.0, 0.0, 0.0], [0.37947, 0.18974, 0.04243]]
    assert traced.terms.tolist() == [pytest.approx(row, abs=1e-4) for row in hand]
    assert traced.score == pytest.approx(sum(map(sum, hand)), abs=1e-4)
    assert traced.constant == pytest.approx(0.04243, abs=1e-4)


@pytest.mark.parametrize(("layer", "head", "q", "k", "says"), [
    (2, 0, 5, 1, "layer 2 out of range"),
    (0, 2, 5, 1, "head 2 out of range"),
    (1, 0, 10, 1, "query position 10 out of range"),
    (1, 0, 5, -1, "key position -1 out of range"),
    (1, 0, 3, 5, "comes after query position 3"),
])
def test_hostile_heads_and_positions_are_one_line(layer: int, head: int, q: int, k: int, says: str) -> None:
    model = tiny_handle(d_model=16, layers=2)
    with pytest.raises(QKError, match=says) as caught:
        qk_trace(model, TINY_IDS, random_set(16, 24, 2), layer, head, q, k)
    assert "\n" not in str(caught.value)


def test_too_many_hops_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from tui_lab.core.analysis.circuits import qk_tracing

    model = tiny_handle(d_model=16, layers=3)
    tset = random_set(16, 24, 3)
    with pytest.raises(QKError, match="at least 0"):
        qk_trace(model, TINY_IDS, tset, 1, 0, 5, 1, -1)
    monkeypatch.setattr(qk_tracing, "MAX_MOVES", 100)
    qk_trace(model, TINY_IDS, tset, 2, 0, 9, 1, 1)  # 2 layers x 2 heads x 10 positions: 40 moves
    with pytest.raises(QKError, match="moved parts a side") as caught:
        qk_trace(model, TINY_IDS, tset, 2, 0, 9, 1, 2)  # 40 x (1 x 2 x 10): 800
    assert "\n" not in str(caught.value)


def test_rotary_positions_are_refused() -> None:
    model = tiny_handle(d_model=16, layers=2, positional="rope")
    with pytest.raises(QKError, match="rotary") as caught:
        qk_trace(model, TINY_IDS, random_set(16, 24, 2), 1, 0, 5, 1)
    assert "\n" not in str(caught.value)


def test_a_transcoder_set_for_another_model_is_refused() -> None:
    model = tiny_handle(d_model=16, layers=2)
    with pytest.raises(LabError, match="d_model"):
        qk_trace(model, TINY_IDS, random_set(8, 24, 2), 1, 0, 5, 1)


def _forward_edge(ref, target, off: Off, patterns: dict[int, torch.Tensor]) -> float:  # type: ignore[no-untyped-def]
    """The edge into ``target`` (("logit", k) or ("feature", (layer, pos, feat))) from the
    sources ``off`` switches off, replayed forward with layer -> pattern replaced."""
    clean = dict(ref.clean)
    for layer, pattern in patterns.items():
        clean[f"blocks.{layer}.attn.hook_pattern"] = pattern[None].double()
    replay = dataclasses.replace(ref, clean=clean)
    (pre_on, logits_on), (pre_off, logits_off) = replay.run(), replay.run(off)
    kind, what = target
    if kind == "logit":
        return float(logits_on[what] - logits_off[what])
    layer, pos, feat = what
    return float(pre_on[layer, pos, feat] - pre_off[layer, pos, feat])


@pytest.mark.parametrize("which", ["strongest", "token"])
def test_carrying_shares_add_up_and_match_a_forward_replay(gpt2, which: str) -> None:  # type: ignore[no-untyped-def]
    """The strongest earlier source, and the strongest earlier token (its paths may cross
    positions twice: a layer-0 head, then a layer-1 head)."""
    _, model, tset = gpt2
    graph = attribute(model, PROMPT, tset)
    target = graph.logit_start
    found_sources = earlier_sources(graph, target)
    if which == "token":
        found_sources = [i for i in found_sources if graph.node(i).kind.value == "token"]
    source = found_sources[0]
    found = edge_carriers(model, graph, tset, target, source)
    edge = float(graph.adjacency[target, source])
    assert found.edge == pytest.approx(edge, rel=1e-4)
    assert found.same_position == pytest.approx(0.0, abs=1e-6)  # between positions: all attention's
    assert sum(c.share for c in found.carriers) == pytest.approx(edge, rel=1e-4, abs=1e-6)
    for carrier in found.carriers:
        assert sum(v for _, v in carrier.keys) == pytest.approx(carrier.share, rel=1e-3, abs=1e-5)
    node = graph.node(source)
    off = Off(tokens=(node.pos,)) if node.kind.value == "token" else (
        Off(errors=((node.layer, node.pos),)) if node.kind.value == "error" else
        Off(features=((node.layer, node.pos, node.id),)))
    ref = make_reference(model, tset, PROMPT)
    for carrier in found.carriers[:3]:  # forward: layers above diagonal, the carrier's diagonal plus its row
        assert carrier.share == pytest.approx(_replayed_share(ref, graph, carrier, off), rel=1e-3, abs=1e-5)


def _replayed_share(ref, graph, carrier, off: Off) -> float:  # type: ignore[no-untyped-def]
    n_layers, n_pos = graph.n_layers, graph.n_pos
    frozen = {lay: ref.clean[f"blocks.{lay}.attn.hook_pattern"][0] for lay in range(n_layers)}
    eye = torch.eye(n_pos, dtype=torch.float64)
    without = {lay: frozen[lay] * eye for lay in range(carrier.layer, n_layers)}
    with_row = dict(without)
    with_row[carrier.layer] = without[carrier.layer].clone()
    with_row[carrier.layer][carrier.head, carrier.query] += frozen[carrier.layer][carrier.head, carrier.query] * (
        1 - eye[carrier.query])
    tok = graph.logit_tokens[0]
    return _forward_edge(ref, ("logit", tok), off, with_row) - _forward_edge(ref, ("logit", tok), off, without)


def test_carriers_refuse_a_token_target(gpt2) -> None:  # type: ignore[no-untyped-def]
    _, model, tset = gpt2
    graph = attribute(model, PROMPT, tset, max_feature_nodes=20)
    with pytest.raises(LabError, match="only features and logits") as caught:
        edge_carriers(model, graph, tset, graph.token_start + 2, graph.token_start)
    assert "\n" not in str(caught.value)


STORY = "qwertyuqwerty"  # the prefix 'qwertyu' repeated up to 'y': the answer is 'u' (position 6)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModelInHand, TranscoderSet]:
    """The trained induction-mlp run and TopK skip transcoders trained on it (30,000 tokens, ~3 s)."""
    from tui_lab.core.sae.transcoder import open_transcoders
    from tui_lab.core.verbs.transcoder_train import Request, run

    out = tmp_path_factory.mktemp("qk-story") / "set"
    model = open_model(RUN)
    run(Request(str(out), architecture="topk", skip=True, features=256, tokens=30_000, batch=512), model)
    return model, open_transcoders(out, model)


def _previous_token_parts(traced, key: int, token: int) -> float:  # type: ignore[no-untyped-def]
    """The key side's total from the token at ``key - 1`` moved there by a layer-0 head."""
    return sum(float(v) for p, v in zip(traced.k_parts, traced.k_marginals(), strict=True)
               if p.kind == "token" and p.pos == key - 1 and p.id == token and p.via is not None and p.via[0] == 0)


def test_the_induction_story(story: tuple[ModelInHand, TranscoderSet]) -> None:
    """The answer's earlier-position edge rides an induction head (the atlas's label) reading
    the answer's position; that head's score there comes from the previous token moved by
    layer-0 heads on the key side and the current token on the query side; changing the
    previous token takes both the contribution and the attention away."""
    from tui_lab.core.analysis.heads.head_scores import atlas_for

    model, tset = story
    ids = model.to_tokens(STORY)[0].tolist()
    graph = attribute(model, ids, tset)
    assert graph.logit_labels[0] == "u"
    target = graph.logit_start
    source = graph.node(earlier_sources(graph, target)[0])
    assert (source.kind.value, source.pos, source.label) == ("token", 6, "u")  # the answer's own embedding, moved
    carriers = edge_carriers(model, graph, tset, target, source.index)
    on_layer_1 = sum(c.share for c in carriers.carriers if c.layer == 1)
    assert on_layer_1 == pytest.approx(carriers.edge, rel=1e-3)  # layer 1's heads move it
    top = carriers.carriers[0]
    assert (top.layer, top.query, top.key) == (1, 12, 6)
    atlas = {(h.name, h.head): h.shown for h in atlas_for(model.model, model.task, model.shape).heads}
    assert atlas[("decoder.1.self", top.head)] == "induction"
    traced = qk_trace(model, ids, tset, top.layer, top.head, top.query, top.key)
    assert traced.weight > 0.5  # the head looks there
    keys = [(p, v) for p, v in traced.top_k(len(traced.k_parts)) if p.kind != "bias"]
    first = keys[0][0]
    assert (first.kind, first.pos, first.id, first.via is not None and first.via[0]) == ("token", 5, ids[5], 0)
    previous = _previous_token_parts(traced, 6, ids[5])
    own = float(traced.k_marginals()[[p.kind == "token" and p.via is None for p in traced.k_parts]].sum())
    assert previous > 2 * abs(own) and previous > 0.25 * traced.score  # the previous token, not the key's own
    (q_first, q_value), (_, q_next) = traced.top_q(2)
    assert (q_first.kind, q_first.pos, q_first.via) == ("token", 12, None) and q_value > 2 * abs(q_next)
    changed = list(ids)
    changed[5] = model.to_tokens("a")[0].tolist()[0]  # 'qwertauqwerty': the successor of 'y' is gone
    after = qk_trace(model, changed, tset, top.layer, top.head, 12, 6)
    assert _previous_token_parts(after, 6, changed[5]) < 0.5 * previous
    assert after.score < traced.score - 0.5 * previous and after.weight < 0.5 * traced.weight
