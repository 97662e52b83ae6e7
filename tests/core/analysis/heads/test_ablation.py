"""Head ablation: a model whose only path is one head, and the real models against w_o edits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.conftest import tiny_config
from tui_lab.core.analysis.heads.ablation import (
    AblationError,
    HeadRef,
    ablate,
    all_heads,
    head_means,
    parse_head,
)
from tui_lab.core.analysis.heads.head_importance import (
    HeadRow,
    ImportanceTable,
    cached_importance,
    importance,
    weights_key,
)
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import BOS, EOS, N_SPECIALS, PAD


class OneHeadPath(nn.Module):
    """x -> attention (2 heads) -> out. w_o reads head 0 only: head 0 is the only path."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(4, 2)
        self.attn.lab_name = "decoder.0.self"
        with torch.no_grad():
            for lin in (self.attn.w_q, self.attn.w_k, self.attn.w_v):
                lin.weight.copy_(torch.eye(4))
                lin.bias.zero_()
            w_o = torch.zeros(4, 4)
            w_o[:2, :2] = torch.eye(2)  # head 0's two dims pass through, head 1's are dropped
            self.attn.w_o.weight.copy_(w_o)
            self.attn.w_o.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x)[0]


@pytest.mark.parametrize("fused", [True, False])
def test_only_path_head_ablated_destroys_output_other_head_changes_nothing(fused):
    model = OneHeadPath()
    model.attn.fused = fused
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, 0.0], [2.0, 0.0, -1.0, 1.0]]])
    base = model(x)
    assert base[..., :2].abs().sum() > 1.0  # the head does carry the input
    with ablate(model, [HeadRef("decoder.0.self", 0)]):
        gone = model(x)
    with ablate(model, [HeadRef("decoder.0.self", 1)]):
        same = model(x)
    assert torch.equal(gone, torch.zeros_like(gone))
    assert torch.equal(same, base)
    assert torch.equal(model(x), base)  # restored on exit


def test_mean_mode_puts_the_probe_mean_in_the_slice():
    model = OneHeadPath()
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, 0.0]]])
    means = {"decoder.0.self": torch.tensor([[7.0, -3.0], [0.0, 0.0]])}  # (H, d_head)
    with ablate(model, [HeadRef("decoder.0.self", 0)], mode="mean", means=means):
        out = model(x)
    assert torch.equal(out[0, :, :2], torch.tensor([[7.0, -3.0], [7.0, -3.0]]))


def _tiny_model():
    cfg = tiny_config()
    torch.manual_seed(0)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.5)
    return cfg, task, model


def test_ablating_a_head_equals_zeroing_its_columns_of_w_o_through_the_kv_cache():
    cfg, task, model = _tiny_model()
    ref = HeadRef("decoder.0.cross", 1)
    with ablate(model, [ref]):
        hooked = generate(model, task, "31415", max_new_tokens=8, capture=False)
    module = dict((m.lab_name, m) for m in model.modules() if isinstance(m, MultiHeadAttention))[ref.name]
    d = module.d_head
    with torch.no_grad():
        module.w_o.weight[:, ref.head * d : (ref.head + 1) * d] = 0.0
    edited = generate(model, task, "31415", max_new_tokens=8, capture=False)
    assert hooked.tokens == edited.tokens
    for a, b in zip(hooked.steps, edited.steps, strict=True):
        assert a.prob == pytest.approx(b.prob, abs=1e-6)


def test_head_names_parse_and_bad_ones_are_one_line():
    _, _, model = _tiny_model()
    assert parse_head("decoder.0.cross:1", model) == HeadRef("decoder.0.cross", 1)
    assert [str(h) for h in all_heads(model)] == [
        "encoder.0.self:0", "encoder.0.self:1", "decoder.0.self:0", "decoder.0.self:1",
        "decoder.0.cross:0", "decoder.0.cross:1",
    ]
    for bad, fragment in [("decoder.3.cross:0", "no attention module"), ("decoder.0.cross:2", "heads 0..1"),
                          ("decoder.0.cross", "NAME:HEAD"), ("decoder.0.cross:x", "not a head number")]:
        with pytest.raises(AblationError, match=fragment) as info:
            parse_head(bad, model)
        assert "\n" not in str(info.value)


def test_head_means_leave_padding_out():
    """A padded batch's mean is the token-weighted mean of its rows' own means."""
    cfg, task, model = _tiny_model()
    rows = [("12345", "12345"), ("1", "1")]
    means = head_means(model, task.collate(rows, cfg.model.arch))
    assert set(means) == {"encoder.0.self", "decoder.0.self", "decoder.0.cross"}
    assert means["decoder.0.cross"].shape == (2, 16)
    alone = [head_means(model, task.collate([r], cfg.model.arch)) for r in rows]
    # encoder modules see the source (5 and 1 tokens), decoder ones BOS + answer (6 and 2)
    for name, (a, b) in {"encoder.0.self": (5, 1), "decoder.0.self": (6, 2), "decoder.0.cross": (6, 2)}.items():
        expected = (a * alone[0][name] + b * alone[1][name]) / (a + b)
        assert torch.allclose(means[name], expected, atol=1e-5), name


LEARNED = Path(__file__).resolve().parents[3] / "data" / "learned-copy"
N_PAIRS = 200
MAX_NEW = 7  # the copy task's longest answer (6 digits) and EOS


def _fresh_learned() -> nn.Module:
    return load_for_inference(LEARNED).model


