"""The Jacobian lens against ``torch.autograd.functional.jacobian`` of the model's own
layers, the identity for blocks that write nothing, and its file round trip."""

from __future__ import annotations

import pytest
import torch

from tests.core.analysis.lenses.lens_models import silence_blocks, tiny_in_hand
from tui_lab.core.analysis.lenses.jacobian_lens import (
    JacobianLens,
    fit_jacobian_lens,
    prompt_jacobians,
)
from tui_lab.core.analysis.lenses.lens_data import LensBatch, lens_batches
from tui_lab.core.analysis.lenses.lens_file import open_lens, save_lens
from tui_lab.core.analysis.lenses.lens_readout import layer_logits
from tui_lab.core.analysis.lenses.logit_lens import layer_streams, resid_post_names
from tui_lab.core.errors import LabError
from tui_lab.core.model.hook_points import using_hooks


def _reference(model, prompt: LensBatch, skip_first: int) -> list[torch.Tensor]:
    """J_l by the definition: the full Jacobian of the last layer's output (T, d) with
    respect to layer l's output (T, d) (the rest of the forward pass re-run from a given
    layer-l output), summed over valid targets and averaged over valid sources."""
    module = model.model
    names = resid_post_names(module)
    with torch.no_grad():
        streams = layer_streams(module, lambda: prompt.forward(module))
    n = prompt.tokens.size(1)
    valid = list(range(skip_first, n - 1))
    out = []
    for layer in range(len(names) - 1):

        def f(h: torch.Tensor, layer: int = layer) -> torch.Tensor:
            found: dict[str, torch.Tensor] = {}

            def hook(x: torch.Tensor, name: str) -> torch.Tensor:
                if name == names[layer]:
                    x = h[None]
                found[name] = x
                return x

            with using_hooks([(name, hook) for name in names]):
                prompt.forward(module)
            return found[names[-1]][0]  # (T, d)

        jac = torch.autograd.functional.jacobian(f, streams[layer][0])  # (T, d, T, d)
        out.append(torch.stack([jac[valid][:, :, t].sum(0) for t in valid]).mean(0))  # (d, d)
    return out


@pytest.mark.parametrize(("arch", "skip_first", "dim_batch"), [
    ("decoder-only", 0, 5), ("decoder-only", 2, 16), ("encoder-decoder", 1, 7),
])
def test_one_prompts_jacobians_match_autograd_functional_jacobian(arch, skip_first, dim_batch):
    model = tiny_in_hand(arch, layers=3, d_model=16, scale=0.4)
    drawn = (lens_batches(model, None, 1, 1, seed=s)[0].rows()[0] for s in range(100))
    prompt = next(p for p in drawn if p.tokens.size(1) > skip_first + 3)  # a few valid positions
    got = prompt_jacobians(model.model, prompt, skip_first, dim_batch)  # blocks of dims, the last short
    assert got is not None
    for layer, expected in enumerate(_reference(model, prompt, skip_first)):
        assert torch.allclose(got[layer], expected, atol=1e-5), (layer, (got[layer] - expected).abs().max())


def test_the_fitted_lens_is_the_mean_over_prompts():
    model = tiny_in_hand("decoder-only", layers=2, d_model=16, scale=0.4)
    lens, report = fit_jacobian_lens(model, prompts=3, seed=9)
    prompts = [LensBatch(p.tokens, p.src, p.mask) for p in
               [b.rows()[0] for b in _batches_as_fit_draws(model, 3, 9)]]
    expected = torch.stack([_reference(model, p, 0)[0] for p in prompts]).mean(0)
    assert report.done == 3 and lens.n_prompts == 3
    assert torch.allclose(lens.matrices[0], expected, atol=1e-5)


def _batches_as_fit_draws(model, n, seed):
    """The prompts ``fit_jacobian_lens`` draws: one-row batches from one source."""
    from tui_lab.core.analysis.lenses.lens_data import BatchSource

    source = BatchSource(model, None, 1, seed)
    return [source.next() for _ in range(n)]


def test_blocks_that_write_nothing_give_the_identity():
    model = tiny_in_hand("decoder-only", layers=3, d_model=16)
    silence_blocks(model)
    lens, _ = fit_jacobian_lens(model, prompts=2)
    for matrix in lens.matrices:
        assert torch.allclose(matrix, torch.eye(16), atol=1e-5)


def test_the_last_layer_reads_the_output_and_translate_is_j_times_h():
    model = tiny_in_hand("decoder-only", layers=3)
    lens, _ = fit_jacobian_lens(model, prompts=2)
    h = torch.randn(4, 16)
    assert torch.allclose(lens.translate(1, h), h @ lens.matrices[1].T)
    batch = lens_batches(model, None, 1, 3, seed=2)[0]
    with torch.no_grad():
        streams = layer_streams(model.model, lambda: batch.forward(model.model))
        assert torch.allclose(layer_logits(model.model, lens, streams)[-1], model.model(batch.tokens), atol=1e-5)


def test_a_saved_jacobian_lens_reopens_exactly_and_refuses_another_model(tmp_path):
    model = tiny_in_hand("decoder-only", layers=3)
    lens, report = fit_jacobian_lens(model, prompts=2)
    save_lens(lens, tmp_path / "j", model, report.to_json())
    again = open_lens(tmp_path / "j", model)
    assert isinstance(again, JacobianLens) and again.n_prompts == 2
    assert torch.equal(again.matrices, lens.matrices)
    with pytest.raises(LabError) as err:
        open_lens(tmp_path / "j", tiny_in_hand("decoder-only", layers=2))
    assert "\n" not in str(err.value) and "another model" in str(err.value)
