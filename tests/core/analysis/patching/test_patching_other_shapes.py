"""Activation and attribution patching on the other two shapes, against ``transformers``' own
models with plain PyTorch forward hooks, one forward pass per cell:

- an encoder-decoder (Marian): the encoder's residual stream by source position, the
  decoder's attention outputs (self and cross) by decoder position, and every head's
  output (encoder self, decoder self, decoder cross), the answer read at the decoder's
  last position after a decoder prefix;
- an encoder-only model (BERT): the residual stream by position and each head's output,
  the answer read at the mask.

Every cell within 1e-4 (raw logit differences): Marian at every site but the pattern (the
encoder by source position, the decoder by its own, every head), BERT, DistilBERT and RoBERTa
at the residual stream and every head. The reference reaches a site through a
pre-hook on the layer (its hidden-states input), a hook on an attention module (its
first output), or a pre-hook on an attention's output projection (the heads' outputs
side by side, (B, T, H * d_head)).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from bench.hf_factory import save_marian, save_masked_lm
from tui_lab.core.analysis.patching.activation_patching import activation_patch
from tui_lab.core.analysis.patching.attribution_patching import attribution_patch
from tui_lab.core.analysis.patching.causal_tracing import causal_trace
from tui_lab.core.analysis.patching.patch_pair import PatchError, PatchPair, make_pair, ready_pair
from tui_lab.core.opening.model_in_hand import open_model

pytestmark = pytest.mark.usefixtures("no_network")
ATOL = 1e-4
SOURCE = [5, 9, 14, 22, 31, 8]
CORRUPT = [5, 9, 40, 22, 17, 8]
TARGET = (63, 11, 20)  # Marian's decoder starts at its pad id (the last)


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    folder: Path = tmp_path_factory.mktemp("marian")
    ref = save_marian(folder, init_std=0.3)
    return open_model(folder), ref


def _masked_lm(folder: Path, family: str) -> tuple[Any, Any]:
    import transformers

    save_masked_lm(folder, family, initializer_range=0.3)
    ref = transformers.AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    return open_model(folder), ref


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return _masked_lm(tmp_path_factory.mktemp("bert"), "bert")


@pytest.fixture(scope="module", params=["bert", "distilbert", "roberta"])
def encoder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, Any]:
    return request.param, *_masked_lm(tmp_path_factory.mktemp(request.param), request.param)


def _layers_and_outputs(family: str, ref: Any) -> tuple[list[nn.Module], list[nn.Module]]:
    """Each family's blocks and its attentions' output projections."""
    if family == "distilbert":
        layers = list(ref.distilbert.transformer.layer)
        return layers, [layer.attention.out_lin for layer in layers]
    layers = list((ref.bert if family == "bert" else ref.roberta).encoder.layer)
    return layers, [layer.attention.output.dense for layer in layers]


def _run(ref: Any, hooks: list[tuple[nn.Module, str, Callable[..., Any]]], **inputs: Tensor) -> Any:
    handles = [m.register_forward_pre_hook(fn, with_kwargs=True) if when == "pre" else m.register_forward_hook(fn)
               for m, when, fn in hooks]
    try:
        with torch.no_grad():
            return ref(**inputs)
    finally:
        for h in handles:
            h.remove()


def _first_in(args: tuple, kwargs: dict) -> Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _with_first_in(args: tuple, kwargs: dict, x: Tensor) -> tuple[tuple, dict]:
    return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})


def _first_out(out: Any) -> Tensor:
    return out[0] if isinstance(out, tuple) else out


def _captured(ref: Any, module: nn.Module, when: str, inputs: dict[str, Tensor]) -> Tensor:
    """What ``module`` reads ("pre") or writes ("post") in the reference's clean run."""
    got: list[Tensor] = []
    if when == "pre":
        _run(ref, [(module, when, lambda _m, a, k: got.append(_first_in(a, k).clone()))], **inputs)
    else:
        _run(ref, [(module, when, lambda _m, _i, out: got.append(_first_out(out).clone()))], **inputs)
    return got[0]


def reference_grid(ref: Any, pair: PatchPair, rows: list[tuple[nn.Module, str]], cols: int, heads: int | None,
                   inputs: Callable[[list[int]], dict[str, Tensor]]) -> list[list[float]]:
    """Each row (module, "pre" input or "post" output) patched one position, or one head
    (``heads``: the heads' outputs at an output projection's input), at a time."""

    def metric(out: Any) -> float:
        logits = out.logits[0, pair.position]
        return float(logits[pair.answer] - logits[pair.wrong])

    grid = []
    for module, when in rows:
        clean = _captured(ref, module, when, inputs(pair.clean))
        row = []
        for cell in range(cols):
            def put(x: Tensor, cell: int = cell, clean: Tensor = clean) -> Tensor:
                x = x.clone()
                if heads is None:
                    x[:, cell] = clean[:, cell]
                else:
                    split, c = x.view(*x.shape[:2], heads, -1), clean.view(*clean.shape[:2], heads, -1)
                    split[:, :, cell] = c[:, :, cell]
                return x

            if when == "pre":
                fn = lambda _m, a, k: _with_first_in(a, k, put(_first_in(a, k)))  # noqa: E731
            else:
                fn = lambda _m, _i, out: (put(out[0]), *out[1:]) if isinstance(out, tuple) else put(out)  # noqa: E731
            row.append(metric(_run(ref, [(module, when, fn)], **inputs(pair.corrupt))))
        grid.append(row)
    return grid


