"""Probes and DAS read in an encoder-decoder's encoder (``stack="encoder"``): input
positions named by hand, the hook on the encoder's stream moving the decoder's output,
and a decoder-only model refused in one line."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from tui_lab.core.analysis.probes.das import Pairs, iia, interchange
from tui_lab.core.analysis.probes.das_pairs import model_forward, plan_pairs
from tui_lab.core.analysis.probes.encoder_slots import encoder_reads, input_names
from tui_lab.core.analysis.probes.slot_activations import (
    capture,
    forward_rows,
    resolve_position,
    variable_slots,
)
from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.errors import LabError
from tui_lab.core.model.models import build_run_model
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.variables import find_variable
from tui_lab.core.verbs import das as das_verb
from tui_lab.core.verbs import probe as probe_verb


def _addition(arch: str, seed: int = 0) -> ModelInHand:
    """A random-weight addition model of ``arch`` (2 encoder layers for an encoder-decoder)."""
    layers = {"n_encoder_layers": 2, "n_decoder_layers": 1} if arch == "encoder-decoder" else \
        {"n_encoder_layers": 0, "n_decoder_layers": 2}
    config = from_dict({
        "model": {"arch": arch, "d_model": 16, "n_heads": 2, "d_ff": 32, **layers},
        "task": {"name": "addition", "max_digits": 2},
        "train": {"device": "cpu", "threads": 1},
    }, source="<tiny-addition>", name="tiny-addition")
    task = make_task(config.task)
    torch.manual_seed(seed)
    model = build_run_model(config, len(task.vocab), "cpu").eval()
    return ModelInHand(config, task, model, 0, torch.device("cpu"), [])


def test_input_positions_are_named_by_operand_digit() -> None:
    model = _addition("encoder-decoder")
    assert input_names(model.task, "57+8") == ["a digit 1", "a digit 0", "+", "b digit 0"]
    carry = find_variable(model.task, "carry")
    # 57+68=125: column 1 gets carry 1 (7+8), column 2 gets 1 (5+6+1); answer index n-1-c.
    reads = [(name, p, slot.index, slot.value) for name, p, slot in encoder_reads(model.task, carry, "57+68")]
    assert ("column 1 @ a digit 0", 1, 1, 1) in reads and ("column 2 @ b digit 1", 3, 0, 1) in reads
    assert len(reads) == 2 * 5  # two carry slots, each read at the five input positions


def test_encoder_slots_are_captured_at_their_input_position() -> None:
    model = _addition("encoder-decoder")
    carry = find_variable(model.task, "carry")
    data = capture(model, variable_slots(model, carry, 60, 0, "encoder"))
    assert data.hooks == ["encoder.0.hook_resid_pre", "encoder.1.hook_resid_pre", "encoder.1.hook_resid_post"]
    assert data.rows is not None and data.rows[0] is not None
    src = data.rows[0]
    _, cache = model.run_with_cache(src, ["encoder.1.hook_resid_post"], target=data.rows[1])
    want = cache["encoder.1.hook_resid_post"][data.example, data.position]
    torch.testing.assert_close(data.resid["encoder.1.hook_resid_post"], want)
    assert resolve_position(data, " column 1  @ a digit 0") == "column 1 @ a digit 0"
    with pytest.raises(LabError, match="no position '0'"):
        resolve_position(data, "0")  # the short form would be ambiguous across columns


def _own_prediction(model: ModelInHand, src: Tensor, tgt: Tensor) -> Tensor:
    """The model's own first answer character for each row, run independently of any hook."""
    with torch.no_grad():
        return model.model(src, tgt)[:, 0].argmax(-1)


def _same_padding_partner(src: Tensor) -> Tensor:
    """For each row, another row of the same input length (the next one of that length)."""
    from tui_lab.core.tasks.vocab import PAD

    lengths = (src != PAD).sum(1)
    partner = torch.arange(src.size(0))
    for length in lengths.unique():
        rows = torch.nonzero(lengths == length).flatten()
        partner[rows] = torch.roll(rows, 1)
    return partner


def test_swapping_the_whole_last_encoder_layer_gives_the_sources_answer() -> None:
    """The whole last encoder layer swapped at every position makes the decoder's logits the
    source's (the base's decoder input kept), so IIA against the source's own prediction is 1.0."""
    model = _addition("encoder-decoder", seed=3)
    carry = find_variable(model.task, "carry")
    data = variable_slots(model, carry, 80, 0, "encoder")
    assert data.rows is not None and data.rows[0] is not None
    src, tgt = data.rows
    n = src.size(0)
    base, source = torch.arange(n), _same_padding_partner(src)  # the decoder masks the base's padding
    hook = "encoder.1.hook_resid_post"
    _, cache = model.run_with_cache(src, [hook], target=tgt)
    whole = cache[hook]  # (N, S, d)
    logits = forward_rows(model, data, base, [(hook, lambda x, _n: whole[source].to(x.dtype))])
    with torch.no_grad():
        independent = model.model(src[source], tgt[base])
    torch.testing.assert_close(logits, independent)
    target = _own_prediction(model, src[source], tgt[source])  # the source's own first character
    zeros = torch.zeros(n, dtype=torch.long)
    pairs = Pairs(base, zeros, zeros, whole[source, 0], target)
    forward = model_forward(model, data, hook)
    swap_all = iia(forward, pairs, torch.eye(16), edit=lambda x, _p, _s: whole[source].to(x.dtype))
    assert swap_all == 1.0
    with torch.no_grad():
        own = model.model(src, tgt)
    assert float((logits - own).abs().max().detach()) > 0.1  # the swap moved the decoder's output
    # The one-position interchange edits only that encoder position.
    edited = interchange(whole[base], zeros, whole[source, 0], torch.eye(16))
    torch.testing.assert_close(edited[:, 0], whole[source, 0])
    torch.testing.assert_close(edited[:, 1:], whole[base, 1:])


def test_das_pairs_at_an_encoder_site_intervene_at_the_input_position() -> None:
    model = _addition("encoder-decoder")
    carry = find_variable(model.task, "carry")
    data = capture(model, variable_slots(model, carry, 200, 0, "encoder"))
    plan = plan_pairs(model.task, carry, data, "column 1 @ b digit 0", 200, 0)
    train, _ = plan.pairs(data, "encoder.1.hook_resid_post")
    assert len(train) > 0
    for row, p, read in zip(train.rows, train.position, train.read, strict=True):
        text = data.texts[int(row)]
        assert input_names(model.task, text)[int(p)] == "b digit 0"  # intervened at b's units digit
        assert int(read) == len(model.task.solve(text)) - 2  # scored where column 1's digit is written


def test_a_decoder_only_model_is_refused_in_one_line() -> None:
    model = _addition("decoder-only")
    for call in (lambda: probe_verb.run(probe_verb.Request("carry", stack="encoder"), model),
                 lambda: das_verb.run(das_verb.Request("carry", 1, stack="encoder"), model)):
        with pytest.raises(LabError, match="--stack encoder: this model is decoder-only") as err:
            call()
        assert "\n" not in str(err.value)
    with pytest.raises(LabError, match="--stack sideways: choose encoder or decoder"):
        das_verb.Request("carry", 1, stack="sideways")
