"""The hook points' Python API: replacements by hand, ablation through ``hook_z``, hooks
that live for one call (threads, errors), the fused kernel when nothing asks for weights,
and one-line errors for names the model does not have."""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.cli.helpers import TINY_RUN
from tui_lab.core.analysis.heads.ablation import HeadRef, ablate, head_means
from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model import attention
from tui_lab.core.model.hook_points import active_hooks, using_hooks
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.model_in_hand import HookError, open_model

D, H, VOCAB = 16, 4, 11


def _model(arch: str = "decoder-only", **kw: object) -> torch.nn.Module:
    torch.manual_seed(0)
    sizes: dict[str, object] = {"d_model": D, "n_heads": H, "n_decoder_layers": 2, "n_encoder_layers": 1, "d_ff": 32}
    cfg = ModelConfig(arch=arch, **{**sizes, **kw})  # type: ignore[arg-type]
    model = build_model(cfg, VOCAB).eval()
    with torch.no_grad():  # non-trivial norms and biases
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def _cache(model: torch.nn.Module, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    found: dict[str, torch.Tensor] = {}
    with torch.no_grad(), using_hooks([(lambda _n: True, lambda x, n: found.__setitem__(n, x))]):
        model(tokens)
    return found


TOKENS = torch.tensor([[1, 5, 3, 7, 2, 9]])


def test_a_replaced_residual_stream_gives_the_logits_worked_by_hand() -> None:
    model = _model(d_ff=0, n_decoder_layers=1)
    replacement = torch.randn(1, 6, D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), using_hooks([("blocks.0.hook_resid_post", lambda _x, _n: replacement)]):
        logits = model(TOKENS)
    ln = model.decoder.norm
    want = F.layer_norm(replacement, (D,), ln.weight, ln.bias, ln.eps) @ model.lm_head.weight.T
    torch.testing.assert_close(logits, want, atol=1e-5, rtol=0)


def test_a_replaced_z_flows_through_w_o_into_the_residual_stream() -> None:
    model = _model(d_ff=0, n_decoder_layers=1)
    z = torch.randn(1, 6, H, D // H, generator=torch.Generator().manual_seed(2))
    plain = _cache(model, TOKENS)
    seen: dict[str, torch.Tensor] = {}
    with torch.no_grad(), using_hooks([
        ("blocks.0.attn.hook_z", lambda _x, _n: z),
        ("blocks.0.hook_resid_post", lambda x, _n: seen.setdefault("post", x)),
    ]):
        model(TOKENS)
    w_o = model.decoder.layers[0].self_attn.w_o
    want = plain["blocks.0.hook_resid_pre"] + z.reshape(1, 6, D) @ w_o.weight.T + w_o.bias
    torch.testing.assert_close(seen["post"], want, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("arch", "name"), [
    ("decoder-only", "decoder.1.self"), ("encoder-decoder", "decoder.0.cross"), ("encoder-decoder", "encoder.0.self"),
])
def test_zeroing_a_head_through_hook_z_equals_zeroing_its_w_o_columns(arch: str, name: str) -> None:
    """What the lab's ablation did before the hook points: the head's slice of ``w_o``'s input
    set to zero, the same as zeroing those columns of ``w_o``'s weight."""
    model = _model(arch)
    inputs = (TOKENS,) if arch == "decoder-only" else (TOKENS, TOKENS[:, :4])
    reference = copy.deepcopy(model)
    module = next(m for m in reference.modules() if getattr(m, "lab_name", None) == name)
    with torch.no_grad():
        module.w_o.weight[:, 2 * (D // H) : 3 * (D // H)] = 0.0
        want = reference(*inputs)
        with ablate(model, [HeadRef(name, 2)]):
            got = model(*inputs)
        plain = model(*inputs)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert (plain - got).abs().max() > 1e-3  # the head mattered, and the block restored it


def test_mean_ablation_puts_the_heads_mean_output_in_its_slice() -> None:
    model = _model()
    batch = type("Batch", (), {"src": None, "tgt_in": TOKENS})()
    means = head_means(model, batch, pad_id=None)
    reference = copy.deepcopy(model)
    w_o = next(m for m in reference.modules() if getattr(m, "lab_name", None) == "decoder.0.self").w_o
    cols = slice(1 * (D // H), 2 * (D // H))
    with torch.no_grad():
        w_o.bias += w_o.weight[:, cols] @ means["decoder.0.self"][1]
        w_o.weight[:, cols] = 0.0
        want = reference(TOKENS)
        with ablate(model, [HeadRef("decoder.0.self", 1)], "mean", means):
            got = model(TOKENS)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_two_threads_each_see_only_their_own_hooks() -> None:
    model = _model()
    tokens = torch.randint(1, VOCAB, (4, 10), generator=torch.Generator().manual_seed(3))

    def zero_head(z: torch.Tensor, _n: str) -> torch.Tensor:
        z = z.clone()
        z[:, :, 0] = 0.0
        return z

    def ablated() -> torch.Tensor:
        with torch.no_grad(), using_hooks([("blocks.1.attn.hook_z", zero_head)]):
            return model(tokens)

    def plain() -> torch.Tensor:
        with torch.no_grad():
            return model(tokens)

    alone = {"ablated": ablated(), "plain": plain()}
    assert (alone["ablated"] - alone["plain"]).abs().max() > 1e-3
    results: dict[str, list[torch.Tensor]] = {"ablated": [], "plain": []}
    start = threading.Barrier(2)

    def worker(kind: str) -> None:
        start.wait()
        for _ in range(50):
            results[kind].append(ablated() if kind == "ablated" else plain())

    threads = [threading.Thread(target=worker, args=(k,)) for k in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for kind, outs in results.items():
        assert len(outs) == 50
        for out in outs:
            torch.testing.assert_close(out, alone[kind], atol=1e-6, rtol=0)


def test_a_hook_that_raises_leaves_no_hook_behind() -> None:
    model = _model()
    with torch.no_grad():
        plain = model(TOKENS)

    def boom(_x: torch.Tensor, _n: str) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"), using_hooks([("blocks.0.hook_mlp_out", boom)]):
        model(TOKENS)
    assert active_hooks() is None
    with torch.no_grad():
        torch.testing.assert_close(model(TOKENS), plain, atol=0, rtol=0)


def test_no_module_carries_hook_or_capture_state() -> None:
    model = _model("encoder-decoder")
    before = {name: dict(vars(m)) for name, m in model.named_modules()}
    with torch.no_grad(), using_hooks([(lambda _n: True, lambda x, _n: x * 1.0)]):
        model(TOKENS, TOKENS[:, :3])
    after = {name: dict(vars(m)) for name, m in model.named_modules()}
    assert after.keys() == before.keys()
    for name in before:
        assert after[name].keys() == before[name].keys(), name
        assert all(after[name][k] is v for k, v in before[name].items()), name
    assert not any(hasattr(m, "store") for m in model.modules())


def test_attention_stays_fused_unless_a_hook_asks_for_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()  # two layers
    calls: list[int] = []
    fused = F.scaled_dot_product_attention

    def counting(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", counting)

    def count(hooks: list) -> int:
        calls.clear()
        with torch.no_grad(), using_hooks(hooks):
            model(TOKENS)
        return len(calls)

    assert count([]) == 2
    assert count([("blocks.0.attn.hook_z", lambda x, _n: None)]) == 2  # z comes after the kernel
    assert count([("blocks.1.attn.hook_pattern", lambda x, _n: None)]) == 1  # layer 1 explicit
    assert count([("blocks.0.attn.hook_attn_scores", lambda x, _n: None)]) == 1


def test_open_model_on_a_run_folder(tmp_path: Path) -> None:
    lab = open_model(TINY_RUN)
    names = lab.hook_names()
    assert names[:2] == ["encoder.hook_embed", "encoder.hook_pos_embed"]
    assert "decoder.0.cross_attn.hook_pattern" in names and names[-1].startswith("decoder")
    logits, cache = lab.run_with_cache("123", names=["decoder.0.cross_attn.hook_pattern"])
    assert list(cache) == ["decoder.0.cross_attn.hook_pattern"]
    assert cache["decoder.0.cross_attn.hook_pattern"].shape[-1] == len(lab.to_str_tokens("123"))
    assert logits.shape[:2] == (1, 1)  # the decoder reads its start token


def test_unknown_hook_names_are_one_line() -> None:
    lab = open_model(TINY_RUN)
    with pytest.raises(HookError, match=r"no hook point 'decoder\.0\.hook_resid_psot'.*decoder\.0\.hook_resid_post"):
        lab.run_with_cache("12", names=["decoder.0.hook_resid_psot"])
    with pytest.raises(HookError, match="no hook point 'blocks.9.attn.hook_z'"):
        lab.run_with_hooks("12", hooks=[("blocks.9.attn.hook_z", lambda x, n: None)])
    with pytest.raises(HookError, match="at_step"):
        open_model(Path(TINY_RUN).parent / "not-a-run", at_step=3)