def _marian_inputs(ids: list[int]) -> dict[str, Tensor]:
    return {"input_ids": torch.tensor([ids]), "decoder_input_ids": torch.tensor([TARGET])}


def _marian_pair() -> PatchPair:
    return PatchPair(SOURCE, CORRUPT, 17, 42, target=TARGET)


HEAD_ROWS = ["enc L0", "enc L1", "dec L0", "cross L0", "dec L1", "cross L1"]


def _heads(ref: Any, module: Callable[[nn.Module], nn.Module]) -> list[nn.Module]:
    """``module`` of every attention: the encoder's, then each decoder layer's self and cross."""
    enc, dec = ref.model.encoder.layers, ref.model.decoder.layers
    return [module(layer.self_attn) for layer in enc] + [
        module(m) for layer in dec for m in (layer.self_attn, layer.encoder_attn)]


@pytest.mark.parametrize("site", ["resid_pre", "attn_out", "mlp_out", "z", "q", "k", "v"])
def test_encoder_decoder_cells_match_the_reference(marian: tuple[Any, Any], site: str) -> None:
    lab, ref = marian
    pair = _marian_pair()
    enc, dec = ref.model.encoder.layers, ref.model.decoder.layers
    if site == "resid_pre":  # the encoder's, by source position
        result = activation_patch(lab, pair, site, max_rows=5)
        modules, cols, heads = [(layer, "pre") for layer in enc], len(SOURCE), None
        labels = ["enc L0", "enc L1"]
    elif site == "attn_out":  # the decoder's self- and cross-attention outputs, by decoder position
        result = activation_patch(lab, pair, site, stack="decoder")
        modules = [(m, "post") for layer in dec for m in (layer.self_attn, layer.encoder_attn)]
        cols, heads, labels = len(TARGET), None, ["dec L0", "cross L0", "dec L1", "cross L1"]
    elif site == "mlp_out":  # the decoder's MLPs, by decoder position
        result = activation_patch(lab, pair, site, stack="decoder")
        modules, cols, heads, labels = [(layer.fc2, "post") for layer in dec], len(TARGET), None, ["dec L0", "dec L1"]
    elif site == "z":  # every head's output: encoder self, then decoder self and cross per layer
        result = activation_patch(lab, pair, site)
        modules, cols, heads = [(m, "pre") for m in _heads(ref, lambda a: a.out_proj)], 4, 4
        labels = HEAD_ROWS
    else:  # q, k, v of every head (over all its positions: Marian's query scale is linear)
        result = activation_patch(lab, pair, site)
        modules = [(m, "post") for m in _heads(ref, lambda a: getattr(a, f"{site}_proj"))]
        cols, heads, labels = 4, 4, HEAD_ROWS
    assert result.rows == labels
    want = torch.tensor(reference_grid(ref, pair, modules, cols, heads, _marian_inputs))
    torch.testing.assert_close(torch.tensor(result.raw), want, atol=ATOL, rtol=0)
    assert float(want.max() - want.min()) > 100 * ATOL  # the cells differ: the test can tell them apart


def test_encoder_decoder_attribution_is_exact_where_linear(marian: tuple[Any, Any]) -> None:
    """At the decoder's final norm output the metric is linear: attribution equals patching."""
    lab, _ = marian
    pair = _marian_pair()
    names = lab.hook_names()
    site = "resid_final" if "decoder_final_ln.hook_normalized" in names else "resid_pre"
    exact, estimate = activation_patch(lab, pair, "resid_final"), attribution_patch(lab, pair, "resid_final")
    assert site and exact.rows == estimate.rows == ["final"]
    torch.testing.assert_close(torch.tensor(estimate.raw), torch.tensor(exact.raw), atol=1e-3, rtol=1e-4)


def _bert_inputs(ids: list[int]) -> dict[str, Tensor]:
    return {"input_ids": torch.tensor([ids])}