def _by_hand_exact_match(model: nn.Module, task: object, pairs: list[tuple[str, str]]) -> float:
    """Exact match of a plain greedy loop over ``model(src, tgt)``: no KV cache, no hooks."""
    vocab = task.vocab  # type: ignore[attr-defined]
    rows = [vocab.encode(i) for i, _ in pairs]
    src = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for r, ids in enumerate(rows):
        src[r, : len(ids)] = torch.tensor(ids)
    tgt = torch.full((len(rows), 1), BOS, dtype=torch.long)
    with torch.no_grad():
        for _ in range(MAX_NEW):
            nxt = model(src, tgt)[:, -1].argmax(-1)  # (B,)
            tgt = torch.cat([tgt, nxt[:, None]], dim=1)
    right = 0
    for r, (_, answer) in enumerate(pairs):
        out = tgt[r, 1:].tolist()
        out = out[: out.index(EOS)] if EOS in out else out  # the answer ends at EOS
        right += "".join(vocab.chars[i - N_SPECIALS] if i >= N_SPECIALS else "?" for i in out) == answer
    return right / len(pairs)


def _switched_off_by_hand(name: str, head: int) -> nn.Module:
    """A freshly loaded model with ``name:head``'s slice of ``w_o``'s input columns zeroed."""
    model = _fresh_learned()
    module = {m.lab_name: m for m in model.modules() if isinstance(m, MultiHeadAttention)}[name]
    d = module.d_head
    with torch.no_grad():
        module.w_o.weight[:, head * d : (head + 1) * d] = 0.0
    return model


def test_importance_on_a_learned_model_ranks_the_copying_head_first_and_is_cached(tmp_path):
    run = tmp_path / "learned-copy"
    shutil.copytree(LEARNED, run)
    (run / "ablation.json").unlink(missing_ok=True)  # the committed folder may carry a cached table
    loaded = load_for_inference(run)
    pairs = loaded.task.held_out(N_PAIRS, 11)
    calls = []

    def compute() -> ImportanceTable:
        return importance(loaded.model, loaded.task, pairs, MAX_NEW,
                          progress=lambda d, t: calls.append((d, t)))

    table, cached = cached_importance(run, weights_key(run), compute, mode="zero", n=N_PAIRS)
    assert not cached and calls[-1] == (10, 10)

    # The same figures, measured independently: w_o's columns zeroed on a fresh model,
    # exact match counted by a plain greedy loop over the full forward.
    baseline = _by_hand_exact_match(_fresh_learned(), loaded.task, pairs)
    by_hand = {}
    for row in table.rows:
        name, head = row.head.split(":")
        by_hand[row.head] = baseline - _by_hand_exact_match(
            _switched_off_by_hand(name, int(head)), loaded.task, pairs)
    assert sorted(by_hand) == sorted(str(h) for h in all_heads(loaded.model))  # every head, once
    assert baseline > 0.95 and table.baseline == pytest.approx(baseline, abs=0.02)
    for row in table.rows:
        # A few near-tied argmaxes may flip between the cached and the full forward: 2%.
        assert row.drop == pytest.approx(by_hand[row.head], abs=0.02), row
        assert row.drop == pytest.approx(table.baseline - row.exact_match)
    assert [r.drop for r in table.rows] == sorted((r.drop for r in table.rows), reverse=True)
    first, second = sorted(by_hand.values(), reverse=True)[:2]
    # The head that does the copying: switching it off costs most of the answers, and
    # the next head costs at least 15 points less, so the ranking cannot be a near tie.
    assert first > 0.5 and first - second >= 0.15, by_hand
    assert table.rows[0].head == max(by_hand, key=by_hand.__getitem__)

    again, cached = cached_importance(run, weights_key(run), lambda: pytest.fail("recomputed"),
                                      mode="zero", n=N_PAIRS)
    assert cached and again == table
    assert list(json.loads((run / "ablation.json").read_text())) == [f"{weights_key(run)}:zero:{N_PAIRS}"]


def test_cached_tables_are_kept_per_weights_mode_and_size(tmp_path):
    table = ImportanceTable("zero", 20, 1.0, [HeadRow("x:0", 1.0, 0.0)])
    assert cached_importance(tmp_path, "abc", lambda: table, mode="zero", n=20) == (table, False)
    other = ImportanceTable("zero", 20, 0.5, [HeadRow("x:0", 0.25, 0.25)])
    assert cached_importance(tmp_path, "def", lambda: other, mode="zero", n=20) == (other, False)
    assert cached_importance(tmp_path, "abc", lambda: other, mode="mean", n=20) == (other, False)
    assert cached_importance(tmp_path, "abc", lambda: pytest.fail("recomputed"), mode="zero", n=20) == (
        table, True)
    assert set(json.loads((tmp_path / "ablation.json").read_text())) == {
        "abc:zero:20", "def:zero:20", "abc:mean:20"}
    calls = []
    assert cached_importance(tmp_path, None, lambda: calls.append(1) or table, mode="zero", n=20) == (
        table, False)
    assert cached_importance(tmp_path, None, lambda: calls.append(1) or table, mode="zero", n=20) == (
        table, False)
    assert calls == [1, 1]  # no recorded hash: never cached


def test_weights_key_from_state_and_from_a_history_snapshot(tmp_path):
    from tui_lab.core.analysis.heads.head_importance import weights_key

    assert weights_key(tmp_path) is None  # nothing recorded: no caching
    (tmp_path / "state.json").write_text(
        json.dumps({"checkpoint": {"files": {"model.safetensors": {"sha256": "aa"}}}})
    )
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "index.json").write_text(
        json.dumps({"snapshots": [{"step": 10, "file": "step-10.safetensors", "sha256": "bb"}]})
    )
    assert weights_key(tmp_path) == "aa"
    assert weights_key(tmp_path, at_step=10) == "bb"
    assert weights_key(tmp_path, at_step=20) is None
