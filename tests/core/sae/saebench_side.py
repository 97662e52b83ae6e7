"""Run by SAEBench's own Python (``/tmp/ref-saebench``): SAEBench 0.6.0's ``run_evals`` over the case.

    python saebench_side.py WORKDIR

The lab's model is read with the lab's own code (on ``sys.path``) and handed to
SAEBench behind the part of TransformerLens's API that ``run_evals`` calls
(``run_with_cache``, ``__call__`` and ``run_with_hooks`` with
``return_type="both", loss_per_token=True``); the windows come from a stand-in
activation store, the SAE through SAELens's ``SAE.load_from_disk``. Writes
``saebench.json``: its metric categories and per-feature lists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from sae_bench.evals.core.main import CoreEvalConfig, calculate_misc_metrics, run_evals  # noqa: E402
from sae_lens import SAE  # noqa: E402

from tui_lab.core.opening.model_in_hand import open_model  # noqa: E402


class LabAsHooked:
    """The lab's model behind TransformerLens's calls that SAEBench's core evaluation makes."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def run_with_cache(self, tokens: torch.Tensor, names_filter: list[str], **_: Any) -> tuple[Any, dict]:
        return self.model.run_with_cache(tokens, names=names_filter)

    def _both(self, logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # TransformerLens's per-token loss: −log p of each next token, (B, T − 1)
        logp = logits.float().log_softmax(dim=-1)[:, :-1]
        return logits, -logp.gather(-1, tokens[:, 1:, None])[..., 0]

    def __call__(self, tokens: torch.Tensor, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return self._both(self.model.run_with_hooks(tokens, hooks=[]), tokens)

    def run_with_hooks(self, tokens: torch.Tensor, fwd_hooks: list, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        hooks = [(name, lambda act, _name, fn=fn: fn(act, hook=None)) for name, fn in fwd_hooks]
        return self._both(self.model.run_with_hooks(tokens, hooks=hooks), tokens)


class Store:
    """The activation store's calls: batches of windows in order, from the start again on reset."""

    def __init__(self, ids: torch.Tensor, prompts: int) -> None:
        self.ids, self.at = ids, 0
        self.context_size, self.store_batch_size_prompts = ids.shape[1], prompts

    def get_batch_tokens(self, n: int) -> torch.Tensor:
        batch = self.ids[self.at : self.at + n]
        self.at += n
        return batch

    def reset_input_dataset(self) -> None:
        self.at = 0


def main(work: Path) -> None:
    case = json.loads((work / "case.json").read_text())
    ids = load_file(str(work / "ids.safetensors"))["ids"]
    model = LabAsHooked(open_model(str(work / "run")))
    sae = SAE.load_from_disk(str(work / "sae"))
    # SAEBench 0.6.0's core evaluation reads SAELens 5's flat cfg names; SAELens 6 nests them
    sae.cfg.hook_name = sae.cfg.metadata.hook_name  # type: ignore[attr-defined]
    sae.cfg.hook_layer = int(case["hook"].split(".")[1])  # type: ignore[attr-defined]
    sae.cfg.hook_head_index = None  # type: ignore[attr-defined]
    sae.cfg.architecture_str = sae.cfg.architecture()  # type: ignore[attr-defined]
    config = CoreEvalConfig(
        model_name="tiny", batch_size_prompts=case["prompts"], n_eval_reconstruction_batches=case["recon_batches"],
        n_eval_sparsity_variance_batches=case["sparsity_batches"], context_size=ids.shape[1], compute_kl=True,
        compute_ce_loss=True, compute_l2_norms=True, compute_sparsity_metrics=True, compute_variance_metrics=True,
        compute_featurewise_density_statistics=True, compute_featurewise_weight_based_metrics=True)
    with torch.no_grad():
        metrics, features = run_evals(sae, Store(ids, case["prompts"]), model, config)  # type: ignore[arg-type]
    metrics["misc_metrics"] = calculate_misc_metrics(features)
    (work / "saebench.json").write_text(json.dumps({"metrics": metrics, "feature_metrics": features}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