def test_encoder_only_cells_match_the_reference_at_the_mask(encoder: tuple[str, Any, Any]) -> None:
    family, lab, ref = encoder
    mask = lab.task.mask_token
    pair = None
    for clean, corrupt, answers in (("the cat sat on the {} upon", "the dog was on the {} upon", ("sea", "time")),
                                    ("the cat sat on the{} upon", "the dog sat on the{} upon", (" cat", " dog"))):
        try:
            pair = make_pair(lab, clean.format(mask), corrupt.format(mask), *answers)
            break
        except PatchError:  # RoBERTa's byte-level pieces carry their space
            continue
    assert pair is not None and pair.clean[pair.position] == lab.task.mask_id
    layers, outputs = _layers_and_outputs(family, ref)
    result = activation_patch(lab, pair, "resid_pre")
    want = reference_grid(ref, pair, [(layer, "pre") for layer in layers], len(pair.clean), None, _bert_inputs)
    torch.testing.assert_close(torch.tensor(result.raw), torch.tensor(want), atol=ATOL, rtol=0)
    assert max(map(max, want)) - min(map(min, want)) > 100 * ATOL
    heads = activation_patch(lab, pair, "z")
    want = reference_grid(ref, pair, [(o, "pre") for o in outputs], 4, 4, _bert_inputs)
    torch.testing.assert_close(torch.tensor(heads.raw), torch.tensor(want), atol=ATOL, rtol=0)


def test_bad_pairs_on_other_shapes_are_one_line(bert: tuple[Any, Any], marian: tuple[Any, Any]) -> None:
    lab, _ = bert
    with pytest.raises(PatchError, match="no mask"):
        make_pair(lab, "the cat sat", "the dog sat", "sea", "time")
    m = lab.task.mask_token
    with pytest.raises(PatchError, match="one mask where"):
        make_pair(lab, f"the {m} sat on the mat", f"the cat sat on the {m}", "sea", "time")
    with pytest.raises(PatchError, match="one stack"):
        make_pair(lab, f"the {m} sat", f"the {m} was", "sea", "time", target="x")
    translator, _ = marian
    with pytest.raises(PatchError, match="decoder"):
        activation_patch(translator, _marian_pair(), "resid_pre", stack="middle")


def test_the_lab_copy_run_has_a_ready_pair_and_traces(tmp_path: Path) -> None:
    """The lab's own encoder-decoder (a learned copy run): its ready pair parts where the
    outputs part, patching the source position that differs restores the answer, and
    causal tracing with no noise gives 1 everywhere."""
    from tui_lab.core.analysis.patching.activation_patching import Reading

    lab = open_model(Path(__file__).resolve().parents[3] / "data" / "learned-copy")
    pair = ready_pair(lab)
    assert pair.target and pair.target[0] == lab.task.decoder_start_id and pair.answer != pair.wrong
    result = activation_patch(lab, pair, "resid_pre")
    changed = [i for i, (a, b) in enumerate(zip(pair.clean, pair.corrupt, strict=True)) if a != b]
    best = max(range(len(result.cols)), key=lambda p: result.values[0][p])
    assert best in changed and result.values[0][best] > 0.5
    ids = torch.tensor([pair.clean])
    trace = causal_trace(lab, ids, (changed[0], changed[0] + 1), pair.answer, noise=0.0, samples=2,
                         reading=Reading(-1, pair.target_ids(1)))
    for kind in trace.values:
        torch.testing.assert_close(torch.tensor(trace.values[kind]), torch.ones(len(pair.clean), 1),
                                   atol=1e-5, rtol=0)
    noisy = causal_trace(lab, ids, (changed[0], changed[0] + 1), pair.answer, noise=3.0, samples=4,
                         reading=Reading(-1, pair.target_ids(1)))
    assert noisy.corrupt < noisy.clean  # the noise on the source token costs the answer


def test_steering_an_encoder_only_model_fills_its_masks_steered(bert: tuple[Any, Any]) -> None:
    """An encoder-only model's output is its masks filled: coefficient 0 changes nothing, and
    the steered logits are the reference's own with the vector added to the layer's output
    (a forward hook on transformers' BERT layer)."""
    from tui_lab.core.analysis.patching.steering import steer, steering_hooks, steering_vector

    lab, ref = bert
    m = lab.task.mask_token
    text = f"the cat sat on the {m} upon a {m}"
    hook = "blocks.0.hook_resid_post"
    vector = steering_vector(lab, hook, ["the sea was little"], ["once upon a time"])
    still = steer(lab, text, hook, vector, 0.0)
    assert still.steered == still.plain and m not in still.plain  # the masks were filled
    ids = lab.task.vocab.encode(text)
    with torch.no_grad():
        got = lab.run_with_hooks(torch.tensor([ids]), steering_hooks(hook, vector, 40.0))[0]
    add = lambda _m, _i, out: (out[0] + 40.0 * vector, *out[1:]) if isinstance(out, tuple) else out + 40.0 * vector  # noqa: E731
    want = _run(ref, [(ref.bert.encoder.layer[0], "post", add)], input_ids=torch.tensor([ids])).logits[0]
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    plain = _run(ref, [], input_ids=torch.tensor([ids])).logits[0]
    assert float((want - plain).abs().max()) > 0.1  # the vector moves the logits
