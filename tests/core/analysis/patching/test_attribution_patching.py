"""Attribution patching: (clean - corrupted) . gradient, from one forward and one backward pass.

Where the metric is linear in the activation (the final norm's output, which the
unembedding reads) the estimate is the exact patch: every cell equals activation
patching's within 1e-4, on each family and on the lab's own model. Elsewhere it is an
estimate: the lab's own model with a tiny corruption (where first order is nearly
exact) agrees with exact patching far better than chance.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.cli.helpers import DATA
from tests.core.analysis.patching.test_activation_patching import family, make_pair  # noqa: F401  (fixture)
from tui_lab.core.analysis.patching.activation_patching import activation_patch
from tui_lab.core.analysis.patching.attribution_patching import attribution_patch, correlation
from tui_lab.core.analysis.patching.patch_pair import PatchPair
from tui_lab.core.opening.model_in_hand import open_model

INDUCTION = DATA / "induction-run"


def test_linear_site_is_exact(family: tuple[str, Any, Any]) -> None:  # noqa: F811
    _name, lab, _ref = family
    pair = make_pair()
    exact = activation_patch(lab, pair, "resid_final")
    estimate = attribution_patch(lab, pair, "resid_final")
    assert estimate.clean == pytest.approx(exact.clean, abs=1e-4)
    assert estimate.corrupt == pytest.approx(exact.corrupt, abs=1e-4)
    torch.testing.assert_close(torch.tensor(estimate.raw), torch.tensor(exact.raw), atol=1e-4, rtol=0)
    assert abs(exact.raw[0][-1] - exact.corrupt) > 1e-2  # the last position's patch moves the metric


@pytest.fixture(scope="module")
def induction() -> Any:
    return open_model(INDUCTION)


def test_every_site_estimates_the_exact_patch_on_a_trained_run(induction: Any) -> None:
    pair = PatchPair(*_pair_ids(induction))
    # Heads' outputs, patterns and values: where first order holds well on this run (the
    # residual stream, as Nanda's write-up warns, is where it fails: the corruption is large).
    for site in ("z", "v", "pattern", "resid_final"):
        exact = activation_patch(induction, pair, site)
        estimate = attribution_patch(induction, pair, site)
        assert estimate.site == site and estimate.method == "attribution"
        assert (estimate.rows, estimate.cols) == (exact.rows, exact.cols)
        assert correlation(exact, estimate) > 0.8, site


def _pair_ids(model: Any) -> tuple[list[int], list[int], int, int]:
    from tui_lab.core.analysis.patching.patch_pair import induction_pair

    p = induction_pair(model)
    return p.clean, p.corrupt, p.answer, p.wrong
